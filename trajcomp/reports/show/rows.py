"""The rows of compressed outputs that `trajcomp show` and `compress --html` look at: which to pick, and their views."""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

from ...core.planning.planner import PlanParams
from ...core.dialects.rows import RowSchema
from ...formats import format_for
from ...formats.base import read_checked
from .pairing import METRICS_KEY, pair, shape_for
from .row_view import RowView, build_views
from .runs import Run

# --status values: a row's own status (compression_metrics.status), and still_over_limit for every
# row over the limit whatever its status (what the report counts as still over the limit).
STATUS_CHOICES = ("compressed", "still_over_limit", "cannot_fit", "failed", "under_target")
OVER = "still_over_limit"


class NotFound(ValueError):
    """Rows asked for that the output does not have; the message says what was looked for and what exists."""


def records(paths: Sequence[Path]) -> Iterator[tuple[str, Any]]:
    """(file:line, row) of every record of the files in order; an unparsable one gives None as its row."""
    for path in paths:
        for record in read_checked(format_for(Path(path)), Path(path)):
            yield f"{Path(path).name}:{record.line}", record.row


@dataclass(frozen=True)
class Brief:
    """One output row, as much as picking needs: which of the outputs shown holds it, its 1-based
    position there, id, status, whether it is over the limit, its tokens (the rows' metrics do not
    name the target: with one target per run, the most tokens is the most over it) and whether
    compression changed it (a summary took the place of some of its turns)."""

    position: int
    id: Any
    status: str | None
    over: bool = False
    tokens: int = 0
    changed: bool = False
    file: int = 0
    segment: int | None = None  # compression.segments: this row's index among its input row's segments


def brief(position: int, row: Any, file: int = 0, segment_field: str = "segment") -> Brief:
    metrics = row.get(METRICS_KEY) if isinstance(row, dict) else None
    seg = row.get(segment_field) if isinstance(row, dict) else None
    index = seg.get("index") if isinstance(seg, dict) and isinstance(seg.get("index"), int) else None
    if not isinstance(metrics, dict):
        return Brief(position, _id(row), None, file=file, segment=index)
    status = metrics.get("status")
    return Brief(position, _id(row), OVER if status == "still_over" else status, bool(metrics.get("still_over_limit")),
                 metrics.get("compressed_tokens", 0), bool(metrics.get("was_compressed")), file, index)


def briefs_of(outputs: Sequence[Path], segment_field: str = "segment") -> list[Brief]:
    """Every row of the outputs, in order."""
    return [brief(position, row, i, segment_field) for i, output in enumerate(outputs)
            for position, (_, row) in enumerate(records([output]), 1)]


def with_segments(briefs: Sequence[Brief], chosen: Sequence[Brief]) -> list[Brief]:
    """The chosen rows, each with the other segments of its input row, one after another in order."""
    out: dict[tuple[int, int], Brief] = {}
    for b in chosen:
        if b.segment is None:
            out.setdefault(_order(b), b)
            continue
        at = briefs.index(b) - b.segment  # the input row's first segment
        out.setdefault(_order(briefs[at]), briefs[at])
        for later in briefs[at + 1:]:
            if later.file != b.file or not later.segment:
                break
            out.setdefault(_order(later), later)
    return list(out.values())


def _id(row: Any) -> Any:
    return row.get("id") if isinstance(row, dict) else None


def _order(b: Brief) -> tuple[int, int]:
    return b.file, b.position


def matches(b: Brief, status: str) -> bool:
    return b.over if status == OVER else b.status == status


@dataclass(frozen=True)
class Choice:
    """Which rows to show: by id, by position, by status or any; at most `limit` of several, sampled by `seed`."""

    ids: tuple[str, ...] = ()
    positions: tuple[int, ...] = ()
    status: str | None = None
    limit: int = 5
    seed: int = 0


def pick(briefs: Sequence[Brief], choice: Choice) -> list[Brief]:
    """The rows to show, in the order to show them: in output order, except the worst first for
    still_over_limit and, of any status, the changed rows first; NotFound when none is as asked.
    Positions (`choice.positions`) are those of one output."""
    if choice.ids:
        return _by_id(briefs, choice.ids)
    if choice.positions:
        missing = [n for n in choice.positions if not 1 <= n <= len(briefs)]
        if missing:
            raise NotFound(f"no row {missing[0]} in the output: it has rows 1 to {len(briefs)}")
        return [briefs[n - 1] for n in choice.positions]
    if choice.status is None:
        return _changed_first(briefs, choice)
    if any(b.status is None for b in briefs):
        raise NotFound(f"--status {choice.status}: the rows carry no {METRICS_KEY} (metrics.per_trajectory was "
                       "false), so their statuses are unknown; pick rows with --id or --row")
    found = [b for b in briefs if matches(b, choice.status)]
    if not found:
        raise NotFound(f"no row has status {choice.status}: the output has {_statuses(briefs)}")
    if choice.status == OVER:
        return sorted(found, key=lambda b: (-b.tokens, *_order(b)))[: choice.limit]
    return _sample(found, choice.limit, choice.seed)


def _changed_first(briefs: Sequence[Brief], choice: Choice) -> list[Brief]:
    """Rows of any status, those compression changed first: what a user asking what it did wants to
    see. The sample is drawn from the changed rows, and from the unchanged ones for the room left."""
    shown = _sample([b for b in briefs if b.changed], choice.limit, choice.seed)
    return shown + _sample([b for b in briefs if not b.changed], choice.limit - len(shown), choice.seed)


