"""compress --prune: old tool outputs become stubs before any summary (core/planning/pruning.py, core/planning/prune_fit.py).

Rows like SWE-agent's (scripts/swe_rows.py: one request, then calls and long observations) in the
Hermes, OpenAI and LLaMA-Factory dialects, and the sample rows of data_samples/, through the real
row core with the demo tokenizer; summaries asked of the real test server and counted there.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest
from conftest import DEMO_TOKENIZER, ROOT, SAMPLES
from openai_server import ServerThread

from trajcomp.core.compressor import TrajectoryCompressor
from trajcomp.core.config import CompressionConfig, load_config
from trajcomp.core.dialects.rows import RowSchema
from trajcomp.core.counting.tokens import TokenCounter

sys.path.insert(0, str(ROOT / "scripts"))
import swe_rows  # noqa: E402

COUNTER = TokenCounter(str(DEMO_TOKENIZER))
DIALECTS = ("hermes", "openai", "llamafactory")
MIN_CHARS = 200


def compress_all(cfg: CompressionConfig, rows: list[dict]):
    async def go():
        async with TrajectoryCompressor(cfg, counter=COUNTER) as compressor:
            return await compressor.compress_rows(rows)
    return asyncio.run(go())


def swe_config(dialect: str, **extra) -> CompressionConfig:
    dialect_key = "llamafactory" if dialect == "llamafactory" else "auto"
    return CompressionConfig(tokenizer_name=str(DEMO_TOKENIZER), target_max_tokens=6000, summary_target_tokens=300,
                             input_dialect=dialect_key, **{"cannot_fit": "shorten", **extra})


@pytest.fixture(scope="module")
def server():
    with ServerThread(models=["test-model"]) as running:
        yield running


def summaries_asked(server, cfg: CompressionConfig, rows: list[dict]):
    """The rows' results, and the summary requests the test server received for them."""
    before = server.stats.requests
    cfg = cfg.replace(summarizer="openai", base_url=server.base_url, summarization_model="test-model",
                      api_key_env="TRAJCOMP_TEST_NO_KEY", cache=False)
    results = compress_all(cfg, rows)
    return results, server.stats.requests - before


def sample_rows() -> list[dict]:
    return [json.loads(line) for name in ("hermes_coding_runs.jsonl", "hermes_research_runs.jsonl")
            for line in (SAMPLES / name).read_text(encoding="utf-8").splitlines()]


CASES = [("swe", d) for d in DIALECTS] + [("samples", "hermes")]


@pytest.mark.parametrize("source,dialect", CASES)
def test_pruning_halves_the_summaries_and_keeps_every_assistant_token_it_can(server, source, dialect):
    """Agent rows over the target: at most half the summary requests of the same run without --prune,
    and no row keeps fewer assistant tokens."""
    if source == "swe":
        rows, cfg = swe_rows.rows(dialect, 24), swe_config(dialect)
    else:
        rows, cfg = sample_rows(), load_config(ROOT / "configs" / "demo.yaml", target_max_tokens=6000)
    plain, asked = summaries_asked(server, cfg, rows)
    pruned, asked_pruned = summaries_asked(server, cfg.replace(prune=True), rows)
    over = [i for i, r in enumerate(plain) if r.metrics.original_tokens > cfg.target_max_tokens]
    assert over and not any(r.rejected for r in plain + pruned)
    assert asked_pruned * 2 <= asked, (asked_pruned, asked)
    for i in over:
        kept, kept_pruned = plain[i].metrics.assistant_tokens_kept, pruned[i].metrics.assistant_tokens_kept
        assert kept_pruned >= kept, (i, kept_pruned, kept)
    if dialect != "llamafactory":  # rows of both kinds: fit by stubs alone, and stubbed then summarized
        assert any(pruned[i].metrics.passes == 0 for i in over) and any(pruned[i].metrics.passes > 0 for i in over)


def test_rows_still_over_after_pruning_are_summarized_from_the_original_turns(server):
    """A summary is written from the original outputs (the server sees them), never from stubs."""
    rows = swe_rows.rows("hermes", 24)
    cfg = swe_config("hermes", prune=True)
    before = len(server.stats.bodies)
    results, asked = summaries_asked(server, cfg, rows)
    assert asked > 0
    prompts = [json.dumps(body["messages"]) for body in server.stats.bodies[before:]]
    assert not any("[pruned" in prompt for prompt in prompts)
    assert all("exit_code" in prompt for prompt in prompts)  # the outputs themselves
    summarized = [r for r in results if r.metrics.passes]
    assert summarized and all(r.metrics.pruned_outputs is not None for r in summarized)


def test_a_failed_summary_keeps_the_rows_stubs_with_on_failure_keep():
    """Rows still over after pruning whose summary fails are written with their stubs, flagged failed."""
    rows = swe_rows.rows("hermes", 8)
    cfg = swe_config("hermes", prune=True, max_retries=0, summarizer="openai", api_key_env="TRAJCOMP_TEST_NO_KEY",
                     summarization_model="test-model", cache=False).replace(target_max_tokens=3000)
    with ServerThread(fail_first_n=10_000) as down:
        results = compress_all(cfg.replace(base_url=down.base_url), rows)
    failed = [(row, r) for row, r in zip(rows, results) if r.metrics.outcome.value == "failed"]
    assert failed and all(not r.rejected for _, r in failed)
    for row, result in failed:
        assert len(result.row["conversations"]) == len(row["conversations"]) and result.metrics.pruned_outputs > 0
        assert sum("[pruned" in t["value"] for t in result.row["conversations"]) == result.metrics.pruned_outputs
        assert result.metrics.compressed_tokens < result.metrics.original_tokens


