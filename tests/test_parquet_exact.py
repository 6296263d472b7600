"""Parquet and `datasets` folders give back the JSON they were given: no key added, none lost, no value
changed in kind (issue 45, item 5)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trajcomp.formats.hf_folder import HF_FOLDER
from trajcomp.formats.jsonl import JSONL
from trajcomp.formats.parquet import PARQUET


def canonical(rows: list[dict]) -> list[str]:
    """The rows as JSON text with sorted keys: 1, 1.0 and true differ, as do a null and a missing key."""
    return [json.dumps(row, sort_keys=True, ensure_ascii=False) for row in rows]


def through(fmt, rows: list[dict], tmp: Path, cuts: list[int]) -> list[dict]:
    """The rows written as parts cut at `cuts`, joined, read back."""
    tmp.mkdir(parents=True, exist_ok=True)
    bounds = [0, *sorted(cuts), len(rows)]
    parts = []
    for i, (a, b) in enumerate(zip(bounds, bounds[1:])):
        parts.append(tmp / f"part-{i}{PARQUET.suffix}")
        fmt.write_part(parts[-1], rows[a:b])
    dest = tmp / ("out" if fmt is HF_FOLDER else "out.parquet")
    fmt.join(parts, dest)
    return [r.row for r in fmt.read(dest)]


TOOL_A = {"type": "function", "function": {"name": "get_time", "parameters": {
    "type": "object", "properties": {"timezone": {"type": "string"}}, "required": ["timezone"]}}}
TOOL_B = {"type": "function", "function": {"name": "search", "parameters": {
    "type": "object", "properties": {"keyword": {"type": "string"}, "city": {"type": "string"}}}}}
TOOL_C = {"type": "function", "function": {"name": "noop", "parameters": {"type": "object", "properties": {}}}}


def test_tool_schemas_of_different_shapes_come_back_without_merged_keys(tmp_path):
    rows = [
        {"messages": [{"role": "user", "content": "time?"}], "tools": [TOOL_A]},
        {"messages": [{"role": "user", "content": "find"}], "tools": [TOOL_B, TOOL_C]},
    ]
    for fmt in (PARQUET, HF_FOLDER):
        got = through(fmt, rows, tmp_path / fmt.suffix, [])
        assert canonical(got) == canonical(rows), fmt
        assert "required" not in got[1]["tools"][1]["function"]["parameters"]
        assert "keyword" not in got[0]["tools"][0]["function"]["parameters"]["properties"]


def test_a_reader_that_knows_no_marks_sees_the_turns_typed_and_the_schemas_as_json_text(tmp_path):
    rows = [
        {"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": None,
                      "tool_calls": [{"id": "1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
                      {"role": "tool", "tool_call_id": "1", "content": "r"}], "tools": [TOOL_A]},
        {"messages": [{"role": "user", "content": "b"}], "tools": [TOOL_C]},
    ]
    PARQUET.write_part(tmp_path / "p.parquet", rows)
    table = pq.read_table(tmp_path / "p.parquet")
    assert pa.types.is_list(table.schema.field("messages").type)  # turns stay structs, as datasets types them
    assert json.loads(table.column("tools")[1].as_py()) == [TOOL_C]
    plain = table.column("messages").to_pylist()[1][0]
    assert plain == {"role": "user", "content": "b", "tool_calls": None, "tool_call_id": None}
    assert [r.row for r in PARQUET.read(tmp_path / "p.parquet")] == rows


def test_a_file_of_an_older_version_reads_as_it_did(tmp_path):
    # No marks: an old output's text column and null-filled keys read back as they are stored.
    turns = [[{"from": "human", "value": "a", "loss": None}], [{"from": "gpt", "value": "b", "loss": True}]]
    table = pa.table({"conversations": pa.array(turns), "meta": pa.array(['{"k": 1}', "plain"])})
    pq.write_table(table, tmp_path / "old.parquet")
    got = [r.row for r in PARQUET.read(tmp_path / "old.parquet")]
    assert got == [{"conversations": turns[0], "meta": '{"k": 1}'}, {"conversations": turns[1], "meta": "plain"}]


@pytest.mark.parametrize("cuts", [[], [1]])
def test_a_key_null_in_some_turns_and_missing_in_others_reads_back_null_and_the_turns_stay_typed(tmp_path, cuts):
    # Rows typed by datasets hold every key (null where unset); the summary turn trajcomp adds has none.
    rows = [{"messages": [{"role": "user", "content": "a", "name": None}]},
            {"messages": [{"role": "user", "content": "[CONTEXT SUMMARY]: ..."}, {"role": "user", "content": "b", "name": None}]}]
    got = through(PARQUET, rows, tmp_path, cuts)
    assert got[1]["messages"][0] == {"role": "user", "content": "[CONTEXT SUMMARY]: ...", "name": None}
    assert got[0] == rows[0] and got[1]["messages"][1] == rows[1]["messages"][1]
    assert pa.types.is_list(pq.read_schema(tmp_path / "out.parquet").field("messages").type)


# ---- the property -----------------------------------------------------------------------------

KEYS = st.sampled_from(["a", "b", "type", "properties", "required", "name"])
LEAVES = (st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.text(max_size=4)
          | st.floats(allow_nan=False, allow_infinity=False))
JSON_VALUES = st.recursive(LEAVES, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=3),
                           max_leaves=8)
PARTS = st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": st.text(max_size=5)}), max_size=2)
CALLS = st.lists(st.fixed_dictionaries({"id": st.text(max_size=3), "type": st.just("function"), "function":
                 st.fixed_dictionaries({"name": st.text(max_size=3), "arguments": st.text(max_size=5)})}), max_size=2)
MESSAGE = st.fixed_dictionaries(
    {"role": st.sampled_from(["system", "user", "assistant", "tool"]), "content": st.none() | st.text(max_size=6) | PARTS},
    optional={"tool_calls": CALLS, "tool_call_id": st.text(max_size=3), "reasoning_content": st.text(max_size=5),
              "name": st.text(max_size=3), "weight": st.integers(0, 1)},  # (null or missing: see above)
)
ROW = st.fixed_dictionaries(
    {"messages": st.lists(MESSAGE, max_size=4)},
    optional={"tools": JSON_VALUES, "metadata": st.dictionaries(KEYS, JSON_VALUES, max_size=3), "id": LEAVES},
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(ROW, min_size=1, max_size=5), cuts=st.lists(st.integers(0, 5), max_size=2))
def test_json_lines_to_parquet_to_json_lines_is_the_identity(rows, cuts, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("exact")
    source = tmp / "in.jsonl"
    source.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    read = [r.row for r in JSONL.read(source)]
    got = through(PARQUET, read, tmp / "pq", [min(c, len(rows)) for c in cuts])
    assert canonical(got) == canonical(rows)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(ROW, min_size=1, max_size=4), cut=st.integers(0, 4))
def test_a_datasets_folder_gives_back_the_rows_it_was_written_from(rows, cut, tmp_path_factory):
    got = through(HF_FOLDER, rows, tmp_path_factory.mktemp("hf"), [min(cut, len(rows))])
    assert canonical(got) == canonical(rows)
