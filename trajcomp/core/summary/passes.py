"""A row's summary passes: summarize the region, measure the row that makes, and while it is still
over the target ask again with a firmer length or extend the region; the shortest row is kept."""

from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import dataclass
from typing import Any, Sequence

from . import identifiers
from .assembly import Assembler, Region
from ..config import CompressionConfig
from ..metrics import Outcome, RowMetrics, assistant_share
from ..planning.planner import Plan, PlanParams, plan
from ..dialects.rows import Turn
from .sourcing import Sourced, Sourcing
from .summarizer import SummaryError, SummaryRequest
from ..counting.tokens import Measured, TokenCounter


@dataclass
class Attempt:
    """One pass's result: the assembled turns, their length, and what made them."""

    out: list[dict[str, Any]]
    tokens: int
    plan: Plan
    body: str
    body_tokens: int  # of the summary turn's body (its text, the user's words, the index)
    text_tokens: int  # of the summarizer's own text
    sourced: Sourced
    region: Region
    request: SummaryRequest
    # The summary turn is over its budget because the summarizer wrote more than its room. (Within the
    # budget a long summary only crowds the index out: asking again would not shorten the row, since
    # the index fills what a shorter summary leaves.)
    overshot: bool


@dataclass
class Tally:
    """What a row's passes cost, summed over them."""

    passes: int = 0
    calls: int = 0
    errors: int = 0
    checks_failed: tuple[str, ...] = ()  # one check name per answer turned away
    summaries: int = 0  # passes that got a summary, and the tokens those were billed
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def add(self, calls: int, errors: int, checks_failed: tuple[str, ...] = ()) -> None:
        self.passes += 1
        self.calls += calls
        self.errors += errors
        self.checks_failed += tuple(checks_failed)

    def bought(self, summary) -> None:
        """A pass's summary: counted with the tokens its calls were billed."""
        self.add(summary.api_calls, summary.errors, summary.checks_failed)
        self.summaries += 1
        self.prompt_tokens += summary.prompt_tokens
        self.completion_tokens += summary.completion_tokens

    def billed(self) -> tuple[int, int, int]:
        return self.summaries, self.prompt_tokens, self.completion_tokens


def plan_region(params: PlanParams, turns: Sequence[Turn], measured: Measured, fmt, more: int = 0) -> Plan:
    """The region for `measured`, asking for `more` tokens of savings than the estimate says."""
    params = dataclasses.replace(params, summary_tokens=params.summary_tokens + more, alternation=fmt.alternation)
    return plan([t.role for t in turns], measured.costs, params, fixed=measured.overhead)


def unchanged(outcome: Outcome, turns: Sequence[Turn], measured: Measured, target: int, region,
              tally: Tally | None = None, error=None, cannot_fit=False) -> RowMetrics:
    """The metrics of a row written as it was: every assistant token kept (a row under the target
    in chat_template mode has no per-turn costs: any assistant turn counts)."""
    tally = tally or Tally()
    roles = [t.role for t in turns]
    kept = assistant_share(roles, measured.costs, None) if measured.costs else (1.0 if "gpt" in roles else None)
    return RowMetrics(
        outcome, measured.total, measured.total, len(turns), len(turns), target, region,
        tally.calls, tally.errors, None, error, passes=tally.passes, cannot_fit=cannot_fit,
        assistant_tokens_kept=kept, summary_checks_failed=tally.checks_failed, bought=tally.billed(),
    )


