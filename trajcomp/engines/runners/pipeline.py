"""The local engine's run: read -> compress (bounded rows in flight and in memory) -> write in input order.

Rows are compressed in this process, in `processing.num_workers` worker processes (workers.py) or by
Ray actors (ray.py); either way this process reads them, keeps their order (ordered.py) and writes
everything: parts made to count by checkpoints (parts.py), so a resumed run writes the same bytes as
one never interrupted, and at the end the report (run_report.py). With worker processes or actors and
JSON Lines (plain or compressed) or Parquet files, they take whole parts instead (`Runner._splits`
decides; part_stream.py, part_work.py): this process only commits their checkpoints in order;
workers find the parts' spans, write the parts and join the files.
"""

from __future__ import annotations

import os
import time
from contextlib import aclosing
from dataclasses import dataclass, field
from datetime import datetime, timezone
from itertools import groupby, islice
from pathlib import Path
from typing import Any

from ...core.compressor import TrajectoryCompressor
from ...core.config import CompressionConfig
from ...core.metrics import Aggregate
from ...core.summary.summarizer import SummarizerUnavailable
from ...formats import Record, format_for, identity
from ...formats.base import InputError, input_schema, read_checked, write_json
from ...reports.schema import Batches, Report
from ...version import __version__
from ..flow.examples import ExampleRows
from ..flow.ordered import ordered_map
from ..flow.paths import FileJob, Layout
from ..flow.progress import Progress, warn
from ..flow.results import Rejected, Skipped, Written, settled, shown_as
from ..flow.selection import Selection, Taker
from ..parts.checkpoint import WORK_FOLDER, WorkDir
from ..parts.failures import FailureStreak
from ..parts.manifest import DamagedPart
from ..parts.part import SIDE_FILES, Part
from ..parts.store import Store
from ..parts.stream import PartStream
from ..parts.work import SHARED, THROUGH_STORE, Asks, JoinTask, join_file
from ..storage.remote import WorkMirror, fetched, is_uri, named
from ..summaries.batch_rounds import BatchBuyer
from .run_report import RunFacts, build_report, gather
from .workers import WorkerPool, build_core, worker_count

# Settings that never change what a run writes (speed, memory, where the endpoint is and how to
# authenticate to it): a resume may change them, e.g. after the server moved to another port.
_NOT_IN_OUTPUT = {
    "num_workers", "max_concurrent_requests", "max_rows_in_memory", "cache", "cache_dir", "max_consecutive_failures",
    "base_url", "api_key_env", "batch", "batch_max_requests", "batch_max_bytes", "batch_poll_seconds",
}
# Times a file's parts are computed and checked before its join gives up: a part damaged again and
# again means the storage under the work folder is failing, which no recomputation cures.
JOIN_ATTEMPTS = 3


@dataclass(frozen=True)
class RunOptions:
    selection: Selection = field(default_factory=Selection)
    quiet: bool = False
    checkpoint_rows: int = 1000
    restart: bool = False


@dataclass
class RunResult:
    report: Report
    aggregate: Aggregate = field(repr=False)


def build_compressor(config: CompressionConfig, counter, layout: Layout) -> TrajectoryCompressor:
    """The compressor for a run, its summarizer behind the summary cache when that is worth it."""
    return build_core(config, counter, layout.cache)


@dataclass(frozen=True)
class RayOptions:
    """`--engine ray`: the cluster to join (None: a Ray instance of this machine) and the actors."""

    address: str | None = None
    actors: int = 2


def build_rows(config: CompressionConfig, counter, layout: Layout, ray: RayOptions | None = None,
               quiet: bool = False) -> TrajectoryCompressor | WorkerPool:
    """What a run's rows go through: the compressor in this process, `processing.num_workers`
    worker processes each with its own (see workers.py), or Ray actors (ray.py)."""
    if ray is not None:
        from .ray import RayPool  # the [ray] extra, imported only when asked for

        return RayPool(config, counter, layout.cache, ray.actors, ray.address, quiet)
    workers = worker_count(config)
    if workers == 1:
        return build_compressor(config, counter, layout)
    return WorkerPool(config, counter, layout.cache, workers)