# --------------------------------------------------------------------------- the order, exactly


def tool_outputs(row: dict, dialect: str) -> dict[int, tuple[str, str]]:
    """Each tool turn's (tool, output JSON), read from the input as docs/compression.md states the rule."""
    fmt = RowSchema(dialect="llamafactory" if dialect == "llamafactory" else "auto").adapter(row)
    native = fmt.native_turns(row)
    found = {}
    for i, turn in enumerate(fmt.turns(native)):
        if turn.role != "tool":
            continue
        if dialect == "openai":
            found[i] = (native[i]["name"], native[i]["content"])
        elif dialect == "hermes":
            body = json.loads(turn.text.split("\n")[1])
            found[i] = (body["name"], json.dumps(body["content"]))
        else:
            found[i] = ("bash", turn.text)
    return found


def documented_order(row: dict, dialect: str, last_n: int = 4) -> tuple[list[int], set[int]]:
    """docs/compression.md's order: older copies of a later identical output of the same tool, oldest first, then
    the other outputs, oldest first; outside the protected head (first turn of each role) and tail.
    And which of them are the older copies."""
    fmt = RowSchema(dialect="llamafactory" if dialect == "llamafactory" else "auto").adapter(row)
    roles = [t.role for t in fmt.turns(fmt.native_turns(row))]
    tail = len(roles) - last_n
    head = max(roles.index(role) for role in set(roles) if roles.index(role) < tail) + 1
    outputs = tool_outputs(row, dialect)
    eligible = [i for i in outputs if head <= i < tail and len(json.loads(outputs[i][1])["output"]) > MIN_CHARS]
    dups = [i for i in eligible if any(outputs[j] == outputs[i] for j in outputs if j > i)]
    return dups + [i for i in eligible if i not in dups], set(dups)


def length(row: dict, cfg: CompressionConfig) -> int:
    fmt = RowSchema.from_config(cfg).adapter(row)
    native = fmt.native_turns(row)
    if cfg.count_mode == "chat_template":
        return len(COUNTER.encode([COUNTER.render(fmt.chat_messages(native, cfg.chat_roles))])[0])
    return sum(COUNTER.count([t.text for t in fmt.turns(native)]))


def fit_by_pruning(dialect: str, count_mode: str):
    """SWE-like rows that pruning alone fits, with their results."""
    cfg = swe_config(dialect, prune=True, count_mode=count_mode)
    rows = swe_rows.rows(dialect, 12, seed=40)
    results = compress_all(cfg, rows)
    fit = [(row, r) for row, r in zip(rows, results)
           if r.metrics.original_tokens > cfg.target_max_tokens and r.metrics.passes == 0 and not r.metrics.still_over_limit]
    assert len(fit) >= 3
    return cfg, fit


def turn_list(row: dict) -> list[dict]:
    return row.get("messages") or row["conversations"]


@pytest.mark.parametrize("count_mode", ["turns", "chat_template"])
@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_row_fit_by_pruning_has_the_first_stubs_of_the_order_and_no_more(dialect, count_mode):
    cfg, fit = fit_by_pruning(dialect, count_mode)
    for row, result in fit:
        before, after = turn_list(row), turn_list(result.row)
        assert len(after) == len(before)  # no summary turn
        assert not any(cfg.summary_prefix in json.dumps(t) for t in after)
        changed = [i for i, (a, b) in enumerate(zip(before, after)) if a != b]
        kinds = {(b.get("from") or b.get("role")) for i, b in enumerate(before) if i in changed}
        assert kinds <= {"tool", "observation"}  # system, human and assistant turns byte-identical
        order, dups = documented_order(row, dialect)
        assert changed and sorted(order[: len(changed)]) == changed
        assert length(result.row, cfg) <= cfg.target_max_tokens
        last = order[len(changed) - 1]
        restored = {**result.row, ("messages" if dialect == "openai" else "conversations"): [
            before[i] if i == last else t for i, t in enumerate(after)]}
        assert length(restored, cfg) > cfg.target_max_tokens
        m = result.metrics.to_dict()
        assert m["pruned_outputs"] == len(changed) and m["compression_region"] is None
        assert m["pruned_tokens"] == m["tokens_saved"] > 0
        assert m["deduplicated_outputs"] == len(dups & set(changed))


def test_duplicates_go_first_and_name_the_newest_copy():
    cfg, fit = fit_by_pruning("hermes", "turns")
    seen = 0
    for row, result in fit:
        outputs = tool_outputs(row, "hermes")
        for i, turn in enumerate(result.row["conversations"]):
            if "identical to the later output of " not in turn["value"]:
                continue
            newest = max(j for j in outputs if outputs[j] == outputs[i])
            assert newest > i
            call = json.loads(row["conversations"][newest - 1]["value"].split("<tool_call>\n")[1].split("\n</tool_call>")[0])
            assert f"identical to the later output of bash `{call['arguments']['command']}`]" in turn["value"]
            seen += 1
    assert seen
