"""Every figure is of the rows written (issue 46): each output row's flags and counts are its own length
against the target, the run's tokens written are the sum over its output rows, the assistant tokens trained
are those of unmarked assistant turns in rows at or under the target, and `--dry-run --segments` predicts
the run's rows out and summaries."""

from __future__ import annotations

import asyncio
import json

import pytest

from conftest import DEMO_TOKENIZER, read_jsonl, run_cli, write_jsonl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openai_server import ServerThread

from trajcomp.core.compressor import TrajectoryCompressor
from trajcomp.core.config import CompressionConfig
from trajcomp.core.metrics import STATUSES, Aggregate
from trajcomp.core.dialects.rows import RowSchema
from trajcomp.core.counting.tokens import TokenCounter
from trajcomp.reports.build import from_aggregate
from trajcomp.reports.schema import Processing, TokenizerInfo

COUNTER = TokenCounter(str(DEMO_TOKENIZER))
TARGET, SUMMARY = 700, 60
SMALL, HUGE = 12, 320  # words in a tool output: one fits beside the head and a summary, the other no row


def row_of(sizes: list[int], seed: int = 0, system_words: int = 20) -> dict:
    """A ShareGPT agent row: a system prompt, a task, one call and its output per size, a final answer."""
    turns = [{"from": "system", "value": "You are a careful programmer. " + " ".join(f"rule{j}" for j in range(system_words))},
             {"from": "human", "value": f"Task {seed}: fix the float repr in card.py."}]
    for k, n in enumerate(sizes):
        call = {"name": "bash", "arguments": {"command": f"sed -n {k},{k + n}p card.py"}}
        turns.append({"from": "gpt", "value": f"Step {k}: I read part {k}.\n<tool_call>\n{json.dumps(call)}\n</tool_call>"})
        out = {"tool_call_id": f"call_{k}", "name": "bash", "content": " ".join(f"v{seed}_{k}_{j}" for j in range(n))}
        turns.append({"from": "tool", "value": f"<tool_response>\n{json.dumps(out)}\n</tool_response>"})
    return {"id": seed, "conversations": turns + [{"from": "gpt", "value": f"Task {seed} done: the test passes."}]}


def config(**overrides) -> CompressionConfig:
    return CompressionConfig(tokenizer_name=str(DEMO_TOKENIZER), target_max_tokens=TARGET,
                             summary_target_tokens=SUMMARY, protect_last_n_turns=1, **overrides)


def compressed(rows: list[dict], cfg: CompressionConfig):
    async def go():
        async with TrajectoryCompressor(cfg, counter=COUNTER) as core:
            return await core.compress_rows(rows)
    return asyncio.run(go())


def length(out: dict) -> int:
    """The row's own length, counted as `turns` mode counts it: its turns' texts."""
    fmt = RowSchema().adapter(out)
    return sum(COUNTER.count([t.text for t in fmt.turns(fmt.native_turns(out))]))


def trained_in(out: dict) -> int:
    """The assistant tokens a trainer trains in `out`: its unmarked assistant turns', none when it is over."""
    if length(out) > TARGET:
        return 0
    gpt = [t["value"] for t in out["conversations"] if t["from"] == "gpt" and t.get("train") is not False]
    return sum(COUNTER.count(gpt)) if gpt else 0


def report_of(results, segments: bool):
    agg = Aggregate()
    for r in results:
        if r.rejected:
            agg.add_reject(r.reason, r.metrics)
        else:
            agg.add(r.metrics)
    config = {"compression": {"segments": segments, "target_max_tokens": TARGET}}
    return from_aggregate(agg, summarizer="extractive", summarizer_stats={}, processing=Processing(),
                          tokenizer=TokenizerInfo(), config=config)


