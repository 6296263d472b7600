"""Rows as Arrow tables and back: the fixed types of `conversations` and `compression_metrics`, types
inferred or kept from the input's schema, and schemas unified across parts (parquet.py says how)."""

from __future__ import annotations

from typing import Any, Sequence

import pyarrow as pa

from .arrow_marks import (
    ABSENT, FIELDWISE, JSON, MISSING, NULL, Conflict, column_values, decode_rows, fieldwise_type, json_array,
    mark_of, marked, null_mark, objects, struct_of, uniform, with_struct,
)

CONVERSATIONS = "conversations"
METRICS = "compression_metrics"

TURN_TYPE = pa.struct([pa.field("from", pa.string()), pa.field("value", pa.string())])
CONVERSATIONS_TYPE = pa.list_(TURN_TYPE)
REGION_TYPE = pa.struct(
    [pa.field("start_idx", pa.int64()), pa.field("end_idx", pa.int64()), pa.field("turns_count", pa.int64())]
)
FLOOR_TYPE = pa.struct(
    [
        pa.field("turns", pa.list_(pa.list_(pa.int64()))),
        pa.field("turn_tokens", pa.int64()),
        pa.field("summary_tokens", pa.int64()),
        pa.field("tokens", pa.int64()),
        pa.field("over_by", pa.int64()),
    ]
)
# The `compression_metrics` object of RowMetrics.to_dict(), field for field, in the same order.
METRICS_TYPE = pa.struct(
    [
        pa.field("original_tokens", pa.int64()),
        pa.field("compressed_tokens", pa.int64()),
        pa.field("tokens_saved", pa.int64()),
        pa.field("compression_ratio", pa.float64()),
        pa.field("original_turns", pa.int64()),
        pa.field("compressed_turns", pa.int64()),
        pa.field("turns_removed", pa.int64()),
        pa.field("compression_region", REGION_TYPE),  # null when nothing was summarized
        pa.field("was_compressed", pa.bool_()),
        pa.field("still_over_limit", pa.bool_()),
        pa.field("skipped_under_target", pa.bool_()),
        pa.field("outcome", pa.string()),
        pa.field("summarization_api_calls", pa.int64()),
        pa.field("summarization_errors", pa.int64()),
        pa.field("summary_source", pa.string()),
        pa.field("error", pa.string()),
        pa.field("passes", pa.int64()),
        pa.field("cannot_fit", pa.bool_()),
        pa.field("identifier_retention", pa.float64()),  # null when nothing was summarized
        pa.field("human_turns_cut", pa.int64()),
        pa.field("assistant_tokens_kept", pa.float64()),  # null when the row has no assistant tokens
        pa.field("status", pa.string()),
        pa.field("cannot_fit_reason", FLOOR_TYPE),  # null when the row can fit (core/fit.py Floor.to_dict)
    ]
)

DROPPED_METADATA = (b"huggingface",)

# What converting Python values to an arrow type raises when they do not fit it.
_CONVERT_ERRORS = (pa.ArrowException, ValueError, TypeError, OverflowError, KeyError)


class _Untypable(Exception):
    """Values for which no arrow type can be found."""


# ---- reading ----------------------------------------------------------------------------------


def _is_ns(t: pa.DataType) -> bool:
    return (pa.types.is_timestamp(t) or pa.types.is_duration(t) or pa.types.is_time64(t)) and t.unit == "ns"


def _without_ns(t: pa.DataType, unit: str | None) -> pa.DataType:
    """`t` with every nanosecond temporal type made microseconds (`unit='us'`) or int64 (None)."""
    if _is_ns(t):
        if unit is None:
            return pa.int64()
        if pa.types.is_timestamp(t):
            return pa.timestamp(unit, t.tz)
        return pa.duration(unit) if pa.types.is_duration(t) else pa.time64(unit)
    if pa.types.is_struct(t):
        return pa.struct([f.with_type(_without_ns(f.type, unit)) for f in t])
    if pa.types.is_list(t):
        return pa.list_(t.value_field.with_type(_without_ns(t.value_type, unit)))
    if pa.types.is_large_list(t):
        return pa.large_list(t.value_field.with_type(_without_ns(t.value_type, unit)))
    if pa.types.is_fixed_size_list(t):
        return pa.list_(t.value_field.with_type(_without_ns(t.value_type, unit)), t.list_size)
    if pa.types.is_map(t):
        key, item = _without_ns(t.key_type, unit), _without_ns(t.item_type, unit)
        return pa.map_(t.key_field.with_type(key), t.item_field.with_type(item))
    return t


def _pick(t: pa.DataType, exact: Any, micro: Any) -> Any:
    """One value from its integer-nanosecond and its truncated-microsecond readings: the
    microsecond one (a datetime / timedelta / time) wherever no nanoseconds were cut off."""
    if exact is None:
        return None
    if _is_ns(t):
        return micro if exact % 1000 == 0 else exact
    if pa.types.is_struct(t):
        return {f.name: _pick(f.type, exact[f.name], micro[f.name]) for f in t}
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return [_pick(t.value_type, e, m) for e, m in zip(exact, micro)]
    if pa.types.is_map(t):
        return [(_pick(t.key_type, e[0], m[0]), _pick(t.item_type, e[1], m[1])) for e, m in zip(exact, micro)]
    return micro


