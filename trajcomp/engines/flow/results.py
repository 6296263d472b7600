"""What becomes of an input record: written, rejected (with the reason) or skipped by the selection."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from ...core.metrics import Outcome, RowMetrics
from ...formats import Record
from .examples import ExampleRows


@dataclass(frozen=True)
class Written:
    """An input record's output rows, in order (several with segments), written whole or not at all."""

    rows: tuple[dict[str, Any], ...]
    metrics: RowMetrics
    source: str  # where the row was read: names it among the report's worst rows
    line: int
    examples: tuple[dict[str, Any], ...] = ()  # --summary-examples: its summaries as training rows


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


def routed(record: Record, result, examples: ExampleRows | None = None) -> Written | Rejected:
    """The core's result for a record, as an engine writes it: into the output or the rejects file;
    with `examples` (--summary-examples), the summaries its rows used as training rows too."""
    if result.rejected:
        return Rejected(record, result.reason, result.detail, result.metrics)
    used = ()
    if examples is not None and result.examples:
        used = examples.rows(record.row, result.examples, len(result.rows), record.source, record.line)
    return Written(result.rows, result.metrics, record.source, record.line, used)


@dataclass(frozen=True)
class Skipped:
    reason: str  # not_sampled | other_shards


async def settled(item: tuple[Record, str | None], compress_row: Callable[[Any], Awaitable],
                  examples: ExampleRows | None = None) -> Written | Rejected | Skipped:
    """What becomes of a record and the selection's verdict on it, `compress_row` compressing a taken row."""
    record, verdict = item
    if verdict is not None:
        return Skipped(verdict)
    if record.error is not None:
        return Rejected(record, record.error.reason, record.error.detail)
    return routed(record, await compress_row(record.row), examples)


def shown_as(result: Written | Rejected | Skipped) -> str | None:
    """The progress bar's count a result adds to: compressed, unchanged, failed or rejected (None: skipped)."""
    if isinstance(result, Rejected):
        return "rejected"
    if isinstance(result, Written):
        return {Outcome.COMPRESSED: "compressed", Outcome.FAILED: "failed"}.get(result.metrics.outcome, "unchanged")
    return None
