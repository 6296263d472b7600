"""Parquet: read in record batches (never the whole file), written as one Parquet file per part and
joined row group by row group into one file.

Reading: `ParquetFile.iter_batches(batch_size)`, one batch converted to Python at a time;
Record.line is the 1-based row number and Record.raw is None (`Record.raw_text()` serialises the
row). Values keep their Python types (datetime, Decimal, bytes, ...), so a Parquet -> Parquet run
writes them back unchanged. A nanosecond timestamp / duration / time that Python's datetime
cannot hold exactly (not a whole microsecond) comes, when pandas is not installed, as an integer
number of nanoseconds (value by value; whole-microsecond values stay datetimes); both kinds write
back to the same nanosecond column exactly.
The file splits by row ranges: `spans` counts rows from the row groups' counts in the footer, and
`read_span` reads, in batches, only the row groups holding its rows (the rows of such a group before
the span are decoded but never made Python values), numbered and valued as `read` gives them.
A file that is not Parquet, or a damaged one, raises ValueError naming the file (after yielding
the rows read before the damage).

Writing a part (`write_part(path, rows, schema)`):
- with `schema` (the input's, when the input is Parquet): every column keeps its type exactly, in
  its place; columns the rows add come after them (`compression_metrics` last);
- without (JSON input): column types are inferred from the values, columns in order of first
  appearance, `compression_metrics` last;
- in both cases two columns have fixed types: `conversations` is list<struct<from: string,
  value: string>> (any other struct fields of the input's type, or of the rows' turns, kept after
  them) and `compression_metrics` is METRICS_TYPE, so a part where every value is null still gets
  the real type and all parts agree;
- the JSON comes back exactly (formats/arrow_marks.py): a column whose values do not share one shape
  (tool schemas of different keys, free-form metadata, an int in one row and a float in another, a
  string in one and an object in another, empty objects) is stored as JSON text, every value
  (strings too) as its JSON, with its field's metadata `trajcomp: json`, and read back into the same
  objects; a null standing for a key a row or a turn did not have is marked `absent` and dropped on
  reading, JSON nulls are marked `null` and kept. The turn columns and `compression_metrics` stay
  structs whose fields are marked one by one, so a reader that knows no marks sees what `datasets`
  gives (turns with every key, null where absent); only a turn's key order is the column's;
- the input's `huggingface` schema metadata (the `datasets` feature list of the input's columns,
  which older `datasets` versions apply as is and fail on a new column) is dropped; any other
  schema and field metadata is kept.

Joining: the schemas of the parts holding rows (a part with none has only a default schema) are
unified column by column (a column null in one part and typed in another takes the type; the turn
columns' fields are merged, their marks with them; a column whose parts' types differ, or whose
nulls are JSON nulls in one part and missing keys in another, becomes JSON as above, each part's
values decoded first, so however the rows were cut into parts they read back the same), every
row group of every part is conformed to that schema and written in order into one file. Same
parts, same pyarrow -> same bytes. No parts: a valid file with no rows, its schema that of
`schema` (known columns typed as above) or just `conversations`.
"""

from __future__ import annotations

import threading
from functools import cache
from pathlib import Path
from typing import Any, Iterator, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from .arrow_rows import METRICS, batch_rows, conform, to_table, unify
from .base import AtomicFile, BufferedPart, Format, Record

# Rows per batch read: a batch is made Python values before its first row goes on, so a small one lets the
# counting start at once (1024 rows of 43 KB kept the tokenizer waiting ~0.25 s), and reading is no slower
# (600 such rows: 0.10 s in batches of 64, 0.25 s in one of 1024).
BATCH_SIZE = 64
COMPRESSION = "snappy"  # pyarrow's default, readable everywhere

def _open(path: Path) -> pq.ParquetFile:
    try:
        return pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        raise ValueError(f"{path}: not a readable Parquet file: {exc}") from exc


