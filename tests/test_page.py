"""The report schema (round trip, merging parts, older reports) and the HTML pages, rendered in headless Chromium."""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path

import pytest

from browser import dump_dom, screenshot
from conftest import run_cli
from test_cli import assert_ok, hermes_rows, run_parallel, write_lines
from trajcomp.core.metrics import STATUSES, Aggregate, Outcome, RowMetrics
from trajcomp.reports.build import from_aggregate
from trajcomp.reports.reading import load, read_report
from trajcomp.reports.schema import SCHEMA_VERSION, NotAReport, Processing, TokenizerInfo

FIXTURES = Path(__file__).parent / "fixtures"
TARGET, SUMMARY = 2800, 200  # 2800 lies inside a length bin, [2500, 3150): the target line is not on a bin edge
LIGHT_AFTER, DARK_AFTER, LIGHT_TARGET = (0x09, 0x69, 0xDA), (0x44, 0x93, 0xF8), (0xCF, 0x22, 0x2E)


# ---------------------------------------------------------------------------
# The schema, in process
# ---------------------------------------------------------------------------


def metrics(original: int, compressed: int, outcome: Outcome, **kw) -> RowMetrics:
    return RowMetrics(outcome, original, compressed, 10, 6 if outcome is Outcome.COMPRESSED else 10, 1000, **kw)


def sample_rows() -> list[tuple[RowMetrics, str, int]]:
    """Rows of every status, some over the limit by known amounts, with retention and passes."""
    rows = []
    for i in range(60):
        if i % 5 == 0:
            m = metrics(500 + i, 500 + i, Outcome.SKIPPED_UNDER_TARGET)
        elif i % 5 == 1:
            m = metrics(3000, 900, Outcome.COMPRESSED, passes=1, identifier_retention=(i % 10) / 10, summarization_api_calls=1,
                        assistant_tokens_kept=0.25, human_turns_cut=i % 3)
        elif i % 5 == 2:
            m = metrics(5000, 1000 + i, Outcome.COMPRESSED, passes=2, identifier_retention=1.0)  # still over by i
        elif i % 5 == 3:
            m = metrics(4000, 4000 + 0, Outcome.NOTHING_TO_COMPRESS, cannot_fit=True)
        else:
            m = metrics(2000, 2000, Outcome.FAILED, error="timeout")
        rows.append((m, f"data/{'a' if i < 30 else 'b'}.jsonl", i + 1))
    return rows


def report_of(agg: Aggregate):
    return from_aggregate(
        agg, summarizer="openai",
        summarizer_stats={"http_requests": 7, "retries": 2, "latency_ms": {"p50": 120, "p95": 480, "max": 900},
                          "usage": {"prompt_tokens": 5000, "completion_tokens": 700}, "new_figure": [1, 2]},
        processing=Processing(trajcomp_version="x", inputs=["data/a.jsonl", "data/b.jsonl"]),
        tokenizer=TokenizerInfo("tok", "Fast", 600),
        config={"compression": {"target_max_tokens": 1000, "summary_target_tokens": 100}},
    )