class Passes:
    """Runs a row's passes with the compressor's counting, planning, summarizers and assembly."""

    def __init__(self, config: CompressionConfig, counter: TokenCounter, lengths, params: PlanParams,
                 sourcing: Sourcing, assembler: Assembler):
        self.config, self.counter, self.lengths, self.params = config, counter, lengths, params
        self.sourcing, self.assembler = sourcing, assembler

    async def run(self, native, fmt, turns: Sequence[Turn], measured: Measured, p: Plan,
                  original: Measured | None = None, previous: str | None = None, covered: int = 0):
        """The compressed turns, their metrics, and the pass whose row was kept; the row as it was when no
        summary could be had or none saved anything (then no pass: None).

        A pruned row (core/planning/prune_fit.py) is `native` and `measured` with its stubs, while `turns` and
        `original` are the input's: summaries are written from the original turns, never from stubs.
        `previous` summarizes the region's first `covered` turns (an earlier compaction's): it is updated."""
        target = self.config.target_max_tokens
        tally, best, last = Tally(), None, None
        stated, more, region = None, 0, None
        while True:
            if region is None or region.span != (p.start, p.end):  # a firmer re-ask keeps its region
                region = await asyncio.to_thread(self.assembler.region, turns, p, self.sourcing.summarizer.secrets())
            stated = None if stated is None or stated >= region.room else stated
            request = SummaryRequest(
                tuple(turns[p.start : p.end]), region.room, self.config.per_trajectory_timeout, stated,
                previous, covered, self._text_costs(original or measured, p), region.identifiers,
                self.config.summary_style, region.goal,
            )
            try:
                sourced = await self.sourcing.summarize(request)
            except SummaryError as exc:
                tally.add(exc.api_calls, exc.errors, exc.checks_failed)
                if best is None:
                    return native, unchanged(
                        Outcome.FAILED, turns, measured, target, (p.start, p.end), tally=tally, error=str(exc),
                    ), None
                break  # an earlier pass's summary stands
            tally.bought(sourced.summary)
            last = await self._attempt(native, fmt, turns, measured, p, sourced, region, request)
            if best is None or last.tokens < best.tokens:
                best = last
            if last.tokens <= target or tally.passes >= self.config.max_passes:
                break
            deficit = last.tokens - target
            if last.overshot:  # ask for less, as much less as it overshot
                stated = max(1, request.stated * region.room * 9 // (last.text_tokens * 10))
                deficit -= last.body_tokens - self.assembler.body_budget
            if deficit > 0:
                more += deficit
                wider = plan_region(self.params, turns, measured, fmt, more)
                if wider.end > p.end and wider.start == p.start:  # wider, even when the estimate doubts it pays
                    # the earlier summary is updated with the new turns: the summarizer's own text,
                    # not the user's words and the index, which are carried again anyway
                    previous, covered, p = sourced.summary.text, p.end - p.start, wider
                elif not last.overshot:
                    break  # the region is as wide as it may be and the summary within its room
        out, metrics = self._result(native, turns, measured, best, last, tally)
        return out, metrics, (best if out is best.out else None)

    async def _attempt(self, native, fmt, turns, measured: Measured, p: Plan, sourced: Sourced,
                       region: Region, request: SummaryRequest) -> Attempt:
        made = await asyncio.to_thread(self.assembler.assemble, native, fmt, turns, p, sourced.summary.text, region)
        if self.lengths.mode == "turns":  # a turn's count does not depend on its neighbours: count what changed
            costs = measured.costs
            # urgent: the rows behind this one wait for it to be written
            changed_counts = await self.counter.acount([text for _, text in made.changed], urgent=True)
            kept = sum(costs[: p.start]) + sum(costs[p.end :]) - sum(costs[i] for i, _ in made.changed if i >= 0)
            tokens = kept + sum(changed_counts) + measured.overhead  # the frame's, which no edit changes
        else:  # the rendering's pieces the row had are counted already: count the pieces the edit made
            messages = fmt.chat_messages(made.out, self.config.chat_roles)
            tokens = await asyncio.to_thread(self.lengths.measure_edit, measured, messages)
        overshot = made.body_tokens > self.assembler.body_budget and made.text_tokens > region.room
        return Attempt(made.out, tokens, p, made.body, made.body_tokens, made.text_tokens, sourced, region, request,
                       overshot)

    def _text_costs(self, measured: Measured, p: Plan) -> tuple[int, ...] | None:
        """The region's turns' token counts, when counting was by turns (a template's costs hold its markup too)."""
        return tuple(measured.costs[p.start : p.end]) if self.lengths.mode == "turns" else None

    def _result(self, native, turns, measured: Measured, best: Attempt, last: Attempt, tally: Tally):
        p, sourced, target = best.plan, best.sourced, self.config.target_max_tokens
        region = (p.start, p.end)
        if best.tokens >= measured.total:  # no net saving: the row stays as it was
            return native, unchanged(
                Outcome.SUMMARY_TOO_LONG, turns, measured, target, region, tally=tally, error=sourced.error,
            )
        over = best.tokens > target
        # Cannot fit: the region reached as far as it may and the summary kept to its room.
        at_limit = last.plan.end >= last.plan.limit and not last.overshot
        return best.out, RowMetrics(
            Outcome.COMPRESSED, measured.total, best.tokens, len(native), len(best.out),
            target, region, tally.calls, tally.errors, sourced.source, sourced.error,
            passes=tally.passes, cannot_fit=over and at_limit,
            identifier_retention=identifiers.retention(best.region.identifiers, self.assembler.turn_text(best.body)),
            human_turns_cut=best.region.words.cut,
            assistant_tokens_kept=assistant_share([t.role for t in turns], measured.costs, region),
            summary_checks_failed=tally.checks_failed, bought=tally.billed(),
        )
