"""The dry run of a `--segments` run: each row cut into the rows the run would write, by the run's own row
core, with the extractive summarizer's summaries (offline: no request is made) in place of the configured
summarizer's. With the extractive summarizer the preview is the run: the same rows out and summaries; with a
model the rows depend on its summaries' lengths, which the extractive ones at the same budget stand in for."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Sequence

from ...core.compressor import RowResult, TrajectoryCompressor
from ...core.counting.tokens import TokenCounter
from ...core.metrics import Outcome
from ...summarizers import make_summarizer


@dataclass
class Previewed:
    """What the previewed rows came to: output rows, their lengths, the summaries they took, the input
    rows over the target all of whose rows fit, and the rows the run would reject, by reason."""

    rows_out: int = 0
    after: list[int] = field(default_factory=list)
    summaries: int = 0
    fit: int = 0
    rejects: dict[str, int] = field(default_factory=dict)


class Previewer:
    def __init__(self, cfg, counter: TokenCounter):
        offline = cfg.replace(summarizer="extractive")
        self.target = cfg.target_max_tokens
        self.core = TrajectoryCompressor(offline, counter, make_summarizer("extractive", offline, counter))

    def add(self, into: Previewed, rows: Sequence[dict[str, Any]]) -> list[bool]:
        """The rows compressed as the run would, their figures added `into`; whether each one cannot fit, as
        the run decides it (with segments, from the first group after the head too: core/planning/fit.py)."""
        results = asyncio.run(self.core.compress_rows(rows))
        for result in results:
            self._add(into, result)
        return [_cannot_fit(result) for result in results]

    def _add(self, into: Previewed, result: RowResult) -> None:
        m = result.metrics
        if result.rejected:
            into.rejects[result.reason] = into.rejects.get(result.reason, 0) + 1
            return
        lengths = [out.compressed_tokens for out in m.output_rows]
        into.rows_out += len(result.rows)
        into.after += lengths
        into.summaries += m.summaries
        into.fit += m.original_tokens > self.target >= max(lengths)


def _cannot_fit(result: RowResult) -> bool:
    if result.rejected:
        return result.reason == "cannot_fit"
    return result.metrics is not None and result.metrics.outcome is Outcome.CANNOT_FIT