def test_report_round_trip_and_merge_of_parts():
    rows = sample_rows()
    whole, parts = Aggregate(), [Aggregate() for _ in range(3)]
    for i, (m, source, line) in enumerate(rows):
        whole.add(m, source=source, line=line)
        parts[i % 3].add(m, source=source, line=line)
    for part in (whole, parts[0]):
        part.add_reject("invalid_json", source="data/b.jsonl", line=99)
    merged = Aggregate()
    for part in parts:  # through JSON, as checkpoints are
        merged.merge(json.loads(json.dumps(part.to_state())))
    report = report_of(whole)
    assert report.to_dict() == report_of(merged).to_dict()

    data = json.loads(json.dumps(report.to_dict()))
    assert data["schema_version"] == SCHEMA_VERSION == 2
    assert read_report(data) == report, "written and read back, the report is the same"

    # Each row in exactly one status; the figures the pictures need.
    assert list(data["statuses"]) == list(STATUSES)
    assert data["statuses"] == {"under_target": 12, "compressed": 12, "still_over": 12, "cannot_fit": 12, "failed": 12,
                                "rejected": 1}
    assert sum(data["statuses"].values()) == data["rows"]["read"] == 61
    assert sum(data["lengths"]["before"]) == sum(data["lengths"]["after"]) == 60
    assert sum(data["compression_ratios"]["counts"]) == 24  # the rows a summary was made for
    retention = [(i % 10) / 10 for i in range(60) if i % 5 == 1] + [1.0] * 12
    assert data["identifier_retention"]["mean"] == round(sum(retention) / len(retention), 4)
    assert data["passes"] == {"0": 36, "1": 12, "2": 12}
    assert data["assistant_tokens_kept"]["rows"] == 12 and data["assistant_tokens_kept"]["mean"] == 0.25
    assert data["human_turns_cut"] == {"turns": sum(i % 3 for i in range(60) if i % 5 == 1),
                                       "rows": sum(i % 3 > 0 for i in range(60) if i % 5 == 1)}
    assert report.summary_passes == 36
    assert data["summarization"]["new_figure"] == [1, 2], "a summarizer's own figures are kept"

    worst = data["worst_rows"]
    over = sorted(((m.compressed_tokens - 1000, s, line) for m, s, line in rows if m.still_over_limit),
                  key=lambda t: (-t[0], t[1], t[2]))[:20]
    assert [(w["over_by"], w["source"], w["line"]) for w in worst] == over
    assert worst[0] == {"source": "data/a.jsonl", "line": 4, "original_tokens": 4000, "compressed_tokens": 4000,
                        "over_by": 3000, "status": "cannot_fit"}


def test_older_report_loads_and_newer_one_is_refused(tmp_path):
    path = FIXTURES / "report_v1_metrics.json"  # written by trajcomp before the schema had a version
    old = json.loads(path.read_text(encoding="utf-8"))
    assert "schema_version" not in old
    report = load(path)
    assert report.schema_version == SCHEMA_VERSION
    assert report.summary.total_trajectories == old["summary"]["total_trajectories"]
    assert report.distribution.after.p50 == old["distribution"]["after"]["p50"]
    assert report.summarization.summarizer == "extractive" and report.summarization.http_requests is None
    assert report.lengths is None and report.statuses is None and report.worst_rows is None
    assert report.assistant_tokens_kept is None and report.human_turns_cut is None  # not measured then
    assert report.target_max_tokens == old["config"]["compression"]["target_max_tokens"]

    newer = tmp_path / "newer.json"
    newer.write_text(json.dumps({**old, "schema_version": 3}))
    with pytest.raises(NotAReport, match="schema version 3; this trajcomp reads versions 1 to 2"):
        load(newer)


# ---------------------------------------------------------------------------
# Real runs and their pages
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def runs(tmp_path_factory, bpe_tokenizer):
    """One file compressed twice (summaries of 200 and 100 tokens), --html; pages by report and compare."""
    d = tmp_path_factory.mktemp("pages")
    src = write_lines(d / "trajs.jsonl", hermes_rows(24, seed=7)[:20] + ["{not json"] + hermes_rows(24, seed=7)[20:])
    budget = ("--tokenizer", str(bpe_tokenizer), "--target-max-tokens", str(TARGET))
    results = run_parallel(
        ("compress", str(src), "-o", str(d / "a" / "out.jsonl"), *budget, "--summary-target-tokens", "200", "--html", "-q"),
        ("compress", str(src), "-o", str(d / "b" / "out.jsonl"), *budget, "--summary-target-tokens", "100", "-q"),
    )
    for res in results:
        assert_ok(res)
    a, b = d / "a" / "out_metrics.json", d / "b" / "out_metrics.json"
    res = run_cli("report", str(a), "-o", str(d / "report.html"))
    assert_ok(res)
    assert res.stdout.strip() == str(d / "report.html")
    res = run_cli("compare", str(a), str(b), "--html", str(d / "compare.html"))
    assert_ok(res)
    assert res.stdout.startswith("A = a/out_metrics.json"), "the text table is still printed"
    return d, a, b