def check_rows_and_report(rows: list[dict], results) -> list[dict]:
    """Each output row's figures are its own; the report's are the sums over the output rows."""
    written = [out for r in results for out in r.rows]
    for row, r in zip(rows, results):
        for k, out in enumerate(r.rows):
            m, own = out["compression_metrics"], length(out)
            assert m["compressed_tokens"] == m.get("segment_tokens", own) == own, k
            assert m["still_over_limit"] == (own > TARGET), k
            assert not m["cannot_fit"] or own > TARGET, k
            if own > TARGET:
                assert m["status"] in ("cannot_fit", "still_over"), k
            else:  # compressed only where a summary brought it to the target
                assert m["status"] == ("compressed" if k > 0 else "under_target"), k
            if "input" in m:  # a row cut into segments: the input row's figures, under `input`
                assert m["input"]["original_tokens"] == length(row) and m["segments"] == len(r.rows)
            else:  # written whole: its figures are its input's
                assert len(r.rows) == 1 and m["original_tokens"] == length(row)
    report = report_of(results, segments=True)
    assert report.rows.written == len(written) and report.rows.inputs_written == len(rows)
    assert report.tokens.total_original == sum(length(row) for row in rows)
    assert report.tokens.total_compressed == sum(length(out) for out in written)
    assert sum(v for k, v in report.statuses.items() if k != "rejected") == len(written)
    assert report.summary.trajectories_still_over_limit == sum(length(out) > TARGET for out in written)
    assert report.tokens.trained == report.segments.assistant_tokens_trained == sum(trained_in(o) for o in written)
    return written


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(st.sampled_from([SMALL, SMALL, HUGE]), min_size=3, max_size=7), min_size=1, max_size=3))
def test_each_segment_rows_figures_are_its_own_and_the_report_sums_the_rows_written(shapes):
    rows = [row_of(sizes, seed) for seed, sizes in enumerate(shapes)]
    check_rows_and_report(rows, compressed(rows, config(segments=True)))


def test_rows_where_some_segments_fit_and_some_cannot_are_counted_each_by_its_own_length():
    rows = [row_of([SMALL, HUGE, SMALL, SMALL, SMALL, HUGE, SMALL, SMALL], 7)]
    written = check_rows_and_report(rows, compressed(rows, config(segments=True)))
    over = [length(out) > TARGET for out in written]
    assert any(over) and not all(over)  # the case the property is about: both kinds in one input row


def test_trained_tokens_count_no_row_over_the_target_no_failed_row_and_no_marked_turn():
    fits = row_of([SMALL] * 3, 1)
    marked = row_of([SMALL] * 2, 2)
    marked["conversations"][2] = {**marked["conversations"][2], "train": False}  # the input marks it itself
    summarized = row_of([SMALL] * 14, 3)  # over, brought under by a summary
    cannot = row_of([SMALL] * 4, 4, system_words=700)  # its system prompt alone is over the target
    plain = [fits, marked, summarized, cannot]
    results = compressed(plain, config())
    statuses = [r.metrics.status for r in results]
    assert statuses == ["under_target", "under_target", "compressed", "cannot_fit"]
    with ServerThread(models=["m"]) as server:  # every request fails: the row is written as it was, failed
        server.set_faults(fail_first_n=10_000)
        failed = compressed([row_of([SMALL] * 14, 5)], config(
            summarizer="openai", summarization_model="m", base_url=server.base_url, api_key_env="TRAJCOMP_TEST_NO_KEY",
            max_retries=0, on_failure="keep"))
    assert failed[0].metrics.status == "failed" and failed[0].metrics.still_over_limit
    results += failed
    report = report_of(results, segments=False)
    written = [r.row for r in results]
    assert report.tokens.trained == sum(trained_in(out) for out in written) > 0
    assert report.tokens.assistant == sum(r.metrics.assistant_tokens for r in results)
    assert [r.metrics.assistant_tokens_trained for r in results] == [trained_in(out) for out in written]
    assert results[3].metrics.assistant_tokens_trained == results[4].metrics.assistant_tokens_trained == 0
    assert report.tokens.trained_share == round(report.tokens.trained / report.tokens.assistant, 4) < 1
    assert set(report.statuses) == set(STATUSES)


