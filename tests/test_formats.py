"""The file formats: round trips through real files, part joining, determinism, damaged inputs."""

from __future__ import annotations

import datetime as dt
import decimal
import gzip
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

import processes

from trajcomp.formats import FORMATS, format_for, split_suffix
from trajcomp.formats.compressed import JSONL_GZ, JSONL_ZST
from trajcomp.formats.json_array import JSON_ARRAY
from trajcomp.formats.jsonl import JSONL, dumps
from trajcomp.formats.arrow_rows import CONVERSATIONS_TYPE, METRICS_TYPE
from trajcomp.formats.parquet import PARQUET, ParquetFormat
from trajcomp.core.metrics import Outcome, RowMetrics

COMPRESSED = Outcome.COMPRESSED
METRICS_A = RowMetrics(
    COMPRESSED, 900, 400, 12, 6, 500, region=(2, 8), summarization_api_calls=1, summary_source="extractive"
)
METRICS_B = RowMetrics(Outcome.SKIPPED_UNDER_TARGET, 100, 100, 2, 2, 500)  # region, source and error all null

ROWS = [
    {
        "conversations": [
            {"from": "system", "value": "You are helpful."},
            {"from": "human", "value": "Ünïcödé ✓ 日本語 🚀\nsecond line\u2028sep"},
            {"from": "gpt", "value": 'quotes " and \\ backslash'},
        ],
        "id": "row-1",
        "score": 0.125,
        "count": 3,
        "ok": True,
        "nothing": None,
        "meta": {"source": "swe", "tags": ["a", "b"], "nested": {"depth": 2, "ratio": 1.5, "flag": False}},
        "compression_metrics": METRICS_A.to_dict(),
    },
    {
        "conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": ""}],
        "id": "row-2",
        "score": -2.75,
        "count": 0,
        "ok": False,
        "nothing": None,
        "meta": {"source": "web", "tags": [], "nested": {"depth": 0, "ratio": 0.0, "flag": True}},
        "compression_metrics": METRICS_B.to_dict(),
    },
    {
        "conversations": [{"from": "human", "value": "x" * 5000}],
        "id": "row-3",
        "score": 1e-300,
        "count": 2**62,
        "ok": True,
        "nothing": None,
        "meta": {"source": "ünï", "tags": ["ç"], "nested": {"depth": 7, "ratio": -0.5, "flag": False}},
        "compression_metrics": METRICS_B.to_dict(),
    },
]

OPENAI_ROWS = [
    {
        "messages": [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "fix the bug ✓"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "run", "arguments": '{"cmd": "ls"}'}}
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "a.py\nb.py"},
        ],
        "tools": [{"type": "function", "function": {"name": "run", "parameters": {"type": "object"}}}],
        "compression_metrics": METRICS_B.to_dict(),
    },
    {"messages": [{"role": "user", "content": "hello"}], "tools": [], "compression_metrics": METRICS_A.to_dict()},
]

JSON_FORMATS = [JSONL_GZ, JSONL_ZST, JSON_ARRAY]
ALL_FORMATS = [*JSON_FORMATS, PARQUET]


def ids(fmt):
    return fmt.suffix


def write_parts(fmt, tmp_path: Path, chunks, schema=None) -> list[Path]:
    parts = []
    for i, chunk in enumerate(chunks):
        part = tmp_path / f"part-{i:05d}{fmt.suffix}"
        fmt.write_part(part, chunk, schema)
        parts.append(part)
    return parts


def read_rows(fmt, path: Path) -> list[dict]:
    records = list(fmt.read(path))
    assert all(r.error is None for r in records), [r.error for r in records if r.error]
    return [r.row for r in records]


