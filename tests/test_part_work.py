"""Parts as the unit of work (`--workers N` on a file that splits: plain JSON Lines, Parquet): the workers
read, compress and write whole parts, the main process parses no row, and the parts, selection and
bytes are the row path's."""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import time
import re
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import ROOT, SAMPLES, read_jsonl, run_cli, write_jsonl

from trajcomp.cli.commands import main
from trajcomp.formats import jsonl, parquet
from trajcomp.formats.arrow_rows import CONVERSATIONS_TYPE, to_table
from trajcomp.formats.jsonl import JSONL, part_ranges, read_range
from trajcomp.formats.parquet import ParquetFormat

# ---- the parts' byte ranges: the same records as one read of the file, `rows` to a part ------------

LINES = st.one_of(
    st.builds(lambda i: json.dumps({"id": i, "text": "é" * (i % 3)}), st.integers(0, 99)),
    st.sampled_from(["", "   ", "\t\r", "not json {", "[1, 2]", '"text"', '{"id": "\\ud800"}']),
)


def seen(record) -> tuple:
    error = record.error and (record.error.reason, record.error.detail)
    return record.source, record.line, record.raw, record.row, error


@settings(max_examples=300, deadline=None)
@given(lines=st.lists(LINES, max_size=30), rows=st.integers(1, 6), crlf=st.booleans(), last_newline=st.booleans(),
       chunk=st.sampled_from([1, 2, 3, 7, 64, jsonl._CHUNK]), skip=st.integers(0, 32))
def test_part_ranges_cut_the_records_every_rows_as_one_read_does(tmp_path_factory, lines, rows, crlf, last_newline,
                                                                 chunk, skip):
    """After the first `skip` records too: a resume goes on after its committed parts, whatever their size."""
    path = tmp_path_factory.mktemp("ranges") / "in.jsonl"
    end = "\r\n" if crlf else "\n"
    path.write_bytes((end.join(lines) + (end if last_newline and lines else "")).encode("utf-8"))
    whole = [seen(r) for r in JSONL.read(path)][skip:]
    default, jsonl._CHUNK = jsonl._CHUNK, chunk  # the scan's reads end anywhere in a line
    try:
        ranges = list(part_ranges(path, rows, skip))
    finally:
        jsonl._CHUNK = default
    parts = [[seen(r) for r in read_range(path, *span)] for span in ranges]
    assert [r for part in parts for r in part] == whole  # the same lines, numbers, rows and errors
    assert [len(part) for part in parts] == [min(rows, len(whole) - k) for k in range(0, len(whole), rows)]
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))  # no byte read twice, none left out


# ---- Parquet's row ranges: the same records as one read, whatever the row groups and batches --------

TURNS = st.lists(st.fixed_dictionaries({"from": st.sampled_from(["human", "gpt"]), "value": st.text(max_size=5)}),
                 max_size=3)
NANOS = st.one_of(st.integers(-2**62, 2**62), st.integers(-2**52, 2**52).map(lambda us: us * 1000))  # not / whole µs
TAGS = st.lists(st.one_of(st.none(), st.text(max_size=3)), max_size=3)
META = st.fixed_dictionaries({}, optional={"lang": st.text(max_size=3), "n": st.integers(0, 9)})  # keys missing
COLUMNS = {  # a type each, so a table of no rows or of nulls only has one too
    "conversations": (st.one_of(st.none(), TURNS), CONVERSATIONS_TYPE),
    "at": (st.one_of(st.none(), NANOS), pa.timestamp("ns", "UTC")),
    "tags": (st.one_of(st.none(), TAGS), pa.list_(pa.string())),
    "meta": (st.one_of(st.none(), META), pa.struct([("lang", pa.string()), ("n", pa.int64())])),
    "split": (st.sampled_from(["train", "test", None]), pa.dictionary(pa.int8(), pa.string())),
}


@st.composite
def parquet_tables(draw) -> tuple[pa.Table, list[int]]:
    """A table and the sizes of the row groups it is written in (maybe none, maybe empty ones)."""
    groups = draw(st.lists(st.integers(0, 7), max_size=6))
    n = sum(groups)
    columns = {name: pa.array(draw(st.lists(values, min_size=n, max_size=n)), arrow_type)
               for name, (values, arrow_type) in COLUMNS.items()}
    return pa.table({"id": pa.array(range(n), pa.int64()), **columns}), groups


