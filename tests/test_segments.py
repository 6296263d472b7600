"""compression.segments on SWE-agent-like rows (scripts/swe_rows.py) and the sample rows, at a target about a
quarter of their length, counted by turns and by the chat templates of the demo tokenizer and of Qwen3 (which
drops <think> before the last user query and folds tool answers into user turns): every segment fits as the
tokenizer's own template renders it,
every assistant turn is trained exactly once, in order, verbatim; every human turn is in some row; every
row is valid in its dialect; later segments open with the head and one summary turn; a segment is flagged
cannot_fit only when it carries no tail and its head, its summary at
its budget and its group are over the target."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest
from conftest import DEMO_TOKENIZER, SAMPLES
from test_fits import qwen3_folder
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trajcomp.core.compressor import TrajectoryCompressor
from trajcomp.core.config import CompressionConfig
from trajcomp.core.dialects.validity import alternation_parity
from trajcomp.core.dialects.rows import RowSchema
from trajcomp.core.counting.tokens import TemplateLengths, TokenCounter
from trajcomp.core.dialects.validity import CALL_UNANSWERED, problems

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
import swe_rows  # noqa: E402

COUNTER = TokenCounter(str(DEMO_TOKENIZER))
COUNTERS = {"demo": COUNTER, "qwen3": TokenCounter(str(qwen3_folder()))}
MODES = ("turns", "chat_template")


def length(row, mode: str, counter: TokenCounter = COUNTER) -> int:
    """The row's length as the trainer counts it: its turns' tokens, or the template's own rendering."""
    fmt = RowSchema().adapter(row)
    native = fmt.native_turns(row)
    if mode == "turns":
        return sum(counter.count([t.text for t in fmt.turns(native)]))
    messages = fmt.chat_messages(native, CompressionConfig().chat_roles)
    return len(counter._tokenizer.apply_chat_template(messages, tokenize=True, return_dict=False))