def without_nulls(value):
    """A table holds every column in every row and every struct field in every object, so a missing
    key reads back as None: compare Parquet rows with the None-valued keys left out."""
    if isinstance(value, dict):
        return {k: without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [without_nulls(v) for v in value]
    return value


# ---- the registry ---------------------------------------------------------------------------


def test_registry_knows_every_format():
    assert set(FORMATS) == {".jsonl", ".jsonl.gz", ".jsonl.zst", ".json", ".parquet"}
    assert split_suffix(Path("data.v2.jsonl.gz")) == ("data.v2", ".jsonl.gz")
    assert split_suffix(Path("data.jsonl.zst")) == ("data", ".jsonl.zst")
    assert format_for(Path("x.json")) is JSON_ARRAY
    assert format_for(Path("x.jsonl.zst")) is JSONL_ZST
    assert format_for(Path("x.parquet")) is PARQUET
    assert format_for(Path("x.bin"), ".jsonl.gz") is JSONL_GZ


# ---- every format ---------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ALL_FORMATS, ids=ids)
@pytest.mark.parametrize("rows", [ROWS, OPENAI_ROWS], ids=["sharegpt", "openai"])
def test_round_trip_through_parts_keeps_every_row_in_order(fmt, rows, tmp_path):
    chunks = [rows[:1], [], rows[1:]]  # an empty part too (a range where every row was rejected)
    parts = write_parts(fmt, tmp_path, chunks)
    dest = tmp_path / f"out{fmt.suffix}"
    fmt.join(parts, dest)
    got = read_rows(fmt, dest)
    if fmt is PARQUET:
        assert without_nulls(got) == without_nulls(rows)
        assert all(set(row) == set(got[0]) for row in rows)  # no column from the empty part's default schema
    else:
        assert got == rows
    assert [r.line for r in fmt.read(dest)] == [1, 2, 3][: len(rows)]
    if fmt is not JSON_ARRAY:  # each part is itself a complete file (a .json part is JSON Lines)
        assert without_nulls(read_rows(fmt, parts[0])) == without_nulls(rows[:1])


@pytest.mark.parametrize("fmt", ALL_FORMATS, ids=ids)
def test_writing_and_joining_are_byte_deterministic(fmt, tmp_path):
    a = write_parts(fmt, tmp_path / "a", [ROWS[:2], ROWS[2:]])
    b = write_parts(fmt, tmp_path / "b", [ROWS[:2], ROWS[2:]])
    assert [p.read_bytes() for p in a] == [p.read_bytes() for p in b]
    fmt.join(a, tmp_path / f"one{fmt.suffix}")
    fmt.join(a, tmp_path / f"two{fmt.suffix}")
    fmt.join(b, tmp_path / f"three{fmt.suffix}")
    one = (tmp_path / f"one{fmt.suffix}").read_bytes()
    assert one == (tmp_path / f"two{fmt.suffix}").read_bytes() == (tmp_path / f"three{fmt.suffix}").read_bytes()
    assert not list(tmp_path.glob(".*trajcomp-tmp"))


@pytest.mark.parametrize("fmt", ALL_FORMATS, ids=ids)
def test_a_streamed_part_is_the_same_file_as_a_written_one(fmt, tmp_path):
    schema = None
    if fmt is PARQUET:
        schema = PARQUET.schema(typed_input(tmp_path))
        rows = compress_rows([r.row for r in PARQUET.read(tmp_path / "in.parquet")], [METRICS_A, METRICS_B, METRICS_B])
    else:
        rows = ROWS
    fmt.write_part(tmp_path / f"written{fmt.suffix}", rows, schema)
    part = fmt.open_part(tmp_path / f"streamed{fmt.suffix}", schema)
    for row in rows:
        part.write(row)
    assert not (tmp_path / f"streamed{fmt.suffix}").exists()  # appears only when closed
    part.close()
    assert (tmp_path / f"streamed{fmt.suffix}").read_bytes() == (tmp_path / f"written{fmt.suffix}").read_bytes()
    aborted = fmt.open_part(tmp_path / f"aborted{fmt.suffix}", schema)
    aborted.write(rows[0])
    aborted.abort()
    assert sorted(p.name for p in tmp_path.iterdir() if "aborted" in p.name) == []


@pytest.mark.parametrize("fmt", [f for f in ALL_FORMATS if f.concatenates], ids=ids)
def test_parts_appended_in_turn_to_one_file_are_the_bytes_of_their_join(fmt, tmp_path):
    """The parts this process writes in turn (AppendedPart): each at its place in one file, what a killed
    or aborted part left after it cut off, each range described as written; their file is the joined output."""
    cuts = [ROWS[:1], ROWS[1:], [], ROWS[::-1]]
    fmt.join([_written(fmt, tmp_path / f"p{i}{fmt.suffix}", rows) for i, rows in enumerate(cuts)], tmp_path / f"joined{fmt.suffix}")
    shared, at, pieces = tmp_path / f"rows{fmt.suffix}", 0, []
    shared.write_bytes(b"what a killed run left")
    for rows in cuts:
        doomed = fmt.append_part(shared, at)
        doomed.write(ROWS[0])
        doomed.abort()
        assert shared.stat().st_size == at
        part = fmt.append_part(shared, at)
        for row in rows:
            part.write(row)
        part.close()
        part.abort()  # a run failing after the part was committed (its checkpoint's write) keeps it
        pieces.append(part.piece)
        at += part.piece["bytes"]
    assert shared.read_bytes() == (tmp_path / f"joined{fmt.suffix}").read_bytes()
    data = shared.read_bytes()
    for piece in pieces:
        chunk = data[piece["at"]:piece["at"] + piece["bytes"]]
        assert hashlib.sha256(chunk).hexdigest() == piece["sha256"]


def test_a_part_appended_to_a_file_another_name_shares_leaves_that_name_as_it_was(tmp_path):
    """The join links the parts' file into place as the output; a resume stopped before the file was marked
    joined may write parts again: the output under its name keeps its bytes meanwhile."""
    shared = tmp_path / "rows.jsonl"
    shared.write_bytes(dumps(ROWS[0]) * 2)
    os.link(shared, tmp_path / "out.jsonl")
    part = JSONL.append_part(shared, len(dumps(ROWS[0])))
    part.write(ROWS[1])
    part.close()
    assert (tmp_path / "out.jsonl").read_bytes() == dumps(ROWS[0]) * 2
    assert shared.read_bytes() == dumps(ROWS[0]) + dumps(ROWS[1])


def _written(fmt, path: Path, rows: list) -> Path:
    fmt.write_part(path, rows)
    return path


def test_opening_a_parquet_part_begins_pyarrows_one_time_import_on_a_thread(tmp_path):
    """In a fresh interpreter: the first part's opening starts pandas' import (which pyarrow's first
    conversion of Python values waits for) on one thread, before any row is converted; the part is
    written as before."""
    script = f"""
import sys, threading
from trajcomp.formats.parquet import PARQUET
assert "pandas" not in sys.modules
part = PARQUET.open_part(__import__("pathlib").Path({str(tmp_path / "p.parquet")!r}))
PARQUET.open_part(__import__("pathlib").Path({str(tmp_path / "q.parquet")!r}))
warm = [t for t in threading.enumerate() if t.name == "trajcomp-arrow-warm"]
assert len(warm) <= 1, warm
for t in warm:
    t.join()
assert "pandas" in sys.modules
part.write({{"conversations": [{{"from": "human", "value": "hi"}}]}})
part.close()
print("ok")
"""
    out = processes.run([sys.executable, "-c", script], text=True)
    assert out.stdout.strip() == "ok", out.stderr
    assert [r.row["conversations"] for r in PARQUET.read(tmp_path / "p.parquet")] == [[{"from": "human", "value": "hi"}]]


@pytest.mark.parametrize("fmt", ALL_FORMATS, ids=ids)
def test_joining_no_parts_gives_a_valid_empty_file(fmt, tmp_path):
    dest = tmp_path / f"empty{fmt.suffix}"
    fmt.join([], dest)
    assert list(fmt.read(dest)) == []


# ---- gzip and zstd ---------------------------------------------------------------------------


def test_gzip_output_is_standard_gzip(tmp_path):
    parts = write_parts(JSONL_GZ, tmp_path, [ROWS[:1], ROWS[1:]])
    dest = tmp_path / "out.jsonl.gz"
    JSONL_GZ.join(parts, dest)
    expected = b"".join(dumps(r) for r in ROWS)
    assert gzip.decompress(dest.read_bytes()) == expected
    with gzip.open(dest, "rt", encoding="utf-8") as fh:
        assert [json.loads(line) for line in fh] == ROWS
    header = parts[0].read_bytes()[:10]
    assert header[4:8] == b"\0\0\0\0" and not header[3] & 0x08  # mtime 0, no file name
    if shutil.which("gzip"):
        assert subprocess.run(["gzip", "-dc", str(dest)], capture_output=True, check=True).stdout == expected
        JSONL_GZ.join([], tmp_path / "e.jsonl.gz")
        empty = subprocess.run(["gzip", "-dc", str(tmp_path / "e.jsonl.gz")], capture_output=True, check=True)
        assert empty.stdout == b""


def test_zstd_output_is_standard_zstd(tmp_path):
    parts = write_parts(JSONL_ZST, tmp_path, [ROWS[:1], [], ROWS[1:]])
    dest = tmp_path / "out.jsonl.zst"
    JSONL_ZST.join(parts, dest)
    expected = b"".join(dumps(r) for r in ROWS)
    for part, rows in zip(parts, [ROWS[:1], [], ROWS[1:]]):  # each part is exactly one frame
        frame = zstandard.ZstdDecompressor().decompressobj()
        assert frame.decompress(part.read_bytes()) == b"".join(dumps(r) for r in rows)
        assert frame.eof and frame.unused_data == b""
    reader = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(dest.read_bytes()), read_across_frames=True)
    assert reader.read() == expected
    if shutil.which("zstd"):
        assert subprocess.run(["zstd", "-dcq", str(dest)], capture_output=True, check=True).stdout == expected
        JSONL_ZST.join([], tmp_path / "e.jsonl.zst")
        empty = subprocess.run(["zstd", "-dcq", str(tmp_path / "e.jsonl.zst")], capture_output=True, check=True)
        assert empty.stdout == b""