def write_groups(path: Path, table: pa.Table, groups: list[int]) -> Path:
    with pq.ParquetWriter(path, table.schema) as writer:
        start = 0
        for size in groups:
            writer.write_table(table.slice(start, size), row_group_size=max(size, 1))
            start += size
    return path


def spans_read_as_one(path: Path, rows: int, batch_size: int, skip: int = 0) -> None:
    """Concatenating read_span over spans(rows, skip) gives read()'s records after the first `skip`;
    every span `rows` but the last."""
    fmt = ParquetFormat(batch_size=batch_size)
    whole = [seen(r) for r in fmt.read(path)][skip:]
    spans = list(fmt.spans(path, rows, skip))
    parts = [[seen(r) for r in fmt.read_span(path, span)] for span in spans]
    assert [r for part in parts for r in part] == whole  # the same source, row numbers and values
    assert [len(part) for part in parts] == [min(rows, len(whole) - k) for k in range(0, len(whole), rows)]
    assert [span[1] - span[0] for span in spans] == [len(part) for part in parts]


@settings(max_examples=200, deadline=None)
@given(table=parquet_tables(), rows=st.integers(1, 8), batch_size=st.integers(1, 9), skip=st.integers(0, 12))
def test_parquet_spans_cut_the_rows_every_rows_as_one_read_does(tmp_path_factory, table, rows, batch_size, skip):
    path = write_groups(tmp_path_factory.mktemp("spans") / "in.parquet", *table)
    assert pq.ParquetFile(path).metadata.num_row_groups == len(table[1])
    spans_read_as_one(path, rows, batch_size, skip)


WITHOUT_PANDAS = """
import sys
from pathlib import Path

class NoPandas:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] == "pandas":
            raise ModuleNotFoundError(name)

sys.meta_path.insert(0, NoPandas())
import pyarrow as pa
from test_part_work import spans_read_as_one

assert type(pa.array([1000], pa.timestamp("ns")).to_pylist()[0]).__module__ == "datetime"
for rows in range(1, 8):
    for batch_size in range(1, 6):
        spans_read_as_one(Path(sys.argv[1]), rows, batch_size)
"""


