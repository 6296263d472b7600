"""Parts as the unit of work: a worker process or Ray actor reads a whole part of a file that splits
(a Format's `spans`) itself, compresses its rows, writes the part's files and hands back only its
figures; a worker also finds where a file's parts lie (JSON Lines: byte ranges, a scan for newlines;
Parquet: row ranges, from the file's footer; a compressed file: its plain copy's, made first), and
once a file's parts are all in, checks and joins them.

The run's process (the coordinator, pipeline.py) then reads no input and copies no byte: it sends
each span to a worker (workers.py, ray.py) and writes the parts' checkpoints in order as their
figures come back, so a killed run never leaves a checkpoint after a gap. A part
covers the same input rows, selects the same rows (selection.py decides by file and line) and writes
the same bytes (parts.py `Part`, the same writer) as on the row-by-row path.
"""

from __future__ import annotations

import asyncio
import math
from collections import Counter
from contextlib import aclosing
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

from ...formats import format_for
from ...formats.base import InputError, checked, input_schema, unpack_checked
from ..flow.examples import ExampleRows
from ..flow.ordered import ordered_map
from ..flow.paths import FileJob
from ..flow.results import settled, shown_as
from ..flow.selection import Selection, Taker
from ..storage.remote import named
from .checkpoint import WorkDir
from .failures import counted
from .part import Part, join_parts


@dataclass(frozen=True)
class PartTask:
    """What a worker needs to compute part `index` of file `file_index`: `span` of the job's input
    (paths absolute: a Ray actor runs in another folder)."""

    work: Path  # the run's work folder
    file_index: int
    index: int
    job: FileJob  # the input (its name for the selection, and in Records), the output (its writer)
    selection: Selection
    span: tuple  # where the part's rows lie, as the input's Format.spans gave it
    max_running: int  # the part's rows in flight in the worker (ordered.ordered_map)
    max_held: int
    streak_limit: int  # max_consecutive_failures: a part failing that often in a row stops early
    examples: ExampleRows | None = None  # --summary-examples: the part writes its rows' summaries too


@dataclass(frozen=True)
class SpanTask:
    """A file whose parts of `rows` input rows a worker finds (the coordinator may not see the file),
    after the `skip` rows its committed parts hold, whatever their size; a compressed one first made a
    plain JSON Lines copy at `copy`, which splits. Rows too few for `min_parts` such parts (one for
    every worker) are cut into `min_parts` smaller ones."""

    job: FileJob
    rows: int
    copy: Path | None = None
    skip: int = 0
    min_parts: int = 1


@dataclass(frozen=True)
class Spans:
    """The job that reads the file's parts (a compressed input's: its plain copy), and their spans."""

    job: FileJob
    spans: list[tuple]


@dataclass(frozen=True)
class JoinTask:
    """A file whose parts are all committed (`checkpoints`: each one's sha256, in order), to be checked and
    joined into its output by a worker."""

    work: Path
    file_index: int
    job: FileJob
    checkpoints: list[str]


@dataclass(frozen=True)
class PartDone:
    """A part's figures: its checkpoint (None when it stopped early), its rows by the progress bar's
    kinds, and its summaries in order, (failed, error) each, for the run's failure streak."""

    file_index: int
    index: int
    checkpoint: dict[str, Any] | None
    shown: dict[str, int] = field(default_factory=dict)
    summaries: list[tuple[bool, str | None]] = field(default_factory=list)


async def compress_part(core, task: PartTask) -> PartDone:
    """The part read, compressed by `core` (a TrajectoryCompressor) and written, in input order, into
    its files; its checkpoint comes back to be committed. It stops early, writing nothing, once its
    own summaries failed `streak_limit` times in a row (the run stops there anyway)."""
    job, reader = task.job, format_for(task.job.input)
    part = Part(WorkDir(task.work, {}), task.file_index, task.index, format_for(job.output),
                input_schema(reader, job.input))
    read = partial(reader.read_span, job.input, task.span)
    records = Taker(task.selection).select(job.key, named(checked(job.input, read), job.source))
    shown: Counter = Counter()
    summaries: list[tuple[bool, str | None]] = []
    failing = 0
    try:
        async with aclosing(ordered_map(records, partial(settled, compress_row=core.compress_row, examples=task.examples),
                                        task.max_running, task.max_held)) as results:
            async for result in results:
                step = counted(getattr(result, "metrics", None))
                if step is not None:
                    summaries.append(step)
                    failing = failing + 1 if step[0] else 0
                    if task.streak_limit and failing >= task.streak_limit:
                        part.abort()
                        return PartDone(task.file_index, task.index, None, dict(shown), summaries)
                part.add(result)
                if (kind := shown_as(result)) is not None:
                    shown[kind] += 1
    except BaseException:
        part.abort()
        raise
    return PartDone(task.file_index, task.index, part.close(), dict(shown), summaries)


