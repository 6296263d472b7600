"""The run: read -> compress (bounded rows in flight and in memory) -> write in input order -> report.

Rows are compressed in this process, or in `processing.num_workers` worker processes (workers.py);
either way this process reads them, keeps their order and writes everything.

Rows are written in parts of `checkpoint_rows` input rows (see checkpoint.py); the final files
are joined from the parts, so a resumed run writes the same bytes as one never interrupted.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from contextlib import aclosing
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from itertools import islice
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable, Iterable

from ..version import __version__
from .checkpoint import WorkDir
from ..core.compressor import TrajectoryCompressor
from ..core.config import CompressionConfig
from ..formats import Format, Record, format_for, identity
from ..formats.base import InputError, PartWriter, input_schema, read_checked, write_json
from ..formats.jsonl import JSONL
from ..core.metrics import Aggregate, Outcome, RowMetrics
from .paths import FileJob, Layout
from .progress import Progress
from .remote import WorkMirror
from ..reports.build import from_aggregate
from ..reports.schema import Processing, Report, TokenizerInfo
from .selection import Selection, Taker
from .workers import WorkerPool, build_core, worker_count

# Settings that never change what a run writes (speed, memory, where the endpoint is and how to
# authenticate to it): a resume may change them, e.g. after the server moved to another port.
_NOT_IN_OUTPUT = {
    "num_workers", "max_concurrent_requests", "max_rows_in_memory", "cache", "cache_dir", "max_consecutive_failures",
    "base_url", "api_key_env",
}


class SummarizerDown(RuntimeError):
    """Too many summaries failed in a row: the run stops, resumable, instead of flagging every row."""


@dataclass(frozen=True)
class RunOptions:
    selection: Selection = field(default_factory=Selection)
    quiet: bool = False
    checkpoint_rows: int = 1000
    restart: bool = False


@dataclass(frozen=True)
class Written:
    row: dict[str, Any]
    metrics: RowMetrics
    source: str  # where the row was read: names it among the report's worst rows
    line: int


@dataclass(frozen=True)
class Rejected:
    record: Record
    reason: str
    detail: str
    metrics: RowMetrics | None = None

    def to_row(self) -> dict[str, Any]:
        row = {"source": self.record.source, "line": self.record.line, "reason": self.reason, "detail": self.detail}
        if self.metrics is not None:
            row["compression_metrics"] = self.metrics.to_dict()
        return {**row, "raw": self.record.raw_text()}


def routed(record: Record, result) -> Written | Rejected:
    """The core's result for a record, as an engine writes it: into the output or the rejects file."""
    if result.rejected:
        return Rejected(record, result.reason, result.detail, result.metrics)
    return Written(result.row, result.metrics, record.source, record.line)


@dataclass(frozen=True)
class Skipped:
    reason: str  # not_sampled | other_shards


@dataclass
class RunResult:
    report: Report
    aggregate: Aggregate = field(repr=False)


class _Part:
    """One part of a file's output: rows stream into part files; the checkpoint makes it count."""

    def __init__(self, work: WorkDir, file_index: int, index: int, writer: Format, schema: Any):
        self.work, self.file_index, self.index = work, file_index, index
        self.writer, self.schema = writer, schema
        for suffix in (writer.suffix, ".rejects.jsonl"):  # a killed run may have left this part's files
            self._path(suffix).unlink(missing_ok=True)
        self.records = 0
        self.taken = 0
        self.aggregate = Aggregate()
        self._rows: PartWriter | None = None
        self._rejects: PartWriter | None = None

    def add(self, result: Written | Rejected | Skipped) -> None:
        self.records += 1
        if isinstance(result, Skipped):
            setattr(self.aggregate, result.reason, getattr(self.aggregate, result.reason) + 1)
            return
        self.taken += 1
        if isinstance(result, Written):
            self._rows = self._rows or self.writer.open_part(self._path(self.writer.suffix), self.schema)
            self._rows.write(result.row)
            self.aggregate.add(result.metrics, source=result.source, line=result.line)
        else:
            self._rejects = self._rejects or JSONL.open_part(self._path(".rejects.jsonl"))
            self._rejects.write(result.to_row())
            self.aggregate.add_reject(result.reason, result.metrics, result.record.source, result.record.line)

    def _path(self, suffix: str) -> Path:
        return self.work.part(self.file_index, self.index, suffix)

    def finish(self) -> None:
        for stream in (self._rows, self._rejects):
            if stream is not None:
                stream.close()
        checkpoint = {"records": self.records, "taken": self.taken, "aggregate": self.aggregate.to_state()}
        self.work.finish_part(self.file_index, self.index, checkpoint)  # last: this makes the part count

    def abort(self) -> None:
        for stream in (self._rows, self._rejects):
            if stream is not None:
                stream.abort()


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


_END = object()


