"""The one serializer (core/json_codec.py): orjson's speed, the standard library's values.

Every row the standard library read must read to the same value, and every value it wrote must be
written with the same value, where orjson alone would differ: NaN and Infinity, integers beyond 64
bits, non-string keys, deep nesting, datetimes. Written bytes are compact and UTF-8 as given.
"""

from __future__ import annotations

import datetime
import json
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from trajcomp.core import json_codec
from trajcomp.formats.jsonl import parse_line

# Text as rows hold it: any code point but unpaired surrogates (no UTF-8 file holds one), control
# characters, U+2028 and non-ASCII included.
TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
SCALARS = st.none() | st.booleans() | st.integers(-(2**80), 2**80) | TEXT
FLOATS = st.floats(allow_nan=True, allow_infinity=True)


def values(scalars):
    return st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
                        max_leaves=12)


def stdlib(value) -> str:
    """The standard library's text of a value: NaN and Infinity as it writes them, keys in their order."""
    return json.dumps(value, ensure_ascii=False)


@settings(max_examples=150, deadline=None)
@given(values(SCALARS))
def test_without_floats_the_bytes_are_the_standard_librarys_compact_ones(value):
    # Escaping, Unicode as given, key order: byte for byte what json.dumps writes with compact separators.
    assert json_codec.dumps(value) == json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    assert json_codec.line(value) == json_codec.dumps(value) + b"\n"


@settings(max_examples=150, deadline=None)
@given(values(SCALARS | FLOATS))
def test_what_is_written_reads_back_as_the_same_value(value):
    written = json_codec.dumps(value)
    assert stdlib(json.loads(written)) == stdlib(value)  # NaN stays NaN, never null; big ints stay ints
    assert stdlib(json_codec.loads(written)) == stdlib(value)


@settings(max_examples=150, deadline=None)
@given(values(SCALARS | FLOATS), st.booleans())
def test_what_the_standard_library_wrote_reads_as_it_read_it(value, ascii_only):
    text = json.dumps(value, ensure_ascii=ascii_only)
    assert stdlib(json_codec.loads(text.encode("utf-8"))) == stdlib(json.loads(text))
    assert stdlib(json_codec.loads(text)) == stdlib(json.loads(text))


def test_integers_beyond_64_bits_read_as_integers_not_floats():
    big = 123456789012345678901234567890
    for number in (big, -big, 2**64, -(2**63) - 1):
        row = parse_line("f.jsonl", 1, json.dumps({"id": number}).encode()).row
        assert row == {"id": number} and type(row["id"]) is int
        assert json_codec.dumps(row) == f'{{"id":{number}}}'.encode()
    assert json_codec.loads(b"[1e19, 2.5]") == [1e19, 2.5]  # a large float stays a float


def test_nan_and_infinity_read_and_written_as_the_standard_library_does():
    line = b'{"id": 1, "score": NaN, "hi": Infinity, "lo": -Infinity, "none": null}\n'
    row = parse_line("f.jsonl", 1, line).row
    assert math.isnan(row["score"]) and row["hi"] == math.inf and row["lo"] == -math.inf
    assert json_codec.dumps(row) == b'{"id":1,"score":NaN,"hi":Infinity,"lo":-Infinity,"none":null}'
    assert json_codec.dumps({"x": None, "y": 1.5}) == b'{"x":null,"y":1.5}'  # a plain null is not one


def test_keys_that_are_not_strings_deep_nesting_and_datetimes_as_the_standard_library_wrote_them():
    odd = {1: "a", 2.5: "b", True: "c", None: "d"}
    assert json_codec.dumps(odd) == json.dumps(odd, separators=(",", ":")).encode()
    deep: list = []
    node = deep
    for _ in range(400):  # orjson stops at 254 levels
        node.append([])
        node = node[0]
    assert json_codec.dumps(deep) == json.dumps(deep, separators=(",", ":")).encode()
    when = {"at": datetime.datetime(2024, 5, 1, 12, 30), "day": datetime.date(2024, 5, 1)}
    assert json_codec.dumps(when) == b'{"at":"2024-05-01 12:30:00","day":"2024-05-01"}'  # str(), as default=str gave


def test_rows_orjson_refuses_are_still_read_and_judged_as_before():
    surrogate = parse_line("f.jsonl", 3, b'{"text": "\\ud800 half a pair"}\n')
    assert surrogate.row is None and surrogate.error.reason == "invalid_unicode"
    pair = parse_line("f.jsonl", 4, b'{"text": "\\ud83d\\ude00"}\n')
    assert pair.row == {"text": "\U0001F600"}
    broken = parse_line("f.jsonl", 5, b'{"text": \n')
    assert broken.error.reason == "invalid_json" and "line 1 column 10" in broken.error.detail  # the stdlib's words
    bom = parse_line("f.jsonl", 6, "\ufeff{}\n".encode())
    assert bom.error.reason == "invalid_json"  # as before: a BOM inside a file of lines is no JSON


def test_a_row_read_whole_gives_its_line_as_it_was_for_the_rejects_file():
    """A JSON Lines row keeps its line as bytes (Record.data) and gives it back as text only when asked: the
    line as read, its line break (LF or CRLF) dropped, spacing and escapes as they were."""
    for ending in (b"\n", b"\r\n", b""):
        line = '{"id": 7,  "conversations": [{"from": "narrator", "value": "é \\u00e9"}]}'.encode() + ending
        record = parse_line("f.jsonl", 2, line)
        assert record.row == {"id": 7, "conversations": [{"from": "narrator", "value": "é é"}]}
        assert record.raw is None and record.data == line
        assert record.raw_text() == line.decode().rstrip("\r\n")