def segmented(row, mode: str, tokenizer: str = "demo", **overrides):
    counter = COUNTERS[tokenizer]
    target = max(length(row, mode, counter) // 4, 1200)
    cfg = CompressionConfig(tokenizer_name=counter.name, segments=True, count_mode=mode,
                            target_max_tokens=target, summary_target_tokens=target // 6,
                            **{"cannot_fit": "shorten", **overrides})
    return asyncio.run(TrajectoryCompressor(cfg, counter=counter).compress_row(row)), cfg, counter


def unmarked(turn) -> bool:
    return "weight" not in turn and "train" not in turn


def folded_next(native, call, following, fmt, cfg) -> bool:
    """Whether the next segment (an alternation's) carries no turn of the one before (so not `call`, which ended
    it) and holds the call's result in the summary's user turn (or, where the run prunes, a stub of it)."""
    summary = next(v.text for v in fmt.turns(following) if cfg.summary_prefix in v.text)
    results = [fmt.turns(native)[j + 1].text for j in range(len(native) - 1) if native[j] == call]
    held = any(summary.endswith("\n\n" + r) for r in results) or (cfg.prune and "[pruned" in summary)
    return not any(cfg.train_field in t for t in following) and held  # no turn carried: none marked


def summary_out(out, native, fmt, prefix: str):
    """`out` without its summary: a turn of its own dropped, or cut from the turn it joined or opened; and
    whether it stood alone."""
    turns = fmt.native_turns(out)
    views = fmt.turns(turns)
    s = next(i for i, v in enumerate(views) if prefix in v.text)
    text = views[s].text
    if not text.startswith(prefix):  # it joined the head's user turn
        return fmt.with_turns(out, turns[:s] + [fmt.with_text(turns[s], text[:text.index(prefix) - 2])] + turns[s + 1:]), False
    opened = [v.text for v in fmt.turns(native) if v.role == "human" and text.endswith("\n\n" + v.text)]
    if opened:
        return fmt.with_turns(out, turns[:s] + [fmt.with_text(turns[s], opened[0])] + turns[s + 1:]), False
    return fmt.with_turns(out, turns[:s] + turns[s + 1:]), True


def unavoidable(out, native, fmt, cfg, counter: TokenCounter) -> bool:
    """Whether a segment flagged cannot_fit had to be: the least tail its dialect allows, and its head, its
    summary at its budget (with the template's markers around a turn of its own) and its group over the target."""
    metrics = out["compression_metrics"]
    if metrics["turns_carried"] > (1 if fmt.alternation else 0):
        return False
    if out["segment"]["index"] == 0:  # the head and the first group, no summary yet
        return True
    bare, alone = summary_out(out, native, fmt, cfg.summary_prefix)
    markup = TemplateLengths(counter).turn_markup(cfg.chat_roles["human"]) if alone and cfg.count_mode != "turns" else 0
    return length(bare, cfg.count_mode, counter) + cfg.summary_target_tokens + markup > cfg.target_max_tokens


def check(row, result, cfg, counter: TokenCounter = COUNTER) -> None:
    """The promises every segmented row keeps (the module's docstring)."""
    assert not result.rejected, result.detail
    fmt = RowSchema().adapter(row)
    native = fmt.native_turns(row)
    n = len(result.rows)
    if n == 1 and result.rows[0]["compression_metrics"].get("cannot_fit_reason"):  # no segment could fit (core/planning/fit.py):
        m = result.rows[0]["compression_metrics"]  # one row, never cut, shortened whole (cannot_fit: shorten)
        assert result.rows[0]["segment"] == {"index": 0, "count": 1} and m["cannot_fit"] and m["still_over_limit"]
        assert m["cannot_fit_reason"]["over_by"] > 0
        return
    for k, out in enumerate(result.rows):
        assert out["segment"] == {"index": k, "count": n}
        assert {key: v for key, v in out.items() if key not in ("segment", "compression_metrics", fmt.key)} == \
            {key: v for key, v in row.items() if key != fmt.key}
        turns = fmt.native_turns(out)
        views = fmt.turns(turns)
        metrics = out["compression_metrics"]
        size = length(out, cfg.count_mode, counter)
        if "segment_tokens" in metrics:  # counted exactly as the trainer counts it; flagged exactly when over
            assert metrics["segment_tokens"] == size
            assert metrics["segment_cannot_fit"] == (size > cfg.target_max_tokens)
            assert not metrics["segment_cannot_fit"] or unavoidable(out, native, fmt, cfg, counter), k
        elif not metrics["cannot_fit"]:
            assert size <= cfg.target_max_tokens
        for turn, view in zip(turns, views):
            if not unmarked(turn):  # marks only on assistant turns, and only the dialect's own
                assert view.role == "gpt"
                assert turn == ({**turn, "weight": 0} if fmt.name == "openai" else {**turn, "train": False})
        summaries = sum(cfg.summary_prefix in v.text for v in views)
        assert summaries == (k > 0)  # one summary turn in every segment after the first
        if k > 0:
            assert views[0] == fmt.turns(native)[0] or views[0].text.startswith(fmt.turns(native)[0].text)
        continued = bool(fmt.alternation) and k < n - 1  # may end on a call the next segment answers
        if continued and problems(turns, fmt)[CALL_UNANSWERED] > problems(native, fmt)[CALL_UNANSWERED]:
            assert folded_next(native, turns[-1], fmt.native_turns(result.rows[k + 1]), fmt, cfg)
    assert_trainable(row, result.rows)


def assert_trainable(row: dict, rows: list[dict]) -> None:
    """Segment rows break nothing the input did not, keep an alternation, train each assistant turn once, in
    order and verbatim, and hold every user turn's words."""
    fmt = RowSchema().adapter(row)
    native = fmt.native_turns(row)
    trained, texts = [], []
    for k, out in enumerate(rows):
        turns = fmt.native_turns(out)
        views = fmt.turns(turns)
        if fmt.alternation:
            assert alternation_parity([v.role for v in views]) is not None, k
        continued = bool(fmt.alternation) and k < len(rows) - 1  # may end on a call the next row answers
        assert not problems(turns, fmt, continued) - problems(native, fmt), k
        trained += [t for t, v in zip(turns, views) if v.role == "gpt" and unmarked(t)]
        texts += [v.text for v in views]
    assert trained == [t for t, v in zip(native, fmt.turns(native)) if v.role == "gpt"]
    assert all(any(v.text in text for text in texts) for v in fmt.turns(native) if v.role == "human")


@settings(max_examples=16, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dialect=st.sampled_from(("hermes", "openai", "llamafactory")), mode=st.sampled_from(MODES),
       tokenizer=st.sampled_from(tuple(COUNTERS)), seed=st.integers(0, 10_000), steps=st.integers(8, 40),
       last_n=st.integers(0, 6))
def test_swe_like_rows_become_segments_that_keep_every_promise(dialect, mode, tokenizer, seed, steps, last_n):
    row = swe_rows.row(dialect, seed, steps)
    result, cfg, counter = segmented(row, mode, tokenizer, protect_last_n_turns=last_n)
    check(row, result, cfg, counter)
    assert result.metrics.segments == len(result.rows) >= 2
    assert len(result.examples) == result.metrics.summaries == len(result.rows) - 1


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", ["hermes_coding_runs.jsonl", "hermes_research_runs.jsonl"])
def test_the_sample_rows_become_segments_that_keep_every_promise(name, mode):
    rows = [json.loads(line) for line in (SAMPLES / name).read_text(encoding="utf-8").splitlines()][:6]
    for row in rows:
        result, cfg, _ = segmented(row, mode)
        check(row, result, cfg)
        if not result.metrics.cannot_fit:
            assert result.metrics.assistant_tokens_trained == result.metrics.assistant_tokens


def test_a_row_under_the_target_is_one_row_with_its_segment_field():
    row = swe_rows.row("hermes", 3, 4)
    cfg = CompressionConfig(tokenizer_name=str(DEMO_TOKENIZER), segments=True, target_max_tokens=100_000,
                            segment_field="part", metrics_per_trajectory=False)
    result = asyncio.run(TrajectoryCompressor(cfg, counter=COUNTER).compress_row(row))
    assert result.rows == ({**row, "part": {"index": 0, "count": 1}},)


def test_the_train_field_is_configurable_and_openai_rows_use_weight():
    row = swe_rows.row("hermes", 5, 30)
    result, _, _ = segmented(row, "turns", train_field="trainable")
    later = result.rows[1]["conversations"]
    assert any(t.get("trainable") is False for t in later) and not any("train" in t for t in later)
    result, _, _ = segmented(swe_rows.row("openai", 5, 30), "turns")
    assert any(m.get("weight") == 0 and m["role"] == "assistant" for m in result.rows[1]["messages"])


def fits_whole(row, mode: str, target: int) -> bool:
    """Whether every group of the row can fit a segment: the default head (system, first request, first call
    and its results), the default summary budget and the row's largest group within `target` (counted by turns,
    with a margin for a template's markers)."""
    fmt = RowSchema().adapter(row)
    roles = [v.role for v in fmt.turns(fmt.native_turns(row))]
    costs = COUNTER.count([v.text for v in fmt.turns(fmt.native_turns(row))])
    head = next(i for i in range(roles.index("gpt") + 1, len(roles)) if roles[i] != "tool")
    starts = [i for i in range(head, len(roles)) if roles[i] != "tool"] + [len(roles)]
    group = max(sum(costs[a:b]) for a, b in zip(starts, starts[1:]))
    return sum(costs[:head]) + CompressionConfig().summary_target_tokens + group <= target * 0.95


@pytest.mark.parametrize("mode", MODES)
def test_at_a_quarter_of_their_length_every_segment_fits_with_the_default_config(mode):
    swe = [swe_rows.row(dialect, seed, 24 + 3 * seed) for dialect in ("hermes", "openai", "llamafactory")
           for seed in range(4)]
    samples = [json.loads(line) for name in ("hermes_coding_runs.jsonl", "hermes_research_runs.jsonl")
               for line in (SAMPLES / name).read_text(encoding="utf-8").splitlines()]
    rows = swe + [row for row in samples if fits_whole(row, mode, length(row, mode) // 4)]
    assert len(rows) == len(swe) + 5  # docs/compression.md says how many sample rows can fit whole
    for row in rows:
        target = length(row, mode) // 4
        cfg = CompressionConfig(tokenizer_name=COUNTER.name, segments=True, count_mode=mode, target_max_tokens=target,
                                cannot_fit="shorten")
        result = asyncio.run(TrajectoryCompressor(cfg, counter=COUNTER).compress_row(row))
        assert all(length(out, mode) <= target for out in result.rows), row["id"]
        assert result.metrics.assistant_tokens_trained == result.metrics.assistant_tokens
