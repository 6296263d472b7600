"""The row core: rows in, results out (an output row or a rejection, with metrics).

Counting, planning, summarizing and assembly happen here and nowhere else; the engines
(pipeline.py for files, hf.py, ray.py) only move rows through `compress_rows`.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace
from typing import Any, Sequence

from .config import CompressionConfig
from .metrics import Outcome, RowMetrics
from .planner import Decision, Plan, PlanParams, plan
from .rows import SHAREGPT, RowError, RowSchema, Turn
from .summarizers import SUMMARY_PREFIX, Summarizer, Summary, SummaryError, SummaryRequest, make_summarizer
from .summarizers.base import with_prefix
from .tokens import TokenCounter

_UNCHANGED = {
    Decision.SKIPPED_UNDER_TARGET: Outcome.SKIPPED_UNDER_TARGET,
    Decision.NOTHING_TO_COMPRESS: Outcome.NOTHING_TO_COMPRESS,
    Decision.NO_NET_SAVINGS: Outcome.NO_NET_SAVINGS,
}


@dataclass(frozen=True)
class RowResult:
    """One input row's result: the output row, or the reason it was rejected; metrics when it got that far."""

    row: dict[str, Any] | None
    metrics: RowMetrics | None
    reason: str | None = None  # a stable code, set exactly when the row is rejected
    detail: str = ""

    @property
    def rejected(self) -> bool:
        return self.reason is not None

    @classmethod
    def reject(cls, reason: str, detail: str, metrics: RowMetrics | None = None) -> "RowResult":
        return cls(None, metrics, reason, detail)


@dataclass(frozen=True)
class _Sourced:
    summary: Summary
    source: str
    error: str | None = None  # the primary summarizer's failure, when a fallback wrote the summary