def _values(column: pa.Array | pa.ChunkedArray) -> list[Any]:
    """The column's values as Python objects; nanosecond temporals that Python's datetime cannot
    hold exactly come as integer nanoseconds, value by value (so not depending on the batching)."""
    try:
        return column.to_pylist()
    except ValueError:  # "Nanosecond resolution temporal type ... is not safely convertible"
        exact = column.cast(_without_ns(column.type, None)).to_pylist()
        micro = column.cast(_without_ns(column.type, "us"), safe=False).to_pylist()
        return [_pick(column.type, e, m) for e, m in zip(exact, micro)]


def batch_rows(batch: pa.RecordBatch) -> list[dict[str, Any]]:
    """The batch's rows as the JSON they were written from (arrow_marks.py)."""
    try:
        rows = batch.to_pylist()
    except ValueError:
        columns = [_values(column) for column in batch.columns]
        rows = [dict(zip(batch.schema.names, values)) for values in zip(*columns)]
    return decode_rows(rows, batch.schema)


# ---- typing the columns written -------------------------------------------------------------


def _has_empty_struct(t: pa.DataType) -> bool:
    if pa.types.is_struct(t):
        return t.num_fields == 0 or any(_has_empty_struct(f.type) for f in t)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return _has_empty_struct(t.value_type)
    if pa.types.is_map(t):
        return _has_empty_struct(t.key_type) or _has_empty_struct(t.item_type)
    return False


def _infer_type(values: list[Any]) -> pa.DataType:
    try:
        t = pa.array(values).type
    except _CONVERT_ERRORS as exc:
        raise _Untypable(str(exc)) from exc
    if _has_empty_struct(t):
        raise _Untypable("an object with no fields")
    return t


def _widen(t: pa.DataType, values: list[Any]) -> pa.DataType:
    """`t` with a field added to each struct for every key the values hold that it lacks."""
    if pa.types.is_struct(t):
        objects = [v for v in values if isinstance(v, dict)]
        if not objects:
            return t
        fields = [f.with_type(_widen(f.type, [o.get(f.name) for o in objects])) for f in t]
        known = set(t.names)
        extra: dict[str, None] = {}
        for o in objects:
            extra.update((k, None) for k in o if k not in known)
        fields += [pa.field(k, _infer_type([o.get(k) for o in objects])) for k in extra]
        return pa.struct(fields)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        items = [item for v in values if isinstance(v, (list, tuple)) for item in v]
        value_type = _widen(t.value_type, items)
        if value_type.equals(t.value_type):
            return t
        make = pa.list_ if pa.types.is_list(t) else pa.large_list
        return make(t.value_field.with_type(value_type))
    return t


def _built(values: list[Any], t: pa.DataType | None) -> pa.Array | pa.ChunkedArray:
    """The values as type `t` (widened for keys it lacks) or, when they do not fit it, inferred."""
    if t is not None:
        try:
            return pa.array(values, type=_widen(t, values))
        except (_Untypable, *_CONVERT_ERRORS):
            pass
    return pa.array(values, type=_infer_type(values))


def _kept(values: list[Any], t: pa.DataType | None) -> pa.Array | None:
    """The values in the input's own type `t`, which they were read from (so they read back the same), or
    None when it does not hold them as it is."""
    if t is None or pa.types.is_null(t) or not _widen(t, values).equals(t):
        return None
    try:
        return pa.array(values, type=t)
    except _CONVERT_ERRORS:
        return None


def _column(field: pa.Field, values: list[Any], t: pa.DataType | None) -> tuple[pa.Field, pa.Array | pa.ChunkedArray]:
    """A column's field (marked, arrow_marks.py) and array; `values` hold MISSING where a row lacks the key."""
    present = [None if v is MISSING else v for v in values]
    try:
        mark = null_mark(values)
        if field.name in FIELDWISE:
            found = objects(values)
            if found is None:
                raise Conflict()
            array = _built(present, t)
            return marked(field.with_type(fieldwise_type(array.type, found)), mark), array
        array = _kept(present, t)
        if array is None:
            if not uniform(present):
                raise Conflict()
            array = _built(present, t)
        if _has_empty_struct(array.type):
            raise _Untypable("an object with no fields")
        return marked(field.with_type(array.type), mark), array
    except (Conflict, _Untypable):
        return marked(field.with_type(pa.string()), JSON), json_array(values)


def conversations_type(input_type: pa.DataType | None = None) -> pa.DataType:
    """list<struct<from: string, value: string, ...>>, keeping any other fields of the input's turns."""
    extra: list[pa.Field] = []
    if input_type is not None and (
        pa.types.is_list(input_type) or pa.types.is_large_list(input_type) or pa.types.is_fixed_size_list(input_type)
    ):
        if pa.types.is_struct(input_type.value_type):
            extra = [f for f in input_type.value_type if f.name not in ("from", "value")]
    return pa.list_(pa.struct([*TURN_TYPE, *extra])) if extra else CONVERSATIONS_TYPE