def test_dry_run_with_segments_predicts_the_runs_rows_out_and_summaries(tmp_path):
    rows = [row_of([SMALL] * 12, 1), row_of([SMALL, HUGE, SMALL, SMALL, SMALL, SMALL, SMALL], 2), row_of([SMALL] * 2, 3)]
    data = write_jsonl(tmp_path / "rows.jsonl", rows)
    flags = ["--tokenizer", str(DEMO_TOKENIZER), "--target-max-tokens", str(TARGET), "--summary-target-tokens",
             str(SUMMARY), "--protect-last-n", "1", "--segments"]
    dry = run_cli("compress", str(data), "-o", str(tmp_path / "dry.jsonl"), *flags, "--dry-run", "--json")
    assert dry.code == 0, dry.stderr
    planned = json.loads(dry.stdout)
    run = run_cli("compress", str(data), "-o", str(tmp_path / "out.jsonl"), *flags, "-q")
    assert run.code == 0, run.stderr
    report = json.loads((tmp_path / "out_metrics.json").read_text())
    out = read_jsonl(tmp_path / "out.jsonl")
    assert planned["rows_out"] == len(out) == report["rows"]["written"] > len(rows)
    assert planned["summaries"] == report["segments"]["summaries"] > 0
    assert planned["would_stay_over_target"] == sum(length(o) > TARGET for o in out)
    stats = run_cli("stats", str(data), *flags, "--json")
    assert stats.code == 0, stats.stderr
    assert json.loads(stats.stdout)["rows_out"] == len(out)


@pytest.mark.parametrize("segments", [[], ["--segments"]], ids=["plain", "segments"])
def test_the_dry_run_predicts_the_run_where_some_rows_cannot_fit(segments, tmp_path):
    """Under each compression.cannot_fit, the dry run predicts the run's rows written, summaries and rejects,
    on rows of which one cannot fit (its system prompt alone is over the target) and one fits after a summary."""
    rows = [row_of([SMALL] * 12, 1), row_of([SMALL] * 12, 2, system_words=TARGET), row_of([SMALL] * 2, 3)]
    data = write_jsonl(tmp_path / "rows.jsonl", rows)
    for cannot_fit in ("keep", "reject", "shorten"):
        flags = ["--tokenizer", str(DEMO_TOKENIZER), "--target-max-tokens", str(TARGET), "--summary-target-tokens",
                 str(SUMMARY), "--protect-last-n", "1", "--cannot-fit", cannot_fit, "--no-cache", *segments]
        dry = run_cli("compress", str(data), "-o", str(tmp_path / "dry.jsonl"), *flags, "--dry-run", "--json")
        assert dry.code == 0, dry.stderr
        planned = json.loads(dry.stdout)
        run = run_cli("compress", str(data), "-o", str(tmp_path / f"{cannot_fit}.jsonl"), *flags, "-q")
        assert run.code == 0, run.stderr
        report = json.loads((tmp_path / f"{cannot_fit}_metrics.json").read_text())
        out = read_jsonl(tmp_path / f"{cannot_fit}.jsonl")
        assert planned["reject_reasons"] == report["rows"]["reject_reasons"], cannot_fit
        assert planned["reject_reasons"] == ({"cannot_fit": 1} if cannot_fit == "reject" else {})
        assert planned["would_stay_over_target"] == sum(length(o) > TARGET for o in out), cannot_fit
        # the run's decision, in both modes: shorten shortens the row; keep and reject decide it cannot fit
        assert planned["decisions"]["cannot_fit"] == (cannot_fit != "shorten"), cannot_fit
        if segments:
            assert planned["rows_out"] == len(out) and planned["summaries"] == report["segments"]["summaries"]
            continue
        summarized = sum(o["compression_metrics"]["passes"] > 0 for o in out)  # one pass each on these rows
        assert planned["rows"] - planned["rows_rejected"] == len(out), cannot_fit
        assert planned["summarizer_calls_needed"] == summarized == (2 if cannot_fit == "shorten" else 1), cannot_fit
