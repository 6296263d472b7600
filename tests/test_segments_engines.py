"""compression.segments writes the same bytes whatever moves the rows: one process, --workers 2, Ray (the
CLI's actors on a local Ray, and Ray Data), `datasets` (one row in, several out), --batch (a round a
compaction) and a resume after SIGKILL; --summary-examples holds one row per summary the rows used.

SWE-like rows at about half their length (one to three segments each) and a line that is not JSON, with
the openai summarizer against the real test server."""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path

import pytest
from conftest import DEMO_TOKENIZER, ROOT, machine_lock, read_jsonl, run_cli, write_jsonl
from openai_server import ServerThread
from test_hf import hf_offline  # noqa: F401 (a fixture: datasets offline)
from test_prune_engines import engine_config
from test_resume import cached_summaries, killed_midway, start, thaw, wait_for_parts

sys.path.insert(0, str(ROOT / "scripts"))
import swe_rows  # noqa: E402
from trajcomp.formats.arrow_rows import METRICS  # noqa: E402

ROWS = 8


def config(folder: Path, url: str) -> Path:
    return engine_config(folder / "segments.yaml", url, "summary_target_tokens: 200\n  segments: true")


def compress_args(src: Path, out: Path, url: str, *extra: str) -> list[str]:
    return ["compress", str(src), "-o", str(out), "-c", str(config(out.parent, url)), "--checkpoint-rows", "3",
            "--summary-examples", str(out.with_name("examples.jsonl")), "-q", *extra]


def run(src: Path, out: Path, *extra: str):
    out.parent.mkdir(parents=True, exist_ok=True)
    with ServerThread() as server:
        result = run_cli(*compress_args(src, out, server.base_url, *extra))
        assert result.code == 0, result.stderr
        return server.stats


SIDE = ("out.jsonl", "out_rejects.jsonl", "examples.jsonl")