def _known_type(name: str, input_type: pa.DataType | None) -> pa.DataType | None:
    if name == CONVERSATIONS:
        return conversations_type(input_type)
    if name == METRICS:
        return METRICS_TYPE
    return input_type


def _metadata(schema: pa.Schema | None) -> dict[bytes, bytes] | None:
    if schema is None or not schema.metadata:
        return None
    kept = {k: v for k, v in schema.metadata.items() if k not in DROPPED_METADATA}
    return kept or None


def _metrics_last(names: list[str]) -> list[str]:
    return [n for n in names if n != METRICS] + ([METRICS] if METRICS in names else [])


def to_table(rows: Sequence[dict[str, Any]], schema: pa.Schema | None = None) -> pa.Table:
    """The rows, in order, as a table typed as the module doc describes."""
    seen: dict[str, None] = {}
    for row in rows:
        seen.update(dict.fromkeys(row))
    fields: list[pa.Field] = []
    arrays: list[pa.Array | pa.ChunkedArray] = []

    def add(field: pa.Field, t: pa.DataType | None) -> None:
        typed, array = _column(field, [row.get(field.name, MISSING) for row in rows], t)
        fields.append(typed)
        arrays.append(array)

    given = set()
    if schema is not None:
        for field in schema:
            given.add(field.name)
            add(field, _known_type(field.name, field.type))
    new = _metrics_last([n for n in seen if n not in given])
    if schema is None and not new:
        new = [CONVERSATIONS]
    for name in new:
        add(pa.field(name, pa.null()), _known_type(name, None))
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields, metadata=_metadata(schema)))


# ---- joining ----------------------------------------------------------------------------------


def _joined_mark(marks: Sequence[bytes | None], turn_field: bool = False) -> bytes | None:
    kinds = set(marks) - {None}
    if JSON in kinds or {ABSENT, NULL} <= kinds and not turn_field:
        raise Conflict()
    if {ABSENT, NULL} <= kinds:  # a turn field: as arrow_marks.turn_mark
        return NULL
    return ABSENT if ABSENT in kinds else NULL if NULL in kinds else None


def _joined_struct(types: Sequence[pa.DataType]) -> pa.DataType:
    """A field-wise column's type over parts: their objects' fields merged, each marked for all parts."""
    structs = [struct_of(t) for t in types]
    if any(s is None for s in structs) or len({t.id for t in types}) != 1:
        raise Conflict()
    names: dict[str, None] = {}
    for s in structs:
        names.update(dict.fromkeys(s.names))
    fields = []
    for name in names:
        fields.append(_joined_field(name, [s.field(name) for s in structs if name in s.names],
                                    any(name not in s.names for s in structs), strict=True))
    return with_struct(types[0], pa.struct(fields))


def _joined_field(name: str, candidates: Sequence[pa.Field], missing: bool, strict: bool = False) -> pa.Field:
    """The field of a column over parts: one type and one mark that hold every part's values exactly,
    else JSON (raised as Conflict where `strict`: inside a field-wise column)."""
    try:
        mark = _joined_mark([mark_of(c) for c in candidates] + ([ABSENT] if missing else []), strict)
        types = [c.type for c in candidates if not pa.types.is_null(c.type)]
        if not types:
            t = pa.null()
        elif name in FIELDWISE and not strict:
            t = _joined_struct(types)
        elif all(x.equals(types[0]) for x in types):
            t = types[0]
        else:
            raise Conflict()
        return marked(candidates[0].with_type(t), mark)
    except Conflict:
        if strict:
            raise
        return marked(candidates[0].with_type(pa.string()), JSON)


def unify(schemas: Sequence[pa.Schema], metrics_last: bool) -> pa.Schema:
    """The schema of the parts joined: each column's type and mark as _joined_field finds them."""
    names: dict[str, None] = {}
    for s in schemas:
        names.update(dict.fromkeys(s.names))
    order = _metrics_last(list(names)) if metrics_last else list(names)
    fields = []
    for name in order:
        present = [s.field(name) for s in schemas if name in s.names]
        fields.append(_joined_field(name, present, len(present) < len(schemas)))
    return pa.schema(fields, metadata=schemas[0].metadata)


def _conform_column(column: pa.ChunkedArray, source: pa.Field, target: pa.Field) -> pa.Array | pa.ChunkedArray:
    t = target.type
    if mark_of(target) == JSON:
        if mark_of(source) == JSON:
            return column
        return json_array(column_values(source, _values(column)))
    if column.type.equals(t):
        return column
    try:
        return column.cast(t)
    except _CONVERT_ERRORS:
        return pa.array(_values(column), type=t)


def conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    columns = [
        _conform_column(table.column(f.name), table.schema.field(f.name), f)
        if f.name in table.column_names
        else pa.nulls(table.num_rows, f.type)
        for f in schema
    ]
    return pa.Table.from_arrays(columns, schema=schema)