async def ordered_map(
    items: Iterable, fn: Callable[[Any], Awaitable], max_running: int, max_held: int
) -> AsyncIterator:
    """fn over items, results in input order: at most `max_running` calls of fn at once, and at
    most `max_held` items taken and not yet yielded (running, or done and waiting behind a slower one).

    Two bounds, not one: a slow item (a call retrying, a hung endpoint) then stalls only itself
    while the others keep every call busy, until `max_held` items wait behind it.
    Use it with contextlib.aclosing: on an early exit the tasks still running are cancelled and
    waited for, so none outlives the resources (HTTP session, cache) they use.
    """
    source = iter(items)
    pending: deque[asyncio.Future] = deque()  # taken and not yet yielded, in input order
    busy: set[asyncio.Future] = set()
    exhausted = False
    try:
        while True:
            busy = {task for task in busy if not task.done()}
            while not exhausted and len(busy) < max_running and len(pending) < max_held:
                item = next(source, _END)
                if item is _END:
                    exhausted = True
                    break
                pending.append(asyncio.ensure_future(fn(item)))
                busy.add(pending[-1])
            if not pending:
                return
            if pending[0].done():
                yield pending.popleft().result()
            else:  # the first one is still running, so `busy` is not empty
                await asyncio.wait(busy, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)


def _named(records: Iterable[Record], source: str | None) -> Iterable[Record]:
    """Records named `source` (a URI a staged input came from) instead of the local path they were read from."""
    return records if source is None else (replace(r, source=source) for r in records)


