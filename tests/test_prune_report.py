"""compress --prune counted: rows' metrics, the report's pruning section, stats --prune, compare, the page
and show --input, through the real CLI."""

from __future__ import annotations

import json
import re
import sys
from collections import Counter

import pytest
from conftest import DEMO_TOKENIZER, ROOT, read_jsonl, run_cli, write_jsonl

sys.path.insert(0, str(ROOT / "scripts"))
import swe_rows  # noqa: E402

ARGS = ("--tokenizer", str(DEMO_TOKENIZER), "--target-max-tokens", "6000", "--summary-target-tokens", "300")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The same SWE-like rows compressed with and without --prune (and the page of the pruned run)."""
    work = tmp_path_factory.mktemp("prune_report")
    src = write_jsonl(work / "swe.jsonl", swe_rows.rows("hermes", 16))
    out = {}
    for name, extra in (("plain", ()), ("pruned", ("--prune", "--html"))):
        run = run_cli("compress", str(src), "-o", str(work / name / "out.jsonl"), *ARGS, *extra)
        assert run.code == 0, run.stderr
        out[name] = run
    return src, work, out


def report(work, name):
    return json.loads((work / name / "out_metrics.json").read_text(encoding="utf-8"))


def test_the_pruning_section_is_the_sum_of_the_rows(runs):
    src, work, out = runs
    rows = [r["compression_metrics"] for r in read_jsonl(work / "pruned" / "out.jsonl")]
    pruned = [m for m in rows if m["pruned_outputs"]]
    fit = [m for m in pruned if m["passes"] == 0 and not m["still_over_limit"]]
    assert len(fit) >= 5 and len(pruned) > len(fit)  # both kinds: fit by stubs, stubbed then summarized
    plain_rows = [r["compression_metrics"] for r in read_jsonl(work / "plain" / "out.jsonl")]
    avoided = sum(m in fit and p["passes"] > 0 for m, p in zip(rows, plain_rows, strict=True))  # the run without --prune
    assert report(work, "pruned")["pruning"] == {
        "rows_pruned": len(pruned), "rows_fit_without_summary": len(fit),
        "outputs_pruned": sum(m["pruned_outputs"] for m in rows),
        "outputs_deduplicated": sum(m["deduplicated_outputs"] for m in rows),
        "tokens_saved": sum(m["pruned_tokens"] for m in rows), "summaries_avoided": avoided,
    }
    assert report(work, "pruned")["config"]["compression"]["prune"] is True
    plain = report(work, "plain")
    assert "pruning" not in plain and "prune" not in plain["config"]["compression"]
    assert all("pruned_outputs" not in r["compression_metrics"] for r in read_jsonl(work / "plain" / "out.jsonl"))
    p = report(work, "pruned")["pruning"]
    line = (f"  pruned              {p['outputs_pruned']} tool outputs made stubs ({p['outputs_deduplicated']} older "
            f"copies) in {p['rows_pruned']} rows, {p['tokens_saved']:,} tokens saved; {len(fit)} rows fit with no summary")
    assert line in out["pruned"].stdout.splitlines() and "pruned " not in out["plain"].stdout


def test_the_page_and_the_rows_page_show_the_pruning(runs):
    src, work, out = runs
    page = (work / "pruned" / "out_metrics.html").read_text(encoding="utf-8")
    fit = report(work, "pruned")["pruning"]["rows_fit_without_summary"]
    assert f"<dt>rows fit with no summary</dt><dd>{fit}</dd>" in page
    assert (work / "pruned" / "out_rows.html").exists() and "warning" not in out["pruned"].stderr


def test_stats_prune_estimates_what_the_run_did(runs):
    src, work, out = runs
    planned = run_cli("stats", str(src), *ARGS, "--prune", "--json")
    plain = run_cli("stats", str(src), *ARGS, "--json")
    assert planned.code == plain.code == 0, planned.stderr
    planned, plain = json.loads(planned.stdout), json.loads(plain.stdout)
    done = report(work, "pruned")["pruning"]
    assert planned["pruning"]["rows_fit_without_summary"] == done["rows_fit_without_summary"]
    assert planned["summarizer_calls_needed"] == plain["summarizer_calls_needed"] - done["summaries_avoided"]
    assert planned["pruning"]["summaries_avoided"] == done["summaries_avoided"] and "pruning" not in plain
    text = run_cli("stats", str(src), *ARGS, "--prune")
    assert re.search(rf"by pruning alone +{done['rows_fit_without_summary']}  \(", text.stdout), text.stdout
    dry = run_cli("compress", str(src), "-o", str(work / "dry" / "out.jsonl"), *ARGS, "--prune", "--dry-run")
    assert dry.code == 0 and re.search(rf"fit by pruning alone +{done['rows_fit_without_summary']} \(", dry.stdout), dry.stderr
    assert not (work / "dry").exists()


def test_show_input_refuses_an_input_whose_stubbed_turn_names_another_call(runs, tmp_path):
    src, work, out = runs
    inputs, outputs = read_jsonl(src), read_jsonl(work / "pruned" / "out.jsonl")
    n = next(i for i, r in enumerate(outputs) if r["compression_metrics"]["pruned_outputs"] and not r["compression_metrics"]["passes"])
    stubbed = next(j for j, t in enumerate(outputs[n]["conversations"]) if "[pruned" in t["value"])
    turns = [dict(t) for t in inputs[n]["conversations"]]
    turns[stubbed]["value"] = turns[stubbed]["value"].replace('"tool_call_id": "call_', '"tool_call_id": "other_')
    assert turns != inputs[n]["conversations"]
    edited = write_jsonl(tmp_path / "ids.jsonl", [{**r, "conversations": turns} if i == n else r for i, r in enumerate(inputs)])
    run = run_cli("show", str(work / "pruned" / "out.jsonl"), "--input", str(edited), "--row", str(n + 1), "--json")
    assert run.code == 2 and "matches no input row" in run.stderr, run.stderr


def test_compare_sets_the_pruning_figures_side_by_side(runs):
    src, work, out = runs
    run = run_cli("compare", str(work / "plain" / "out_metrics.json"), str(work / "pruned" / "out_metrics.json"), "--json")
    assert run.code == 0, run.stderr
    figures = json.loads(run.stdout)["figures"]
    done = report(work, "pruned")["pruning"]
    assert figures["summaries_avoided"] == [None, done["summaries_avoided"]]
    assert figures["outputs_pruned"] == [None, done["outputs_pruned"]]
    assert figures["pruned_tokens_saved"] == [None, done["tokens_saved"]]


def test_show_input_puts_each_stub_beside_its_output(runs):
    src, work, out = runs
    inputs, outputs = read_jsonl(src), read_jsonl(work / "pruned" / "out.jsonl")
    every = [arg for i in range(len(outputs)) for arg in ("--row", str(i + 1))]
    run = run_cli("show", str(work / "pruned" / "out.jsonl"), "--input", str(src), "--json", *every)
    assert run.code == 0, run.stderr
    views = json.loads(run.stdout)
    assert sorted(v["row"] for v in views) == list(range(1, len(outputs) + 1))
    seen = Counter()
    for view in views:
        row, out_row = inputs[view["row"] - 1], outputs[view["row"] - 1]
        stubbed = view.get("stubbed", [])
        assert len(stubbed) == out_row["compression_metrics"]["pruned_outputs"]
        originals = {t["value"] for t in row["conversations"]}
        for s in stubbed:
            assert s["value"] in originals and "[pruned" in out_row["conversations"][s["turn"] - 1]["value"]
            seen[view["summary"] is None] += 1
    assert seen[True] and seen[False]  # beside rows fit by stubs and rows also summarized
    text = run_cli("show", str(work / "pruned" / "out.jsonl"), "--input", str(src), "--row", "2")
    assert "stubbed from:" in text.stdout and "tool outputs pruned" in text.stdout