def join_file(task: JoinTask) -> tuple[int, str] | None:
    """The file's parts checked and joined into its output (parts.join_parts), off the coordinator:
    reading every part's bytes to check and copy them is most of a run's work outside the rows.
    (index, why) of a damaged part comes back instead, nothing written."""
    job, work = task.job, WorkDir(task.work, {})
    if work.is_file_done(task.file_index):  # joined already: a retried task (its actor lost before it answered)
        return None
    writer, schema = format_for(job.output), input_schema(format_for(job.input), job.input)
    return join_parts(work, task.file_index, job, writer, schema, task.checkpoints)


def find_spans(task: SpanTask) -> Spans:
    """The file's spans; a compressed input first decompressed into its plain copy (its damage an
    InputError naming it, as on the row path), the job then reading the copy, its rows still named
    as the run names the input."""
    job = task.job
    if task.copy is not None:
        unpack_checked(format_for(job.input), job.input, task.copy)
        job = replace(job, input=task.copy, source=job.source or str(job.input))
    reader = format_for(job.input)

    def spans(rows: int) -> list[tuple]:
        return list(checked(job.input, lambda: reader.spans(job.input, rows, task.skip)))

    found = spans(task.rows)
    if len(found) < task.min_parts:  # a short file (its rows few, so counted fast): a part for every worker
        found = spans(max(1, math.ceil(len(spans(1)) / task.min_parts)))
    return Spans(job, found)


async def perform(core, work: Any) -> Any:
    """What a worker process or Ray actor is sent, done: a row, a part, or a file's spans or its join
    (on a thread, so that the worker's rows in flight go on meanwhile)."""
    try:
        if isinstance(work, PartTask):
            return await compress_part(core, work)
        if isinstance(work, JoinTask):
            return await asyncio.to_thread(join_file, work)
        if isinstance(work, SpanTask):
            return await asyncio.to_thread(find_spans, work)
        return await core.compress_row(work)
    except InputError as exc:  # the input named as the run names it, not by the path a worker reads
        job = getattr(work, "job", None)
        if job is None or not job.source:
            raise
        raise InputError(str(exc).replace(str(job.input), job.source)) from None


SHARED, THROUGH_STORE = "shared", "through object storage"  # how workers take whole parts (Asks.reads, reaches)


class Asks:
    """What the coordinator asks of a pool of `workers` workers (worker processes, Ray actors), each
    request sent by the pool's `_ask` to its least busy worker, which does it with `perform`."""

    workers: int

    async def _ask(self, work: Any) -> Any:
        raise NotImplementedError

    async def reaches(self, store: Any) -> bool:
        """Whether every worker takes whole parts through object storage (`store`, a part_store.Store:
        Ray actors that do not see the coordinator's files); from then on they do."""
        return False

    async def reads(self, paths: list[Path], work: Path) -> bool:
        """Whether every worker reads `paths` and writes into the work folder `work` where the coordinator does."""
        raise NotImplementedError

    async def compress_row(self, row: Any) -> Any:
        """The row's result (the row core's RowResult)."""
        return await self._ask(row)

    async def compress_part(self, task: PartTask) -> PartDone:
        """The part computed and written."""
        return await self._ask(task)

    async def find_spans(self, task: SpanTask) -> Spans:
        """The file's spans (a compressed input's: its plain copy's), and the job that reads them."""
        return await self._ask(task)

    async def join_file(self, task: JoinTask) -> tuple[int, str] | None:
        """The file's parts checked and joined; (index, why) of a damaged part instead."""
        return await self._ask(task)