class Runner:
    """One run over many files with one compressor, a pool of worker processes or of Ray actors
    (anything with the row core's start, compress_row and close, a `summarizer` and a `counter`)."""

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
        self.work = WorkDir(layout.work, self.fingerprint(), mirror)
        self.progress: Progress | None = None
        self.resumed_rows = 0
        self.taker = Taker(options.selection)
        self.failures_in_a_row = 0
        self.streak_began = (0, 0)  # (file, part) where the current run of failures began
        self.files_all_rejected: list[str] = []  # inputs none of whose rows could be written

    def fingerprint(self) -> dict[str, Any]:
        """What must not change between an interrupted run and its resume."""
        sections = self.config.to_sections().items()
        config = {s: {k: v for k, v in keys.items() if k not in _NOT_IN_OUTPUT} for s, keys in sections}
        return {
            "trajcomp_version": __version__,
            "inputs": [[j.source or str(j.input), *identity(j.input)] for j in self.layout.files],
            "outputs": [j.dest or str(j.output) for j in self.layout.files],
            "config": config,
            "selection": self.options.selection.as_dict(),
            "checkpoint_rows": self.options.checkpoint_rows,
        }

    async def run(self) -> RunResult:
        started, clock = datetime.now(timezone.utc), time.monotonic()
        self.work.check(self.options.restart)
        try:
            await self.compressor.start()  # preflight: a dead endpoint stops the run before any file exists
            self.work.begin()
            self._count_resumed()
            with Progress(disable=self.options.quiet, live=self.compressor.summarizer.live) as self.progress:
                for index, job in enumerate(self.layout.files):
                    if not self.work.is_file_done(index):
                        await self.run_file(index, job)
        except InputError:
            if next(self.work.all_checkpoints(len(self.layout.files)), None) is None:
                self.work.remove()  # nothing finished: leave no trace of a run that could not start
            raise
        finally:
            await self.compressor.close()
        aggregate = self.finish()
        report = self.build_report(aggregate, started, time.monotonic() - clock)
        write_json(self.layout.report, report.to_dict(), indent=2)
        self.work.remove()
        return RunResult(report, aggregate)

    def _count_resumed(self) -> None:
        """Rows the checkpoints already hold, and rows taken so far (--limit counts across files)."""
        for checkpoint in self.work.all_checkpoints(len(self.layout.files)):
            self.resumed_rows += checkpoint["records"]
            self.taker.taken += checkpoint["taken"]

    async def run_file(self, index: int, job: FileJob) -> None:
        reader, writer = format_for(job.input), format_for(job.output)
        schema = input_schema(reader, job.input)
        done = [c["records"] for c in self.work.checkpoints(index)]
        records = self.taker.select(job.key, islice(_named(read_checked(reader, job.input), job.source), sum(done), None))
        part = _Part(self.work, index, len(done), writer, schema)
        try:
            async with aclosing(ordered_map(records, self.process, self.max_running, self.max_held)) as results:
                async for result in results:
                    self._watch_failures(result, index, part.index)
                    part.add(result)
                    self._show(result)
                    if part.records == self.options.checkpoint_rows:
                        part.finish()
                        part = _Part(self.work, index, part.index + 1, writer, schema)
        except BaseException:
            part.abort()
            raise
        if part.records:
            part.finish()
        self._join(index, job, writer, schema)

    def _watch_failures(self, result: Written | Rejected | Skipped, file_index: int, part_index: int) -> None:
        """Stop when summaries keep failing; the parts holding the streak are undone, to be redone."""
        metrics = getattr(result, "metrics", None)
        if metrics is None or metrics.outcome not in (Outcome.FAILED, Outcome.COMPRESSED):
            return
        if metrics.outcome is Outcome.COMPRESSED:
            self.failures_in_a_row = 0
            return
        if self.failures_in_a_row == 0:
            self.streak_began = (file_index, part_index)
        self.failures_in_a_row += 1
        limit = self.config.max_consecutive_failures
        if limit and self.failures_in_a_row >= limit:
            began_file, began_part = self.streak_began
            self.work.undo_parts(file_index, began_part if began_file == file_index else 0)
            raise SummarizerDown(
                f"{self.failures_in_a_row} summaries in a row failed (last: {metrics.error}); stopped. "
                f"Finished parts are kept in {self.layout.work}: run the same command again to resume"
            )

    def _join(self, index: int, job: FileJob, writer: Format, schema: Any) -> None:
        """The file's parts joined into its output; then only the checkpoints are still needed."""
        parts = [self.work.part(index, i, writer.suffix) for i, _ in enumerate(self.work.checkpoints(index))]
        parts = [p for p in parts if p.exists()]  # a part whose rows were all rejected has no output
        writer.join(parts, job.output, schema)
        self.work.mark_file_done(index)
        for p in parts:
            p.unlink()

    async def process(self, item: tuple[Record, str | None]) -> Written | Rejected | Skipped:
        record, verdict = item
        if verdict is not None:
            return Skipped(verdict)
        if record.error is not None:
            return Rejected(record, record.error.reason, record.error.detail)
        return routed(record, await self.compressor.compress_row(record.row))

    def _show(self, result: Written | Rejected | Skipped) -> None:
        if isinstance(result, Rejected):
            self.progress.update("rejected")
        elif isinstance(result, Written):
            outcome = result.metrics.outcome
            kind = {Outcome.COMPRESSED: "compressed", Outcome.FAILED: "failed"}.get(outcome, "unchanged")
            self.progress.update(kind)

    def finish(self) -> Aggregate:
        """The run's aggregate from every part's checkpoint, and the rejects file joined from the parts."""
        aggregate = Aggregate()
        rejects = []
        self.files_all_rejected = []
        for f, job in enumerate(self.layout.files):
            written = rejected = 0
            for p, checkpoint in enumerate(self.work.checkpoints(f)):
                state = checkpoint["aggregate"]
                written += len(state["before"])
                rejected += sum(state["reject_reasons"].values())
                aggregate.merge(state)
                rejects.append(self.work.part(f, p, ".rejects.jsonl"))
            if rejected and not written:  # a file that is not rows at all is almost always the wrong file
                self.files_all_rejected.append(str(job.input))
        rejects = [r for r in rejects if r.exists()]
        # A rejects file exists exactly when rows were rejected: a stale one would mislead.
        if rejects:
            JSONL.join(rejects, self.layout.rejects)
        else:
            self.layout.rejects.unlink(missing_ok=True)
        return aggregate

    def _engine(self) -> dict[str, Any]:
        """What compressed the rows, as the report names it: local processes, or Ray actors."""
        if getattr(self.compressor, "engine", None) == "ray":
            return {"engine": "ray", "ray_actors": self.compressor.workers, "ray_nodes": len(set(self.compressor.nodes))}
        return {"workers": getattr(self.compressor, "workers", 1)}

    def build_report(self, aggregate: Aggregate, started: datetime, seconds: float) -> Report:
        handled = aggregate.rows_read - self.resumed_rows
        processing = Processing(
            trajcomp_version=__version__,
            started_at=started.isoformat(timespec="seconds"),
            duration_seconds=round(seconds, 3),
            rows_per_second=round(handled / seconds, 2) if seconds > 0 else 0.0,
            inputs=[str(j.input) for j in self.layout.files],
            outputs=[str(j.output) for j in self.layout.files],
            rejects_file=str(self.layout.rejects) if aggregate.reject_reasons else None,
            skipped_files=[str(p) for p in self.layout.skipped],
            stray_files_in_output=[str(p) for p in self.layout.strays()],
            files_all_rejected=self.files_all_rejected,
            resumed=self.work.resumed,
            rows_from_checkpoint=self.resumed_rows,
            selection=self.options.selection.as_dict(),
            max_rows_running=self.max_running,
            tokenizer_chars=self.compressor.counter.chars if isinstance(self.compressor, TrajectoryCompressor) else None,
            **self._engine(),
        )
        return from_aggregate(
            aggregate,
            summarizer=self.config.summarizer,
            summarizer_stats=self.compressor.summarizer.run_stats(),
            processing=processing,
            tokenizer=TokenizerInfo(**vars(self.compressor.counter.info)),
            config=self.config.to_sections(),
        )