def _sample(found: Sequence[Brief], limit: int, seed: int) -> list[Brief]:
    """At most `limit` of `found`, drawn by `seed` when there are more, in output order."""
    if len(found) > limit:
        found = random.Random(seed).sample(list(found), limit)
    return sorted(found, key=_order)


def _by_id(briefs: Sequence[Brief], ids: Sequence[str]) -> list[Brief]:
    by_id: dict[str, list[Brief]] = {}
    for b in briefs:
        if b.id is not None:
            by_id.setdefault(str(b.id), []).append(b)
    for wanted in ids:
        if wanted not in by_id:
            some = ", ".join(list(by_id)[:5])
            exists = f"ids such as {some}" if by_id else "no row with an 'id' field"
            raise NotFound(f"no row with id {wanted!r} in the output: it has {len(briefs)} rows, {exists}")
    return sorted({_order(b): b for wanted in ids for b in by_id[wanted]}.values(), key=_order)


def _statuses(briefs: Sequence[Brief]) -> str:
    counts: dict[str, int] = {}
    for b in briefs:
        counts[b.status or "unknown"] = counts.get(b.status or "unknown", 0) + 1
        if b.over and b.status != OVER:
            counts[OVER] = counts.get(OVER, 0) + 1
    return ", ".join(f"{n} {status}" for status, n in sorted(counts.items())) or "no rows"


def views(output: Path, inputs: Sequence[Path], choice: Choice, counter, run: Run) -> list[RowView]:
    """The chosen rows of `output`, paired with their input rows when `inputs` are given (PairingError when
    they do not match, NotFound when no row is as asked, InputError when a file cannot be read)."""
    briefs = briefs_of([output], run.config.segment_field)
    return views_at(output, inputs, [b.position for b in with_segments(briefs, pick(briefs, choice))], counter, run)


def folder_views(folder: Path, outputs: Sequence[Path], choice: Choice, counter, run: Run) -> list[RowView]:
    """The chosen rows across the outputs of a folder run under `folder` (by id, status or any, not by
    position), each named by its path below the folder; NotFound when no row is as asked."""
    files = [((), output, output.relative_to(folder).as_posix()) for output in outputs]
    briefs = briefs_of(outputs, run.config.segment_field)
    return _views_of(files, with_segments(briefs, pick(briefs, choice)), counter, run)


def _views_of(files: Sequence[tuple[Sequence[Path], Path, str | None]], chosen: Sequence[Brief], counter,
              run: Run) -> list[RowView]:
    """The `chosen` rows of the files (inputs, output, its name in the views), in the order chosen."""
    shown: dict[tuple[int, int], RowView] = {}
    for i, (inputs, output, source) in enumerate(files):
        positions = sorted(b.position for b in chosen if b.file == i)
        if positions:
            shown.update({(i, v.row): v for v in views_at(output, inputs, positions, counter, run, source)})
    return [shown[_order(b)] for b in chosen if _order(b) in shown]


def views_at(output: Path, inputs: Sequence[Path], positions: Sequence[int], counter, run: Run,
             source: str | None = None) -> list[RowView]:
    """The rows of `output` at `positions` (1-based), in that order, named `source` (its file name)."""
    schema, prefix = RowSchema.from_config(run.config), run.config.summary_prefix
    wanted, chosen = set(positions), {}
    outs = ((position, row if isinstance(row, dict) else {}) for position, (_, row) in enumerate(records([output]), 1))
    first = next(records([output]), (None, None))[1]
    segmented = isinstance(first, dict) and run.config.segment_field in first
    if inputs and not segmented:  # segments are shown one after another, not paired with input rows
        shaped = ((position, row, shape_for(row, schema, prefix)) for position, row in outs)
        for position, row, paired in pair(shaped, records(inputs), schema):
            if position in wanted:
                chosen[position] = (row, paired)
            if len(chosen) == len(wanted):
                break
    else:
        chosen = {position: (row, None) for position, row in outs if position in wanted}
    rows = [(position, *chosen[position]) for position in positions if position in chosen]
    params = PlanParams.from_config(run.config)
    target = run.report.target_max_tokens if run.report is not None else None
    return build_views(rows, counter, schema, params, prefix, target, source or Path(output).name,
                       run.config.segment_field)


RUN_ROWS = 20  # the rows `compress --html` shows beside its report, at most


def run_views(files: Sequence[tuple[Sequence[Path], Path]], counter, run: Run, most: int = RUN_ROWS) -> list[RowView]:
    """The rows `compress --html` shows beside its report, from its (inputs, output) files: every failed
    row, the worst still over the limit and a sample of compressed ones, `most` in all, in that order."""
    found = briefs_of([output for _, output in files])
    if found and all(b.status is None for b in found):  # no metrics in the rows: any of them
        chosen = random.Random(0).sample(found, min(most, len(found)))
    else:
        chosen = _run_choice(found, most)
    return _views_of([(inputs, output, None) for inputs, output in files], chosen, counter, run)


def _run_choice(found: list[Brief], most: int) -> list[Brief]:
    failed = [b for b in found if b.status == "failed"][:most]
    over = sorted((b for b in found if b.over and b.status != "failed"), key=lambda b: -b.tokens)
    compressed = [b for b in found if b.status == "compressed"]
    room = most - len(failed)
    over = over[: room - min(len(compressed), room // 2)]  # half the room for each, or all for one that fills it
    sample = random.Random(0).sample(compressed, min(len(compressed), room - len(over)))
    return failed + over + sorted(sample, key=_order)


def rows_page_path(report: Path) -> Path:
    """The page of rows beside a report: out_rows.html beside out_metrics.json."""
    name = report.name[: -len("_metrics.json")] if report.name.endswith("_metrics.json") else report.stem
    return report.with_name(f"{name}_rows.html")
