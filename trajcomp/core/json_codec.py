"""The project's one JSON serializer: every row, reject, summary example, cache line and batch line is
parsed and written here, so the same value gives the same bytes whatever engine, worker or resume
wrote it.

orjson does the work (measured on the SWE-like rows: parse 0.093 against the standard library's 0.28 ms a
row, write 0.027 against 0.64; pyproject.toml). Its output is compact (`,` and `:` without spaces),
UTF-8 as it came in (no \\u escapes but the control characters JSON requires), keys in their order.
Where orjson would give another value than the standard library did, the standard library answers
instead, with the same separators, so every row that read before still reads, with the same values:
- reading: NaN and Infinity (orjson rejects them), an unpaired surrogate escape (rejected by both, the
  row's reader then says why) and integers beyond 64 bits, which orjson reads as floats without a word
  (found by a walk of the parsed row for floats that large, far cheaper than parsing);
- writing: dict keys that are not strings, integers beyond 64 bits, nesting deeper than orjson's 254
  levels (it raises on all three) and NaN or Infinity, which orjson would write as null.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

# default=str: values JSON has no type for (Parquet's dates and decimals) as their text. Datetimes and
# dataclasses go through it too, as the standard library wrote them: orjson would write its own forms.
_OPTIONS = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS
_LINE = _OPTIONS | orjson.OPT_APPEND_NEWLINE
_BIG = 9.2e18  # just under 2**63: orjson reads an integer beyond 64 bits as a float at least this large


def dumps(value: Any) -> bytes:
    """`value` as compact UTF-8 JSON."""
    try:
        out = orjson.dumps(value, default=str, option=_OPTIONS)
    except orjson.JSONEncodeError:
        return _stdlib(value).encode("utf-8")
    # orjson writes NaN and Infinity as null: only a row whose text holds a null may hold one.
    if b"null" in out and _odd_float(value):
        return _stdlib(value).encode("utf-8")
    return out


def line(value: Any) -> bytes:
    """`value` as one line of JSON Lines: dumps(value) and a newline (a row never holds a raw newline)."""
    try:
        out = orjson.dumps(value, default=str, option=_LINE)
    except orjson.JSONEncodeError:
        return dumps(value) + b"\n"
    if b"null" in out and _odd_float(value):
        return dumps(value) + b"\n"
    return out


def text(value: Any) -> str:
    """dumps(value) as a str."""
    return dumps(value).decode("utf-8")


def loads(data: bytes | str) -> Any:
    """The value of JSON text, as the standard library reads it; ValueError (its message) when it is not JSON."""
    return loads_checked(data)[0]


def loads_fast(data: bytes) -> Any:
    """The value of JSON text where orjson reads it as the standard library does, else None (refused, or
    a float the standard library reads otherwise: loads_checked then says what it is)."""
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    return None if _odd_float(value) else value


def loads_checked(data: bytes | str, text: str | None = None) -> tuple[Any, bool]:
    """(value, whether the standard library read it) of `data`, or of `text` where the standard library
    reads (the same JSON as a str: a BOM is an error in a str, not in bytes). Only text orjson refused may
    hold an unpaired surrogate escape, so only then need a reader look for one."""
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError:
        pass  # the standard library's error (line, column, reason), or its reading of NaN and others
    else:
        if not _odd_float(value):
            return value, False
    return json.loads(data if text is None else text), True


def canonical(value: Any) -> bytes:
    """`value` as sorted, compact JSON for hashing: cache keys and checksums. These bytes are a stored
    contract (caches written by earlier versions are looked up and checked by them), so they stay the
    standard library's, float forms included; they are made once a summary, never once a row."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode("utf-8")


def _stdlib(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def _odd_float(value: Any) -> bool:
    """Whether `value` holds a float that is NaN, infinite or at least 2**63 in size (what a JSON integer
    beyond 64 bits becomes in orjson): strings, most of a row, are passed over at once."""
    stack = [[value]]
    while stack:
        node = stack.pop()
        for item in node.values() if type(node) is dict else node:
            kind = type(item)
            if kind is str:
                continue
            if kind is dict or kind is list or kind is tuple:
                stack.append(item)
            elif kind is float and not -_BIG < item < _BIG:  # NaN fails both comparisons
                return True
    return False
