"""JSON Lines: one JSON object per line, read and written as a stream."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

from ..rows import RowError
from .base import AtomicFile, Record


def read_jsonl(path: str | Path) -> Iterator[Record]:
    """Records of a JSONL file; blank lines are skipped (they are not rows)."""
    source = str(path)
    with open(path, "rb") as handle:
        for number, data in enumerate(handle, 1):
            if data.strip():
                yield parse_line(source, number, data)


def parse_line(source: str, number: int, data: bytes) -> Record:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raw = data.decode("utf-8", errors="backslashreplace").rstrip("\r\n")
        return Record(source, number, raw, error=RowError("invalid_utf8", f"not UTF-8 at byte {exc.start}"))
    raw = text.rstrip("\r\n")
    try:
        row = json.loads(raw)
    except ValueError as exc:
        return Record(source, number, raw, error=RowError("invalid_json", f"not valid JSON: {exc}"))
    if not isinstance(row, dict):
        kind = type(row).__name__
        return Record(source, number, raw, error=RowError("not_an_object", f"the line is a JSON {kind}, not an object"))
    return Record(source, number, raw, row=row)


def dumps(row: Any) -> bytes:
    return (json.dumps(row, ensure_ascii=False) + "\n").encode("utf-8")


class JsonlWriter(AtomicFile):
    """Rows as JSON Lines, UTF-8, in the order they are written."""

    def write(self, row: dict[str, Any]) -> None:
        self.handle.write(dumps(row))