class ParquetFormat(Format):
    suffix = ".parquet"
    splits = True

    def __init__(self, batch_size: int = BATCH_SIZE):
        self.batch_size = batch_size

    def read(self, path: Path) -> Iterator[Record]:
        with _open(path) as parquet:
            yield from _records(path, parquet.iter_batches(batch_size=self.batch_size), 0)

    def spans(self, path: Path, rows: int, skip: int = 0) -> Iterator[tuple[int, int]]:
        """(first row, end row), 0-based, of each run of `rows` rows after the first `skip`: from the row
        groups' counts alone."""
        with _open(path) as parquet:
            total = sum(_group_rows(parquet.metadata))
        for first in range(skip, total, rows):
            yield first, min(first + rows, total)

    def read_span(self, path: Path, span: tuple) -> Iterator[Record]:
        first, end = span
        with _open(path) as parquet:
            groups, start = _groups_holding(parquet.metadata, first, end)
            batches = parquet.iter_batches(batch_size=self.batch_size, row_groups=groups)
            yield from _records(path, batches, start, first, end)

    def schema(self, path: Path) -> pa.Schema:
        with _open(path) as parquet:
            return parquet.schema_arrow

    def open_part(self, path: Path, schema: pa.Schema | None = None) -> BufferedPart:
        _warm_conversion()
        return BufferedPart(self, path, schema)

    def write_part(self, path: Path, rows: Sequence[dict[str, Any]], schema: pa.Schema | None = None) -> None:
        table = to_table(rows, schema)
        with AtomicFile(path) as out:
            pq.write_table(table, out.handle, compression=COMPRESSION)

    def join(self, parts: Sequence[Path], dest: Path, schema: pa.Schema | None = None) -> None:
        if not parts:
            table = to_table([], schema)
            with AtomicFile(dest) as out:
                pq.write_table(table, out.handle, compression=COMPRESSION)
            return
        target = joined_schema(parts, schema)
        with AtomicFile(dest) as out:
            with pq.ParquetWriter(out.handle, target, compression=COMPRESSION) as writer:
                for table in conformed_row_groups(parts, target):
                    writer.write_table(table, row_group_size=table.num_rows)


def joined_schema(parts: Sequence[Path], schema: pa.Schema | None = None) -> pa.Schema:
    """The schema of Parquet parts joined into one table (see the module doc); `parts` is not empty."""
    schemas, empty = [], []
    for part in parts:
        with _open(part) as parquet:
            (schemas if parquet.metadata.num_rows else empty).append(parquet.schema_arrow)
    # A part with no rows (every row of its range rejected) has only a default schema: it
    # must not add its columns (e.g. `conversations` to an OpenAI dataset) to the others.
    return unify(schemas or empty, metrics_last=schema is None or METRICS not in schema.names)


def conformed_row_groups(parts: Sequence[Path], target: pa.Schema) -> Iterator[pa.Table]:
    """Every non-empty row group of the parts, in order, conformed to `target`."""
    for part in parts:
        with _open(part) as parquet:
            for i in range(parquet.num_row_groups):
                table = parquet.read_row_group(i)
                if table.num_rows:
                    yield conform(table, target)


def _group_rows(metadata: pq.FileMetaData) -> list[int]:
    return [metadata.row_group(i).num_rows for i in range(metadata.num_row_groups)]


def _groups_holding(metadata: pq.FileMetaData, first: int, end: int) -> tuple[list[int], int]:
    """The row groups holding any of rows [first, end), and the row the first of them begins at."""
    groups, start, position = [], 0, 0
    for i, size in enumerate(_group_rows(metadata)):
        if position < end and position + size > first:
            start = start if groups else position
            groups.append(i)
        position += size
    return groups, start


def _records(path: Path, batches: Iterator[pa.RecordBatch], position: int, first: int = 0,
             end: int | None = None) -> Iterator[Record]:
    """The Records of rows [first, end) (0-based) of `batches`, whose first row is the file's row `position`."""
    source = str(path)
    while end is None or position < end:
        try:
            batch = next(batches, None)
            if batch is None:
                return
            # A span begins and ends anywhere in a row group: only its own rows become Python values.
            skip = max(first - position, 0)
            rows = batch_rows(batch.slice(skip, None if end is None else end - position - skip))
        except (pa.ArrowException, OSError) as exc:
            raise ValueError(f"{path}: corrupt Parquet data after row {position}: {exc}") from exc
        for number, row in enumerate(rows, position + skip + 1):
            yield Record(source, number, None, row=row)
        position += batch.num_rows


PARQUET = ParquetFormat()


@cache  # once a process
def _warm_conversion() -> None:
    """pyarrow's first conversion of Python values imports pandas (~0.4 s, once a process) to ask
    whether they are a pandas object. Begun on a thread when a part opens, that import overlaps the
    part's rows instead of delaying its write: a short file's one part was written ~0.3 s later."""
    threading.Thread(target=pa.array, args=([],), name="trajcomp-arrow-warm", daemon=True).start()
