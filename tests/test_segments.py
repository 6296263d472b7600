"""compression.segments on SWE-agent-like rows (scripts/swe_rows.py) and the sample rows, at a target about a
quarter of their length, counted by turns and by the demo tokenizer's chat template: every segment fits,
every assistant turn is trained exactly once, in order, verbatim; every human turn is in some row; every
row is valid in its dialect; later segments open with the head and one summary turn."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest
from conftest import DEMO_TOKENIZER, SAMPLES
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trajcomp.core.compressor import TrajectoryCompressor
from trajcomp.core.config import CompressionConfig
from trajcomp.core.planner import alternation_parity
from trajcomp.core.rows import RowSchema
from trajcomp.core.tokens import TokenCounter, lengths_for
from trajcomp.core.validity import RESULT_WITHOUT_CALL, problems

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
import swe_rows  # noqa: E402

COUNTER = TokenCounter(str(DEMO_TOKENIZER))
MODES = ("turns", "chat_template")


def length(row, mode: str) -> int:
    fmt = RowSchema().adapter(row)
    native = fmt.native_turns(row)
    messages = fmt.chat_messages(native, CompressionConfig().chat_roles)
    return lengths_for(mode, COUNTER).measure([t.text for t in fmt.turns(native)], messages, None).total


def segmented(row, mode: str, **overrides):
    target = max(length(row, mode) // 4, 1200)
    cfg = CompressionConfig(tokenizer_name=str(DEMO_TOKENIZER), segments=True, count_mode=mode,
                            target_max_tokens=target, summary_target_tokens=target // 6, **overrides)
    return asyncio.run(TrajectoryCompressor(cfg, counter=COUNTER).compress_row(row)), cfg


def unmarked(turn) -> bool:
    return "weight" not in turn and "train" not in turn


def check(row, result, cfg) -> None:
    """The promises every segmented row keeps (the module's docstring)."""
    assert not result.rejected, result.detail
    fmt = RowSchema().adapter(row)
    native = fmt.native_turns(row)
    gpt_in = [t for t, v in zip(native, fmt.turns(native)) if v.role == "gpt"]
    trained, n = [], len(result.rows)
    for k, out in enumerate(result.rows):
        assert out["segment"] == {"index": k, "count": n}
        assert {key: v for key, v in out.items() if key not in ("segment", "compression_metrics", fmt.key)} == \
            {key: v for key, v in row.items() if key != fmt.key}
        turns = fmt.native_turns(out)
        views = fmt.turns(turns)
        metrics = out["compression_metrics"]
        if not metrics.get("segment_cannot_fit", metrics["cannot_fit"]):
            assert length(out, cfg.count_mode) <= cfg.target_max_tokens
        for turn, view in zip(turns, views):
            if view.role == "gpt" and unmarked(turn):
                trained.append(turn)
            elif not unmarked(turn):  # marks only on assistant turns, and only the dialect's own
                assert view.role == "gpt"
                assert turn == ({**turn, "weight": 0} if fmt.name == "openai" else {**turn, "train": False})
        summaries = sum(cfg.summary_prefix in v.text for v in views)
        assert summaries == (k > 0)  # one summary turn in every segment after the first
        if k > 0:
            assert views[0] == fmt.turns(native)[0] or views[0].text.startswith(fmt.turns(native)[0].text)
        if fmt.alternation:
            assert alternation_parity([v.role for v in views]) is not None
            assert not problems(turns, fmt)[RESULT_WITHOUT_CALL]
        else:
            assert not problems(turns, fmt) - problems(native, fmt), k
    assert trained == gpt_in  # each input assistant turn trained once, in order, verbatim
    texts = [v.text for out in result.rows for v in fmt.turns(fmt.native_turns(out))]
    for v in fmt.turns(native):
        if v.role == "human":
            assert any(v.text in text for text in texts)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dialect=st.sampled_from(("hermes", "openai", "llamafactory")), mode=st.sampled_from(MODES),
       seed=st.integers(0, 10_000), steps=st.integers(8, 40), last_n=st.integers(0, 6))
def test_swe_like_rows_become_segments_that_keep_every_promise(dialect, mode, seed, steps, last_n):
    row = swe_rows.row(dialect, seed, steps)
    result, cfg = segmented(row, mode, protect_last_n_turns=last_n)
    check(row, result, cfg)
    assert result.metrics.segments == len(result.rows) >= 2
    assert len(result.examples) == result.metrics.summaries == len(result.rows) - 1


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", ["hermes_coding_runs.jsonl", "hermes_research_runs.jsonl"])
def test_the_sample_rows_become_segments_that_keep_every_promise(name, mode):
    rows = [json.loads(line) for line in (SAMPLES / name).read_text(encoding="utf-8").splitlines()][:6]
    for row in rows:
        result, cfg = segmented(row, mode)
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
    result, _ = segmented(row, "turns", train_field="trainable")
    later = result.rows[1]["conversations"]
    assert any(t.get("trainable") is False for t in later) and not any("train" in t for t in later)
    result, _ = segmented(swe_rows.row("openai", 5, 30), "turns")
    assert any(m.get("weight") == 0 and m["role"] == "assistant" for m in result.rows[1]["messages"])