def test_files_made_by_the_standard_tools_are_read(tmp_path):
    data = b'{"a": 1}\n\n{"a": 2}\nnot json\n[1]\n'
    (tmp_path / "x.jsonl.gz").write_bytes(gzip.compress(data[:9]) + gzip.compress(data[9:]))
    (tmp_path / "x.jsonl.zst").write_bytes(zstandard.ZstdCompressor(write_content_size=False).compress(data))
    for fmt in (JSONL_GZ, JSONL_ZST):
        records = list(fmt.read(tmp_path / f"x{fmt.suffix}"))
        assert [(r.line, r.row) for r in records[:2]] == [(1, {"a": 1}), (3, {"a": 2})]
        assert [(r.line, r.error.reason) for r in records[2:]] == [(4, "invalid_json"), (5, "not_an_object")]


@pytest.mark.parametrize("fmt,kind", [(JSONL_GZ, "gzip"), (JSONL_ZST, "zstd")], ids=["gz", "zst"])
def test_a_truncated_file_yields_its_complete_lines_then_a_clear_error(fmt, kind, tmp_path):
    rows = [{"i": i, "pad": f"{i:08d}" * 40} for i in range(3000)]
    whole = tmp_path / f"whole{fmt.suffix}"
    fmt.write_part(whole, rows)
    cut = tmp_path / f"cut{fmt.suffix}"
    cut.write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])
    got = []
    with pytest.raises(ValueError, match=rf"cut{fmt.suffix}: corrupt {kind} data after line (\d+): ") as err:
        for record in fmt.read(cut):
            got.append(record)
    assert 0 < len(got) < len(rows)
    assert all(r.error is None for r in got)  # the partial line at the cut is not yielded
    assert [r.row for r in got] == rows[: len(got)]
    assert f"after line {len(got)}:" in str(err.value)


