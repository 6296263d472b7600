"""The run: read -> compress (a bounded window of rows in flight) -> write in input order -> report."""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable, Iterable

from . import __version__
from .cache import CachedSummarizer, SummaryCache
from .compressor import SHAREGPT, TrajectoryCompressor
from .config import CompressionConfig
from .formats import AtomicFile, Record, open_reader, open_writer
from .formats.jsonl import JsonlWriter
from .metrics import Aggregate, Outcome, RowMetrics
from .progress import Progress
from .rows import RowError
from .summarizers import make_summarizer


@dataclass(frozen=True)
class FileJob:
    input: Path
    output: Path


@dataclass(frozen=True)
class RunSpec:
    """Where a run reads and writes, and which rows it takes."""

    files: list[FileJob]
    report: Path
    rejects: Path
    cache: Path
    sample_percent: float = 100.0
    seed: int = 0
    quiet: bool = False


@dataclass(frozen=True)
class Written:
    row: dict[str, Any]
    metrics: RowMetrics


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
        return {**row, "raw": self.record.raw}


@dataclass
class RunResult:
    report: dict[str, Any]
    aggregate: Aggregate = field(repr=False)


def build_compressor(config: CompressionConfig, counter, spec: RunSpec) -> TrajectoryCompressor:
    """The compressor for a run, its summarizer behind the summary cache when that is worth it."""
    summarizer = make_summarizer(config.summarizer, config, counter)
    if config.cache and summarizer.cacheable:
        summarizer = CachedSummarizer(summarizer, SummaryCache(spec.cache))
    return TrajectoryCompressor(config, counter, summarizer)


def sampled(record: Record, percent: float, seed: int) -> bool:
    """A deterministic per-row draw, the same on every machine and in every shard."""
    if percent >= 100:
        return True
    key = f"{seed}:{Path(record.source).name}:{record.line}".encode()
    draw = int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "big") / 2**64
    return draw * 100 < percent


async def ordered_map(items: Iterable, fn: Callable[[Any], Awaitable], window: int) -> AsyncIterator:
    """fn over items with at most `window` in flight, results in input order."""
    pending: deque[asyncio.Future] = deque()
    try:
        for item in items:
            pending.append(asyncio.ensure_future(fn(item)))
            while pending and (len(pending) >= window or pending[0].done()):
                yield await pending.popleft()
        while pending:
            yield await pending.popleft()
    finally:
        for task in pending:
            task.cancel()


class Runner:
    """One run over many files with one compressor; owns the aggregate and the rejects file."""

    def __init__(self, config: CompressionConfig, compressor: TrajectoryCompressor, spec: RunSpec):
        self.config = config
        self.compressor = compressor
        self.spec = spec
        self.aggregate = Aggregate()
        self.window = max(8, 2 * config.max_concurrent_requests)

    async def process(self, record: Record) -> Written | Rejected:
        if record.error is not None:
            return Rejected(record, record.error.reason, record.error.detail)
        try:
            native = SHAREGPT.native_turns(record.row)
        except RowError as exc:
            return Rejected(record, exc.reason, exc.detail)
        turns, metrics = await self.compressor.compress_turns(native, SHAREGPT)
        if metrics.outcome is Outcome.FAILED and self.config.on_failure == "reject":
            return Rejected(record, "summary_failed", metrics.error or "", metrics)
        if metrics.still_over_limit and not self.config.save_over_limit:
            return Rejected(record, "still_over_limit", f"{metrics.compressed_tokens} tokens", metrics)
        row = SHAREGPT.with_turns(record.row, turns) if turns is not native else dict(record.row)
        if self.config.metrics_per_trajectory:
            row["compression_metrics"] = metrics.to_dict()
        return Written(row, metrics)

    async def run_file(self, job: FileJob, rejects: JsonlWriter) -> None:
        records = (r for r in open_reader(job.input) if self._take(r))
        with open_writer(job.output) as out:
            async for result in ordered_map(records, self.process, self.window):
                if isinstance(result, Written):
                    out.write(result.row)
                    self.aggregate.add(result.metrics)
                else:
                    rejects.write(result.to_row())
                    self.aggregate.add_reject(result.reason, result.metrics)
                self.progress.update(_progress_kind(result))

    def _take(self, record: Record) -> bool:
        if sampled(record, self.spec.sample_percent, self.spec.seed):
            return True
        self.aggregate.not_sampled += 1
        return False

    async def run(self) -> RunResult:
        started, clock = datetime.now(timezone.utc), time.monotonic()
        try:
            await self.compressor.start()  # preflight: a dead endpoint stops the run before any file exists
            with Progress(disable=self.spec.quiet, live=self.compressor.summarizer.live) as self.progress:
                await self._run_files()
        finally:
            await self.compressor.close()
        report = self.build_report(started, time.monotonic() - clock)
        write_json(self.spec.report, report)
        return RunResult(report, self.aggregate)

    async def _run_files(self) -> None:
        rejects = JsonlWriter(self.spec.rejects)
        try:
            for job in self.spec.files:
                await self.run_file(job, rejects)
        except BaseException:
            rejects.abort()
            raise
        self._finish_rejects(rejects)

    def _finish_rejects(self, rejects: JsonlWriter) -> None:
        # A rejects file exists exactly when rows were rejected: a stale one would mislead.
        if self.aggregate.reject_reasons:
            rejects.commit()
        else:
            rejects.abort()
            self.spec.rejects.unlink(missing_ok=True)

    def build_report(self, started: datetime, seconds: float) -> dict[str, Any]:
        sections = self.aggregate.sections()
        rows = sections.pop("rows")
        distribution = sections.pop("distribution")
        handled = rows["written"] + rows["rejected"]
        return {
            **sections,
            "summarization": {
                "summarizer": self.config.summarizer,
                "api_calls": self.aggregate.api_calls,
                "errors": self.aggregate.errors,
                **self.compressor.summarizer.run_stats(),
            },
            "processing": {
                "trajcomp_version": __version__,
                "started_at": started.isoformat(timespec="seconds"),
                "duration_seconds": round(seconds, 3),
                "rows_per_second": round(handled / seconds, 2) if seconds > 0 else 0.0,
                "inputs": [str(j.input) for j in self.spec.files],
                "outputs": [str(j.output) for j in self.spec.files],
                "rejects_file": str(self.spec.rejects) if rows["rejected"] else None,
                "sample_percent": self.spec.sample_percent,
                "seed": self.spec.seed,
                "max_rows_in_flight": self.window,
            },
            "rows": rows,
            "distribution": distribution,
            "tokenizer": vars(self.compressor.counter.info),
            "config": self.config.to_sections(),
        }


def _progress_kind(result: Written | Rejected) -> str:
    if isinstance(result, Rejected):
        return "rejected"
    outcome = result.metrics.outcome
    if outcome is Outcome.COMPRESSED:
        return "compressed"
    return "failed" if outcome is Outcome.FAILED else "skipped"


def write_json(path: Path, data: dict[str, Any]) -> None:
    with AtomicFile(path) as f:
        f.handle.write((json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode("utf-8"))
