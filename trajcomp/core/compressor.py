"""The row core: rows in, results out (an output row or a rejection, with metrics).

Counting, planning, summarizing and assembly happen here and nowhere else; the engines
(pipeline.py for files, hf.py, ray.py) only move rows through `compress_rows`.
"""

from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import dataclass
from typing import Any, Sequence

from . import identifiers, summary_turn
from .config import CompressionConfig
from .metrics import Outcome, RowMetrics, assistant_share
from .planner import Decision, Plan, PlanParams, plan
from .redact import kept_whole
from .rows import SHAREGPT, RowError, RowSchema, Turn
from .summarizer import Summarizer, Summary, SummaryError, SummaryRequest, make_summarizer
from .summary_turn import UserWords
from .tokens import Measured, TokenCounter, lengths_for

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


@dataclass(frozen=True)
class _Region:
    """What a pass's summary turn is made of besides the summary: the user's words, the identifiers,
    and the length left for the summarizer's own text (`room`)."""

    span: tuple[int, int]  # the region's [start, end)
    identifiers: tuple[str, ...]  # of the summarized turns, most recent first
    words: UserWords
    room: int
    goal: str | None = None  # handoff: the row's first user request


@dataclass
class _Attempt:
    """One pass's result: the assembled turns, their length, and what made them."""

    out: list[dict[str, Any]]
    tokens: int
    plan: Plan
    body: str
    body_tokens: int  # of the summary turn's body (its text, the user's words, the index)
    text_tokens: int  # of the summarizer's own text
    sourced: _Sourced
    region: _Region
    # The summary turn is over its budget because the summarizer wrote more than its room. (Within the
    # budget a long summary only crowds the index out: asking again would not shorten the row, since
    # the index fills what a shorter summary leaves.)
    overshot: bool


@dataclass
class _Tally:
    """What a row's passes cost, summed over them."""

    passes: int = 0
    calls: int = 0
    errors: int = 0

    def add(self, calls: int, errors: int) -> None:
        self.passes += 1
        self.calls += calls
        self.errors += errors


