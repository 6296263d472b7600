"""The user's words survive compression, and summaries come in the shape the agent shows (prose or handoff).

Real rows through the real row core: the demo tokenizer, the extractive summarizer, and the openai
summarizer against the test server on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest
from conftest import DEMO_TOKENIZER, run_cli
from openai_server import ServerThread

from trajcomp.core.compressor import TrajectoryCompressor
from trajcomp.core.config import CompressionConfig
from trajcomp.core.metrics import Outcome
from trajcomp.core.dialects.rows import Turn
from trajcomp.core.dialects.summary_turn import (
    CUT, EMPTY_SECTION, HANDOFF_SECTIONS, USERS_HEAD, UserWords, compose, sections, user_words,
)
from trajcomp.core.counting.tokens import TokenCounter

MODEL = "test-model"
TASK = "The parser drops the last field of every line in src/parser/core.py. Fix it and make the tests pass."
SHORT = "Also keep the public signature of parse_line unchanged: other teams call it."
LONG = "Here is the full log from CI, please look at it: " + " ".join(
    f"[{i:03d}] compiling module_{i}.py in src/pkg ... ok" for i in range(60))
LATEST = "Now write the fix up in docs/CHANGELOG.md under Unreleased."


@pytest.fixture(scope="module")
def counter() -> TokenCounter:
    return TokenCounter(str(DEMO_TOKENIZER))


def step(k: int) -> list[dict[str, str]]:
    call = json.dumps({"name": "terminal", "arguments": {"command": f"pytest -x tests/test_{k}.py"}})
    log = "\n".join(f"tests/test_{k}.py::case_{i} PASSED ({k}.{i}s) at commit 3f9a2b{k}{i}c" for i in range(25))
    result = json.dumps({"tool_call_id": f"call_{k}", "name": "terminal", "content": log})
    return [{"from": "gpt", "value": f"<think>Run suite {k}.</think>\n<tool_call>\n{call}\n</tool_call>"},
            {"from": "tool", "value": f"<tool_response>\n{result}\n</tool_response>"}]


def row(*followups: tuple[int, str]) -> list[dict[str, str]]:
    """system, task, 8 steps with the human follow-ups after the steps named, a final answer."""
    turns = [{"from": "system", "value": "You are a coding agent."}, {"from": "human", "value": TASK}]
    after = dict(followups)
    for k in range(8):
        turns += step(k)
        if k in after:
            turns.append({"from": "human", "value": after[k]})
    return turns + [{"from": "gpt", "value": "Done: the parser keeps every field now."}]


def config(**overrides: Any) -> CompressionConfig:
    values = dict(tokenizer_name=str(DEMO_TOKENIZER), target_max_tokens=2500, summary_target_tokens=600,
                  cannot_fit="shorten")
    return CompressionConfig(**{**values, **overrides})


def compress(cfg: CompressionConfig, turns: list[dict[str, str]], counter: TokenCounter):
    async def go():
        async with TrajectoryCompressor(cfg, counter=counter) as compressor:
            return await compressor.compress_trajectory(turns)
    return asyncio.run(go())


def summary_of(out, m) -> str:
    return out[m.region[0]]["value"]


# --------------------------------------------------------------------------- building blocks


def test_user_words_are_latest_first_and_only_long_ones_cut(counter):
    turns = [Turn("human", TASK), Turn("gpt", "a"), Turn("human", SHORT), Turn("gpt", "b"), Turn("human", LONG),
             Turn("gpt", "c"), Turn("human", LATEST)]
    cap = 40
    assert counter.count([SHORT, LATEST])[0] <= cap < counter.count([LONG])[0]
    words = user_words(turns, 1, 6, cap, counter, with_task=False)
    cut = words.messages[0]
    assert words.messages[1] == SHORT and words.cut == 1 and words.task is None
    kept, marker = cut.split(" [... ", 1)
    assert LONG.startswith(kept) and counter.count([kept])[0] == cap  # cut at a token's end
    assert " [... " + marker == CUT.format(n=counter.count([LONG])[0] - cap)
    # The task is the latest request in the region, else the latest before it; the region's own are carried.
    assert user_words(turns, 1, 4, cap, counter, with_task=True).task == SHORT
    assert user_words(turns, 3, 4, cap, counter, with_task=True) == UserWords((), 0, SHORT)
    assert user_words(turns, 0, 1, cap, counter, with_task=True) == UserWords((TASK,), 0, TASK)


def test_sections_are_read_in_any_order_and_the_models_active_task_is_dropped():
    text = ("Some preamble the model wrote.\n## relevant files:\n- a.py\n## Active Task\nparaphrase of the ask\n"
            "### Goal\nFix it.\n## Notes\nextra")
    assert sections(text) == {"Completed Actions": "Some preamble the model wrote.", "Relevant Files": "- a.py",
                              "Goal": "Fix it.\n**Notes**\nextra"}
    body = compose("handoff", text, UserWords(("latest ask", "older ask"), 0, "latest ask"))
    assert headings(body) == list(HANDOFF_SECTIONS)
    assert body.startswith("## Active Task\nlatest ask\n") and "older ask" in body
    assert "paraphrase" not in body and f"## Active State\n{EMPTY_SECTION}" in body


def headings(text: str) -> list[str]:
    return re.findall(r"^## (.+)$", text, re.M)


# --------------------------------------------------------------------------- through the row core


def test_every_human_turn_in_the_region_is_in_the_summary_verbatim(counter):
    turns = row((1, SHORT), (3, LONG), (4, LATEST))
    cfg = config()
    out, m = compress(cfg, turns, counter)
    assert m.outcome is Outcome.COMPRESSED
    start, end = m.region
    region_humans = [t["value"] for t in turns[start:end] if t["from"] == "human"]
    assert region_humans == [SHORT, LONG, LATEST]
    summary = summary_of(out, m)
    carried = summary.split(USERS_HEAD, 1)[1]
    # latest first; the long paste is cut (its start kept, a marker), the others whole
    assert carried.index(LATEST) < carried.index(LONG[:60]) < carried.index(SHORT)
    assert LONG not in summary and m.human_turns_cut == 1 and m.to_dict()["human_turns_cut"] == 1
    # the extractive summarizer itself does not restate them
    assert summary.count(SHORT) == 1 and summary.count(LATEST) == 1
    # the rows around the region are untouched and no two human turns meet
    roles = [t["from"] for t in out]
    assert ("human", "human") not in zip(roles, roles[1:])


def test_prose_rows_without_human_turns_in_the_region_carry_nothing(counter):
    turns = row()
    out, m = compress(config(), turns, counter)
    assert m.outcome is Outcome.COMPRESSED and m.human_turns_cut == 0
    assert USERS_HEAD not in summary_of(out, m)


@pytest.mark.parametrize("followups", [(), ((2, SHORT), (4, LATEST))])
def test_handoff_extractive_writes_the_six_sections_in_order(counter, followups):
    turns = row(*followups)
    out, m = compress(config(summary_style="handoff"), turns, counter)
    assert m.outcome is Outcome.COMPRESSED
    summary = summary_of(out, m)
    assert summary.startswith("[CONTEXT SUMMARY]:\n## Active Task\n")
    assert headings(summary) == list(HANDOFF_SECTIONS)
    latest = LATEST if followups else TASK  # in the region, else the latest before it
    assert summary.split("## Active Task\n", 1)[1].startswith(latest + "\n")
    actions = summary.split("## Completed Actions\n", 1)[1].split("\n## ", 1)[0]
    assert re.match(r"1\. terminal\(command=pytest -x tests/test_\d\.py\) — .* \[tool: terminal\]", actions)
    assert "Identifiers: " in summary.split("## Critical Context\n", 1)[1]  # the index closes it


def test_handoff_openai_answer_is_put_in_the_sections_order(counter):
    # A model that writes the sections out of order, adds its own Active Task, and a preamble.
    answer = ("Here is the note.\n## Critical Context\nexit code 1 in test_3\n## Goal\nMake the parser tests pass.\n"
              "## Active Task\nThe user wants a changelog entry.\n## Completed Actions\n1. ran pytest — 1 failure "
              "[tool: terminal]")
    turns = row((2, SHORT), (4, LATEST))
    with ServerThread(models=[MODEL], content_override=answer) as server:
        cfg = config(summary_style="handoff", summarizer="openai", base_url=server.base_url, summarization_model=MODEL,
                     api_key_env="TRAJCOMP_TEST_NO_KEY", cache=False)
        out, m = compress(cfg, turns, counter)
        (body,) = server.stats.bodies
    assert m.outcome is Outcome.COMPRESSED and m.summary_source == "openai"
    system = body["messages"][0]["content"]
    assert all(f"## {name}" in system for name in HANDOFF_SECTIONS[1:]) and "## Active Task" not in system
    summary = summary_of(out, m)
    assert headings(summary) == list(HANDOFF_SECTIONS)
    task = summary.split("## Active Task\n", 1)[1].split("\n## Goal", 1)[0]
    assert task.startswith(LATEST + "\n") and SHORT in task and "changelog entry" not in summary
    assert "Here is the note." in summary.split("## Completed Actions\n", 1)[1].split("## Active State", 1)[0]


def test_summary_prefix_is_configurable_and_an_echo_of_it_is_stripped(counter, tmp_path):
    prefix = "[EARLIER TURNS, CONDENSED]"
    with ServerThread(models=[MODEL], content_override=f"{prefix} The assistant ran the suites.") as server:
        cfg = config(summarizer="openai", base_url=server.base_url, summarization_model=MODEL,
                     api_key_env="TRAJCOMP_TEST_NO_KEY", summary_prefix=prefix, cache=False,
                     summary_checks="none")  # a one-line answer: the checks would call it too little
        out, m = compress(cfg, row(), counter)
    summary = summary_of(out, m)
    assert summary.startswith(f"{prefix} The assistant ran the suites.") and summary.count(prefix) == 1


def test_cli_takes_the_style_and_prefix(tmp_path):
    inp = tmp_path / "in.jsonl"
    inp.write_text(json.dumps({"id": "r", "conversations": row((3, LATEST))}) + "\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    result = run_cli("compress", str(inp), "-o", str(out), "--tokenizer", str(DEMO_TOKENIZER), "-q",
                     "--target-max-tokens", "2500", "--summary-target-tokens", "600",
                     "--summary-style", "handoff", "--summary-prefix", "## Handoff", "--cannot-fit", "shorten")
    assert result.code == 0, result.stderr
    written = json.loads(out.read_text(encoding="utf-8"))
    region = written["compression_metrics"]["compression_region"]
    summary = written["conversations"][region["start_idx"]]["value"]
    assert summary.startswith("## Handoff\n## Active Task\n" + LATEST + "\n")
    bad = run_cli("compress", str(inp), "-o", str(out), "--tokenizer", str(DEMO_TOKENIZER), "--summary-style", "poem")
    assert bad.code == 2 and "summarization.style must be one of prose, handoff" in bad.stderr


# --------------------------------------------------------------------------- a model that ignores identifiers


def test_a_model_writing_plain_words_still_leaves_the_users_words_and_a_third_of_the_identifiers(tmp_path):
    """On the sample trajectories at a 300-token budget (configs/demo.yaml), against a server that
    answers with ordinary words of exactly the length it is asked for: no identifier of its own."""
    out = tmp_path / "out"
    with ServerThread(models=[MODEL], plain_words=True,
                      overshoot_tokenizer=str(DEMO_TOKENIZER / "tokenizer.json")) as server:
        result = run_cli("compress", "data_samples", "-c", "configs/demo.yaml", "-o", str(out), "-q", "--no-cache",
                         "--summarizer", "openai", "--base-url", server.base_url, "--model", MODEL,
                         "--api-key-env", "TRAJCOMP_TEST_NO_KEY",
                         # its English words in the samples' Chinese, Spanish and French sessions too
                         "--summary-checks", "refusal,repetition,too_little,echo")
    assert result.code == 0, result.stderr
    report = json.loads((out / "compression_metrics.json").read_text(encoding="utf-8"))
    assert report["identifier_retention"]["mean"] >= 1 / 3, report["identifier_retention"]
    inputs = {}
    for name in ("hermes_coding_runs.jsonl", "hermes_research_runs.jsonl"):
        for line in open(f"data_samples/{name}", encoding="utf-8"):
            row = json.loads(line)
            inputs[row["id"]] = row["conversations"]
    carried = 0
    for path in out.glob("*.jsonl"):
        for line in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            m = row["compression_metrics"]
            if not m["was_compressed"]:
                continue
            start, end = m["compression_region"]["start_idx"], m["compression_region"]["end_idx"]
            summary = row["conversations"][start]["value"]
            humans = [t["value"] for t in inputs[row["id"]][start:end] if t["from"] == "human"]
            whole = [h for h in humans if h in summary]
            assert len(humans) - len(whole) == m["human_turns_cut"], (row["id"], humans)
            carried += len(whole)
    assert carried >= 5  # the samples' follow-up instructions, word for word