def same_bytes(out: Path, ref: Path) -> bool:
    return all(out.with_name(name).read_bytes() == ref.with_name(name).read_bytes() for name in SIDE)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The rows as one process writes them, the summaries they took, and the input rows."""
    folder = tmp_path_factory.mktemp("segments_engines")
    rows = swe_rows.rows("hermes", ROWS)
    src = write_jsonl(folder / "in.jsonl", [*rows[:3], "not JSON", *rows[3:]])
    out = folder / "one" / "out.jsonl"
    stats = run(src, out, "--no-cache")
    return src, out, stats.requests, rows


def test_one_process_writes_every_segment_and_one_example_per_summary(reference):
    src, out, requests, rows = reference
    written = read_jsonl(out)
    report = json.loads(out.with_name("out_metrics.json").read_text())
    seg = report["segments"]
    counts = [row["segment"]["count"] for row in written if row["segment"]["index"] == 0]
    assert seg["rows_in"] == ROWS and seg["rows_out"] == len(written) == sum(counts) > ROWS
    assert seg["segments_per_row"] == {str(n): counts.count(n) for n in sorted(set(counts))} and max(counts) >= 3
    # The segments of an input row are consecutive, in order, and keep its id.
    assert [(r["id"], r["segment"]["index"]) for r in written] == \
        [(row["id"], k) for row, n in zip(rows, counts) for k in range(n)]
    examples = read_jsonl(out.with_name("examples.jsonl"))
    assert len(examples) == seg["summaries"] == requests == sum(n - 1 for n in counts)
    by_id = {row["id"]: n for row, n in zip(rows, counts)}
    for ex in examples:
        assert [t["from"] for t in ex["conversations"]] == ["system", "human", "gpt"]
        assert ex["segment"]["count"] == by_id[ex["id"]] and 1 <= ex["segment"]["index"] < ex["segment"]["count"]
        # The summary is the one the segment it opens carries.
        opened = next(r for r in written if r["id"] == ex["id"] and r["segment"] == ex["segment"])
        assert any(ex["conversations"][2]["value"] in t["value"] for t in opened["conversations"])
    assert seg["assistant_tokens_trained"] == seg["assistant_tokens"] > 0 and seg["trained_share"] == 1.0
    assert report["processing"]["summary_examples_file"] == str(out.with_name("examples.jsonl"))


def test_two_workers_write_one_process_bytes(reference, tmp_path):
    src, ref, requests, _ = reference
    stats = run(src, tmp_path / "out.jsonl", "--workers", "2", "--no-cache")
    assert same_bytes(tmp_path / "out.jsonl", ref) and stats.requests == requests


def test_batch_advances_every_row_one_compaction_a_round(reference, tmp_path):
    src, ref, requests, _ = reference
    stats = run(src, tmp_path / "out.jsonl", "--batch")
    assert same_bytes(tmp_path / "out.jsonl", ref)
    batches = [len(batch) for batch in stats.batch_custom_ids]
    # A row's next summary updates its previous one: the first round asks every row's first, and so on.
    most = max(row["segment"]["count"] for row in read_jsonl(ref))
    assert sum(batches) == requests and len(batches) == most - 1 and batches[0] == ROWS - 1
    report = json.loads((tmp_path / "out_metrics.json").read_text())
    assert report["summarization"]["batch"]["rounds"] == most - 1


def last_rows_own_text(ref: Path, rows: list[dict]) -> str:
    """A line only the summary requests of the last input row that has any hold: while its calls hang,
    its part, the last, cannot be done, so a kill after the first part always comes midway."""
    examples = read_jsonl(ref.with_name("examples.jsonl"))
    last = examples[-1]["id"]
    assert last in [row["id"] for row in rows[5:]]  # lines 7 to 9 (a line is not JSON): the last part of 3
    others = "\n".join(ex["conversations"][1]["value"] for ex in examples if ex["id"] != last)
    own = [line for ex in examples if ex["id"] == last
           for line in ex["conversations"][1]["value"].splitlines() if len(line) > 20 and line not in others]
    assert own, "the last row's requests share every line with the others'"
    return own[0]


def test_kill_9_then_rerun_gives_the_same_bytes(reference, tmp_path):
    src, ref, requests, rows = reference
    out = tmp_path / "run" / "out.jsonl"
    out.parent.mkdir()
    with ServerThread(latency=0.15, hang_matching=last_rows_own_text(ref, rows)) as server:
        killed_midway(server, compress_args(src, out, server.base_url), out)
        assert not out.exists() and not out.with_name("examples.jsonl").exists()
        paid = cached_summaries(out.parent / "out_summary_cache")
        thaw(server)
        server.set_faults(hang_matching=None)
        before = server.stats.requests
        result = run_cli(*compress_args(src, out, server.base_url))
        assert result.code == 0, result.stderr
        assert server.stats.requests - before == requests - paid
    assert same_bytes(out, ref)


def test_a_resume_asking_for_examples_the_parts_lack_is_refused(reference, tmp_path):
    src, ref, _, rows = reference
    out = tmp_path / "out.jsonl"
    with ServerThread(latency=0.15, hang_matching=last_rows_own_text(ref, rows)) as server:
        argv = compress_args(src, out, server.base_url)
        plain = argv[:argv.index("--summary-examples")] + argv[argv.index("--summary-examples") + 2:]
        proc = start(plain)
        try:
            wait_for_parts(out, 1, proc)
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.communicate()
        again = run_cli(*argv)
    assert again.code == 2 and again.stderr.count("\n") == 1 and "summary_examples" in again.stderr


def test_datasets_writes_the_clis_rows(reference, tmp_path, hf_offline):  # noqa: F811 (the fixture)
    import datasets
    from trajcomp.hf import compress_dataset

    _, ref, _, rows = reference
    with ServerThread() as server:
        got = compress_dataset(datasets.Dataset.from_list(rows), str(config(tmp_path, server.base_url)),
                               num_proc=2, batch_size=3).to_list()
    expected = read_jsonl(ref)
    assert [_plain(row) for row in got] == [_plain(row) for row in expected]
    assert [row["compression"]["status"] for row in got] == [row["compression_metrics"]["status"] for row in expected]


def test_ray_writes_the_clis_rows(reference, tmp_path):
    """The CLI's actors on a Ray of this machine, and Ray Data's map with a local ray.init(num_cpus=2)."""
    import pyarrow as pa
    import ray
    import trajcomp.ray as trajcomp_ray

    src, ref, _, rows = reference
    with machine_lock("ray"):  # a local Ray must not join the Ray tests' cluster
        run(src, tmp_path / "out.jsonl", "--engine", "ray", "--no-cache")
        assert same_bytes(tmp_path / "out.jsonl", ref)
        ray.init(num_cpus=2, logging_level="WARNING")
        try:
            with ServerThread() as server:
                ds = ray.data.from_arrow(pa.Table.from_pylist(rows))
                got = trajcomp_ray.compress(ds, str(config(tmp_path, server.base_url)), concurrency=2, batch_size=3,
                                            metrics_column=None).take_all()
        finally:
            ray.shutdown()
    expected = read_jsonl(ref)
    assert sorted(map(_key, got)) == sorted(map(_key, expected))
    assert [(r["id"], r["segment"]["index"]) for r in got if r["id"] == rows[0]["id"]] == \
        [(r["id"], r["segment"]["index"]) for r in expected if r["id"] == rows[0]["id"]]


def _plain(value):
    """A row without its metrics and without the nulls an Arrow table gives the keys a turn lacks."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if v is not None and k not in ("compression", METRICS)}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _key(row: dict) -> str:
    return json.dumps(_plain(row), sort_keys=True)