def test_a_gzip_file_damaged_in_its_middle_says_the_lines_before_may_be_damaged(tmp_path):
    """Deflate may decode damaged bytes as other text; only the member's checksum, at its end, catches it."""
    rows = [{"i": i, "text": f"row {i:06d} " * 30} for i in range(400)]
    whole = tmp_path / "whole.jsonl.gz"
    JSONL_GZ.write_part(whole, rows)
    data = bytearray(whole.read_bytes())
    for k in range(len(data) // 2, len(data) // 2 + 64):
        data[k] ^= 0x55
    (tmp_path / "mid.jsonl.gz").write_bytes(bytes(data))
    with pytest.raises(ValueError, match="corrupt gzip data after line") as err:
        list(JSONL_GZ.read(tmp_path / "mid.jsonl.gz"))
    assert "CRC check failed" in str(err.value)  # these damaged bytes still decode: only the checksum fails
    assert "lines before it may be damaged too" in str(err.value)


@pytest.mark.parametrize("fmt,kind", [(JSONL_GZ, "gzip"), (JSONL_ZST, "zstd")], ids=["gz", "zst"])
def test_a_file_cut_at_the_last_byte_or_not_compressed_is_an_error(fmt, kind, tmp_path):
    whole = tmp_path / f"whole{fmt.suffix}"
    fmt.write_part(whole, ROWS)
    cut = tmp_path / f"cut{fmt.suffix}"
    cut.write_bytes(whole.read_bytes()[:-1])
    with pytest.raises(ValueError, match=f"corrupt {kind} data"):
        list(fmt.read(cut))
    plain = tmp_path / f"plain{fmt.suffix}"
    plain.write_bytes(b'{"a": 1}\n')
    with pytest.raises(ValueError, match=f"corrupt {kind} data after line 0"):
        list(fmt.read(plain))


# ---- JSON array ------------------------------------------------------------------------------


def test_json_array_output_is_exactly_an_array_of_dumped_rows(tmp_path):
    parts = write_parts(JSON_ARRAY, tmp_path, [ROWS[:2], [], ROWS[2:]])
    dest = tmp_path / "out.json"
    JSON_ARRAY.join(parts, dest)
    body = ",\n".join(dumps(r).decode().rstrip("\n") for r in ROWS)
    assert dest.read_text(encoding="utf-8") == "[\n" + body + "\n]\n"
    assert json.loads(dest.read_text(encoding="utf-8")) == ROWS
    JSON_ARRAY.join([parts[1]], tmp_path / "empty.json")
    assert (tmp_path / "empty.json").read_text() == "[]\n"


def test_json_array_bad_elements_become_records_with_errors(tmp_path):
    path = tmp_path / "in.json"
    path.write_text('[{"a": 1}, 5, "s", null, [1], {"b": "é"}]', encoding="utf-8")
    records = list(JSON_ARRAY.read(path))
    assert [r.line for r in records] == [1, 2, 3, 4, 5, 6]
    assert [r.row for r in records] == [{"a": 1}, None, None, None, None, {"b": "é"}]
    assert [r.error.reason if r.error else None for r in records] == [None] + ["not_an_object"] * 4 + [None]
    assert [r.raw for r in records[1:5]] == ["5", '"s"', "null", "[1]"]
    assert records[5].raw_text() == '{"b":"é"}'


def test_json_array_that_is_not_an_array_is_a_clear_error(tmp_path):
    path = tmp_path / "in.json"
    path.write_text('{"data": []}')
    with pytest.raises(ValueError, match=r"in\.json: the top level is a JSON object, not an array"):
        list(JSON_ARRAY.read(path))
    path.write_text('[{"a": 1},')
    with pytest.raises(ValueError, match=r"in\.json: not valid JSON"):
        list(JSON_ARRAY.read(path))
    path.write_bytes(b'\xef\xbb\xbf[{"a": 1}]')  # a BOM is fine
    assert read_rows(JSON_ARRAY, path) == [{"a": 1}]


# ---- Parquet ---------------------------------------------------------------------------------

TYPED_CONVERSATIONS = pa.list_(pa.struct([("from", pa.string()), ("value", pa.string())]))


def typed_input(tmp_path: Path, conversations_type=TYPED_CONVERSATIONS) -> Path:
    utc = dt.timezone.utc
    table = pa.table(
        {
            "id": pa.array([1, 2, 3], pa.int32()),
            "conversations": pa.array(
                [
                    [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "yo"}],
                    [{"from": "human", "value": "✓"}],
                    [],
                ],
                conversations_type,
            ),
            "created": pa.array(
                [dt.datetime(2024, 5, 1, 12, 30, tzinfo=utc), None, dt.datetime(1999, 1, 1, tzinfo=utc)],
                pa.timestamp("ms", "UTC"),
            ),
            "price": pa.array([decimal.Decimal("12.34"), decimal.Decimal("-0.01"), None], pa.decimal128(9, 2)),
            "tags": pa.array([["a", "b"], [], None], pa.list_(pa.string())),
            "info": pa.array(
                [{"lang": "py", "stars": 5}, None, {"lang": None, "stars": -1}],
                pa.struct([("lang", pa.string()), ("stars", pa.int16())]),
            ),
            "blob": pa.array([b"\x00\xff", None, b""], pa.binary()),
            "day": pa.array([dt.date(2020, 2, 29), None, dt.date(1970, 1, 1)], pa.date32()),
            "weight": pa.array([0.5, None, 2.0], pa.float32()),
            "split": pa.array(["train", "test", "train"], pa.dictionary(pa.int8(), pa.string())),
            "counts": pa.array([[("a", 1)], [], None], pa.map_(pa.string(), pa.int64())),
            "ns": pa.array([1_000_000_001, 2_000_000_000, None], pa.timestamp("ns")),
        }
    )
    path = tmp_path / "in.parquet"
    pq.write_table(table, path)
    return path


