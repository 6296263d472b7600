"""Output rows paired with the input rows they came from, by their content alone (nothing is added to rows).

A compress output keeps its input's order and only drops rows (rejects, sampling, shards, --limit);
a written row keeps every field but its turns as they were, and its turns are the input's with one
span, the region, replaced by the summary turn: the protected head before it (a system turn may
gain the notice at its end), the tail after it verbatim (its first user turn may open with the
summary). When the output row's metrics count stubs (compression.prune's `pruned_outputs`), a tool
turn outside the region may hold a stub instead of its output: only then may a tool turn's output
differ, every other field of it (role, tool_call_id, name) still equal. So each output row is
paired with the next input row, in order, whose other fields are equal and whose turns give the
output's around one region (or turn for turn, when pruning alone fit it). A row no later input row gives is an
error: the input is not the one the output was made from.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

from ...core.planning.pruning import response_ids
from ...core.dialects.rows import RowError, RowSchema, Turn
from ...formats.base import json_text

METRICS_KEY = "compression_metrics"
_TEXT_KEYS = ("value", "content")  # a turn's output: the one field of a tool turn a stub changes


class PairingError(ValueError):
    """An input that does not match the output: other rows, or another order."""


@dataclass(frozen=True)
class Shape:
    """Where an output row's summary turn stands (`summary` None: the row is unchanged) and, when
    the row's metrics say so, the region of input turns it replaced and how many turns the input had."""

    summary: int | None
    region: tuple[int, int] | None = None
    original_turns: int | None = None
    pruned: bool = False  # its metrics count stubs: a tool turn's output may differ from the input's


@dataclass(frozen=True)
class Paired:
    """An input row that an output row came from: where it is (file and line, as compress's rejects and
    report name rows), the row, and the region."""

    where: str
    row: dict[str, Any]
    region: tuple[int, int] | None  # [start, end) of the input turns the summary replaced


def turns_of(row: Any, schema: RowSchema) -> tuple[list[Any], list[Turn]] | None:
    """A row's native turns and their planner view; None when the row is no valid trajectory."""
    try:
        adapter = schema.adapter(row)
        native = adapter.native_turns(row)
        return native, adapter.turns(native)
    except RowError:
        return None


def shape_for(row: dict[str, Any], schema: RowSchema, prefix: str) -> Shape:
    """`shape_of` an output row, its turns read only when it has no metrics."""
    metrics = row.get(METRICS_KEY)
    turns = [] if isinstance(metrics, dict) else (turns_of(row, schema) or ([], []))[1]
    return shape_of(metrics, turns, prefix)


def shape_of(metrics: dict[str, Any] | None, turns: list[Turn], prefix: str) -> Shape:
    """The output row's shape: from its metrics when it has them, else the first turn opening with the prefix."""
    if isinstance(metrics, dict):
        region, pruned = metrics.get("compression_region"), bool(metrics.get("pruned_outputs"))
        if metrics.get("outcome") != "compressed" or not isinstance(region, dict):
            return Shape(None, pruned=pruned)
        span = (region["start_idx"], region["end_idx"])
        return Shape(span[0], span, metrics.get("original_turns"), pruned)
    found = next((i for i, t in enumerate(turns) if t.text.startswith(prefix)), None)
    return Shape(found)


def _others(row: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k not in (key, METRICS_KEY)}


def region_of(out: dict[str, Any], shape: Shape, source: Any, schema: RowSchema) -> tuple[int, int] | None | bool:
    """The input turns `out`'s summary replaced when `source` is the row it came from; None when it
    came from `source` unchanged; False when it did not come from `source`."""
    if not isinstance(source, dict) or not _same(_others(out, _key(out)), _others(source, _key(out))):
        return False
    read_out, read_in = turns_of(out, schema), turns_of(source, schema)
    if read_out is None or read_in is None:
        return False
    (o_native, o_turns), (i_native, i_turns) = read_out, read_in
    if o_native == i_native:  # unchanged (a row without metrics may hold an earlier run's summary turn)
        return None if shape.region is None else False
    if shape.summary is None:  # unchanged but for stubs, or not from `source`
        return None if shape.region is None and _same_turns(o_native, i_native, o_turns, i_turns, shape.pruned) else False
    k, tail = shape.summary, len(o_native) - shape.summary - 1
    tail_start = len(i_native) - tail
    if tail_start <= k or not _same_turns(o_native[k + 1:], i_native[tail_start:], o_turns[k + 1:],
                                          i_turns[tail_start:], shape.pruned):
        return False
    if shape.original_turns is not None and shape.original_turns != len(i_native):
        return False
    if not all(_same_head(o, i, on, inn, shape.pruned) for o, i, on, inn in zip(o_turns[:k], i_turns, o_native, i_native)):
        return False
    merged = i_turns[tail_start - 1].role == "human" and o_turns[k].text.endswith("\n\n" + i_turns[tail_start - 1].text)
    end = tail_start - 1 if merged and tail_start - 1 > k else tail_start
    if shape.region is not None and shape.region != (k, end):
        return False
    return (k, end)


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    # Equal, or equal as JSON text: a NaN read twice is two floats that are not equal to each other.
    return a == b or json_text(a) == json_text(b)


def _key(row: dict[str, Any]) -> str:
    return "messages" if isinstance(row.get("messages"), list) else "conversations"


def _same_head(out: Turn, inp: Turn, out_native: Any, in_native: Any, pruned: bool) -> bool:
    # A head turn is the input's, or (the first system turn) the input's text with the notice after it,
    # or, in a pruned row, a tool turn whose output may be a stub.
    return out_native == in_native or (out.role == inp.role == "system" and out.text.startswith(inp.text)) or (
        pruned and _stub_of(out, inp, out_native, in_native))


def _same_turns(out_native: list, in_native: list, out_turns: list[Turn], in_turns: list[Turn], pruned: bool) -> bool:
    """The same turns, but that in a pruned row a tool turn may hold a stub of its output."""
    return out_native == in_native or pruned and len(out_native) == len(in_native) and all(
        o == i or _stub_of(a, b, o, i) for o, i, a, b in zip(out_native, in_native, out_turns, in_turns))


def _stub_of(out: Turn, inp: Turn, out_native: Any, in_native: Any) -> bool:
    """Whether `out` may be `inp` with a stub for its output: tool turns whose other fields (role,
    tool_call_id, name, and a Hermes <tool_response>'s ids and name) are equal."""
    if not (out.role == inp.role == "tool" and isinstance(out_native, dict) and isinstance(in_native, dict)):
        return False
    if response_ids(out.text) != response_ids(inp.text):
        return False
    return {k: v for k, v in out_native.items() if k not in _TEXT_KEYS} == {
        k: v for k, v in in_native.items() if k not in _TEXT_KEYS}


def pair(outputs: Iterator[tuple[int, dict[str, Any], Shape]], inputs: Iterator[tuple[str, Any]],
         schema: RowSchema) -> Iterator[tuple[int, dict[str, Any], Paired]]:
    """(output position, output row, its input row) for each output row, walking both in order; PairingError
    at the first output row that no later input row gives."""
    last = ""
    for position, out, shape in outputs:
        for where, source in inputs:
            region = region_of(out, shape, source, schema)
            if region is not False:
                last = f" after input row {where}"
                yield position, out, Paired(where, source, region)
                break
        else:
            raise PairingError(
                f"output row {position} matches no input row{last}: the input is not the one this "
                "output was compressed from (other rows, or another order)")
