"""A JSON array of objects (`.json`, as LLaMA-Factory datasets are written).

Reading loads the whole file (JSON has no way to stream an array's elements with the standard
library); elements are handed out one at a time and dropped from memory once handed out. Record.line
is the 1-based index of the element in the array. An element that is not an object becomes a Record
with a `not_an_object` error; a file that is not JSON, or whose top level is not an array, raises
ValueError naming the file.

Writing: each part is the rows as JSON Lines (serialised exactly like `jsonl.dumps`, streamed row by
row through `open_part`, which `write_part` writes the same bytes as); joining streams
the parts line by line into `[\\n` + rows joined by `,\\n` + `\\n]\\n` (`[]\\n` when there are none).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator, Sequence

from ..core import json_codec
from .base import AtomicFile, Record
from .jsonl import SURROGATE_ESCAPE, JsonlFormat, as_record, unicode_error

JSON_TYPES = {dict: "object", list: "array", str: "string", int: "number", float: "number", bool: "boolean"}


def json_kind(value: Any) -> str:
    return "null" if value is None else JSON_TYPES.get(type(value), type(value).__name__)


class JsonArrayFormat(JsonlFormat):
    """Parts are JSON Lines like JsonlFormat's; only reading and joining differ."""

    suffix = ".json"
    splits = False  # an array is one JSON value: its elements cannot be found without parsing it
    concatenates = False  # its join adds the brackets and commas

    def spans(self, path: Path, rows: int, skip: int = 0) -> Iterator[tuple]:
        raise NotImplementedError("a JSON array does not split")

    def read_span(self, path: Path, span: tuple) -> Iterator[Record]:
        raise NotImplementedError("a JSON array does not split")

    def read(self, path: Path) -> Iterator[Record]:
        source = str(path)
        try:
            raw = Path(path).read_bytes()
            data, slow = json_codec.loads_checked(raw)  # bytes: the encoding (and a BOM) is detected
        except UnicodeDecodeError as exc:
            raise ValueError(f"{path}: not UTF-8 text (byte {exc.start}): {exc.reason}") from exc
        except ValueError as exc:
            raise ValueError(f"{path}: not valid JSON: {exc}") from exc
        if not isinstance(data, list):
            raise ValueError(
                f"{path}: the top level is a JSON {json_kind(data)}, not an array of objects "
                "(a .json input must be one array of rows; use .jsonl for one object per line)"
            )
        # Only a file orjson refused may escape half a surrogate pair (json_codec.loads_checked).
        check_unicode = slow and SURROGATE_ESCAPE.search(raw.decode("utf-8", errors="replace")) is not None
        del raw
        for index in range(len(data)):
            element, data[index] = data[index], None
            if isinstance(element, dict):
                error = unicode_error(element) if check_unicode else None
                yield Record(source, index + 1, None if error is None else json.dumps(element), row=element, error=error)
            else:
                yield as_record(source, index + 1, json.dumps(element, ensure_ascii=False), element)

    def join(self, parts: Sequence[Path], dest: Path, schema: Any = None) -> None:
        with AtomicFile(dest) as out:
            write = out.handle.write
            write(b"[")
            first = True
            for part in parts:
                with open(part, "rb") as src:
                    for line in src:  # a serialised row never holds a raw newline
                        line = line.rstrip(b"\r\n")
                        if not line.strip():
                            continue
                        write(b"\n" if first else b",\n")
                        write(line)
                        first = False
            write(b"]\n" if first else b"\n]\n")


JSON_ARRAY = JsonArrayFormat()