def compress_rows(rows: list[dict], metrics: list[RowMetrics]) -> list[dict]:
    """What the pipeline writes: the row, its turns possibly replaced, its metrics added."""
    out = []
    for row, m in zip(rows, metrics):
        turns = row["conversations"]
        if m.was_compressed:
            turns = turns[:1] + [{"from": "gpt", "value": "[summary]"}]
        out.append({**row, "conversations": turns, "compression_metrics": m.to_dict()})
    return out


def test_parquet_keeps_every_column_type_and_value(tmp_path):
    source = typed_input(tmp_path)
    schema = PARQUET.schema(source)
    records = list(PARQUET.read(source))
    assert [r.line for r in records] == [1, 2, 3] and all(r.raw is None for r in records)
    assert json.loads(records[0].raw_text())["price"] == "12.34"
    rows = compress_rows([r.row for r in records], [METRICS_A, METRICS_B, METRICS_B])
    parts = write_parts(PARQUET, tmp_path, [rows[:1], rows[1:]], schema)
    dest = tmp_path / "out.parquet"
    PARQUET.join(parts, dest, schema)

    out = pq.read_schema(dest)
    assert out.names == schema.names + ["compression_metrics"]
    for field in schema:
        if field.name != "conversations":
            assert out.field(field.name).type == field.type, field.name
    assert out.field("conversations").type == CONVERSATIONS_TYPE == TYPED_CONVERSATIONS
    assert out.field("compression_metrics").type == METRICS_TYPE
    assert read_rows(PARQUET, dest) == rows
    before, after = pq.read_table(source), pq.read_table(dest)
    for name in schema.names:
        if name != "conversations":
            a, b = after.column(name), before.column(name)
            if pa.types.is_dictionary(a.type):  # the same values, dictionaries chunked differently
                a, b = a.cast(a.type.value_type), b.cast(b.type.value_type)
            assert a.equals(b), name