class TrajectoryCompressor:
    """Planner + tokenizer + summarizer + assembly + metrics for one row."""

    def __init__(
        self,
        config: CompressionConfig,
        counter: TokenCounter | None = None,
        summarizer: Summarizer | None = None,
    ):
        self.config = config
        self.counter = counter or TokenCounter.for_config(config)
        self.lengths = lengths_for(config.count_mode, self.counter)
        self.summarizer = summarizer or make_summarizer(config.summarizer, config, self.counter)
        self.fallback = None
        if config.on_failure == "extractive" and self.summarizer.name != "extractive":
            self.fallback = make_summarizer("extractive", config, self.counter)
        self.schema = RowSchema.from_config(config)
        opening = summary_turn.opening(config.summary_prefix, config.summary_style)
        self._body_budget = max(1, config.summary_target_tokens - self.counter.count([opening])[0])
        self._user_cap = max(1, int(config.summary_target_tokens * summary_turn.USER_TURN_SHARE))
        self.params = plan_params(config, self.lengths)

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
        measured = await self._measure(native, fmt, turns, costs_above=self.config.target_max_tokens)
        if measured.total <= self.config.target_max_tokens:
            return native, self._unchanged(Outcome.SKIPPED_UNDER_TARGET, turns, measured, None)
        p = self._plan(turns, measured, fmt)
        if p.decision is not Decision.COMPRESS:
            region = (p.start, p.end) if p.decision is Decision.NO_NET_SAVINGS else None
            return native, self._unchanged(_UNCHANGED[p.decision], turns, measured, region, cannot_fit=True)
        return await self._passes(native, fmt, turns, measured, p)

    async def _measure(self, native, fmt, turns: Sequence[Turn], costs_above: int | None) -> Measured:
        messages = fmt.chat_messages(native, self.config.chat_roles) if self.lengths.mode == "chat_template" else ()
        return await self.lengths.ameasure([t.text for t in turns], messages, costs_above)

    def _plan(self, turns: Sequence[Turn], measured: Measured, fmt, more: int = 0) -> Plan:
        """The region for `measured`, asking for `more` tokens of savings than the estimate says."""
        params = dataclasses.replace(
            self.params, summary_tokens=self.params.summary_tokens + more, alternation=fmt.alternation
        )
        return plan([t.role for t in turns], measured.costs, params, fixed=measured.overhead)

    async def _passes(self, native, fmt, turns: Sequence[Turn], measured: Measured, p: Plan):
        """Summarize, measure the real row, and while it is still over: ask again with a firmer
        length when the summary overshot its budget, extend the region when it can grow."""
        target = self.config.target_max_tokens
        tally, best, last = _Tally(), None, None
        stated, previous, covered, more, region = None, None, 0, 0, None
        while True:
            if region is None or region.span != (p.start, p.end):  # a firmer re-ask keeps its region
                region = await asyncio.to_thread(self._region, turns, p)
            stated = None if stated is None or stated >= region.room else stated
            request = SummaryRequest(
                tuple(turns[p.start : p.end]), region.room, self.config.per_trajectory_timeout, stated,
                previous, covered, self._text_costs(measured, p), region.identifiers,
                self.config.summary_style, region.goal,
            )
            try:
                sourced = await self._summarize(request)
            except SummaryError as exc:
                tally.add(exc.api_calls, exc.errors)
                if best is None:
                    return native, self._unchanged(
                        Outcome.FAILED, turns, measured, (p.start, p.end), tally=tally, error=str(exc),
                    )
                break  # an earlier pass's summary stands
            tally.add(sourced.summary.api_calls, sourced.summary.errors)
            last = await self._attempt(native, fmt, turns, measured, p, sourced, region)
            if best is None or last.tokens < best.tokens:
                best = last
            if last.tokens <= target or tally.passes >= self.config.max_passes:
                break
            deficit = last.tokens - target
            if last.overshot:  # ask for less, as much less as it overshot
                stated = max(1, request.stated * region.room * 9 // (last.text_tokens * 10))
                deficit -= last.body_tokens - self._body_budget
            if deficit > 0:
                more += deficit
                wider = self._plan(turns, measured, fmt, more)
                if wider.end > p.end and wider.start == p.start:  # wider, even when the estimate doubts it pays
                    # the earlier summary is updated with the new turns: the summarizer's own text,
                    # not the user's words and the index, which are carried again anyway
                    previous, covered, p = sourced.summary.text, p.end - p.start, wider
                elif not last.overshot:
                    break  # the region is as wide as it may be and the summary within its room
        return self._result(native, turns, measured, best, last, tally)

    async def _attempt(self, native, fmt, turns, measured: Measured, p: Plan, sourced: _Sourced,
                       region: _Region) -> _Attempt:
        body, body_tokens, text_tokens, out, changed = await asyncio.to_thread(
            self._assemble, native, fmt, turns, p, sourced.summary.text, region
        )
        if self.lengths.mode == "turns":  # a turn's count does not depend on its neighbours: count what changed
            costs = measured.costs
            changed_counts = await self.counter.acount([text for _, text in changed])
            kept = sum(costs[: p.start]) + sum(costs[p.end :]) - sum(costs[i] for i, _ in changed if i >= 0)
            tokens = kept + sum(changed_counts)
        else:  # the rendering's pieces the row had are counted already: count the pieces the edit made
            messages = fmt.chat_messages(out, self.config.chat_roles)
            tokens = await asyncio.to_thread(self.lengths.measure_edit, measured, messages)
        overshot = body_tokens > self._body_budget and text_tokens > region.room
        return _Attempt(out, tokens, p, body, body_tokens, text_tokens, sourced, region, overshot)

    def _text_costs(self, measured: Measured, p: Plan) -> tuple[int, ...] | None:
        """The region's turns' token counts, when counting was by turns (a template's costs hold its markup too)."""
        return tuple(measured.costs[p.start : p.end]) if self.lengths.mode == "turns" else None

    def _region(self, turns: Sequence[Turn], p: Plan) -> _Region:
        """The region's identifiers (a secret is none: the index never writes what redaction would hide),
        the user's words, and the room left for the summarizer: the body's budget less the user's
        words (with handoff's headings) and the index's share (CPU work: off the loop)."""
        ids = tuple(kept_whole(identifiers.extract(turns[p.start : p.end]), *self.summarizer.secrets()))
        handoff = self.config.summary_style == summary_turn.HANDOFF
        words = summary_turn.user_words(turns, p.start, p.end, self._user_cap, self.counter, handoff)
        skeleton = summary_turn.compose(self.config.summary_style, "", words)
        unlisted = [ident for ident in ids if ident not in skeleton]
        index = identifiers.INDEX_HEAD + ", ".join(unlisted)
        fixed, index_tokens = self.counter.count([skeleton, index])
        index_room = min(int(self._body_budget * identifiers.INDEX_SHARE), index_tokens)
        # The user's words come first; a summarizer crowded out by them still gets a quarter of the budget.
        room = max(self._body_budget // 4, self._body_budget - fixed - index_room, 1)
        # The first request, unless it is the latest, which the Active Task already holds verbatim.
        requests = [t.text for t in turns[: p.end] if t.role == "human"] if handoff else []
        goal = requests[0] if len(requests) > 1 else None
        return _Region((p.start, p.end), ids, words, room, goal)

    def _assemble(self, native, fmt, turns, p: Plan, text: str, region: _Region):
        """The summary body (the user's words, the identifier index), its and the summarizer's text's
        lengths, and the new turns (CPU work: off the loop)."""
        body = summary_turn.compose(self.config.summary_style, text, region.words)
        body = identifiers.with_index(body, region.identifiers, self._body_budget, self.counter.count)
        body_tokens, text_tokens = self.counter.count([body, text])
        return (body, body_tokens, text_tokens, *assemble(native, fmt, turns, p, self._turn_text(body), self._notice()))

    def _turn_text(self, body: str) -> str:
        return summary_turn.joined(self.config.summary_prefix, self.config.summary_style, body)

    def _result(self, native, turns, measured: Measured, best: _Attempt, last: _Attempt, tally: _Tally):
        p, sourced = best.plan, best.sourced
        region = (p.start, p.end)
        if best.tokens >= measured.total:  # no net saving: the row stays as it was
            return native, self._unchanged(
                Outcome.SUMMARY_TOO_LONG, turns, measured, region, tally=tally, error=sourced.error,
            )
        over = best.tokens > self.config.target_max_tokens
        # Cannot fit: the region reached as far as it may and the summary kept to its room.
        at_limit = last.plan.end >= last.plan.limit and not last.overshot
        return best.out, RowMetrics(
            Outcome.COMPRESSED, measured.total, best.tokens, len(native), len(best.out),
            self.config.target_max_tokens, region, tally.calls, tally.errors, sourced.source, sourced.error,
            passes=tally.passes, cannot_fit=over and at_limit,
            identifier_retention=identifiers.retention(best.region.identifiers, self._turn_text(best.body)),
            human_turns_cut=best.region.words.cut,
            assistant_tokens_kept=assistant_share([t.role for t in turns], measured.costs, region),
        )

    async def _summarize(self, request: SummaryRequest) -> _Sourced:
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

    def _notice(self) -> str:
        return self.config.summary_notice_text if self.config.add_summary_notice else ""

    def _unchanged(self, outcome, turns: Sequence[Turn], measured: Measured, region, tally: _Tally | None = None,
                   error=None, cannot_fit=False) -> RowMetrics:
        """The metrics of a row written as it was: every assistant token kept (a row under the target
        in chat_template mode has no per-turn costs: any assistant turn counts)."""
        tally = tally or _Tally()
        roles = [t.role for t in turns]
        kept = assistant_share(roles, measured.costs, None) if measured.costs else (1.0 if "gpt" in roles else None)
        return RowMetrics(
            outcome, measured.total, measured.total, len(turns), len(turns), self.config.target_max_tokens, region,
            tally.calls, tally.errors, None, error, passes=tally.passes, cannot_fit=cannot_fit,
            assistant_tokens_kept=kept,
        )


def plan_params(config: CompressionConfig, lengths) -> PlanParams:
    """The planner's settings. What compressing adds to a row is planned as the summary turn at its
    budget, the template's markers around it and the notice; the passes then measure the real row."""
    added = config.summary_target_tokens + lengths.turn_markup(config.chat_roles["human"])
    if config.add_summary_notice:
        added += lengths.counter.count([config.summary_notice_text])[0]
    return PlanParams.from_config(config, summary_tokens=added)


def assemble(native, fmt, turns: Sequence[Turn], p: Plan, summary: str, notice: str):
    """The new turn list with `summary` (the summary turn's whole text) in place of the region, and
    the (original index or -1, text) of every turn it adds or edits."""
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
