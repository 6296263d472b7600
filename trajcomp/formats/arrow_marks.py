"""A column's mark: what a table needs to give back the JSON its rows held, no key added, none lost.

An Arrow column has one type for all rows, so an object lacking a key its neighbours have would read
back with that key null, and values of several shapes (tool schemas, free-form metadata) with every
shape's keys merged. The writer therefore looks at each column's values and marks the field (the
field's Arrow metadata, key MARK), and the reader undoes what the mark says:

- no mark: the values read back as they are (files of older versions have none: read as before);
- NULL: the column, or a turn field, holds JSON nulls (kept on reading);
- ABSENT: a null stands for a key the row, or the turn, did not have (dropped on reading);
- JSON: the values do not share one shape: each is stored as its JSON text, a null for a missing key
  (`null` as text is a JSON null), and read back into the same objects.

The turn columns (`conversations`, `messages`) and `compression_metrics` stay typed when turns lack
keys (as `datasets` types them, so a trainer reads the turns as structs): their fields are marked one
by one (a key JSON null in some turns and missing in others then reads back null in all: the
one case where a key is added). Any other column that does not share one shape is stored as JSON (a trainer renders a
tool schema's keys as they are; a merged schema would show keys that were never there).
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

import pyarrow as pa

from ..core.json_codec import loads
from .base import json_text

MARK = b"trajcomp"
JSON, ABSENT, NULL = b"json", b"absent", b"null"
FIELDWISE = ("conversations", "messages", "compression_metrics")
MISSING: Any = object()  # a row or turn without the key


class Conflict(Exception):
    """Nulls that are JSON nulls and nulls that stand for missing keys in one column: only JSON keeps both."""


def _kind(value: Any) -> type:
    if isinstance(value, dict):
        return dict
    return list if isinstance(value, list) else type(value)  # bool, int and float are three kinds; a tuple is a
    # map's entry (pyarrow's), never JSON: its type came with it


def uniform(values: Iterable[Any]) -> bool:
    """Whether the values (nulls aside) share one shape, which an Arrow type holds and gives back as it was:
    one kind at every position (an int and a float are two), every object with the same keys in the same
    order, none empty (Parquet stores no struct without fields)."""
    present = [v for v in values if v is not None]
    kinds = {_kind(v) for v in present}
    if len(kinds) != 1:
        return not kinds
    kind = kinds.pop()
    if kind is dict:
        keys = {tuple(v) for v in present}
        if len(keys) != 1 or not next(iter(keys)):
            return False
        return all(uniform([v[k] for v in present]) for k in next(iter(keys)))
    if kind is list:
        return uniform([item for v in present for item in v])
    return True


def null_mark(values: Sequence[Any]) -> bytes | None:
    """The mark for the nulls among `values` (MISSING for an absent key), or raise Conflict."""
    missing = any(v is MISSING for v in values)
    null = any(v is None for v in values)
    if missing and null:
        raise Conflict()
    return ABSENT if missing else NULL if null else None


def turn_mark(values: Sequence[Any]) -> bytes | None:
    """null_mark for a turn field, where JSON nulls in some turns and the key missing in others give NULL:
    the missing keys read back as nulls. That is the turns' own convention (rows typed by `datasets`
    hold every key, null where unset; the summary turn trajcomp adds has none), and it keeps the turns
    structs, which JSON text would not."""
    try:
        return null_mark(values)
    except Conflict:
        return NULL


def struct_of(t: pa.DataType) -> pa.StructType | None:
    """The struct a field-wise column's objects have: the column's own, or its lists' items'."""
    if pa.types.is_struct(t):
        return t
    if (pa.types.is_list(t) or pa.types.is_large_list(t)) and pa.types.is_struct(t.value_type):
        return t.value_type
    return None


def objects(values: Sequence[Any]) -> list[dict[str, Any]] | None:
    """The objects of a field-wise column (each row's turns, or its metrics object); None if not all are."""
    found: list[dict[str, Any]] = []
    for v in values:
        if v is None or v is MISSING:
            continue
        items = [v] if isinstance(v, dict) else v if isinstance(v, list) else None
        if items is None or not all(isinstance(item, dict) for item in items):
            return None
        found.extend(items)
    return found


def with_struct(t: pa.DataType, struct: pa.StructType) -> pa.DataType:
    if pa.types.is_struct(t):
        return struct
    make = pa.list_ if pa.types.is_list(t) else pa.large_list
    return make(t.value_field.with_type(struct))


def marked(field: pa.Field, mark: bytes | None) -> pa.Field:
    meta = {k: v for k, v in (field.metadata or {}).items() if k != MARK}
    if mark is not None:
        meta[MARK] = mark
    return field.with_metadata(meta)


def mark_of(field: pa.Field) -> bytes | None:
    return (field.metadata or {}).get(MARK)


def fieldwise_type(t: pa.DataType, found: list[dict[str, Any]]) -> pa.DataType:
    """`t` (a field-wise column's type) with each of its objects' fields marked; raise Conflict when a field
    holds nulls of both kinds or values of several shapes (then the column is stored as JSON)."""
    struct = struct_of(t)
    if struct is None:
        raise Conflict()
    fields = []
    for f in struct:
        values = [o.get(f.name, MISSING) for o in found]
        if not uniform(v for v in values if v is not MISSING):
            raise Conflict()
        fields.append(marked(f, turn_mark(values)))
    return with_struct(t, pa.struct(fields))


def json_array(values: Sequence[Any]) -> pa.Array:
    """The values as JSON text; a missing key as null."""
    return pa.array([None if v is MISSING else json_text(v) for v in values], type=pa.string())


# ---- reading --------------------------------------------------------------------------------


def _decoder(field: pa.Field):
    """How a row's value of `field` is made what the JSON held, or None when it reads as it is."""
    mark, struct = mark_of(field), struct_of(field.type)
    absent = [f.name for f in struct if mark_of(f) == ABSENT] if struct is not None and mark != JSON else []
    if mark is None and not absent:
        return None
    name = field.name

    def decode(row: dict[str, Any]) -> None:
        value = row.get(name)
        if value is None:
            if mark in (ABSENT, JSON):
                row.pop(name, None)
            return
        if mark == JSON:
            row[name] = loads(value)
            return
        if not absent:
            return
        for obj in [value] if isinstance(value, dict) else value:
            for key in absent:
                if key in obj and obj[key] is None:
                    del obj[key]

    return decode


def decoders(schema: pa.Schema) -> list:
    return [d for d in map(_decoder, schema) if d is not None]


def decode_rows(rows: list[dict[str, Any]], schema: pa.Schema) -> list[dict[str, Any]]:
    """The rows read from a table of `schema`, as the JSON they were written from (see the module doc)."""
    steps = decoders(schema)
    if steps:
        for row in rows:
            for step in steps:
                step(row)
    return rows


def column_values(field: pa.Field, values: list[Any]) -> list[Any]:
    """A column's values as its rows held them, MISSING where a row had no such key."""
    rows = [{field.name: v} for v in values]
    decode_rows(rows, pa.schema([field]))
    return [row.get(field.name, MISSING) for row in rows]
