"""The report's figures equal what the written rows contain when counted again with the same tokenizer."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from conftest import read_jsonl
from test_cli import BUDGET, SUMMARY, TARGET, assert_ok, hermes_rows, run_parallel, write_lines
from trajcomp.core.counting.tokens import TokenCounter

TOKENIZERS = ("bpe_tokenizer", "wordpiece_tokenizer")


@pytest.fixture(scope="module")
def runs(tmp_path_factory, bpe_tokenizer, wordpiece_tokenizer):
    """The same generated file compressed once with each tokenizer (both runs at once)."""
    rows = hermes_rows(21, seed=42)
    lines = rows[:5] + ["{not json", ""] + rows[5:15] + ['{"conversations": [{"from": "bot", "value": "x"}]}'] + rows[15:]
    toks = {"bpe_tokenizer": bpe_tokenizer, "wordpiece_tokenizer": wordpiece_tokenizer}
    dirs, commands = {}, []
    for name, tok in toks.items():
        d = tmp_path_factory.mktemp(name)
        src = write_lines(d / "trajs.jsonl", lines)
        dirs[name] = d
        commands.append(("compress", str(src), "--tokenizer", str(tok), *BUDGET, "--cannot-fit", "shorten", "--quiet"))
    results = dict(zip(toks, run_parallel(*commands)))
    return rows, toks, dirs, results


def nearest_rank(values: list[int]) -> dict[str, int]:
    """min, p50, p90, p99, max; the p-th percentile is the ceil(p/100 * n)-th smallest value."""
    if not values:
        return {"min": 0, "p50": 0, "p90": 0, "p99": 0, "max": 0}
    ordered = sorted(values)
    n = len(ordered)

    def pct(p: int) -> int:
        rank = max(1, -(-p * n // 100))  # integer ceil, no float rounding
        return ordered[rank - 1]

    return {"min": ordered[0], "p50": pct(50), "p90": pct(90), "p99": pct(99), "max": ordered[-1]}


@pytest.mark.parametrize("tok_name", TOKENIZERS)
def test_report_equals_a_recount_of_the_written_rows(tok_name, runs):
    rows, toks, dirs, results = runs
    res = results[tok_name]
    assert_ok(res)
    d = dirs[tok_name]
    written = read_jsonl(d / "trajs_compressed.jsonl")
    report = json.loads((d / "trajs_compressed_metrics.json").read_text(encoding="utf-8"))
    by_id = {r["id"]: r for r in rows}
    assert [r["id"] for r in written] == [r["id"] for r in rows]

    counter = TokenCounter(str(toks[tok_name]))

    def recount(row: dict) -> int:
        return sum(counter.count([t["value"] for t in row["conversations"]]))

    before, after, turns_before, turns_after, kept_shares = [], [], [], [], []
    assistant = trained = 0
    outcomes: Counter = Counter()
    sources: Counter = Counter()
    for row in written:
        m = row["compression_metrics"]
        source = by_id[row["id"]]
        original, compressed = recount(source), recount(row)
        # Each row's own figures.
        assert m["original_tokens"] == original, row["id"]
        assert m["compressed_tokens"] == compressed, row["id"]
        assert m["tokens_saved"] == original - compressed
        assert m["compression_ratio"] == round(compressed / original, 4)
        assert m["original_turns"] == len(source["conversations"])
        assert m["compressed_turns"] == len(row["conversations"])
        assert m["turns_removed"] == m["original_turns"] - m["compressed_turns"]
        assert m["still_over_limit"] == (compressed > TARGET)
        assert m["was_compressed"] == (m["outcome"] == "compressed")
        assert m["skipped_under_target"] == (m["outcome"] == "skipped_under_target")
        assert m["skipped_under_target"] == (original <= TARGET)
        if m["was_compressed"]:
            assert compressed < original
        else:
            assert compressed == original and row["conversations"] == source["conversations"]
        # The assistant tokens still in the row: each input gpt turn found, unchanged, among the output's.
        left = Counter(t["value"] for t in row["conversations"] if t["from"] == "gpt")
        gpt_tokens = kept_tokens = 0
        for turn in source["conversations"]:
            if turn["from"] == "gpt":
                tokens = counter.count([turn["value"]])[0]
                gpt_tokens += tokens
                if left[turn["value"]] > 0:
                    left[turn["value"]] -= 1
                    kept_tokens += tokens
        assert m["assistant_tokens_kept"] == (round(kept_tokens / gpt_tokens, 4) if gpt_tokens else None), row["id"]
        kept_shares.append(m["assistant_tokens_kept"])
        assistant += gpt_tokens
        trained += kept_tokens if compressed <= TARGET else 0  # a row over the target trains nothing
        assert m["human_turns_cut"] == 0  # these rows' user turns fit whole
        before.append(original)
        after.append(compressed)
        turns_before.append(m["original_turns"])
        turns_after.append(m["compressed_turns"])
        outcomes[m["outcome"]] += 1
        if m["summary_source"] is not None:
            sources[m["summary_source"]] += 1

    n = len(written)
    compressed_rows = outcomes["compressed"]
    assert compressed_rows >= 5 and outcomes["skipped_under_target"] >= 3, outcomes  # a meaningful mix

    def avg(total: float, count: int) -> float:
        return round(total / count, 2) if count else 0.0

    assert report["summary"] == {
        "total_trajectories": n,
        "trajectories_compressed": compressed_rows,
        "trajectories_skipped_under_target": outcomes["skipped_under_target"],
        "trajectories_still_over_limit": sum(a > TARGET for a in after),
        "trajectories_failed": outcomes["failed"],
        "compression_rate": avg(compressed_rows, n),
        "outcomes": {key: outcomes[key] for key in report["summary"]["outcomes"]},
        "summaries_by_source": dict(sources),
    }
    assert sum(report["summary"]["outcomes"].values()) == n
    assert set(outcomes) <= set(report["summary"]["outcomes"])
    assert report["tokens"] == {
        "total_original": sum(before),
        "total_compressed": sum(after),
        "total_saved": sum(before) - sum(after),
        "overall_compression_ratio": round(sum(after) / sum(before), 4),
        "assistant": assistant,
        "trained": trained,
        "trained_share": round(trained / assistant, 4),
    }
    assert report["turns"] == {
        "total_original": sum(turns_before),
        "total_compressed": sum(turns_after),
        "total_removed": sum(turns_before) - sum(turns_after),
    }
    assert report["averages"] == {
        "original_tokens_per_trajectory": avg(sum(before), n),
        "compressed_tokens_per_trajectory": avg(sum(after), n),
        "tokens_saved_per_trajectory": avg(sum(before) - sum(after), n),
        "turns_removed_per_compressed_trajectory": avg(sum(turns_before) - sum(turns_after), compressed_rows),
    }
    assert report["distribution"] == {"before": nearest_rank(before), "after": nearest_rank(after)}
    shares = [k for k in kept_shares if k is not None]
    assert min(shares) < 1.0 and report["assistant_tokens_kept"]["rows"] == len(shares)
    assert report["assistant_tokens_kept"]["mean"] == round(sum(shares) / len(shares), 4)
    assert sum(report["assistant_tokens_kept"]["histogram"]["counts"]) == len(shares)
    assert report["human_turns_cut"] == {"turns": 0, "rows": 0}
    assert report["rows"]["written"] == n
    assert report["rows"]["rejected"] == 2
    assert report["rows"]["read"] == n + 2
    assert report["summarization"]["summarizer"] == "extractive"
    assert report["summarization"]["api_calls"] == sum(r["compression_metrics"]["summarization_api_calls"] for r in written)
    assert report["tokenizer"]["name"] == str(toks[tok_name])
    assert report["tokenizer"]["vocab_size"] == counter.info.vocab_size
    compression = report["config"]["compression"]
    assert (compression["target_max_tokens"], compression["summary_target_tokens"]) == (TARGET, SUMMARY)


def test_nearest_rank_helper():
    """The test's own percentile helper, on values where the answer is known by hand."""
    assert nearest_rank(list(range(1, 101))) == {"min": 1, "p50": 50, "p90": 90, "p99": 99, "max": 100}
    assert nearest_rank([5]) == {"min": 5, "p50": 5, "p90": 5, "p99": 5, "max": 5}
    assert nearest_rank([3, 1, 2]) == {"min": 1, "p50": 2, "p90": 3, "p99": 3, "max": 3}
    assert nearest_rank(list(range(10, 0, -1))) == {"min": 1, "p50": 5, "p90": 9, "p99": 10, "max": 10}
