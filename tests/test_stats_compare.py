"""`trajcomp stats` and `trajcomp compare` end to end: the CLI as a subprocess, a real tokenizer, real reports.

Expected figures are recomputed here from the rows with TokenCounter and planner.plan, not read
back through estimate.py. CLI runs are shared by module-scoped fixtures (each costs a Python start-up).
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import pytest

from conftest import run_cli
from trajcomp.cli.compare import difference, short_names
from trajcomp.core.config import CompressionConfig
from trajcomp.core.planning.planner import Decision, PlanParams, plan
from trajcomp.core.counting.tokens import TokenCounter

TARGET, SUMMARY, LAST_N = 2500, 200, 3
BUDGET = ("--target-max-tokens", str(TARGET), "--summary-target-tokens", str(SUMMARY), "--protect-last-n", str(LAST_N))
BAD_LINES = [("{\"conversations\": [", "invalid_json"), ('{"id": "no-conv"}', "missing_conversations")]

# ---------------------------------------------------------------------------
# Data: Hermes-style rows of three kinds, plus bad lines
# ---------------------------------------------------------------------------

SYSTEM = (
    "You are a function calling AI model. You may call one or more functions to assist with the user query.\n"
    '<tools>\n[{"type": "function", "function": {"name": "terminal", "parameters": {"command": "string"}}}]\n</tools>'
)


def _tool_output(rng: random.Random, lines: int) -> str:
    log = "\n".join(
        rng.choice([
            f'  File "src/app.py", line {rng.randint(1, 400)}, in parse',
            f"AssertionError: expected {rng.randint(0, 9)} got {rng.randint(10, 99)}",
            "我们需要修复解析器中的错误 ✓",
            f"[{i:04d}] INFO worker-{rng.randint(1, 8)} processed batch {rng.randint(0, 10**6)}",
        ])
        for i in range(lines)
    )
    return "<tool_response>\n" + json.dumps({"name": "terminal", "content": log}, ensure_ascii=False) + "\n</tool_response>"


def hermes_row(rng: random.Random, idx: int, steps: int, lines: int) -> dict:
    conv = [{"from": "system", "value": SYSTEM}, {"from": "human", "value": "Fix the failing test in src/app.py."}]
    for step in range(steps):
        call = {"name": "terminal", "arguments": {"command": f"pytest -x tests/test_{step}.py"}}
        conv.append({"from": "gpt", "value": f"<think>\nStep {step}.\n</think>\n<tool_call>\n{json.dumps(call)}\n</tool_call>"})
        conv.append({"from": "tool", "value": _tool_output(rng, lines)})
    conv.append({"from": "gpt", "value": "All tests pass now. 完成 ✅"})
    return {"id": f"traj-{idx:03d}", "conversations": conv}


def hermes_rows(n: int, seed: int) -> list[dict]:
    """Short rows (under target), one-step rows with huge logs (nothing to compress), long rows."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        if i % 4 == 0:
            rows.append(hermes_row(rng, i, steps=1, lines=2))
        elif i % 6 == 5:
            rows.append(hermes_row(rng, i, steps=1, lines=150))
        else:
            rows.append(hermes_row(rng, i, steps=rng.randint(5, 9), lines=rng.randint(6, 20)))
    return rows


@dataclass
class DataFile:
    path: Path
    rows: list[dict]
    bad: list[tuple[str, str]]  # (line, reject reason)

    def write(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        lines = [json.dumps(r, ensure_ascii=False) for r in self.rows] + [line for line, _ in self.bad]
        self.path.write_text("\n".join(lines) + "\n", encoding="utf-8")


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> tuple[Path, list[DataFile]]:
    """A folder with a.jsonl (valid rows and bad lines) and sub/b.jsonl."""
    root = tmp_path_factory.mktemp("stats") / "data"
    files = [DataFile(root / "a.jsonl", hermes_rows(20, seed=1), BAD_LINES), DataFile(root / "sub" / "b.jsonl", hermes_rows(12, seed=2), [])]
    for f in files:
        f.write()
    return root, files


# ---------------------------------------------------------------------------
# The expected figures, recomputed
# ---------------------------------------------------------------------------


# The fixed length bins, written out here: 0, then ten geometric steps per decade from 100 to 10 million.
LENGTH_EDGES = [0] + [int(m * 10**k) for k in range(5) for m in (100, 125, 160, 200, 250, 315, 400, 500, 630, 800)] + [10**7]


def binned(values: list[int]) -> list[int]:
    """Rows per bin [edge_i, edge_i+1); the last bin also holds anything larger."""
    counts = [0] * (len(LENGTH_EDGES) - 1)
    for v in values:
        i = max(i for i, e in enumerate(LENGTH_EDGES[:-1]) if v >= e)
        counts[i] += 1
    return counts


def nearest_rank(values: list[int]) -> dict[str, int]:
    ordered = sorted(values)
    pick = lambda p: ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]  # noqa: E731
    return {"min": ordered[0], "p50": pick(50), "p90": pick(90), "p99": pick(99), "max": ordered[-1]}