def test_parquet_spans_read_nanoseconds_as_one_read_does_without_pandas(tmp_path):
    """Without pandas a batch holding a nanosecond not a whole µs is converted column by column
    (arrow_rows.batch_rows): a value must not depend on which batch it falls in."""
    at = [10**18 + 1, None, 2 * 10**18, 3 * 10**18, 7, 5000, 5001, None, 8 * 10**15]
    table = pa.table({"id": range(9), "at": pa.array(at, pa.timestamp("ns", "UTC")),
                      "within": pa.array([[{"t": v}] for v in at], pa.list_(pa.struct([("t", pa.duration("ns"))])))})
    path = write_groups(tmp_path / "in.parquet", table, [2, 4, 3])
    done = subprocess.run([sys.executable, "-c", WITHOUT_PANDAS, str(path)], cwd=Path(__file__).parent,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_a_parquet_span_reads_only_its_row_groups_a_batch_at_a_time(tmp_path, monkeypatch):
    table = pa.table({"id": range(5000), "text": [f"row {i}" for i in range(5000)]})
    path = tmp_path / "in.parquet"
    pq.write_table(table, path, row_group_size=1000)
    asked, pulled = [], []
    real = pq.ParquetFile.iter_batches

    def spying(self, *args, **kwargs):
        asked.append((kwargs.get("batch_size"), list(kwargs.get("row_groups"))))
        for batch in real(self, *args, **kwargs):
            pulled.append(batch.num_rows)
            yield batch

    monkeypatch.setattr(pq.ParquetFile, "iter_batches", spying)
    records = list(ParquetFormat(batch_size=100).read_span(path, (1950, 3010)))
    assert [r.line for r in records] == list(range(1951, 3011))
    assert asked == [(100, [1, 2, 3])]  # not the groups before or after it
    assert pulled == [100] * 21  # rows 1000-3099: group 1 from its start, up to the batch holding the end


def test_a_damaged_row_group_fails_the_spans_holding_it_as_read_fails(tmp_path):
    table = pa.table({"id": range(30), "text": [f"row {i} " * 5 for i in range(30)]})
    path = tmp_path / "damaged.parquet"
    pq.write_table(table, path, row_group_size=10)
    chunk = pq.ParquetFile(path).metadata.row_group(1).column(1)  # rows 10-19's text
    start = chunk.dictionary_page_offset or chunk.data_page_offset
    data = bytearray(path.read_bytes())
    data[start:start + chunk.total_compressed_size] = b"\xff" * chunk.total_compressed_size
    path.write_bytes(bytes(data))
    fmt, expected = ParquetFormat(batch_size=4), table.to_pylist()
    damaged = re.escape(str(path)) + ": corrupt Parquet data"
    with pytest.raises(ValueError, match=damaged):
        list(fmt.read(path))
    for first, end in fmt.spans(path, 7):
        if first < 20 and end > 10:  # some of its rows are the damaged group's
            with pytest.raises(ValueError, match=damaged):
                list(fmt.read_span(path, (first, end)))
        else:
            assert [(r.line, r.row) for r in fmt.read_span(path, (first, end))] == [
                (k + 1, expected[k]) for k in range(first, end)]


# ---- whole runs: the row path's bytes, and no row parsed in the main process -------------------------


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    """The sample rows with a bad line, blank lines and a last line without its newline."""
    lines = (SAMPLES / "hermes_research_runs.jsonl").read_text(encoding="utf-8").splitlines()[:14]
    lines[3:3] = ["", '{"id": "broken", "conversations": [', "  "]
    lines.insert(9, "[1, 2]")
    path = tmp_path_factory.mktemp("data") / "in.jsonl"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def run(out: Path, src: Path, *flags: str) -> dict:
    """trajcomp compress in this process (the workers are spawned: they import trajcomp afresh)."""
    with pytest.raises(SystemExit) as exit:
        main(["compress", str(src), "-c", str(ROOT / "configs" / "demo.yaml"), "-o", str(out), "-q", *flags])
    assert exit.value.code == 0
    report = json.loads((out.parent / "out_metrics.json").read_text())
    kept = {k: v for k, v in report.items() if k != "processing"}
    kept["config"]["processing"].pop("num_workers")
    return kept


SETTINGS = {
    "2 rows a part": ("--checkpoint-rows", "2"),
    "a 60% sample, 3 rows a part": ("--checkpoint-rows", "3", "--sample-percent", "60", "--seed", "7"),
    "shard 1 of 2, 4 rows a part": ("--checkpoint-rows", "4", "--num-shards", "2", "--shard-index", "1"),
}


@pytest.mark.parametrize("flags", list(SETTINGS.values()), ids=list(SETTINGS))
def test_two_workers_take_whole_parts_and_write_the_row_paths_bytes(tmp_path, dataset, monkeypatch, flags):
    monkeypatch.chdir(dataset.parent)  # the input named as given, relative: the rejects name it so
    one = run(tmp_path / "one" / "out.jsonl", Path(dataset.name), *flags, "--workers", "1")
    parsed = []
    parse_line = jsonl.parse_line
    monkeypatch.setattr(jsonl, "parse_line", lambda *a: parsed.append(a[1]) or parse_line(*a))
    two = run(tmp_path / "two" / "out.jsonl", Path(dataset.name), *flags, "--workers", "2")
    assert parsed == []  # this process read no row: the workers did
    assert two == one
    for name in ("out.jsonl", "out_rejects.jsonl"):
        assert (tmp_path / "two" / name).read_bytes() == (tmp_path / "one" / name).read_bytes()
    assert one["rows"]["read"] == 16 and one["rows"]["rejected"] >= 1


@pytest.fixture(scope="module")
def parquet_dataset(tmp_path_factory) -> Path:
    """The sample rows and two the row core rejects, in row groups of 4 rows."""
    lines = (SAMPLES / "hermes_research_runs.jsonl").read_text(encoding="utf-8").splitlines()[:14]
    rows = [json.loads(line) for line in lines]
    rows.insert(3, {**rows[3], "id": "no turns", "conversations": None})
    rows.insert(9, {**rows[9], "id": "a robot", "conversations": [{"from": "robot", "value": "beep"}]})
    path = tmp_path_factory.mktemp("data") / "in.parquet"
    pq.write_table(to_table(rows), path, row_group_size=4)
    return path


PARQUET_SETTINGS = {
    "3 rows a part": ("--checkpoint-rows", "3"),  # parts begin and end inside row groups
    "a 60% sample, 5 rows a part": ("--checkpoint-rows", "5", "--sample-percent", "60", "--seed", "7"),
}


@pytest.mark.parametrize("suffix", [".parquet", ".jsonl"])
@pytest.mark.parametrize("flags", list(PARQUET_SETTINGS.values()), ids=list(PARQUET_SETTINGS))
def test_two_workers_take_whole_parts_of_a_parquet_file(tmp_path, parquet_dataset, monkeypatch, flags, suffix):
    assert pq.ParquetFile(parquet_dataset).metadata.num_row_groups == 4
    converted = []
    batch_rows = parquet.batch_rows
    monkeypatch.setattr(parquet, "batch_rows", lambda batch: converted.append(batch.num_rows) or batch_rows(batch))
    monkeypatch.chdir(parquet_dataset.parent)  # the input named relative, as the rejects name it
    one = run(tmp_path / "one" / f"out{suffix}", Path(parquet_dataset.name), *flags, "--workers", "1")
    assert sum(converted) == 16  # one worker: this process reads every row
    converted.clear()
    two = run(tmp_path / "two" / f"out{suffix}", Path(parquet_dataset.name), *flags, "--workers", "2")
    assert converted == []  # two: this process read no row, the workers did
    assert two == one
    for name in (f"out{suffix}", "out_rejects.jsonl"):
        assert (tmp_path / "two" / name).read_bytes() == (tmp_path / "one" / name).read_bytes()
    assert one["rows"]["read"] == 16 and one["rows"]["rejected"] == 2


def test_a_failing_endpoint_stops_two_workers_resumably(tmp_path, bpe_tokenizer):
    """The failure streak counts the parts' summaries in input order: the run stops, the parts holding
    the failures are undone, and the resumed run writes the bytes of a run that never failed. Twice:
    a streak across two parts of 3 rows, and one within each part of 6 (whose worker stops it early)."""
    from openai_server import ServerThread
    from test_resume import args, hermes_row, reference_run, write_limit

    src = write_jsonl(tmp_path / "data.jsonl", [hermes_row(i) for i in range(12)])
    with ServerThread(latency=0.05) as server:
        ref = reference_run(tmp_path, src, bpe_tokenizer, server.base_url)
        for limit, part_rows in ((4, "3"), (2, "6")):
            flags = ("--max-retries", "0", "--retry-delay", "0", "--workers", "2", "--checkpoint-rows", part_rows,
                     "-c", str(write_limit(tmp_path, limit)))
            server.set_faults(fail_first_n=10_000, fail_status=503)
            out = tmp_path / f"run{limit}" / "out.jsonl"
            down = run_cli(*args(src, out, bpe_tokenizer, server.base_url, *flags))
            assert down.code == 1 and f"{limit} summaries in a row failed" in down.stderr and "resume" in down.stderr
            assert not out.exists() and not list((out.parent / ".out.jsonl.trajcomp-work").glob("file-*/*.done.json"))
            server.set_faults(fail_first_n=0)
            back = run_cli(*args(src, out, bpe_tokenizer, server.base_url, *flags))
            assert back.code == 0, back.stderr
            assert out.read_bytes() == ref.read_bytes()


def test_a_folder_of_small_files_goes_as_one_stream_of_whole_parts(tmp_path, dataset, monkeypatch):
    """Files of one part each (fewer than the workers, file by file) still go whole, as one stream of parts
    across the folder; compressed files too (a worker unpacks each first); a JSON array, which neither
    splits nor unpacks, row by row after them; an empty file too."""
    import zstandard

    from trajcomp.engines.runners import pipeline

    lines = dataset.read_bytes().splitlines(keepends=True)
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.jsonl").write_bytes(b"".join(lines[:6]))
    (folder / "b.jsonl.gz").write_bytes(gzip.compress(b"".join(lines[6:10]), mtime=0))
    (folder / "c.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(b"".join(lines[10:13])))
    (folder / "d.jsonl").write_bytes(b"".join(lines[13:]))
    (folder / "e.jsonl").write_bytes(b"")
    (folder / "f.json").write_text(json.dumps(read_jsonl(SAMPLES / "hermes_coding_runs.jsonl")[:2]))
    flags = ("-c", str(ROOT / "configs" / "demo.yaml"), "-q", "--checkpoint-rows", "6")
    one = run_cli("compress", str(folder), "-o", str(tmp_path / "one"), *flags, "--workers", "1")
    assert one.code == 0, one.stderr
    parsed, rows_here = [], []
    parse_line, read_checked = jsonl.parse_line, pipeline.read_checked
    monkeypatch.setattr(jsonl, "parse_line", lambda *a: parsed.append(a[0]) or parse_line(*a))
    monkeypatch.setattr(pipeline, "read_checked", lambda fmt, path: rows_here.append(path.name) or read_checked(fmt, path))
    with pytest.raises(SystemExit) as exit:
        main(["compress", str(folder), "-o", str(tmp_path / "two"), *flags, "--workers", "2"])
    assert exit.value.code == 0
    assert parsed == [] and rows_here == ["f.json"]  # only the JSON array was read here
    assert not list((tmp_path / "two").rglob("input.jsonl"))  # the plain copies are gone with the work folder

    def written(out: Path) -> dict[str, bytes]:
        return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()
                and p.name != "compression_metrics.json"}
    assert written(tmp_path / "two") == written(tmp_path / "one")
    assert len(written(tmp_path / "one")) >= 6
    one_report, two_report = (json.loads((tmp_path / run / "compression_metrics.json").read_text()) for run in ("one", "two"))
    for report in (one_report, two_report):
        report.pop("processing")
        report["config"]["processing"].pop("num_workers")
    assert two_report == one_report


def test_a_folder_run_killed_between_its_files_resumes_to_the_same_bytes(tmp_path, bpe_tokenizer):
    """Whole parts across three files (two parts each, one gzip), SIGKILL once three parts are in, the same command."""
    import signal

    from openai_server import ServerThread
    from test_resume import args, freeze, hermes_row, start, thaw, wait_for_parts

    folder = tmp_path / "in"
    folder.mkdir()
    for k, name in enumerate(("a.jsonl", "b.jsonl.gz", "c.jsonl")):  # b unpacked by a worker, again on the resume
        plain = write_jsonl(tmp_path / f"{k}.jsonl", [hermes_row(6 * k + i) for i in range(6)])
        (folder / name).write_bytes(gzip.compress(plain.read_bytes(), mtime=0) if name.endswith(".gz")
                                    else plain.read_bytes())
    with ServerThread(latency=0.1) as server:
        ref = run_cli(*args(folder, tmp_path / "ref", bpe_tokenizer, server.base_url, "--workers", "1", "--no-cache"))
        assert ref.code == 0, ref.stderr
        out = tmp_path / "run"
        proc = start(args(folder, out, bpe_tokenizer, server.base_url, "--workers", "2"))
        wait_for_parts(out, 3, proc)
        freeze(server)
        joined = out / ".trajcomp-work" / "file-00000" / "joined"
        while not joined.exists():  # a.jsonl joined (its last part is in): the resume must keep it as it is
            assert proc.poll() is None, "the run ended before it could be interrupted"
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        thaw(server)
        again = run_cli(*args(folder, out, bpe_tokenizer, server.base_url, "--workers", "2"))
        assert again.code == 0, again.stderr
    report = json.loads((out / "compression_metrics.json").read_text())
    assert report["processing"]["resumed"] is True and report["processing"]["rows_from_checkpoint"] >= 9
    for name in ("a.jsonl", "b.jsonl.gz", "c.jsonl"):
        assert (out / name).read_bytes() == (tmp_path / "ref" / name).read_bytes()


@pytest.mark.parametrize("suffix", [".jsonl.gz", ".jsonl.zst"])
def test_a_damaged_compressed_input_stops_whole_parts_with_the_row_paths_error(tmp_path, dataset, suffix):
    """The worker unpacking a damaged file says what reading it row by row says: one line naming the
    file, the compression and the last whole line; exit 1."""
    from trajcomp.formats import format_for

    rows = [json.loads(line) for line in dataset.read_text(encoding="utf-8").splitlines()
            if line.strip().startswith('{"id": "hermes')]
    whole = tmp_path / f"whole{suffix}"
    format_for(whole).write_part(whole, rows * 6)
    src = tmp_path / f"in{suffix}"
    src.write_bytes(whole.read_bytes()[: whole.stat().st_size * 2 // 3])
    said = []
    for workers in ("1", "2"):
        res = run_cli("compress", src.name, "-o", f"out{workers}{suffix}", "-c", str(ROOT / "configs" / "demo.yaml"),
                      "-q", "--checkpoint-rows", "2", "--workers", workers, cwd=tmp_path)
        assert res.code == 1, res.stderr
        (line,) = res.stderr.splitlines()
        said.append(line)
    assert said[0] == said[1] and f"in{suffix}: corrupt " in said[0] and "data after line" in said[0]


def test_a_symlinked_input_and_relative_paths_go_by_whole_parts(tmp_path, dataset, monkeypatch):
    """A link named in.jsonl to a file named by its hash (a Hugging Face cache's layout), given and
    written relative to the working folder: the row path's bytes, the rows named as the run names them."""
    (tmp_path / "blobs").mkdir()
    (tmp_path / "blobs" / "3f9a").write_bytes(dataset.read_bytes())
    (tmp_path / "in.jsonl").symlink_to(tmp_path / "blobs" / "3f9a")
    monkeypatch.chdir(tmp_path)
    one = run(Path("one") / "out.jsonl", Path("in.jsonl"), "--checkpoint-rows", "3", "--workers", "1")
    two = run(Path("two") / "out.jsonl", Path("in.jsonl"), "--checkpoint-rows", "3", "--workers", "2")
    assert two == one
    for name in ("out.jsonl", "out_rejects.jsonl"):
        assert (tmp_path / "two" / name).read_bytes() == (tmp_path / "one" / name).read_bytes()
    assert {json.loads(line)["source"] for line in (tmp_path / "two" / "out_rejects.jsonl").open()} == {"in.jsonl"}


def test_a_join_asked_again_after_it_was_done_changes_nothing(tmp_path, dataset, monkeypatch):
    """A Ray actor lost after joining a file but before answering has its task run again: the second
    join must see the file joined, not its parts gone (which would undo and redo the file)."""
    from trajcomp.engines.runners.workers import WorkerPool

    real = WorkerPool.join_file

    async def twice(self, task):
        await real(self, task)
        return await real(self, task)

    one = run(tmp_path / "one" / "out.jsonl", dataset, "--checkpoint-rows", "3", "--workers", "1")
    monkeypatch.setattr(WorkerPool, "join_file", twice)
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        two = run(tmp_path / "two" / "out.jsonl", dataset, "--checkpoint-rows", "3", "--workers", "2")
    assert "warning" not in err.getvalue() and two == one
    assert (tmp_path / "two" / "out.jsonl").read_bytes() == (tmp_path / "one" / "out.jsonl").read_bytes()


def test_a_damaged_file_after_a_good_one_stops_as_one_process_stops(tmp_path, dataset):
    """The error of a later file reaches the run in its place: the file before it is joined first, as one
    process joins it before reading the next; the same line, exit 1, the same first output."""
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.jsonl").write_bytes(dataset.read_bytes())
    whole = gzip.compress(dataset.read_bytes() * 20, mtime=0)
    (folder / "b.jsonl.gz").write_bytes(whole[: len(whole) // 2])
    said = []
    for workers in ("1", "2"):
        res = run_cli("compress", "in", "-o", f"out{workers}", "-c", str(ROOT / "configs" / "demo.yaml"), "-q",
                      "--checkpoint-rows", "3", "--workers", workers, cwd=tmp_path)
        assert res.code == 1, res.stderr
        said.append(res.stderr.splitlines()[0])
    assert said[0] == said[1] and "b.jsonl.gz: corrupt gzip data" in said[0]
    assert (tmp_path / "out2" / "a.jsonl").read_bytes() == (tmp_path / "out1" / "a.jsonl").read_bytes()


@pytest.mark.parametrize("suffix, cut", [(".jsonl", True), (".json", True), (".jsonl.gz", False), (".parquet", False)])
def test_a_short_file_is_cut_into_a_part_for_every_worker_where_the_cut_leaves_no_trace(
        tmp_path, dataset, monkeypatch, suffix, cut):
    """16 rows, parts of 1,000: with three workers, a part each (6, 6 and 4 rows), the main process
    reading none, where the output's join shows no part boundary; a compressed or Parquet output,
    whose members and row groups would show them, goes row by row as before. The bytes of one
    process either way."""
    from trajcomp.engines.parts import checkpoint

    monkeypatch.chdir(dataset.parent)
    one = run(tmp_path / "one" / f"out{suffix}", Path(dataset.name), "--workers", "1")
    parsed, committed = [], []
    parse_line, commit = jsonl.parse_line, checkpoint.WorkDir.commit_part
    monkeypatch.setattr(jsonl, "parse_line", lambda *a: parsed.append(a[1]) or parse_line(*a))
    monkeypatch.setattr(checkpoint.WorkDir, "commit_part",
                        lambda self, f, i, c: committed.append(c["records"]) or commit(self, f, i, c))
    three = run(tmp_path / "three" / f"out{suffix}", Path(dataset.name), "--workers", "3")
    assert three == one
    for name in (f"out{suffix}", "out_rejects.jsonl"):
        assert (tmp_path / "three" / name).read_bytes() == (tmp_path / "one" / name).read_bytes()
    if cut:
        assert parsed == [] and committed == [6, 6, 4]
    else:
        assert len(parsed) == 16 and committed == [16]


def test_a_run_killed_after_a_short_files_first_parts_resumes_with_other_workers_to_the_same_bytes(tmp_path, bpe_tokenizer):
    """Two files of twelve rows, each cut into parts of four for three workers; SIGKILL once the first
    file's first two parts are in (its last row's summaries hang); the same command with two workers:
    the first file goes on after the eight rows committed, whatever size their parts had, its rest cut
    in two beside the second file's parts."""
    import signal

    from openai_server import ServerThread
    from test_resume import args, hermes_row, start, thaw, wait_for_parts

    folder = tmp_path / "in"
    folder.mkdir()
    for k, name in enumerate(("a.jsonl", "b.jsonl")):
        write_jsonl(folder / name, [hermes_row(12 * k + i) for i in range(12)])
    whole = ("--checkpoint-rows", "1000", "--concurrency", "3")  # three calls: three workers may run
    with ServerThread(latency=0.05) as server:
        ref = run_cli(*args(folder, tmp_path / "ref", bpe_tokenizer, server.base_url, *whole, "--no-cache"))
        assert ref.code == 0, ref.stderr
        server.set_faults(hang_matching="tests/test_11_")  # in row 11's tool outputs alone: a's last part hangs
        out = tmp_path / "run"
        proc = start(args(folder, out, bpe_tokenizer, server.base_url, *whole, "--workers", "3"))
        wait_for_parts(out, 2, proc)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        thaw(server)
        server.set_faults(hang_matching=None)
        again = run_cli(*args(folder, out, bpe_tokenizer, server.base_url, *whole, "--workers", "2"))
        assert again.code == 0, again.stderr
    report = json.loads((out / "compression_metrics.json").read_text())
    assert report["processing"]["resumed"] is True and report["processing"]["rows_from_checkpoint"] == 8
    for name in ("a.jsonl", "b.jsonl"):
        assert (out / name).read_bytes() == (tmp_path / "ref" / name).read_bytes()