class TrajectoryCompressor:
    """Planner + tokenizer + summarizer + assembly + metrics for one row."""

    def __init__(
        self,
        config: CompressionConfig,
        counter: TokenCounter | None = None,
        summarizer: Summarizer | None = None,
    ):
        self.config = config
        self.counter = counter or TokenCounter(config.tokenizer_name, config.trust_remote_code)
        self.summarizer = summarizer or make_summarizer(config.summarizer, config, self.counter)
        self.fallback = None
        if config.on_failure == "extractive" and self.summarizer.name != "extractive":
            self.fallback = make_summarizer("extractive", config, self.counter)
        self.params = PlanParams.from_config(config)
        self.schema = RowSchema.from_config(config)
        prefix_tokens = self.counter.count([SUMMARY_PREFIX + " "])[0]
        self._body_budget = max(1, config.summary_target_tokens - prefix_tokens)

    async def start(self) -> None:
        await self.summarizer.start()

    async def close(self) -> None:
        await self.summarizer.close()

    async def __aenter__(self) -> "TrajectoryCompressor":
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def compress_rows(self, rows: Sequence[Any]) -> list[RowResult]:
        """One result per row, in order; the rows' summaries are made concurrently."""
        return list(await asyncio.gather(*(self.compress_row(row) for row in rows)))

    async def compress_row(self, row: Any) -> RowResult:
        """The output row (input fields kept, turns compressed) or a rejection; the input is never mutated."""
        try:
            adapter = self.schema.adapter(row)
            native = adapter.native_turns(row)
        except RowError as exc:
            return RowResult.reject(exc.reason, exc.detail)
        try:
            turns, metrics = await self.compress_turns(native, adapter)
        except Exception as exc:  # one row's surprise must not stop a run of a million: reject it, named
            return RowResult.reject("internal_error", f"{type(exc).__name__}: {exc}")
        if metrics.outcome is Outcome.FAILED and self.config.on_failure == "reject":
            return RowResult.reject("summary_failed", metrics.error or "", metrics)
        if metrics.still_over_limit and not self.config.save_over_limit:
            return RowResult.reject("still_over_limit", f"{metrics.compressed_tokens} tokens", metrics)
        out = adapter.with_turns(row, turns) if turns is not native else dict(row)
        if self.config.metrics_per_trajectory:
            out["compression_metrics"] = metrics.to_dict()
        return RowResult(out, metrics)

    async def compress_trajectory(self, turns: list[dict[str, str]]) -> tuple[list[dict[str, str]], RowMetrics]:
        """Compress ShareGPT turns (`[{"from", "value"}, ...]`); the input is never mutated."""
        return await self.compress_turns(turns, SHAREGPT.bind({SHAREGPT.key: turns}, self.schema))

    async def compress_turns(self, native: list[dict[str, Any]], fmt=SHAREGPT) -> tuple[list[dict[str, Any]], RowMetrics]:
        """Compress validated turns of any row format (see rows.py); the input is never mutated."""
        turns = fmt.turns(native)
        counts = await self.counter.acount([t.text for t in turns])
        p = plan([t.role for t in turns], counts, replace(self.params, alternation=fmt.alternation))
        if p.decision is not Decision.COMPRESS:
            region = (p.start, p.end) if p.decision is Decision.NO_NET_SAVINGS else None
            return native, self._unchanged(_UNCHANGED[p.decision], p.total_tokens, len(native), region)
        try:
            sourced = await self._summarize(turns[p.start : p.end])
        except SummaryError as exc:
            return native, self._unchanged(
                Outcome.FAILED, p.total_tokens, len(native), (p.start, p.end),
                calls=exc.api_calls, errors=exc.errors, error=str(exc),
            )
        return await self._assemble_checked(native, fmt, turns, counts, p, sourced)

    async def _summarize(self, turns: Sequence[Turn]) -> _Sourced:
        request = SummaryRequest(tuple(turns), self._body_budget, self.config.per_trajectory_timeout)
        try:
            return _Sourced(await self.summarizer.summarize(request), self.summarizer.name)
        except SummaryError as exc:
            if self.fallback is None:
                raise
            failed = f"{self.summarizer.name} failed: {exc}"
            try:
                summary = await self.fallback.summarize(request)
            except SummaryError as also:  # keep what the first summarizer cost
                raise SummaryError(f"{failed}; {self.fallback.name} failed: {also}", exc.api_calls, exc.errors) from None
            return _Sourced(Summary(summary.text, exc.api_calls, exc.errors), self.fallback.name, failed)

    async def _assemble_checked(self, native, fmt, turns, counts, p: Plan, sourced: _Sourced):
        out, changed = assemble(native, fmt, turns, p, sourced.summary.text, self._notice())
        # Only the new or edited turns need counting: a turn's count does not depend on its neighbours.
        changed_counts = await self.counter.acount([text for _, text in changed])
        kept = sum(counts[: p.start]) + sum(counts[p.end :]) - sum(counts[i] for i, _ in changed if i >= 0)
        compressed_tokens = kept + sum(changed_counts)
        summary = sourced.summary
        if compressed_tokens >= p.total_tokens:
            return native, self._unchanged(
                Outcome.SUMMARY_TOO_LONG, p.total_tokens, len(native), (p.start, p.end),
                calls=summary.api_calls, errors=summary.errors, error=sourced.error,
            )
        metrics = RowMetrics(
            Outcome.COMPRESSED, p.total_tokens, compressed_tokens, len(native), len(out),
            self.config.target_max_tokens, (p.start, p.end), summary.api_calls, summary.errors,
            sourced.source, sourced.error,
        )
        return out, metrics

    def _notice(self) -> str:
        return self.config.summary_notice_text if self.config.add_summary_notice else ""

    def _unchanged(self, outcome, tokens, n_turns, region, calls=0, errors=0, error=None) -> RowMetrics:
        return RowMetrics(
            outcome, tokens, tokens, n_turns, n_turns, self.config.target_max_tokens, region,
            calls, errors, None, error,
        )


def assemble(native, fmt, turns: Sequence[Turn], p: Plan, body: str, notice: str):
    """The new turn list, and the (original index or -1, text) of every turn it adds or edits."""
    out: list[dict[str, Any]] = []
    changed: list[tuple[int, str]] = []
    noticed = False
    for i in range(p.start):
        if notice and not noticed and turns[i].role == "system":
            noticed = True
            text = turns[i].text + notice
            out.append(fmt.with_text(native[i], text))
            changed.append((i, text))
        else:
            out.append(dict(native[i]))
    summary = with_prefix(body)
    rest = p.end
    if p.merge_into_next:
        text = f"{summary}\n\n{turns[p.end].text}"
        out.append(fmt.with_text(native[p.end], text))
        changed.append((p.end, text))
        rest += 1
    else:
        out.append(fmt.make_turn("human", summary))
        changed.append((-1, summary))
    out.extend(dict(t) for t in native[rest:])
    return out, changed