@lru_cache
def token_counter(tokenizer: Path) -> TokenCounter:
    return TokenCounter(str(tokenizer))


def expected_stats(files: list[DataFile], tokenizer: Path, target: int, summary: int, last_n: int) -> dict:
    counter = token_counter(tokenizer)
    # Planned as compress plans: the summary turn at its budget plus the notice the system turn gets.
    added = summary + counter.count([CompressionConfig().summary_notice_text])[0]
    params = PlanParams(target, added, protect_last_n_turns=last_n)
    # decisions.cannot_fit: 0 under compression.cannot_fit shorten, the default these runs use (estimate.py)
    before, after, decisions, reasons = [], [], {**{d.value: 0 for d in Decision}, "cannot_fit": 0}, {}
    for f in files:
        for row in f.rows:
            conv = row["conversations"]
            p = plan([t["from"] for t in conv], counter.count([t["value"] for t in conv]), params)
            decisions[p.decision.value] += 1
            before.append(p.total_tokens)
            saved = p.region_tokens - added if p.decision is Decision.COMPRESS else 0
            after.append(p.total_tokens - saved)
        for _, reason in f.bad:
            reasons[reason] = reasons.get(reason, 0) + 1
    return {
        "schema_version": 2,
        "inputs": [str(f.path) for f in files],
        "tokenizer": vars(counter.info),
        "target_max_tokens": target,
        "summary_target_tokens": summary,
        "protect_last_n_turns": last_n,
        "rows": len(before),
        "rows_rejected": sum(reasons.values()),
        "reject_reasons": dict(sorted(reasons.items())),
        "over_target": sum(b > target for b in before),
        "would_fit_after_compression": sum(b > target >= a for b, a in zip(before, after)),
        "would_stay_over_target": sum(a > target for a in after),
        "decisions": decisions,
        "summarizer_calls_needed": decisions["compress"],
        "summary_tokens_needed": decisions["compress"] * summary,
        "tokens_before": nearest_rank(before),
        "tokens_after_estimate": nearest_rank(after),
        "lengths": {"edges": LENGTH_EDGES, "before": binned(before), "after": binned(after)},
        "files": [{"path": str(f.path), "rows": len(f.rows), "rejected": len(f.bad)} for f in files],
    }


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(root.rglob("*"))}


def assert_ok(res) -> None:
    assert res.code == 0, f"exit {res.code}\nstdout:\n{res.stdout}\nstderr:\n{res.stderr}"
    assert "Traceback" not in res.stderr, res.stderr


def assert_usage_error(res, *must_name: str) -> None:
    assert res.code == 2, f"exit {res.code}\nstdout:\n{res.stdout}\nstderr:\n{res.stderr}"
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("trajcomp: error: "), res.stderr
    for text in must_name:
        assert text in lines[0], (text, lines[0])
    assert res.stdout == ""


def cells(text: str, label: str) -> list[str]:
    """The cells after `label` on the table line that starts with it."""
    line = next(l for l in text.splitlines() if l.strip().startswith(label + " ") or l.strip() == label)
    return line.strip()[len(label):].split()


# ---------------------------------------------------------------------------
# stats
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def stats_runs(dataset, bpe_tokenizer):
    """stats on the folder, --json and text, with a snapshot of the folder around them."""
    root, files = dataset
    before = snapshot(root.parent)
    args = ("stats", str(root), "--tokenizer", str(bpe_tokenizer), *BUDGET)
    as_json, text = run_cli(*args, "--json", cwd=root.parent), run_cli(*args, cwd=root.parent)
    return as_json, text, before, snapshot(root.parent)