def test_compress_html_writes_the_page_beside_the_report(runs):
    d, a, _ = runs
    page = d / "a" / "out_metrics.html"
    assert page.exists() and not (d / "b" / "out_metrics.html").exists()
    # they agree but for the link to the page of rows beside the report, from where each page is
    linked = page.read_text(encoding="utf-8").replace('href="out_rows.html"', 'href="a/out_rows.html"')
    assert linked == (d / "report.html").read_text(encoding="utf-8"), "compress --html and trajcomp report agree"
    assert 'href="a/out_rows.html"' in linked and (d / "a" / "out_rows.html").exists()


@pytest.mark.parametrize("name", ["report.html", "compare.html"])
def test_pages_are_self_contained(runs, name):
    text = (runs[0] / name).read_text(encoding="utf-8")
    assert "<script" not in text.lower() and "@import" not in text and "url(" not in text
    assert not re.search(r"\s(src|xlink:href|srcset|action|data)=", text), "nothing is fetched"
    # an href only on a link (the report's to its page of rows): followed when clicked, never fetched
    assert all(tag.startswith("<a ") for tag in re.findall(r"<[a-z]+[^>]*\shref=", text))
    assert "<link" not in text and "<img" not in text and "<iframe" not in text and "<object" not in text


def bars(svg, series: str):
    return [r for r in svg.find_all("rect") if r.attrs.get("data-series") == series and "bar" in r.classes()]


def test_report_page_structure_in_the_browser(runs):
    d, a, _ = runs
    report = json.loads(a.read_text(encoding="utf-8"))
    dom = dump_dom(d / "report.html")
    assert dom.find("title").all_text().startswith("trajcomp report")

    svg = dom.find("svg", id="lengths-chart")
    assert svg.attrs["role"] == "img"
    assert svg.find("title").all_text() == "Tokens per row, before and after"
    texts = [t.all_text() for t in svg.find_all("text")]
    assert "tokens per row (log scale)" in texts and "rows" in texts and f"target {TARGET:,}" in texts
    before, after = bars(svg, "before"), bars(svg, "after")
    assert sum(int(r.attrs["data-count"]) for r in before) == report["rows"]["written"]
    assert sum(int(r.attrs["data-count"]) for r in after) == report["rows"]["written"]
    for series, counts in ((before, report["lengths"]["before"]), (after, report["lengths"]["after"])):
        edges = report["lengths"]["edges"]
        drawn = {float(r.attrs["data-lo"]): int(r.attrs["data-count"]) for r in series}
        assert drawn == {float(edges[i]): c for i, c in enumerate(counts) if c}

    # The target line: log-interpolated inside its bin, measured from the bars' own geometry.
    line = next(l for l in svg.find_all("line") if "target" in l.classes())
    assert float(line.attrs["data-value"]) == TARGET
    edges = report["lengths"]["edges"]
    width = float(after[0].attrs["width"])  # two series: a bin is two bars and a 1-unit gap each side
    bin_width = 2 * width + 2
    ref = before[0]
    ref_left = float(ref.attrs["x"]) - 1
    ref_index = edges.index(int(float(ref.attrs["data-lo"])))
    t = max(i for i, e in enumerate(edges[:-1]) if e <= TARGET)
    frac = math.log(TARGET / edges[t]) / math.log(edges[t + 1] / edges[t])
    want = ref_left + (t - ref_index + frac) * bin_width
    assert abs(float(line.attrs["x1"]) - want) < 0.05, (line.attrs["x1"], want)
    assert 0.3 < frac < 0.7, "the target is not on an edge: the check sees the interpolation"

    statuses = dom.find("svg", id="statuses-chart")
    drawn = {r.attrs["data-category"]: int(r.attrs["data-count"]) for r in statuses.find_all("rect") if "bar" in r.classes()}
    assert drawn == {k: v for k, v in report["statuses"].items() if v}
    assert drawn["rejected"] == 1
    assert dom.find("svg", id="ratios-chart").find_all("rect")
    kept = dom.find("svg", id="assistant-chart")
    assert sum(int(r.attrs["data-count"]) for r in kept.find_all("rect") if "bar" in r.classes()) == \
        report["assistant_tokens_kept"]["rows"]
    figures = dom.find("section").all_text()  # the key figures
    assert "assistant tokens kept" in figures and f"{report['assistant_tokens_kept']['mean']:.1%}" in figures
    assert "user turns cut" in figures

    # A table behind each figure; the summarizer figures, the worst rows and the config.
    for figure in dom.find_all("figure"):
        assert figure.find("figcaption").all_text() and figure.find("details").find("table")
    assert "extractive" in dom.find("section", id="summarizer").all_text()
    worst = dom.find("section", id="worst").find("table").find_all("tr")[1:]
    assert len(worst) == len(report["worst_rows"]) and "trajs.jsonl" in worst[0].all_text()
    assert "target_max_tokens" in dom.find("section", id="config").all_text()


