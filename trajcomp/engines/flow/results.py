"""What becomes of an input record: written, rejected (with the reason) or skipped by the selection."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from ...core.metrics import Outcome, RowMetrics
from ...formats import Record


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


async def settled(item: tuple[Record, str | None], compress_row: Callable[[Any], Awaitable]) -> Written | Rejected | Skipped:
    """What becomes of a record and the selection's verdict on it, `compress_row` compressing a taken row."""
    record, verdict = item
    if verdict is not None:
        return Skipped(verdict)
    if record.error is not None:
        return Rejected(record, record.error.reason, record.error.detail)
    return routed(record, await compress_row(record.row))


def shown_as(result: Written | Rejected | Skipped) -> str | None:
    """The progress bar's count a result adds to: compressed, unchanged, failed or rejected (None: skipped)."""
    if isinstance(result, Rejected):
        return "rejected"
    if isinstance(result, Written):
        return {Outcome.COMPRESSED: "compressed", Outcome.FAILED: "failed"}.get(result.metrics.outcome, "unchanged")
    return None