def test_stats_json_equals_recomputed_figures(stats_runs, dataset, bpe_tokenizer):
    res = stats_runs[0]
    assert_ok(res)
    got = json.loads(res.stdout)
    want = expected_stats(dataset[1], bpe_tokenizer, TARGET, SUMMARY, LAST_N)
    assert got == want
    assert list(got) == list(want), "key order is part of the stable output"
    # The data exercises every branch the report distinguishes.
    assert got["would_fit_after_compression"] > 0 and got["would_stay_over_target"] > 0
    assert got["decisions"]["skipped_under_target"] > 0 and got["decisions"]["nothing_to_compress"] > 0


def test_stats_text_table_shows_the_same_figures(stats_runs, dataset, bpe_tokenizer):
    res = stats_runs[1]
    assert_ok(res)
    want = expected_stats(dataset[1], bpe_tokenizer, TARGET, SUMMARY, LAST_N)
    out = res.stdout
    assert f"{want['rows']} rows in 2 files" in out
    assert cells(out, "tokens per row") == ["min", "p50", "p90", "p99", "max"]
    assert cells(out, "now") == [f"{want['tokens_before'][k]:,}" for k in ("min", "p50", "p90", "p99", "max")]
    assert cells(out, "after (planned)") == [f"{want['tokens_after_estimate'][k]:,}" for k in ("min", "p50", "p90", "p99", "max")]
    assert cells(out, "rows over target") == [f"{want['over_target']:,}"]
    assert cells(out, "could be brought under") == [f"{want['would_fit_after_compression']:,}"]
    assert cells(out, "would stay over")[0] == f"{want['would_stay_over_target']:,}"
    assert f"nothing to compress: {want['decisions']['nothing_to_compress']}" in out
    assert cells(out, "summarizer calls needed") == [str(want["summarizer_calls_needed"]), f"(~{want['summary_tokens_needed']:,}", "summary", "tokens)"]
    assert cells(out, "rejected") == ["2", "(invalid_json:", "1,", "missing_conversations:", "1)"]
    for f in want["files"]:
        assert cells(out, f["path"]) == [str(f["rows"]), str(f["rejected"])]


def test_stats_writes_nothing(stats_runs):
    _, _, before, after = stats_runs
    assert after == before


def test_stats_config_file_with_flag_override_on_one_file(tmp_path, dataset, bpe_tokenizer):
    _, files = dataset
    config = tmp_path / "cfg.yaml"
    config.write_text(
        f"tokenizer:\n  name: {bpe_tokenizer}\ncompression:\n  target_max_tokens: 4000\n  summary_target_tokens: 300\n"
        "protected_turns:\n  last_n_turns: 2\n"
    )
    res = run_cli("stats", str(files[1].path), "-c", str(config), "--summary-target-tokens", "250", "--json")
    assert_ok(res)
    assert json.loads(res.stdout) == expected_stats(files[1:], bpe_tokenizer, 4000, 250, 2)

    res = run_cli("stats", str(files[1].path), "-c", str(config))
    assert_ok(res)
    assert "12 rows in 1 file," in res.stdout and "file " not in res.stdout, "no per-file table for one file"


