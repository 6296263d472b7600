"""A local run's end: its aggregate gathered from the parts' checkpoints, the rejects file joined from
theirs, and the report, which names what the run did (files, engine, timing) besides the rows' figures."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from ...core.compressor import TrajectoryCompressor
from ...core.config import CompressionConfig
from ...core.metrics import Aggregate
from ...formats.jsonl import JSONL
from ...reports.build import from_aggregate
from ...reports.schema import Batches, Processing, Report, TokenizerInfo
from ...version import __version__
from ..flow.paths import Layout
from ..parts.checkpoint import WorkDir
from ..parts.manifest import DamagedPart, damage, listed
from ..parts.part import EXAMPLES, REJECTS


@dataclass(frozen=True)
class Gathered:
    aggregate: Aggregate
    files_all_rejected: list[str]  # inputs none of whose rows could be written


def gather(work: WorkDir, layout: Layout) -> Gathered:
    """The run's aggregate from every part's checkpoint, and the rejects file (and --summary-examples')
    joined from the parts."""
    aggregate = Aggregate()
    side: dict[str, list] = {REJECTS: [], EXAMPLES: []}
    files_all_rejected = []
    for f, job in enumerate(layout.files):
        written = rejected = 0
        for p, checkpoint in enumerate(work.checkpoints(f)):
            state = checkpoint["aggregate"]
            written += len(state["before"])
            rejected += sum(state["reject_reasons"].values())
            aggregate.merge(state)
            for suffix, parts in side.items():
                part = work.part(f, p, suffix)
                if listed(checkpoint, part.name):
                    _check_side(work.part(f, p, ".done.json"), checkpoint, suffix)
                    parts.append(part)
        if rejected and not written:  # a file that is not rows at all is almost always the wrong file
            files_all_rejected.append(str(job.input))
    _join_side(side[REJECTS], layout.rejects)
    if layout.examples is not None:
        _join_side(side[EXAMPLES], layout.examples, keep_empty=True)
    return Gathered(aggregate, files_all_rejected)


def _join_side(parts: list, dest, keep_empty: bool = False) -> None:
    """A side file joined from its parts. The rejects file exists exactly when rows were rejected (a
    stale one would mislead); the summary examples file, asked for, is there even when empty."""
    if parts or keep_empty:
        JSONL.join(parts, dest)
    else:
        dest.unlink(missing_ok=True)


def _check_side(done, checkpoint, suffix: str) -> None:
    """A rejects or examples part checked right before it is read; damaged, it stops the run (the output
    is written, the report not), and the same command redoes the part's file: a resume checks it first."""
    reason = damage(done, checkpoint, only=suffix)
    if reason is not None:
        raise DamagedPart(f"{reason} (a {suffix.split('.')[1]} part, read at the run's end)")


@dataclass(frozen=True)
class RunFacts:
    """What the engine knows of its run, for the report's processing section."""

    started: datetime
    seconds: float
    resumed: bool
    rows_from_checkpoint: int
    selection: dict[str, Any]
    max_rows_running: int
    batch: Batches | None = None  # when the summaries were bought in batches


def build_report(config: CompressionConfig, compressor, layout: Layout, gathered: Gathered, facts: RunFacts) -> Report:
    aggregate = gathered.aggregate
    handled = aggregate.rows_read - facts.rows_from_checkpoint
    processing = Processing(
        trajcomp_version=__version__,
        started_at=facts.started.isoformat(timespec="seconds"),
        duration_seconds=round(facts.seconds, 3),
        rows_per_second=round(handled / facts.seconds, 2) if facts.seconds > 0 else 0.0,
        inputs=[str(j.input) for j in layout.files],
        outputs=[str(j.output) for j in layout.files],
        rejects_file=str(layout.rejects) if aggregate.reject_reasons else None,
        summary_examples_file=str(layout.examples) if layout.examples is not None else None,
        skipped_files=[str(p) for p in layout.skipped],
        stray_files_in_output=[str(p) for p in layout.strays()],
        files_all_rejected=gathered.files_all_rejected,
        resumed=facts.resumed,
        rows_from_checkpoint=facts.rows_from_checkpoint,
        selection=facts.selection,
        max_rows_running=facts.max_rows_running,
        tokenizer_chars=compressor.counter.chars if isinstance(compressor, TrajectoryCompressor) else None,
        **_engine(compressor),
    )
    return from_aggregate(
        aggregate,
        summarizer=config.summarizer,
        summarizer_stats={**compressor.summarizer.run_stats(), **_batch_stats(facts.batch)},
        processing=processing,
        tokenizer=TokenizerInfo(**vars(compressor.counter.info)),
        config=config.to_sections(),
    )


def _batch_stats(batch: Batches | None) -> dict[str, Any]:
    """A batch run's figures; its cache hits are the summaries its batches did not have to buy."""
    return {"batch": asdict(batch), "cache_hits": batch.from_cache} if batch else {}


def _engine(compressor) -> dict[str, Any]:
    """What compressed the rows, as the report names it: local processes, or Ray actors."""
    if getattr(compressor, "engine", None) == "ray":
        return {"engine": "ray", "ray_actors": compressor.workers, "ray_nodes": len(set(compressor.nodes))}
    return {"workers": getattr(compressor, "workers", 1)}
