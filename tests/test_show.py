"""`trajcomp show`: rows of an output paired with their input rows, counted, explained, as text, JSON and pages.

Most runs are made in this process (`main`, as the console script calls it): a CLI subprocess costs
~2 s of start-up. A folder run as `make demo` makes it, and what show does with its files and its
folder, go through the real CLI.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from browser import dump_dom, parse, screenshot
from conftest import DEMO_TOKENIZER, ROOT, SAMPLES, read_jsonl, run_cli
from test_cli import hermes_rows, write_lines
from trajcomp.cli.commands import main
from trajcomp.core.counting.tokens import TokenCounter
from trajcomp.reports.show.rows import Choice, views
from trajcomp.reports.show.runs import run_of

TARGET = 2500
BUDGET = ("--tokenizer", str(DEMO_TOKENIZER), "--target-max-tokens", str(TARGET), "--summary-target-tokens", "200")
BAD = ["{not json", json.dumps({"id": "bad", "messages": "nope"})]
HIGHLIGHT = (0xD4, 0xA7, 0x2C)  # --s2 in light mode: the replaced turns and their summary


def cli(*args: str) -> int:
    """`trajcomp ARGS` in this process; its exit code."""
    with pytest.raises(SystemExit) as done:
        main([str(a) for a in args])
    return done.value.code


@pytest.fixture(scope="module")
def counter():
    return TokenCounter(str(DEMO_TOKENIZER))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """One input with bad lines among its rows, compressed whole (--html), sampled, as a shard, and with no metrics."""
    d = tmp_path_factory.mktemp("show")
    rows = [{**row, "id": f"r{i}"} for i, row in enumerate(hermes_rows(14, seed=3))]
    lines = rows[:3] + [BAD[0]] + rows[3:9] + [BAD[1]] + rows[9:]
    src = write_lines(d / "in.jsonl", lines)
    line_of = {row["id"]: n for n, row in enumerate(lines, 1) if isinstance(row, dict)}
    (d / "nometrics.yaml").write_text("metrics:\n  per_trajectory: false\n", encoding="utf-8")
    assert cli("compress", src, "-o", d / "out.jsonl", *BUDGET, "--html", "-q") == 0
    assert cli("compress", src, "-o", d / "sample.jsonl", *BUDGET, "--sample-percent", "50", "--seed", "4", "-q") == 0
    assert cli("compress", src, "-o", d / "shard.jsonl", *BUDGET, "--num-shards", "2", "--shard-index", "1", "-q") == 0
    assert cli("compress", src, "-o", d / "plain.jsonl", *BUDGET, "-c", d / "nometrics.yaml", "-q") == 0
    return d, src, line_of


def parsed(path: Path) -> list[dict]:
    """The lines of `path` that are JSON objects (the input's bad lines left out)."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.startswith('{"')]


def shown_json(capsys, *args) -> list[dict]:
    capsys.readouterr()
    assert cli("show", *args, "--json") == 0
    return json.loads(capsys.readouterr().out)


def test_show_prints_the_summary_and_the_turns_it_replaced(runs):
    d, src, _ = runs
    row = next(r for r in read_jsonl(d / "out.jsonl") if r["compression_metrics"]["status"] == "compressed")
    m = row["compression_metrics"]
    res = run_cli("show", str(d / "out.jsonl"), "--id", row["id"], "--input", str(src))
    assert res.code == 0, res.stderr
    start, end = m["compression_region"]["start_idx"], m["compression_region"]["end_idx"]
    summary = row["conversations"][start]["value"]
    assert f"{m['original_tokens']:,} → {m['compressed_tokens']:,} (target {TARGET:,})" in res.stdout
    assert "summary turn human" in res.stdout and f"in place of input turns {start + 1}–{end}" in res.stdout
    assert all(line in res.stdout for line in summary.splitlines()), "the summary in full"
    assert "replaced:" in res.stdout and "\x1b[" not in res.stdout, "plain text off a terminal"


def test_json_fields_equal_a_recount(runs, capsys, counter):
    d, src, line_of = runs
    inputs = {r["id"]: r for r in parsed(src) if isinstance(r.get("conversations"), list)}
    outputs = {r["id"]: r for r in read_jsonl(d / "out.jsonl")}
    shown = shown_json(capsys, d / "out.jsonl", "--input", src, "--status", "compressed", "--limit", "3")
    assert len(shown) == 3
    for item in shown:
        assert set(item) == {"row", "output", "id", "status", "tokens_before", "tokens_after", "summary", "kept", "replaced", "input", "why"}
        out, inp = outputs[item["id"]], inputs[item["id"]]
        assert item["input"] == f"in.jsonl:{line_of[item['id']]}" and item["status"] == "compressed"
        kept = [t["value"] for t in out["conversations"]]
        assert [t["tokens"] for t in item["kept"]] == counter.count(kept)
        assert item["tokens_after"] == sum(counter.count(kept))
        assert item["tokens_before"] == sum(counter.count([t["value"] for t in inp["conversations"]]))
        region = out["compression_metrics"]["compression_region"]
        replaced = inp["conversations"][region["start_idx"]:region["end_idx"]]
        assert [t["value"] for t in item["replaced"]] == [t["value"] for t in replaced]
        assert [t["tokens"] for t in item["replaced"]] == counter.count([t["value"] for t in replaced])
        assert item["summary"] == kept[region["start_idx"]] and item["summary"].startswith("[CONTEXT SUMMARY]:")
        assert [t["summary"] for t in item["kept"]].count(True) == 1 and item["why"] is None


def test_why_gives_head_and_tail_tokens_against_the_target(runs, capsys, counter):
    d, _, _ = runs
    shown = shown_json(capsys, d / "out.jsonl", "--status", "cannot_fit", "--limit", "1")
    (item,) = shown
    why = item["why"]
    out = next(r for r in read_jsonl(d / "out.jsonl") if r["id"] == item["id"])
    counts = counter.count([t["value"] for t in out["conversations"]])
    assert why["target"] == TARGET and why["head_tokens"] == sum(counts[: why["head_turns"]])
    assert why["tail_tokens"] == sum(counts[len(counts) - why["tail_turns"]:])
    assert why["head_tokens"] + why["tail_tokens"] > TARGET
    assert f"alone are {why['head_tokens'] + why['tail_tokens']:,} tokens against a target of {TARGET:,}" in why["text"]
    assert "protected_turns.last_n_turns" in why["text"]


def test_why_of_a_failed_row_names_its_error(tmp_path, counter):
    row = {"id": "f", "conversations": [{"from": "human", "value": "hi " * 50}, {"from": "gpt", "value": "ok " * 50}],
           "compression_metrics": {"outcome": "failed", "status": "failed", "still_over_limit": True,
                                   "original_tokens": 100, "compressed_tokens": 100, "error": "timeout after 300s"}}
    write_lines(tmp_path / "f.jsonl", [row])
    (view,) = views(tmp_path / "f.jsonl", [], Choice(status="failed"), counter, run_of(tmp_path / "f.jsonl"))
    assert view.status == "failed" and "The summary failed: timeout after 300s" in view.why.text


@pytest.mark.parametrize("output", ["out.jsonl", "sample.jsonl", "shard.jsonl"])
def test_rows_are_paired_after_rejects_sampling_and_shards(runs, counter, output):
    d, src, line_of = runs
    outs = read_jsonl(d / output)
    assert 0 < len(outs) < 14 or output == "out.jsonl"
    every = tuple(range(1, len(outs) + 1))
    shown = views(d / output, [src], Choice(positions=every), counter, run_of(d / output))
    assert [v.input_where for v in shown] == [f"in.jsonl:{line_of[r['id']]}" for r in outs]


def test_a_mismatched_input_is_refused(runs, capsys, tmp_path):
    d, src, _ = runs
    rows = parsed(src)
    reordered = write_lines(tmp_path / "reordered.jsonl", rows[::-1])
    edited = write_lines(tmp_path / "edited.jsonl", [{**r, "reward": -1} if r.get("id") == "r5" else r for r in rows])
    for wrong in (reordered, edited):
        capsys.readouterr()
        assert cli("show", d / "out.jsonl", "--input", wrong, "--row", "14", "--json") == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "matches no input row" in err and "not the one this output" in err


def test_an_input_whose_tool_output_differs_is_refused_when_nothing_was_pruned(runs, capsys, tmp_path):
    """Only a run's rows that count stubs may differ from their input in a tool output."""
    d, src, _ = runs
    rows = parsed(src)
    row = next(r for r in rows if r["id"] == "r5")
    first_tool = next(i for i, t in enumerate(row["conversations"]) if t["from"] == "tool")
    turns = [{**t, "value": "other output"} if i == first_tool else t for i, t in enumerate(row["conversations"])]
    edited = write_lines(tmp_path / "tool.jsonl", [{**r, "conversations": turns} if r is row else r for r in rows])
    capsys.readouterr()
    assert cli("show", d / "out.jsonl", "--input", edited, "--row", "14", "--json") == 2
    assert "matches no input row" in capsys.readouterr().err


@pytest.mark.parametrize("args, said", [
    (("--id", "nope"), "no row with id 'nope' in the output: it has 14 rows, ids such as r0"),
    (("--row", "99"), "no row 99 in the output: it has rows 1 to 14"),
    (("--status", "failed"), "no row has status failed: the output has"),
    (("--status", "bogus"), "--status must be one of"),
])
def test_unknown_rows_exit_2_with_one_line(runs, capsys, args, said):
    d, _, _ = runs
    capsys.readouterr()
    assert cli("show", d / "out.jsonl", *args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and said in err, err


def test_an_output_without_metrics(runs, capsys, counter):
    d, src, _ = runs
    plain = read_jsonl(d / "plain.jsonl")
    assert all("compression_metrics" not in r for r in plain)
    position = next(i for i, r in enumerate(plain, 1) if any(t["value"].startswith("[CONTEXT SUMMARY]") for t in r["conversations"]))
    (item,) = shown_json(capsys, d / "plain.jsonl", "--row", str(position), "--input", src)
    assert item["status"] is None and item["summary"].startswith("[CONTEXT SUMMARY]") and item["replaced"]
    source = next(r for r in parsed(src) if r["id"] == item["id"])
    assert item["tokens_before"] == sum(counter.count([t["value"] for t in source["conversations"]]))
    assert cli("show", d / "plain.jsonl", "--row", str(position)) == 0
    assert "cannot be known" in capsys.readouterr().out
    assert cli("show", d / "plain.jsonl", "--status", "compressed") == 2
    assert "statuses are unknown" in capsys.readouterr().err


def test_both_pages_render_offline_with_the_replaced_turns_highlighted(runs, tmp_path):
    d, src, _ = runs
    assert 'href="out_rows.html"' in (d / "out_metrics.html").read_text(encoding="utf-8")
    assert cli("show", d / "out.jsonl", "--input", src, "--status", "compressed", "--limit", "2",
               "--html", tmp_path / "rows.html") == 0
    for page in (d / "out_rows.html", tmp_path / "rows.html"):
        text = page.read_text(encoding="utf-8")
        assert "<script" not in text and "url(" not in text and not re.search(r"\s(src|srcset|action|data)=", text)
        assert all(tag.startswith("<a ") for tag in re.findall(r"<[a-z]+[^>]*\shref=", text)), "links, never fetched"
        # the browser's DOM of one page; the other is rendered below, its markup read as written
        dom = dump_dom(page) if page.name == "out_rows.html" else parse(text)
        rows = dom.find_all("section", class_="row")
        assert rows and any(s.find_all("div", class_="cell replaced") for s in rows)
        for section in rows:
            for region in section.find_all("div", class_="cell replaced"):
                link = region.find("a", class_="tie")
                summary = dom.find("div", id=link.attrs["href"][1:])
                assert "summary" in summary.classes() and summary.find("div", class_="turn summary")
    image = screenshot(tmp_path / "rows.html", tmp_path / "shot.png", 1000, 1400)
    assert image.count((0, 200, 1000, 1400), HIGHLIGHT) > 200, "the replaced turns and their summary are highlighted"


def test_openai_rows_are_paired_and_shown(tmp_path, counter):
    from test_openai_rows import agent_row

    rows = [{**agent_row(), "id": f"o{i}"} for i in range(2)]
    src = write_lines(tmp_path / "in.jsonl", [rows[0], "{not json", rows[1]])
    assert cli("compress", src, "-o", tmp_path / "out.jsonl", "--tokenizer", DEMO_TOKENIZER, "--target-max-tokens",
               "1000", "--summary-target-tokens", "80", "-q") == 0
    out = tmp_path / "out.jsonl"
    shown = views(out, [src], Choice(positions=(1, 2)), counter, run_of(out))
    assert [v.input_where for v in shown] == ["in.jsonl:1", "in.jsonl:3"]
    for view, row in zip(shown, read_jsonl(out)):
        region = row["compression_metrics"]["compression_region"]
        start, end = view.region
        assert (start, end) == (region["start_idx"], region["end_idx"])
        assert view.kept[start].summary and len(view.replaced) == end - start > 0
        assert [t.role for t in view.input_turns[:start]] == [t.role for t in view.kept[:start]]


# A folder run as `make demo` makes it: data_samples with configs/demo.yaml, one file in a nested folder, and
# a file of short rows (under the target, left as they are) with one long row among them.
DEMO_TARGET = "(target 4,000)"


@pytest.fixture(scope="module")
def folder_run(tmp_path_factory):
    d = tmp_path_factory.mktemp("folder")
    (d / "in" / "nested" / "deeper").mkdir(parents=True)
    shutil.copy(SAMPLES / "hermes_coding_runs.jsonl", d / "in")
    shutil.copy(SAMPLES / "hermes_research_runs.jsonl", d / "in" / "nested" / "deeper")
    long = read_jsonl(SAMPLES / "hermes_coding_runs.jsonl")[2:10]
    short = [{**row, "conversations": row["conversations"][:3]} for row in long[1:]]
    write_lines(d / "in" / "nested" / "mixed.jsonl", short[:5] + long[:1] + short[5:])
    res = run_cli("compress", str(d / "in"), "-c", str(ROOT / "configs" / "demo.yaml"), "-o", str(d / "out"), "-q")
    assert res.code == 0, res.stderr
    # Another folder run into a folder inside the first's, with another target: its files are its own.
    res = run_cli("compress", str(d / "in" / "nested"), "-c", str(ROOT / "configs" / "demo.yaml"), "-o",
                  str(d / "out" / "again"), "--target-max-tokens", "3500", "-q")
    assert res.code == 0, res.stderr
    shutil.copy(d / "out" / "hermes_coding_runs.jsonl", d / "out" / "stray.jsonl")  # no run wrote it there
    return d


def test_a_file_of_a_folder_run_is_shown_with_the_runs_report(folder_run, counter):
    d = folder_run
    for rel in ("hermes_coding_runs.jsonl", "nested/deeper/hermes_research_runs.jsonl"):
        res = run_cli("show", f"out/{rel}", "--status", "compressed", "--limit", "1", cwd=d)
        assert res.code == 0 and DEMO_TARGET in res.stdout, res.stderr
    res = run_cli("show", str(d / "out" / "nested" / "mixed.jsonl"), "--json")
    shown = json.loads(res.stdout)
    outputs = read_jsonl(d / "out" / "nested" / "mixed.jsonl")
    for item in shown:
        kept = [t["value"] for t in outputs[item["row"] - 1]["conversations"]]
        assert [t["tokens"] for t in item["kept"]] == counter.count(kept), "counted with the run's tokenizer"
        assert item["output"] == "mixed.jsonl"
    assert any(item["why"] is None and item["summary"] for item in shown)


def test_the_report_found_is_the_nearest_that_names_the_file(folder_run):
    d = folder_run
    res = run_cli("show", str(d / "out" / "again" / "deeper" / "hermes_research_runs.jsonl"), "--limit", "1")
    assert res.code == 0 and "(target 3,500)" in res.stdout, res.stderr
    res = run_cli("show", str(d / "out" / "stray.jsonl"), "--limit", "1")
    assert res.code == 2 and res.stderr.count("\n") == 1 and "give its tokenizer with --tokenizer" in res.stderr
    res = run_cli("show", str(d / "out" / "stray.jsonl"), "--limit", "1", "--tokenizer", str(DEMO_TOKENIZER))
    assert res.code == 0 and DEMO_TARGET not in res.stdout, "the report above did not write it: its target is not this file's"


def test_a_folder_shows_rows_across_its_outputs_the_changed_first(folder_run):
    d = folder_run
    res = run_cli("show", str(d / "out"), "--json", "--limit", "1000")
    assert res.code == 0, res.stderr
    shown = json.loads(res.stdout)
    files = {"hermes_coding_runs.jsonl": 42, "nested/deeper/hermes_research_runs.jsonl": 20, "nested/mixed.jsonl": 8}
    assert sorted({item["output"] for item in shown}) == sorted(files), "the run's outputs, not another run's or a stray"
    assert len(shown) == sum(files.values()) == len({(item["output"], item["row"]) for item in shown})
    changed = [item["summary"] is not None for item in shown]
    assert changed == sorted(changed, reverse=True) and 0 < changed.count(False) < len(changed)
    res = run_cli("show", "out/nested", "--json", "--limit", "1000", cwd=d)
    assert res.code == 0, res.stderr
    assert {item["output"] for item in json.loads(res.stdout)} == {"deeper/hermes_research_runs.jsonl", "mixed.jsonl"}
    res = run_cli("show", str(d / "out"), "--limit", "2")
    assert res.code == 0 and res.stdout.count("── row") == 2 and DEMO_TARGET in res.stdout, res.stderr


@pytest.mark.parametrize("args, said", [
    (("out", "--row", "1"), "--row is for one output file, not a folder: give one of the 3 in out, such as out/hermes_coding_runs.jsonl"),
    (("out", "--input", "in"), "--input is for one output file, not a folder: give one of the 3 in out"),
    (("in",), "in is a folder, and no compression_metrics.json of a folder run in it or above it names a file in it: give an output file"),
    (("out/compression_metrics.json",), "out/compression_metrics.json is the report of a run, not an output: give one of "
     "the 3 outputs it names, such as "),
])
def test_a_folder_that_cannot_be_shown_says_what_to_give(folder_run, args, said):
    res = run_cli("show", *args, cwd=folder_run)
    assert res.code == 2 and res.stderr.count("\n") == 1 and said in res.stderr, res.stderr


def test_without_status_the_changed_rows_come_first(folder_run):
    out = folder_run / "out" / "nested" / "mixed.jsonl"
    statuses = [r["compression_metrics"]["was_compressed"] for r in read_jsonl(out)]
    assert statuses.count(True) == 1 and statuses.index(True) > 0, "one changed row, after unchanged ones"
    for seed in range(3):
        res = run_cli("show", str(out), "--limit", "1", "--json", "--seed", str(seed))
        (item,) = json.loads(res.stdout)
        assert item["row"] == statuses.index(True) + 1 and item["status"] == "compressed" and item["summary"]
    res = run_cli("show", str(out), "--limit", "4", "--json")
    rows = [item["row"] for item in json.loads(res.stdout)]
    assert rows[0] == statuses.index(True) + 1 and rows[1:] == sorted(rows[1:]) and len(rows) == 4


def test_a_dataset_folder_is_one_output_not_a_folder_of_them(tmp_path):
    src = write_lines(tmp_path / "in.jsonl", read_jsonl(SAMPLES / "hermes_research_runs.jsonl")[:4])
    assert cli("compress", src, "-o", tmp_path / "ds", "--output-format", "hf", *BUDGET, "-q") == 0
    res = run_cli("show", str(tmp_path / "ds"), "--row", "2")
    assert res.code == 0 and "── row 2 " in res.stdout and f"(target {TARGET:,})" in res.stdout, res.stderr
