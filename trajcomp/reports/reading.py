"""Reading a report file: checked against the schema, key by key; schema 1 (written before the schema
had a version: the same sections, no histograms) converted, its missing sections None."""

from __future__ import annotations

import json
import math
import types
from dataclasses import fields, is_dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Union, get_args, get_origin, get_type_hints

from .schema import SCHEMA_VERSION, NotAReport, Report


def load(path: Path) -> Report:
    """A report file of any schema version; NotAReport (naming the file) when it cannot be read as one."""
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as exc:
        raise NotAReport(f"{path}: cannot read it ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise NotAReport(f"{path}: not a trajcomp report (not UTF-8 text)") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise NotAReport(f"{path}: not a trajcomp report (not valid JSON: {exc})") from None
    try:
        return read_report(data, "report")
    except NotAReport as exc:
        raise NotAReport(f"{path}: {exc}") from None


def read_report(data: Any, where: str = "report") -> Report:
    """A Report from parsed JSON: schema 2 as written, schema 1 (no schema_version) converted."""
    if not isinstance(data, dict):
        raise NotAReport(f"not a trajcomp report (a JSON {_json_type(data)}, not an object)")
    version = data.get("schema_version", 1)
    if version not in (1, SCHEMA_VERSION):
        raise NotAReport(f"a report of schema version {version!r}; this trajcomp reads versions 1 to {SCHEMA_VERSION}")
    # Every compress report has both; without them its figures would read as zeros, not as missing.
    if not all(isinstance(data.get(s), dict) for s in ("summary", "tokens")):
        stats = "files" in data and "tokens_before" in data
        raise NotAReport("the output of trajcomp stats, not a compress report" if stats
                         else "not a trajcomp report (no 'summary' and 'tokens' sections)")
    if version == 1:
        data = {k: v for k, v in data.items() if k in _V1_SECTIONS}  # schema 1 had no other sections
    report = checked(Report, data, where)
    report.schema_version = SCHEMA_VERSION  # converted: written again, it is a version-2 report
    if report.rows is not None and report.rows.inputs_written is None:  # written before rows in and out
        report.rows.inputs_written = report.rows.written  # then the input rows written
        if report.segments is not None:
            report.rows.written = report.segments.rows_out
    return report


_V1_SECTIONS = ("summary", "tokens", "turns", "averages", "summarization", "processing", "rows", "distribution",
                "tokenizer", "config")


def _json_type(value: Any) -> str:
    return {list: "list", str: "string", int: "number", float: "number", bool: "boolean", type(None): "null"}.get(
        type(value), type(value).__name__)


@lru_cache(maxsize=None)
def _hints(cls: type) -> dict[str, Any]:
    return get_type_hints(cls)


def checked(tp: Any, value: Any, where: str) -> Any:
    """`value` (parsed JSON) checked against the type `tp`; NotAReport names the key that is wrong."""
    origin, args = get_origin(tp), get_args(tp)
    if tp is Any:
        return value
    if origin in (Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        return checked(next(a for a in args if a is not type(None)), value, where)
    if is_dataclass(tp):
        return _build_dataclass(tp, value, where)
    if origin is list:
        _expect(isinstance(value, list), value, where, "a list")
        return [checked(args[0], v, f"{where}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        _expect(isinstance(value, dict), value, where, "an object")
        return {k: checked(args[1], v, f"{where}.{k}") for k, v in value.items()}
    if tp is float:
        _expect(isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value),
                value, where, "a number")
        return value
    if tp is int:
        _expect(isinstance(value, int) and not isinstance(value, bool), value, where, "an integer")
        return value
    if tp is bool:
        _expect(isinstance(value, bool), value, where, "true or false")
        return value
    if tp is str:
        _expect(isinstance(value, str), value, where, "a string")
        return value
    raise TypeError(f"no reader for {tp!r}")  # a schema type this function does not know: a bug here


def _build_dataclass(cls: type, value: Any, where: str) -> Any:
    _expect(isinstance(value, dict), value, where, "an object")
    hints, known = _hints(cls), {f.name for f in fields(cls)}
    kwargs = {name: checked(hints[name], value[name], f"{where}.{name}") for name in known if name in value}
    if "extra" in known:  # keys the schema does not name are kept as they are
        kwargs["extra"] = {k: v for k, v in value.items() if k not in known}
    return cls(**kwargs)


def _expect(ok: bool, value: Any, where: str, kind: str) -> None:
    if not ok:
        shown = json.dumps(value)
        shown = shown if len(shown) <= 40 else shown[:37] + "..."
        raise NotAReport(f"{where} is {shown}, not {kind}")


