"""The row core's result for the engines: RowResult's rows and examples, and the assistant tokens and
output rows every input row's metrics and the run's aggregate count (without segments here)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest
from conftest import DEMO_TOKENIZER

from trajcomp.core.compressor import RowResult, TrajectoryCompressor
from trajcomp.core.config import CompressionConfig
from trajcomp.core.metrics import Aggregate
from trajcomp.core.counting.tokens import TokenCounter

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
import swe_rows  # noqa: E402

COUNTER = TokenCounter(str(DEMO_TOKENIZER))


def compress(row, **overrides):
    cfg = CompressionConfig(tokenizer_name=str(DEMO_TOKENIZER), **overrides)
    return asyncio.run(TrajectoryCompressor(cfg, counter=COUNTER).compress_row(row))


def gpt_tokens(row) -> int:
    return sum(COUNTER.count([t["value"] for t in row["conversations"] if t["from"] == "gpt"]))


def test_a_row_under_the_target_is_one_row_every_assistant_token_trained():
    row = swe_rows.row("hermes", 1, 3)
    result = compress(row, target_max_tokens=100_000, summary_target_tokens=500)
    assert result.rows == (result.row,) and result.row["id"] == 1
    m = result.metrics
    assert (m.segments, m.summaries) == (1, 0) and result.examples == ()
    assert m.assistant_tokens == gpt_tokens(row) > 0
    assert m.assistant_tokens_trained == m.assistant_tokens


def test_a_compressed_row_trains_only_what_it_kept_and_used_one_summary():
    row = swe_rows.row("hermes", 2, 30)
    result = compress(row, target_max_tokens=4000, summary_target_tokens=500)
    m = result.metrics
    assert m.was_compressed and (m.segments, m.summaries) == (1, 1)
    # the summary it used, as a training example: the turns it replaced asked for, the summary answered
    (example,) = result.examples
    assert example.segment == 0 and example.summary
    assert sum(example.summary in t["value"] for t in result.row["conversations"]) == 1
    asked = example.messages[-1]["content"]
    assert [m["role"] for m in example.messages] == ["system", "user"]
    assert row["conversations"][5]["value"] in asked and row["conversations"][-1]["value"] not in asked
    assert m.assistant_tokens == gpt_tokens(row)
    # the output's assistant turns are the input's kept ones (the share is rounded to 4 places)
    assert 0 < m.assistant_tokens_trained < m.assistant_tokens
    assert abs(m.assistant_tokens_trained - gpt_tokens(result.row)) <= 1 + m.assistant_tokens // 10_000


@pytest.mark.parametrize("prune", [False, True])
def test_every_plain_row_has_one_example_per_summary_its_output_holds(prune):
    for seed, steps in ((6, 12), (7, 30), (8, 45)):
        result = compress(swe_rows.row("hermes", seed, steps), target_max_tokens=4000, summary_target_tokens=500,
                          prune=prune)
        assert len(result.examples) == result.metrics.summaries
        for e in result.examples:
            assert any(e.summary in t["value"] for t in result.row["conversations"])


def test_chat_template_rows_under_the_target_count_their_assistant_tokens_too():
    row = swe_rows.row("openai", 3, 3)
    result = compress(row, target_max_tokens=100_000, summary_target_tokens=500, count_mode="chat_template")
    assert result.metrics.assistant_tokens > 0
    assert result.metrics.assistant_tokens_trained == result.metrics.assistant_tokens


def test_a_rejected_row_has_no_rows():
    result = compress({"conversations": "nope"}, target_max_tokens=4000, summary_target_tokens=500)
    assert result.rejected and result.rows == () and result.row is None and result.examples == ()
    assert RowResult.reject("x", "y").row is None


def test_the_aggregate_counts_rows_out_segments_summaries_and_assistant_tokens():
    results = [compress(swe_rows.row("hermes", s, n), target_max_tokens=4000, summary_target_tokens=500)
               for s, n in ((4, 2), (5, 30))]
    agg = Aggregate()
    for r in results:
        agg.add(r.metrics)
    assert agg.rows_out == 2 and dict(agg.segment_counts) == {"1": 2} and agg.summaries == 1
    assert agg.assistant_tokens == sum(r.metrics.assistant_tokens for r in results)
    assert agg.assistant_tokens_trained == sum(r.metrics.assistant_tokens_trained for r in results)
    merged = Aggregate()
    merged.merge(agg.to_state())
    assert (merged.rows_out, merged.summaries, merged.segment_counts) == (2, 1, agg.segment_counts)