def test_parquet_conversations_are_list_of_from_value_structs_keeping_extra_fields(tmp_path):
    wide = pa.large_list(pa.struct([("from", pa.large_string()), ("value", pa.large_string()), ("loss", pa.bool_())]))
    table = pa.table({"conversations": pa.array([[{"from": "human", "value": "a", "loss": True}]], wide)})
    pq.write_table(table, tmp_path / "wide.parquet")
    schema = PARQUET.schema(tmp_path / "wide.parquet")
    rows = [r.row for r in PARQUET.read(tmp_path / "wide.parquet")]
    rows[0]["conversations"].append({"from": "gpt", "value": "b"})  # a new turn: no "loss"
    PARQUET.write_part(tmp_path / "p.parquet", rows, schema)
    expected = pa.list_(pa.struct([("from", pa.string()), ("value", pa.string()), ("loss", pa.bool_())]))
    assert pq.read_schema(tmp_path / "p.parquet").field("conversations").type == expected
    assert read_rows(PARQUET, tmp_path / "p.parquet")[0]["conversations"] == [
        {"from": "human", "value": "a", "loss": True},
        {"from": "gpt", "value": "b"},  # the key it lacked is not added (the field is marked absent)
    ]


def test_parquet_metrics_type_matches_row_metrics():
    assert METRICS_TYPE.names == list(METRICS_A.to_dict())
    assert METRICS_TYPE.field("compression_region").type.names == list(METRICS_A.to_dict()["compression_region"])