@pytest.fixture(scope="module")
def bad_inputs(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("bad_inputs")
    (d / "rows.txt").write_text("not a dataset\n")
    (d / "empty_dir").mkdir()
    (d / "unknown_key.yaml").write_text("compression:\n  target_max_tokenz: 5\n")
    (d / "ok.jsonl").write_text('{"conversations": []}\n')
    return d


@pytest.mark.parametrize("case", ["missing_input", "unsupported_file", "empty_dir", "unknown_config_key", "missing_tokenizer"])
def test_stats_errors_exit_2_with_one_line(case, bad_inputs, bpe_tokenizer):
    d, tok = bad_inputs, ("--tokenizer", str(bpe_tokenizer))
    args, must_name = {
        "missing_input": (("stats", str(d / "nope.jsonl"), *tok), ["input not found", "nope.jsonl"]),
        "unsupported_file": (("stats", str(d / "rows.txt"), *tok), ["unsupported input file type", "rows.txt"]),
        "empty_dir": (("stats", str(d / "empty_dir"), *tok), ["no data files", "empty_dir"]),
        "unknown_config_key": (("stats", str(d / "ok.jsonl"), *tok, "-c", str(d / "unknown_key.yaml")), ["target_max_tokenz"]),
        "missing_tokenizer": (("stats", str(d / "ok.jsonl"), "--tokenizer", str(d / "no_tok")), ["no_tok"]),
    }[case]
    before = snapshot(d)
    assert_usage_error(run_cli(*args, cwd=d), *must_name)
    assert snapshot(d) == before


# ---------------------------------------------------------------------------
# compare
# ---------------------------------------------------------------------------

# Where each figure sits in a report: written out here, independently of compare.FIGURES.
REPORT_PATHS = {
    "target_max_tokens": ("config", "compression", "target_max_tokens"),
    "summary_target_tokens": ("config", "compression", "summary_target_tokens"),
    "rows_read": ("rows", "read"),
    "rows_in": ("rows", "inputs_written"),
    "rows_written": ("rows", "written"),
    "rows_rejected": ("rows", "rejected"),
    "compressed": ("statuses", "compressed"),
    "skipped_under_target": ("summary", "trajectories_skipped_under_target"),
    "still_over_limit": ("summary", "trajectories_still_over_limit"),
    "cannot_fit": ("statuses", "cannot_fit"),
    "failed": ("summary", "trajectories_failed"),
    "tokens_before": ("tokens", "total_original"),
    "tokens_after": ("tokens", "total_compressed"),
    "tokens_saved": ("tokens", "total_saved"),
    "compression_ratio": ("tokens", "overall_compression_ratio"),
    "assistant_tokens": ("tokens", "assistant"),
    "assistant_tokens_trained": ("tokens", "trained"),
    "trained_share": ("tokens", "trained_share"),
    "p50_tokens_after": ("distribution", "after", "p50"),
    "p99_tokens_after": ("distribution", "after", "p99"),
    "identifier_retention": ("identifier_retention", "mean"),
    "assistant_tokens_kept": ("assistant_tokens_kept", "mean"),
    "human_turns_cut": ("human_turns_cut", "turns"),
    "rows_pruned": ("pruning", "rows_pruned"),
    "outputs_pruned": ("pruning", "outputs_pruned"),
    "outputs_deduplicated": ("pruning", "outputs_deduplicated"),
    "pruned_tokens_saved": ("pruning", "tokens_saved"),
    "summaries_avoided": ("pruning", "summaries_avoided"),
    "rows_out": ("segments", "rows_out"),
    "segment_summaries": ("segments", "summaries"),
    "summary_passes": ("passes",),  # summed: passes x rows
    "api_calls": ("summarization", "api_calls"),
    "http_requests": ("summarization", "http_requests"),
    "retries": ("summarization", "retries"),
    "cache_hits": ("summarization", "cache_hits"),
    "answers_failed_checks": ("summarization", "answers_failed_checks"),  # summed over the checks
    "rows_fallen_back_on_checks": ("summarization", "rows_fallen_back_on_checks"),
    "prompt_tokens": ("summarization", "usage", "prompt_tokens"),
    "completion_tokens": ("summarization", "usage", "completion_tokens"),
    "batches": ("summarization", "batch", "batches"),
    "batch_rounds": ("summarization", "batch", "rounds"),
    "batch_requests": ("summarization", "batch", "requests"),
    "batch_failed": ("summarization", "batch", "failed"),
    "batch_wait_seconds": ("summarization", "batch", "wait_seconds"),
    "latency_p95_ms": ("summarization", "latency_ms", "p95"),
    "duration_seconds": ("processing", "duration_seconds"),
    "rows_per_second": ("processing", "rows_per_second"),
}


def lookup(report: dict, path: tuple[str, ...]):
    for key in path:
        report = report.get(key) if isinstance(report, dict) else None
    if path == ("passes",) and report is not None:
        return sum(int(k) * v for k, v in report.items())
    if path[-1] == "answers_failed_checks" and report is not None:
        return sum(report.values())
    return report


@pytest.fixture(scope="module")
def two_reports(dataset, bpe_tokenizer, tmp_path_factory) -> tuple[Path, Path]:
    """a.jsonl compressed with target 2500 (runA) and 4000 (runB)."""
    out = tmp_path_factory.mktemp("compare")
    src = dataset[1][0].path
    reports = []
    for name, target in (("runA", 2500), ("runB", 4000)):
        res = run_cli("compress", str(src), "-o", str(out / name / "a.jsonl"), "--tokenizer", str(bpe_tokenizer),
                      "--target-max-tokens", str(target), "--summary-target-tokens", str(SUMMARY), "-q")
        assert_ok(res)
        reports.append(out / name / "a_metrics.json")
    return reports[0], reports[1]


def test_compare_json_has_each_reports_figures_and_differences(two_reports, dataset, bpe_tokenizer):
    res = run_cli("compare", *map(str, two_reports), "--json")
    assert_ok(res)
    got = json.loads(res.stdout)
    a, b = (json.loads(p.read_text(encoding="utf-8")) for p in two_reports)
    assert got["reports"] == ["runA/a_metrics.json", "runB/a_metrics.json"]
    assert got["paths"] == [str(p) for p in two_reports]
    assert list(got["figures"]) == list(REPORT_PATHS) == list(got["differences"])
    for key, path in REPORT_PATHS.items():
        va, vb = lookup(a, path), lookup(b, path)
        assert got["figures"][key] == [va, vb], key
        if va is None or vb is None:
            assert got["differences"][key] == [{"absolute": None, "percent": None}], key
        else:
            pct = 0.0 if va == vb == 0 else round((vb - va) / abs(va) * 100, 2)
            assert got["differences"][key] == [{"absolute": pytest.approx(vb - va, abs=1e-4), "percent": pct}], key

    # The figures themselves are right: the same rows, recomputed.
    data = dataset[1][0]
    at_a = expected_stats([data], bpe_tokenizer, 2500, SUMMARY, 4)
    at_b = expected_stats([data], bpe_tokenizer, 4000, SUMMARY, 4)
    f = got["figures"]
    assert f["rows_read"] == [len(data.rows) + len(data.bad)] * 2
    assert f["rows_rejected"] == [2, 2] and f["failed"] == [0, 0]
    assert f["skipped_under_target"] == [at_a["decisions"]["skipped_under_target"], at_b["decisions"]["skipped_under_target"]]
    assert f["http_requests"] == [None, None], "the extractive summarizer makes no HTTP requests"
    assert got["differences"]["tokens_before"] == [{"absolute": 0, "percent": 0.0}]
    assert f["compressed"][0] > f["compressed"][1] and f["tokens_after"][0] < f["tokens_after"][1]


def test_compare_text_table(two_reports):
    res = run_cli("compare", *map(str, two_reports))
    assert_ok(res)
    a, b = (json.loads(p.read_text(encoding="utf-8")) for p in two_reports)
    lines = res.stdout.splitlines()
    assert lines[:3] == ["A = runA/a_metrics.json", "B = runB/a_metrics.json", ""]
    assert lines[3].split() == ["A", "B", "B-A", "%"]
    assert cells(res.stdout, "target max tokens") == ["2,500", "4,000", "+1,500", "+60.0%"]
    ta, tb = a["tokens"]["total_compressed"], b["tokens"]["total_compressed"]
    assert cells(res.stdout, "tokens written") == [f"{ta:,}", f"{tb:,}", f"{tb - ta:+,}", f"{(tb - ta) / ta * 100:+.1f}%"]
    ra, rb = a["tokens"]["overall_compression_ratio"], b["tokens"]["overall_compression_ratio"]
    assert cells(res.stdout, "ratio written / in")[:3] == [f"{ra:.4f}", f"{rb:.4f}", f"{rb - ra:+.4f}"]
    assert cells(res.stdout, "http requests") == ["-", "-", "-", "-"]
    assert len({len(line) for line in res.stdout.splitlines()[3:]}) == 1, "columns are aligned"


def test_a_schema_2_report_from_before_the_training_signal_shows_it_as_missing(two_reports, tmp_path):
    """assistant_tokens_kept and human_turns_cut came after schema 2: such a report shows `-`, never 0."""
    a = json.loads(two_reports[0].read_text(encoding="utf-8"))
    old = {k: v for k, v in a.items() if k not in ("assistant_tokens_kept", "human_turns_cut")}
    assert old["schema_version"] == 2
    old_path = tmp_path / "before_metrics.json"
    old_path.write_text(json.dumps(old))
    res = run_cli("compare", str(two_reports[0]), str(old_path))
    assert_ok(res)
    kept, cut = a["assistant_tokens_kept"]["mean"], a["human_turns_cut"]["turns"]
    assert cells(res.stdout, "assistant tokens kept (mean)") == [f"{kept:.4f}", "-", "-", "-"]
    assert cells(res.stdout, "user turns cut") == [f"{cut:,}", "-", "-", "-"]


def test_compare_three_reports_with_an_older_one_missing_keys(two_reports, tmp_path):
    old = json.loads(two_reports[0].read_text(encoding="utf-8"))
    for key in ("schema_version", "lengths", "statuses", "worst_rows", "identifier_retention", "passes"):
        del old[key]  # as if written before the schema (version 1)
    del old["distribution"]  # as if written before the section existed
    del old["processing"]
    del old["summarization"]
    old_path = tmp_path / "old_metrics.json"
    old_path.write_text(json.dumps(old))

    res = run_cli("compare", *map(str, two_reports), str(old_path), "--json")
    assert_ok(res)
    got = json.loads(res.stdout)
    assert got["reports"][2] == "old_metrics.json"
    assert got["figures"]["p50_tokens_after"][2] is None and got["figures"]["rows_per_second"][2] is None
    assert got["figures"]["api_calls"][2] is None
    assert got["differences"]["p50_tokens_after"][1] == {"absolute": None, "percent": None}
    assert got["differences"]["tokens_after"][1] == {"absolute": 0, "percent": 0.0}

    res = run_cli("compare", *map(str, two_reports), str(old_path))
    assert_ok(res)
    assert cells(res.stdout, "p50 tokens after")[-3:] == ["-", "-", "-"]


@pytest.mark.parametrize(
    "case", ["not_json", "json_list", "stats_output", "no_sections", "v2_no_tokens", "wrong_type", "newer_schema",
             "missing_file", "one_report"]
)
def test_compare_errors_exit_2_with_one_line(case, two_reports, stats_runs, tmp_path):
    good = str(two_reports[0])
    bad = tmp_path / f"{case}.json"
    content, must_name = {
        "not_json": ("this is not json", ["not a trajcomp report (not valid JSON"]),
        "json_list": ("[1, 2]", ["not a trajcomp report (a JSON list, not an object)"]),
        "stats_output": (stats_runs[0].stdout, ["the output of trajcomp stats, not a compress report"]),
        "no_sections": ('{"rows": 3}', ["not a trajcomp report (no 'summary' and 'tokens' sections)"]),
        "v2_no_tokens": ('{"schema_version": 2, "summary": {"total_trajectories": 3}}',
                         ["not a trajcomp report (no 'summary' and 'tokens' sections)"]),
        "wrong_type": ('{"summary": {}, "tokens": {}, "summarization": {"api_calls": "n/a"}}',
                       ['summarization.api_calls is "n/a", not an integer']),
        "newer_schema": ('{"schema_version": 99, "summary": {}}', ["schema version 99"]),
        "missing_file": (None, ["cannot read it"]),
        "one_report": (None, ["at least two reports"]),
    }[case]
    if content is not None:
        bad.write_text(content)
    args = ("compare", good) if case == "one_report" else ("compare", good, str(bad))
    name = [] if case == "one_report" else [f"{bad}: "]
    assert_usage_error(run_cli(*args), *name, *must_name)


# ---------------------------------------------------------------------------
# compare helpers, in process
# ---------------------------------------------------------------------------


def test_short_names_use_the_fewest_parts_that_differ(tmp_path):
    a, b, c = tmp_path / "x" / "run1" / "m.json", tmp_path / "x" / "run2" / "m.json", tmp_path / "y" / "other.json"
    assert short_names([a, b, c]) == ["run1/m.json", "run2/m.json", "other.json"]
    assert short_names([c, tmp_path / "z" / "q.json"]) == ["other.json", "q.json"]
    assert short_names([a, a]) == ["m.json (1)", "m.json (2)"]


def test_difference_handles_zero_and_missing():
    assert difference(10, 15) == {"absolute": 5, "percent": 50.0}
    assert difference(0.3, 0.1) == {"absolute": -0.2, "percent": -66.67}
    assert difference(0, 0) == {"absolute": 0, "percent": 0.0}
    assert difference(0, 4) == {"absolute": 4, "percent": None}
    assert difference(None, 4) == difference(4, None) == {"absolute": None, "percent": None}
