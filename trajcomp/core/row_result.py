"""What the row core gives back for one input row: its output rows (several with segments), or why it
was rejected, its metrics, and the summaries its output used as training examples."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .metrics import RowMetrics


@dataclass(frozen=True)
class SummaryExample:
    """One summary an output row used: the summarizer's request as chat messages, and its answer."""

    messages: list[dict[str, str]]  # {"role", "content"}: the summarizer's system and user messages
    summary: str
    segment: int  # the output row (0-based) that opens with this summary


@dataclass(frozen=True)
class RowResult:
    """One input row's result: its output rows in order, or the reason it was rejected; metrics when it
    got that far."""

    rows: tuple[dict[str, Any], ...]  # one without segments; none when rejected
    metrics: RowMetrics | None
    reason: str | None = None  # a stable code, set exactly when the row is rejected
    detail: str = ""
    examples: tuple[SummaryExample, ...] = ()

    @property
    def row(self) -> dict[str, Any] | None:
        """The single output row (the first, with segments); None when rejected."""
        return self.rows[0] if self.rows and self.reason is None else None

    @property
    def rejected(self) -> bool:
        return self.reason is not None

    @classmethod
    def reject(cls, reason: str, detail: str, metrics: RowMetrics | None = None) -> "RowResult":
        return cls((), metrics, reason, detail)