def test_parquet_known_columns_get_their_types_even_when_all_null(tmp_path):
    # JSON input: no schema. Every metric region / source / error here is null.
    rows = [{"conversations": [{"from": "human", "value": "a"}], "compression_metrics": METRICS_B.to_dict()}]
    PARQUET.write_part(tmp_path / "p.parquet", rows)
    schema = pq.read_schema(tmp_path / "p.parquet")
    assert schema.field("conversations").type == CONVERSATIONS_TYPE
    assert schema.field("compression_metrics").type == METRICS_TYPE
    PARQUET.write_part(tmp_path / "empty.parquet", [])
    assert pq.read_schema(tmp_path / "empty.parquet").field("conversations").type == CONVERSATIONS_TYPE


def test_parquet_join_keeps_every_part_exact_whatever_each_inferred(tmp_path):
    b, a = METRICS_B.to_dict(), METRICS_A.to_dict()
    chunks = [
        [{"conversations": [], "x": None, "mixed": "text", "obj": {"a": 1}, "same": {"k": 1}, "compression_metrics": b}],
        [{"conversations": [], "x": 5, "mixed": {"k": [1]}, "obj": {"b": "s"}, "late": 1.5, "same": {"k": 2},
          "compression_metrics": a}],
        [{"conversations": [], "x": 2.5, "mixed": None, "obj": {"a": 2}, "same": None, "compression_metrics": b}],
    ]
    parts = write_parts(PARQUET, tmp_path, chunks)
    PARQUET.join(parts, tmp_path / "out.parquet")
    schema = pq.read_schema(tmp_path / "out.parquet")
    assert schema.names == ["conversations", "x", "mixed", "obj", "same", "late", "compression_metrics"]
    # An int and a float, a string and an object, objects of other keys: no one type holds them as they were.
    for name in ("x", "mixed", "obj"):
        assert schema.field(name).type == pa.string() and schema.field(name).metadata == {b"trajcomp": b"json"}
    assert schema.field("same").type == pa.struct([("k", pa.int64())])  # one shape in every part: typed
    assert schema.field("compression_metrics").type == METRICS_TYPE
    assert read_rows(PARQUET, tmp_path / "out.parquet") == [c[0] for c in chunks]


def test_parquet_values_without_a_common_type_in_one_part_are_json_read_back_as_they_were(tmp_path):
    rows = [
        {"conversations": [], "v": "s", "big": 2**70, "empty": {}},
        {"conversations": [], "v": [1, "a"], "big": None, "empty": {}},
    ]
    PARQUET.write_part(tmp_path / "p.parquet", rows)
    assert read_rows(PARQUET, tmp_path / "p.parquet") == rows
    table = pq.read_table(tmp_path / "p.parquet")  # what a reader that knows no marks sees: JSON text
    assert table.column("v").to_pylist() == ['"s"', '[1,"a"]']
    assert table.column("big").to_pylist() == [str(2**70), "null"]


