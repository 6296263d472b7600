"""The rows of a compressed output that `trajcomp show` looks at: the run they came from, and which to pick."""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

from ..core.config import CompressionConfig, ConfigError, as_config
from ..core.planner import PlanParams
from ..core.rows import RowSchema
from ..formats import format_for, split_suffix
from ..formats.base import read_checked
from .pairing import METRICS_KEY, pair, shape_for
from .row_view import RowView, build_views
from .reading import load
from .schema import NotAReport, Report

# --status values: a row's own status (compression_metrics.status), and still_over_limit for every
# row over the limit whatever its status (what the report counts as still over the limit).
STATUS_CHOICES = ("compressed", "still_over_limit", "cannot_fit", "failed", "under_target")
OVER = "still_over_limit"


class NotFound(ValueError):
    """Rows asked for that the output does not have; the message says what was looked for and what exists."""


@dataclass(frozen=True)
class Run:
    """What the run that wrote an output tells about it: its config (the report's, else the defaults) and report."""

    config: CompressionConfig
    report: Report | None = None
    report_path: Path | None = None


def report_beside(output: Path) -> Path | None:
    """The report compress wrote beside `output` (named after its stem, or after its whole name)."""
    stem = split_suffix(Path(output))[0]
    for name in (f"{stem}_metrics.json", f"{Path(output).name}_metrics.json"):
        if (Path(output).parent / name).is_file():
            return Path(output).parent / name
    return None


def run_of(output: Path) -> Run:
    """The run that wrote `output`, from its report; the default config when there is none."""
    path = report_beside(output)
    if path is None:
        return Run(CompressionConfig())
    try:
        report = load(path)
    except NotAReport:
        return Run(CompressionConfig())
    try:
        config = as_config(report.config) if report.config else CompressionConfig()
    except (ConfigError, TypeError):  # a report of another version's keys: its figures still hold
        config = CompressionConfig()
    return Run(config, report, path)


def records(paths: Sequence[Path]) -> Iterator[tuple[str, Any]]:
    """(file:line, row) of every record of the files in order; an unparsable one gives None as its row."""
    for path in paths:
        for record in read_checked(format_for(Path(path)), Path(path)):
            yield f"{Path(path).name}:{record.line}", record.row


@dataclass(frozen=True)
class Brief:
    """One output row, as much as picking needs: its 1-based position, id, status, whether it is over
    the limit and its tokens (the rows' metrics do not name the target: with one target per run, the
    most tokens is the most over it)."""

    position: int
    id: Any
    status: str | None
    over: bool = False
    tokens: int = 0


def brief(position: int, row: Any) -> Brief:
    metrics = row.get(METRICS_KEY) if isinstance(row, dict) else None
    if not isinstance(metrics, dict):
        return Brief(position, _id(row), None)
    status = metrics.get("status")
    return Brief(position, _id(row), OVER if status == "still_over" else status,
                 bool(metrics.get("still_over_limit")), metrics.get("compressed_tokens", 0))


def _id(row: Any) -> Any:
    return row.get("id") if isinstance(row, dict) else None


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


def pick(briefs: Sequence[Brief], choice: Choice) -> list[int]:
    """The positions to show, in output order (the worst first for still_over_limit); NotFound when none is."""
    if choice.ids:
        return _by_id(briefs, choice.ids)
    if choice.positions:
        missing = [n for n in choice.positions if not 1 <= n <= len(briefs)]
        if missing:
            raise NotFound(f"no row {missing[0]} in the output: it has rows 1 to {len(briefs)}")
        return list(choice.positions)
    found = list(briefs)
    if choice.status is not None:
        if any(b.status is None for b in briefs):
            raise NotFound(f"--status {choice.status}: the rows carry no {METRICS_KEY} (metrics.per_trajectory was "
                           "false), so their statuses are unknown; pick rows with --id or --row")
        found = [b for b in briefs if matches(b, choice.status)]
        if not found:
            raise NotFound(f"no row has status {choice.status}: the output has {_statuses(briefs)}")
    if choice.status == OVER:
        return [b.position for b in sorted(found, key=lambda b: (-b.tokens, b.position))[: choice.limit]]
    if len(found) > choice.limit:
        found = random.Random(choice.seed).sample(found, choice.limit)
    return sorted(b.position for b in found)


def _by_id(briefs: Sequence[Brief], ids: Sequence[str]) -> list[int]:
    by_id: dict[str, list[int]] = {}
    for b in briefs:
        if b.id is not None:
            by_id.setdefault(str(b.id), []).append(b.position)
    for wanted in ids:
        if wanted not in by_id:
            some = ", ".join(list(by_id)[:5])
            exists = f"ids such as {some}" if by_id else "no row with an 'id' field"
            raise NotFound(f"no row with id {wanted!r} in the output: it has {len(briefs)} rows, {exists}")
    return sorted({p for wanted in ids for p in by_id[wanted]})


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
    briefs = [brief(position, row) for position, (_, row) in enumerate(records([output]), 1)]
    positions = pick(briefs, choice)
    return views_at(output, inputs, positions, counter, run)


def views_at(output: Path, inputs: Sequence[Path], positions: Sequence[int], counter, run: Run) -> list[RowView]:
    """The rows of `output` at `positions` (1-based), in that order."""
    schema, prefix = RowSchema.from_config(run.config), run.config.summary_prefix
    wanted, chosen = set(positions), {}
    outs = ((position, row if isinstance(row, dict) else {}) for position, (_, row) in enumerate(records([output]), 1))
    if inputs:
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
    return build_views(rows, counter, schema, params, prefix, target, Path(output).name)


RUN_ROWS = 20  # the rows `compress --html` shows beside its report, at most


def run_views(files: Sequence[tuple[Sequence[Path], Path]], counter, run: Run, most: int = RUN_ROWS) -> list[RowView]:
    """The rows `compress --html` shows beside its report, from its (inputs, output) files: every failed
    row, the worst still over the limit and a sample of compressed ones, `most` in all, in that order."""
    found = [(i, brief(position, row)) for i, (_, output) in enumerate(files)
             for position, (_, row) in enumerate(records([output]), 1)]
    if found and all(b.status is None for _, b in found):  # no metrics in the rows: any of them
        chosen = random.Random(0).sample(found, min(most, len(found)))
    else:
        chosen = _run_choice(found, most)
    shown: dict[tuple[int, int], RowView] = {}
    for i, (inputs, output) in enumerate(files):
        positions = sorted(b.position for j, b in chosen if j == i)
        if positions:
            shown.update({(i, v.row): v for v in views_at(output, inputs, positions, counter, run)})
    return [shown[(i, b.position)] for i, b in chosen if (i, b.position) in shown]


def _run_choice(found: list[tuple[int, Brief]], most: int) -> list[tuple[int, Brief]]:
    failed = [x for x in found if x[1].status == "failed"][:most]
    over = sorted((x for x in found if x[1].over and x[1].status != "failed"), key=lambda x: -x[1].tokens)
    compressed = [x for x in found if x[1].status == "compressed"]
    room = most - len(failed)
    over = over[: room - min(len(compressed), room // 2)]  # half the room for each, or all for one that fills it
    sample = random.Random(0).sample(compressed, min(len(compressed), room - len(over)))
    return failed + over + sorted(sample, key=lambda x: (x[0], x[1].position))


def rows_page_path(report: Path) -> Path:
    """The page of rows beside a report: out_rows.html beside out_metrics.json."""
    name = report.name[: -len("_metrics.json")] if report.name.endswith("_metrics.json") else report.stem
    return report.with_name(f"{name}_rows.html")
