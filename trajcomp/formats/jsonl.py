"""JSON Lines: one JSON object per line, read and written as a stream."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import IO, Any, Iterable, Iterator, Sequence

from ..core import json_codec
from ..core.dialects.rows import RowError
from .base import AppendedPart, AtomicFile, Format, PartWriter, Record, StreamPart, concat_files

# JSON may escape half of a surrogate pair ("\ud800") that no UTF-8 file can hold: such a row
# could not be written, so it is rejected. The regex keeps the costly check to rows that need it.
SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def unicode_error(row: Any) -> RowError | None:
    try:
        json.dumps(row, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as exc:
        return RowError("invalid_unicode", f"holds an unpaired surrogate ({exc.object[exc.start:exc.end]!a}), not valid Unicode")
    return None


def parse_line(source: str, number: int, data: bytes) -> Record:
    row = json_codec.loads_fast(data)
    if type(row) is dict:  # the common row: its text is kept as bytes, decoded only for a reject (Record.data)
        return Record(source, number, None, row=row, data=data)
    return _parse_slowly(source, number, data)


def _parse_slowly(source: str, number: int, data: bytes) -> Record:
    """A line orjson refused or read otherwise than the standard library, or one that is not an object."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raw = data.decode("utf-8", errors="backslashreplace").rstrip("\r\n")
        return Record(source, number, raw, error=RowError("invalid_utf8", f"not UTF-8 at byte {exc.start}"))
    raw = text.rstrip("\r\n")
    try:
        row, slow = json_codec.loads_checked(data, raw)
    except ValueError as exc:
        return Record(source, number, raw, error=RowError("invalid_json", f"not valid JSON: {exc}"))
    # Only a line orjson refused may escape half a surrogate pair: the others skip the search (0.2 ms a row).
    if slow and SURROGATE_ESCAPE.search(raw) and (error := unicode_error(row)) is not None:
        return Record(source, number, raw, error=error)
    return as_record(source, number, raw, row)


def as_record(source: str, number: int, raw: str, row: Any) -> Record:
    if not isinstance(row, dict):
        kind = type(row).__name__
        return Record(source, number, raw, error=RowError("not_an_object", f"the row is a JSON {kind}, not an object"))
    return Record(source, number, raw, row=row)


def read_lines(source: str, handle: Iterable[bytes], first: int = 1) -> Iterator[Record]:
    """Records of a binary stream of JSON Lines, its first line numbered `first`; blank lines are
    skipped (they are not rows)."""
    for number, data in enumerate(handle, first):
        if data and not data.isspace():  # not `data.strip()`, a copy of the line (~20 us a 43 KB row)
            yield parse_line(source, number, data)


def part_ranges(path: Path, rows: int, skip: int = 0) -> Iterator[tuple[int, int, int]]:
    """(first byte, end byte, first line number) of each run of `rows` records of a plain JSON Lines
    file after its first `skip` records, the last maybe shorter: the lines a part of `rows` input
    rows reads, found without parsing a row or copying a line (a blank line is no record, as in
    read_lines, and goes with the part after it)."""
    with open(path, "rb") as handle:
        yield from _ranges(handle, rows, skip)


_BLANK = frozenset(b" \t\n\r\x0b\x0c")  # what bytes.strip() and bytes.isspace() take for whitespace
_CHUNK = 1 << 20
# The buffer lines are read through: with the default 8 KiB, a line of an agent row (tens of KB) is put
# together from several reads (22 us a 43 KB row to iterate, 8 us with 1 MiB; scripts/bench_main_cpu.py).
READ_BUFFER = 1 << 20


def _ranges(handle: IO[bytes], rows: int, skip: int = 0) -> Iterator[tuple[int, int, int]]:
    start = offset = count = 0  # offset: where the chunk begins in the file
    first = number = 1
    goal = skip or rows  # records to the next boundary: the skipped ones first, as one range not given
    blank = True  # the current line, so far, is whitespace only (read_lines: `not data.strip()`)
    while chunk := handle.read(_CHUNK):
        pos = 0
        while pos < len(chunk):
            newline = chunk.find(b"\n", pos)
            stop = newline + 1 if newline >= 0 else len(chunk)
            blank = blank and chunk[pos] in _BLANK and chunk[pos:stop].isspace()  # a line rarely starts blank
            if newline < 0:  # the line goes on in the next chunk
                break
            if not blank:
                count += 1
                if count == goal:
                    if not skip:
                        yield start, offset + stop, first
                    start, first, count, goal, skip = offset + stop, number + 1, 0, rows, 0
            pos, number, blank = stop, number + 1, True
        offset += len(chunk)
    count += not blank  # a last line without its newline
    if count and not skip:
        yield start, offset, first


def read_range(path: Path, start: int, end: int, first: int) -> Iterator[Record]:
    """The records of bytes [start, end) of a plain JSON Lines file whose line `first` begins at `start`:
    the same Records, line numbers and errors as `JSONL.read` gives for those lines."""
    with open(path, "rb", buffering=READ_BUFFER) as handle:
        handle.seek(start)
        yield from read_lines(str(path), _lines_within(handle, end - start), first)


def _lines_within(handle: IO[bytes], size: int) -> Iterator[bytes]:
    while size > 0 and (data := handle.readline()):
        size -= len(data)
        yield data


def dumps(row: Any) -> bytes:
    return json_codec.line(row)


def encode_rows(rows: Iterable[dict[str, Any]]) -> bytes:
    return b"".join(dumps(row) for row in rows)


class JsonlFormat(Format):
    suffix = ".jsonl"
    splits = True
    seamless = True
    concatenates = True

    def read(self, path: Path) -> Iterator[Record]:
        with open(path, "rb", buffering=READ_BUFFER) as handle:
            yield from read_lines(str(path), handle)

    def spans(self, path: Path, rows: int, skip: int = 0) -> Iterator[tuple[int, int, int]]:
        return part_ranges(path, rows, skip)

    def read_span(self, path: Path, span: tuple) -> Iterator[Record]:
        return read_range(path, *span)

    def write_part(self, path: Path, rows: Sequence[dict[str, Any]], schema: Any = None) -> None:
        with AtomicFile(path) as out:
            out.handle.write(encode_rows(rows))

    def open_part(self, path: Path, schema: Any = None) -> PartWriter:
        return StreamPart(path, dumps)

    def append_part(self, path: Path, at: int) -> AppendedPart:
        return AppendedPart(path, at, dumps)

    def join(self, parts: Sequence[Path], dest: Path, schema: Any = None) -> None:
        concat_files(parts, dest)


JSONL = JsonlFormat()