def test_parquet_empty_join_uses_the_given_schema(tmp_path):
    source = typed_input(tmp_path)
    schema = PARQUET.schema(source)
    PARQUET.join([], tmp_path / "empty.parquet", schema)
    out = pq.read_schema(tmp_path / "empty.parquet")
    assert out.names == schema.names
    assert out.field("price").type == pa.decimal128(9, 2)
    assert out.field("conversations").type == CONVERSATIONS_TYPE
    assert pq.ParquetFile(tmp_path / "empty.parquet").metadata.num_rows == 0
    PARQUET.join([], tmp_path / "bare.parquet")
    assert pq.read_schema(tmp_path / "bare.parquet").names == ["conversations"]


def test_parquet_drops_only_the_huggingface_metadata(tmp_path):
    table = pa.table({"conversations": pa.array([[]], TYPED_CONVERSATIONS)}).replace_schema_metadata(
        {b"huggingface": b'{"info": {"features": {}}}', b"origin": b"test"}
    )
    pq.write_table(table, tmp_path / "in.parquet")
    rows = [dict(r.row, compression_metrics=METRICS_B.to_dict()) for r in PARQUET.read(tmp_path / "in.parquet")]
    parts = write_parts(PARQUET, tmp_path, [rows], PARQUET.schema(tmp_path / "in.parquet"))
    PARQUET.join(parts, tmp_path / "out.parquet")
    assert pq.read_schema(tmp_path / "out.parquet").metadata == {b"origin": b"test"}


def test_parquet_nanosecond_times_survive(tmp_path):
    st = pa.struct([("t", pa.timestamp("ns", "UTC")), ("d", pa.list_(pa.duration("ns")))])
    values = [{"t": 1_000_000_001, "d": [5, 1000]}, {"t": 2_000_000_000, "d": []}]
    table = pa.table({"conversations": pa.array([[], []], TYPED_CONVERSATIONS), "s": pa.array(values, st)})
    pq.write_table(table, tmp_path / "in.parquet")
    fmt = ParquetFormat(batch_size=1)
    rows = read_rows(fmt, tmp_path / "in.parquet")
    # whole microseconds are datetimes whatever the batching; the rest integer nanoseconds
    assert rows[1]["s"]["t"] == dt.datetime(1970, 1, 1, 0, 0, 2, tzinfo=dt.timezone.utc)
    fmt.write_part(tmp_path / "p.parquet", rows, fmt.schema(tmp_path / "in.parquet"))
    assert pq.read_table(tmp_path / "p.parquet").column("s").equals(table.column("s"))


def test_parquet_is_read_lazily_in_batches(tmp_path, monkeypatch):
    n = 20_000
    turns = [[{"from": "human", "value": f"q{i}"}] for i in range(n)]
    table = pa.table({"conversations": pa.array(turns, TYPED_CONVERSATIONS), "i": pa.array(range(n), pa.int64())})
    pq.write_table(table, tmp_path / "big.parquet", row_group_size=5_000)
    pulled = []
    real = pq.ParquetFile.iter_batches

    def counting(self, *args, **kwargs):
        pulled.append(kwargs.get("batch_size"))
        for batch in real(self, *args, **kwargs):
            pulled.append(batch.num_rows)
            yield batch

    monkeypatch.setattr(pq.ParquetFile, "iter_batches", counting)
    records = ParquetFormat(batch_size=100).read(tmp_path / "big.parquet")
    first = next(records)
    assert (first.line, first.row) == (1, {"conversations": [{"from": "human", "value": "q0"}], "i": 0})
    assert pulled == [100, 100]  # the batch size asked for, then one batch of it
    lines = [first.line] + [r.line for r in records]
    assert lines == list(range(1, n + 1))
    assert len(pulled) == 1 + n // 100 and set(pulled[1:]) == {100}


def test_parquet_damaged_files_are_clear_errors(tmp_path):
    (tmp_path / "bad.parquet").write_bytes(b"not parquet at all")
    with pytest.raises(ValueError, match=r"bad\.parquet: not a readable Parquet file"):
        list(PARQUET.read(tmp_path / "bad.parquet"))