class Runner:
    """Moves every input file's rows, in order, through one compressor (or a pool of worker processes or
    Ray actors: anything with the row core's start, compress_row and close, a `summarizer` and a
    `counter`; a pool, part_work.Asks, also takes whole parts) into its output's parts; the parts, the failure streak and the report are others' jobs."""

    def __init__(self, config: CompressionConfig, compressor: TrajectoryCompressor | WorkerPool | Any, layout: Layout,
                 options: RunOptions):
        self.config = config
        self.compressor = compressor
        self.layout = layout
        self.options = options
        # Enough rows running to keep every summarizer call busy; many more may wait, done, behind
        # a slow one (memory: at most max_rows_in_memory rows).
        self.max_held = config.max_rows_in_memory
        self.max_running = min(max(8, 2 * config.max_concurrent_requests), self.max_held)
        mirror = WorkMirror(layout.work_mirror) if layout.work_mirror else None
        # Absolute: workers and Ray actors are sent paths in it, and actors run in another folder.
        self.work = WorkDir(Path(os.path.abspath(layout.work)), self.fingerprint(), mirror)
        self.progress: Progress | None = None
        self.batch: Batches | None = None  # what buying the summaries in batches took (summarization.batch)
        self.resumed_rows = 0
        self.resumed_parts: dict[int, list[int]] = {}  # file -> records of each part a resume found whole
        self.taker = Taker(options.selection)
        self.parts_go: str | None = None  # how workers take whole parts (_parts_go), None: they do not
        self.failures = FailureStreak(config.max_consecutive_failures, self.work, layout.work)
        self.examples = ExampleRows.from_config(config) if layout.examples is not None else None

    def fingerprint(self) -> dict[str, Any]:
        """What must not change between an interrupted run and its resume."""
        sections = self.config.to_sections().items()
        config = {s: {k: v for k, v in keys.items() if k not in _NOT_IN_OUTPUT} for s, keys in sections}
        return {
            "trajcomp_version": __version__,
            "work_folder": WORK_FOLDER,  # a build that reads checkpoints otherwise refuses the folder
            "inputs": [[j.source or str(j.input), *(j.listed or identity(j.input))] for j in self.layout.files],
            "outputs": [j.dest or str(j.output) for j in self.layout.files],
            "config": config,
            "selection": self.options.selection.as_dict(),
            "checkpoint_rows": self.options.checkpoint_rows,
            # Parts written without examples cannot give them: a resume that asks for them is refused.
            **({"summary_examples": True} if self.layout.examples is not None else {}),
        }

    async def run(self) -> RunResult:
        started, clock = datetime.now(timezone.utc), time.monotonic()
        self.work.check(self.options.restart)
        unreadable = False
        try:
            await self.compressor.start()  # a summarizer's resources; an endpoint is checked by its first request
            self.work.begin()
            if self.config.batch:
                self.batch = await BatchBuyer(
                    self.config, self.layout, self.options.selection, self.compressor, self.work.path,
                    self.options.quiet, self.max_running, self.max_held,
                ).buy()
            self.parts_go = await self._parts_go()
            self._count_resumed()
            with Progress(disable=self.options.quiet, live=self.compressor.summarizer.live) as self.progress:
                await self._run_files()
        except (InputError, SummarizerUnavailable):
            unreadable = True
            raise
        finally:
            await self.compressor.close()  # first: a worker still writing a part would make the folder again
            if unreadable and next(self.work.all_checkpoints(len(self.layout.files)), None) is None:
                self.work.remove()  # nothing finished: leave no trace of a run that could not go on
        if self.parts_go == THROUGH_STORE:  # the side parts Ray actors put in the store, for the side files
            for index in range(len(self.layout.files)):
                self.work.fetch_missing(index, SIDE_FILES)
        gathered = gather(self.work, self.layout)
        facts = RunFacts(started, time.monotonic() - clock, self.work.resumed, self.resumed_rows,
                         self.options.selection.as_dict(), self.max_running, self.batch)
        report = build_report(self.config, self.compressor, self.layout, gathered, facts)
        write_json(self.layout.report, report.to_dict(), indent=2)
        self.work.remove()
        return RunResult(report, gathered.aggregate)

    def _count_resumed(self) -> None:
        """Every finished part checked against its checkpoint (a damaged one is undone with those after
        it, to be computed again), then the rows the checkpoints hold."""
        for index, job in enumerate(self.layout.files):
            joined = self.work.is_file_done(index)
            # A joined file's outputs are in its output already; its side parts (rejects, examples) are
            # read at the end. The output parts Ray actors put in the store are checked by the actor that joins them.
            only = SIDE_FILES if joined or self.parts_go == THROUGH_STORE and self._splits(job) else None
            self.work.fetch_missing(index, only or "")  # what only the store holds (actors' parts, or another mode's)
            damaged = self.work.first_damaged(index, only)
            if damaged is not None and joined:  # its other parts' outputs are gone: the whole file again
                self.work.unmark_file_done(index)
                damaged = (0, damaged[1])
            if damaged is not None:
                self._undo(index, *damaged)
            self.resumed_parts[index] = [c["records"] for c in self.work.checkpoints(index)]
            self.resumed_rows += sum(self.resumed_parts[index])

    def _undo(self, index: int, first: int, reason: str) -> None:
        """A damaged part and every later one of its file forgotten, to be computed again, and said once."""
        warn(f"{reason}; not used: its file is computed again from part {first}")
        self.work.undo_parts(index, first)
        resumed = self.resumed_parts.get(index, [])
        self.resumed_rows -= sum(resumed[first:])
        del resumed[first:]

    async def _run_files(self) -> None:
        """Every file not yet done, in order: a run of files whose parts workers take whole as one
        stream of parts (part_stream.py), any other file (or one whose join found a part damaged)
        row by row through this process."""
        if self.options.selection.limit is not None:
            taken = 0  # rows taken in the files before: --limit counts across files
            for index, job in enumerate(self.layout.files):
                if not self.work.is_file_done(index):
                    await self.run_file(index, job, taken)
                taken += sum(c["taken"] for c in self.work.checkpoints(index))
            return
        left = [(i, job) for i, job in enumerate(self.layout.files) if not self.work.is_file_done(i)]
        whole = [self.parts_go is not None and self._splits(job) for _, job in left]
        for split, group in groupby(zip(left, whole), key=lambda pair: pair[1]):
            files = [file for file, _ in group]
            if split:
                files = await self._by_parts(files)
            for index, job in files:
                await self.run_file(index, job, 0)

    async def _by_parts(self, files: list[tuple[int, FileJob]]) -> list[tuple[int, FileJob]]:
        """The files by whole parts (part_stream.py); those to go row by row come back: every one when
        they have fewer parts than there are workers, else those whose join found a damaged part. Through
        object storage, where this process holds no part of theirs, the stream computes those again."""
        damaged = await self._part_stream().run(files)
        if self.parts_go == SHARED:
            return files if damaged is None else damaged
        for _ in range(JOIN_ATTEMPTS - 1):
            if damaged:
                damaged = await self._part_stream().run(damaged)
        if damaged:
            raise DamagedPart(f"a part of {damaged[0][1].source} was damaged, again after {JOIN_ATTEMPTS} attempts: "
                              f"the storage under {self.layout.work_mirror} loses writes")
        return []

    def _part_stream(self) -> PartStream:
        finished = {i: self.work.finished_parts(i) for i in range(len(self.layout.files))}
        return PartStream(self.work, self.compressor, self.parts_go, self.options.selection, self.options.checkpoint_rows,
                          self.config.max_consecutive_failures, self.max_running, self.max_held, self.failures,
                          self.progress, self._undo, finished, self.examples)

    async def run_file(self, index: int, job: FileJob, taken_before: int) -> None:
        """The file's remaining parts, row by row, then their join; parts that fail the join's check are redone."""
        job = fetched(job)  # an input only listed in a lazy stage: read here after all
        reader, writer = format_for(job.input), format_for(job.output)
        schema = input_schema(reader, job.input)
        for _ in range(JOIN_ATTEMPTS):
            await self._write_parts(index, job, reader, writer, schema, taken_before)
            if (damaged := self._join(index, job)) is None:
                return
        raise DamagedPart(f"{damaged}, again after {JOIN_ATTEMPTS} attempts: the storage under "
                          f"{self.layout.work} loses writes")

    def _join(self, index: int, job: FileJob) -> str | None:
        """The file's parts joined into its output; else why a part failed its check (it is undone, said once)."""
        damaged = join_file(JoinTask(self.work.path, index, job, self.work.committed(index)))
        if damaged is not None:
            self._undo(index, *damaged)
        return damaged and damaged[1]

    def _splits(self, job: FileJob) -> bool:
        """Whether worker processes or Ray actors take the file's parts whole (part_work.py), this
        process parsing no row. The only place that decides it (with `_parts_go`): a file (or an
        object's local stage) whose format splits (a span is cheap to find and to read) or unpacks
        (a worker makes a compressed file a plain copy, which splits), and nothing that needs rows
        counted or seen here: no --limit (it counts taken rows across files), no
        summarization.batch (it buys every row's summaries first)."""
        reader = format_for(job.input)
        return ((reader.splits or reader.unpacks) and isinstance(self.compressor, Asks)
                and self.options.selection.limit is None and not self.config.batch)

    async def _parts_go(self) -> str | None:
        """How the workers take whole parts, asked once for the run (part_work.Asks.reaches, then reads):
        Ray actors on other nodes need inputs and output in object storage, or shared storage; None: row by row."""
        jobs = [job for job in self.layout.files if self._splits(job)]
        if not jobs:
            return None
        stored = self.layout.work_mirror is not None and all(is_uri(job.source) for job in jobs)
        probes = tuple({job.source.split("/", 3)[2]: job.source for job in jobs}.values()) if stored else ()
        if stored and await self.compressor.reaches(Store(self.work.path, self.layout.work_mirror, probes)):
            self.work.parts_in_mirror = True
            return THROUGH_STORE
        jobs = [fetched(job) for job in jobs]  # read here, or where the workers read what this process does
        return SHARED if await self.compressor.reads([job.absolute().input for job in jobs], self.work.path) else None

    async def _write_parts(self, index: int, job: FileJob, reader, writer, schema, taken_before: int) -> None:
        """The file's rows from its first unfinished part on, into parts each made to count by its checkpoint."""
        finished = [(c["records"], c["taken"]) for c in self.work.checkpoints(index)]
        self.taker.taken = taken_before + sum(taken for _, taken in finished)
        done = sum(records for records, _ in finished)
        records = self.taker.select(job.key, islice(named(read_checked(reader, job.input), job.source), done, None))
        # One part after another: their rows written in turn into one file, which the join renames,
        # unless a copy of the work folder is kept in object storage (it would upload that file at every part).
        at = self.work.rows_end(index, writer.suffix) if writer.concatenates and self.work.mirror is None else None
        part = Part(self.work, index, len(finished), writer, schema, at)
        try:
            async with aclosing(ordered_map(records, self.process, self.max_running, self.max_held)) as results:
                async for result in results:
                    self.failures.see(getattr(result, "metrics", None), index, part.index)
                    part.add(result)
                    self._show(result)
                    if part.records == self.options.checkpoint_rows:
                        part.finish()
                        part = Part(self.work, index, part.index + 1, writer, schema, part.end)
        except BaseException:
            part.abort()
            raise
        if part.records:
            part.finish()

    async def process(self, item: tuple[Record, str | None]) -> Written | Rejected | Skipped:
        return await settled(item, self.compressor.compress_row, self.examples)

    def _show(self, result: Written | Rejected | Skipped) -> None:
        if (kind := shown_as(result)) is not None:
            self.progress.update(kind)