def test_the_report_compare_page_and_show_name_the_segments(reference, tmp_path):
    _, ref, _, rows = reference
    report = ref.with_name("out_metrics.json")
    seg = json.loads(report.read_text())["segments"]
    old = tmp_path / "old_metrics.json"  # a report from before segments: no such section
    old.write_text(json.dumps({k: v for k, v in json.loads(report.read_text()).items() if k != "segments"}))
    compared = run_cli("compare", str(old), str(report), "--json", "--html", str(tmp_path / "c.html"))
    assert compared.code == 0, compared.stderr
    figures = json.loads(compared.stdout)["figures"]
    assert figures["rows_out"] == [None, seg["rows_out"]] and figures["segment_summaries"] == [None, seg["summaries"]]
    assert figures["trained_share"] == [1.0, 1.0]  # the report's tokens section, in every run's report
    from trajcomp.reports.html.page import report_page
    from trajcomp.reports.reading import load

    page = report_page(load(report))
    assert "input rows by segments" in page and f"{seg['rows_in']} → {seg['rows_out']}" in page
    # show: a row picked by its id, or any of its segments by position, comes with all its segments in order.
    written = read_jsonl(ref)
    three = next(r for r in written if r["segment"]["count"] == 3)
    middle = written.index(three) + 2  # its second segment, 1-based
    for pick in (["--id", str(three["id"])], ["--row", str(middle)]):
        shown = run_cli("show", str(ref), *pick, "--json")
        assert shown.code == 0, shown.stderr
        views = json.loads(shown.stdout)
        assert [v["segment"] for v in views] == [{"index": k, "count": 3} for k in range(3)]
        assert [v["summary"] is not None for v in views] == [False, True, True]
    text = run_cli("show", str(ref), "--row", str(middle))
    assert "segment 1 of 3" in text.stdout and text.stdout.index("segment 2 of 3") < text.stdout.index("segment 3 of 3")


def test_the_segments_flag_and_a_bad_examples_file(reference, tmp_path):
    src, _, _, rows = reference
    flags = ["compress", str(src), "--tokenizer", str(DEMO_TOKENIZER), "--target-max-tokens", "6000",
             "--summary-target-tokens", "200", "-q"]
    for bad in ("examples.json", "s3://bucket/examples.jsonl", str(src)):
        refused = run_cli(*flags, "-o", str(tmp_path / "o.jsonl"), "--summary-examples", bad)
        assert refused.code == 2 and refused.stderr.count("\n") == 1 and "--summary-examples" in refused.stderr
    assert not (tmp_path / "o.jsonl").exists()
    done = run_cli(*flags, "-o", str(tmp_path / "seg.jsonl"), "--segments")  # the extractive summarizer
    assert done.code == 0, done.stderr
    written = read_jsonl(tmp_path / "seg.jsonl")
    assert len(written) > ROWS and {r["id"] for r in written} == {r["id"] for r in rows}


def test_the_config_key_writes_the_examples_the_flag_does(reference, tmp_path):
    src = reference[0]
    flags = ["compress", str(src), "--tokenizer", str(DEMO_TOKENIZER), "--target-max-tokens", "6000",
             "--summary-target-tokens", "200", "--segments", "-q"]
    by_flag = run_cli(*flags, "-o", str(tmp_path / "a" / "out.jsonl"), "--summary-examples",
                      str(tmp_path / "a" / "examples.jsonl"))
    cfg = tmp_path / "examples.yaml"
    cfg.write_text(f"output:\n  summary_examples: {tmp_path / 'b' / 'examples.jsonl'}\n", encoding="utf-8")
    by_key = run_cli(*flags, "-o", str(tmp_path / "b" / "out.jsonl"), "-c", str(cfg))
    assert by_flag.code == 0 and by_key.code == 0, by_flag.stderr + by_key.stderr
    examples = (tmp_path / "b" / "examples.jsonl").read_bytes()
    assert examples and examples == (tmp_path / "a" / "examples.jsonl").read_bytes()



def test_the_api_key_reaches_no_file_the_run_writes(tmp_path):
    src = write_jsonl(tmp_path / "in.jsonl", swe_rows.rows("hermes", 2))
    out = tmp_path / "run" / "out.jsonl"
    out.parent.mkdir()
    secret = "sk-trajcomp-test-0123456789abcdef"
    with ServerThread() as server:
        argv = compress_args(src, out, server.base_url)
        cfg = out.parent / "segments.yaml"  # written by compress_args: the key now named and set
        cfg.write_text(cfg.read_text().replace("TRAJCOMP_TEST_NO_KEY", "TRAJCOMP_TEST_KEY"), encoding="utf-8")
        result = run_cli(*argv, env={"TRAJCOMP_TEST_KEY": secret})
    assert result.code == 0, result.stderr
    assert read_jsonl(out.with_name("examples.jsonl"))  # summaries were bought, with the key
    written = [p for p in out.parent.rglob("*") if p.is_file()]
    assert secret not in result.stdout + result.stderr
    assert [p.name for p in written if secret.encode() in p.read_bytes()] == []