def test_comparison_page_structure_in_the_browser(runs):
    d, a, b = runs
    ra, rb = (json.loads(p.read_text(encoding="utf-8")) for p in (a, b))
    dom = dump_dom(d / "compare.html")
    svg = dom.find("svg", id="lengths-chart")
    series = {r.attrs["data-series"] for r in svg.find_all("rect") if "bar" in r.classes() and "data-series" in r.attrs}
    assert series == {"before (A)", "after (A)", "after (B)"}
    assert sum(int(r.attrs["data-count"]) for r in bars(svg, "after (B)")) == rb["rows"]["written"]
    assert any("target" in l.classes() for l in svg.find_all("line")), "the runs share a target: one line"
    statuses = {(r.attrs["data-series"], r.attrs["data-category"]): int(r.attrs["data-count"])
                for r in dom.find("svg", id="statuses-chart").find_all("rect") if "data-category" in r.attrs}
    assert statuses[("B", "compressed")] == rb["statuses"]["compressed"]

    callouts = dom.find("section", id="callouts").all_text()
    saved_a, saved_b = ra["tokens"]["total_saved"], rb["tokens"]["total_saved"]
    assert saved_a != saved_b
    assert f"tokens saved: {saved_b:,} vs {saved_a:,} in A, {saved_b - saved_a:+,}" in callouts
    table = dom.find("section", id="table").all_text()
    assert "identifier retention" not in table or "-" in table  # shown when a report has it
    assert "still over limit" in table and "summary passes" in table
    assert "assistant tokens kept (mean)" in table and "user turns cut" in table


@pytest.mark.parametrize("dark", [False, True], ids=["light", "dark"])
def test_screenshot_shows_the_charts(runs, tmp_path, dark):
    d = runs[0]
    image = screenshot(d / "report.html", tmp_path / "shot.png", 1000, 1400, dark=dark)
    background = image.pixel(2, 2)
    assert (sum(background) < 120) == dark, background
    # The header and key figures, then the length chart below them: neither region is blank.
    assert image.not_background((0, 0, 1000, 300)) > 5000
    chart = (0, 300, 1000, 760)
    assert image.not_background(chart) > 20000
    assert image.count(chart, DARK_AFTER if dark else LIGHT_AFTER, tolerance=30) > 1500, "the 'after' bars"
    if not dark:
        assert image.count(chart, LIGHT_TARGET, tolerance=40) > 150, "the target line and its label"


def test_report_command_on_an_older_report_and_bad_files(tmp_path):
    old = tmp_path / "old_metrics.json"
    shutil.copy(FIXTURES / "report_v1_metrics.json", old)
    res = run_cli("report", str(old))
    assert_ok(res)
    page = (tmp_path / "old_metrics.html").read_text(encoding="utf-8")
    assert "Not shown: this report has no length histograms" in page and "Summarizer" in page
    res = run_cli("compare", str(old), str(FIXTURES / "report_v1_metrics.json"), "--html", str(tmp_path / "c.html"))
    assert_ok(res)
    assert "Not shown: this report has no length histograms" in (tmp_path / "c.html").read_text(encoding="utf-8")

    bad = tmp_path / "bad.json"
    bad.write_text('{"schema_version": 7}')
    res = run_cli("report", str(bad), "-o", str(tmp_path / "bad.html"))
    assert res.code == 2 and res.stderr.strip().count("\n") == 0
    assert f"{bad}: a report of schema version 7" in res.stderr
    assert not (tmp_path / "bad.html").exists()
