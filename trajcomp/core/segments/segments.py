"""compression.segments: one input row replayed as the live compactor lives it, one output row per view.

The turns are walked in groups (a turn and the results of its calls; a human turn with the answer after
it). While the next group fits the current row, as `count_mode` counts it, it joins the row; when it does
not, the row is complete, and the next one is the protected head, ONE summary turn covering every turn
between the head and the carried tail (the previous summary updated with the turns since, through
`Passes`, as a row's re-asks are), the carried tail, and the groups that follow. A live agent's own
compaction summary in the row (compaction.py) ends a row too, and is the previous summary to update.
With `compression.prune`, a row about to be cut, or still over after its compaction, first has old tool
outputs stubbed (prune_fit.py), as few as fit it; the stubs stay in every later view, as in a live agent's
context, while summaries are written from the original turns.
In a row that keeps LLaMA-Factory's alternation the head ends at the first human turn, the summary
joins it, and no tail is carried: the observation (or user turn) after the cut joins the summary's user turn
too, so no assistant turn is in two rows (LLaMA-Factory trains every one it reads, marked or not).
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any, Sequence

from ..dialects import compaction
from ..summary.assembly import Assembler
from ..config import CompressionConfig
from ..planning.fit import Floor, group_floor, segment_floor
from ..summary.passes import Passes
from ..planning.planner import Decision, Plan, PlanParams, protected_bounds
from ..planning.prune_fit import Pruner
from ..summary.sourcing import Sourcing
from ..counting.tokens import Measured, TokenCounter
from .walk import Replay, Row, Segment, folded


class Segmenter:
    """Cuts rows into segments with the compressor's counting, planning, summarizers and assembly."""

    def __init__(self, config: CompressionConfig, counter: TokenCounter, lengths, params: PlanParams, sourcing: Sourcing):
        self.config, self.counter, self.lengths, self.params, self.sourcing = config, counter, lengths, params, sourcing
        self.fixed = Passes(config, counter, lengths, params, sourcing, Assembler(config, counter))
        self.pruner = Pruner(config, lengths, params) if config.prune else None

    async def replay(self, row: Row) -> Replay:
        head = self._head_end(row)
        seg = Segment(list(row.native[:head]), list(range(head)), 0, head, head, await self._tokens(row, row.native[:head]))
        out = Replay([], [], [])
        previous, upto = None, head
        row.cut_list = row.cuts(head)
        for c in row.cut_list:
            if seg.end in row.summaries:  # a live agent's compaction: its summary opens a row
                if seg.end > max(head, seg.new_from):
                    out.segments.append(await self._exact(row, seg))
                    seg = await self._reopened(row, head, seg.end)
                previous, upto = compaction.body(row.turns[seg.end].text, self.config.summary_prefix), seg.end + 1
            grown = None if seg.closed else await self._grown(row, seg, c)
            if grown is None and seg.end > max(head, seg.new_from):
                out.segments.append(await self._exact(row, seg))
                if self._hopeless(row, head, seg.end, c):  # the next row is over whatever it holds: no summary
                    seg = await self._unsummarized(row, head, seg.end)  # (the next one bought covers these turns too)
                else:
                    made, example, metrics = await self._compact(row, seg, head, c, previous, upto, len(out.segments))
                    if made is None:
                        out.failed = metrics
                        return out
                    seg = made
                    out.examples.append(example)
                    out.passes.append(metrics)
                    previous, upto = example.summary, seg.body_from
                    grown = await self._grown(row, seg, c)
            seg = grown or await self._closed(row, seg, c) or await self._extended(row, seg, c, None)
        out.segments.append(await self._exact(row, seg))
        return out

    def floor(self, row: Row) -> Floor | None:
        """What no rule may shorten in the smallest segment the row could give (core/planning/fit.py); None when
        some segment could fit."""
        head = self._head_end(row)
        return segment_floor(head, row.cuts(head), self._lasting(row, head), row.measured.overhead,
                             self._summary_cost(self._budget(0)), self.config.target_max_tokens)

    def _hopeless(self, row: Row, head: int, start: int, c: int) -> bool:
        """Whether a row of the head, the smallest summary and the group [start, c) is over the target (what no
        rule may shorten), under compression.cannot_fit keep or reject: that row is then written without a summary,
        flagged, and none is bought for it."""
        if self.config.cannot_fit == "shorten":
            return False
        return group_floor(head, (start, c), self._lasting(row, head), row.measured.overhead,
                           self._summary_cost(self._budget(0)), self.config.target_max_tokens).over_by > 0

    def _lasting(self, row: Row, head: int) -> list[int]:
        """Each turn's tokens no rule may shorten: with compression.prune a tool output after the head may
        become a stub, which is counted as nothing (a floor, never more than the row will hold)."""
        if self.pruner is None:
            return row.costs
        return [0 if i >= head and role == "tool" else cost for i, (role, cost) in enumerate(zip(row.roles, row.costs))]

    async def _exact(self, row: Row, seg: Segment) -> Segment:
        """`seg` as it is written: its length counted, when it was summed from its turns' costs."""
        if not seg.estimated:
            return seg
        tokens = await self._tokens(row, seg.native)
        return replace(seg, tokens=tokens, estimated=False,
                       cannot_fit=seg.cannot_fit or tokens > self.config.target_max_tokens)

    def _head_end(self, row: Row) -> int:
        """The protected head; in an alternation, the turns up to the first human one, which the summary
        joins; never past a live summary."""
        if row.join:
            head = row.roles.index("human") + 1 if "human" in row.roles else 1
        else:
            head = protected_bounds(row.roles, replace(self.params, protect_last_n_turns=0))[0]
        return min([head, *row.summaries])

    async def _grown(self, row: Row, seg: Segment, c: int) -> Segment | None:
        """`seg` with the group up to `c` when that fits, with the fewest stubs it takes (compression.prune);
        None when it does not fit even so."""
        fits = await self._fits(row, seg, c)
        if fits is not None:
            return await self._extended(row, seg, c, *fits)
        if self.pruner is None:
            return None
        native, origins = seg.native + row.current[seg.end:c], seg.origins + list(range(seg.end, c))
        pruned, stubs = await self._pruned(row, native, self._old(row, origins))
        if pruned is None or pruned.measured.total > self.config.target_max_tokens:
            return None
        for stub, saved in stubs:
            row.stub(origins[stub.index], stub, saved)
        return replace(seg, native=pruned.native, origins=origins, end=c, tokens=pruned.measured.total)

    async def _closed(self, row: Row, seg: Segment, c: int) -> Segment | None:
        """`seg` with the group up to `c`, which fits no row otherwise, fit by stubbing also the outputs it closes
        on (after its last assistant turn: what no turn of this row reads), as few as fit: the row then ends
        there. Those stubs are this row's only; a later row carries the outputs whole or summarizes them."""
        if self.pruner is None:
            return None
        native, origins = seg.native + row.current[seg.end:c], seg.origins + list(range(seg.end, c))
        pruned, old = await self._pruned(row, native, self._old(row, origins))
        native = native if pruned is None else pruned.native
        closing = range(max(i for i, t in enumerate(row.fmt.turns(native)) if t.role != "tool") + 1, len(native))
        last, stubs = await self._pruned(row, native, closing)
        if last is None or last.measured.total > self.config.target_max_tokens:
            return None
        for stub, saved in old:
            row.stub(origins[stub.index], stub, saved)
        for stub, saved in stubs:
            row.closing[origins[stub.index]] = (stub, saved)
        return replace(seg, native=last.native, origins=origins, end=c, tokens=last.measured.total, closed=True)

    def _old(self, row: Row, origins: list[int]) -> list[int]:
        """The view's turns pruning may stub: outside its protected head and tail, and no stub already."""
        start, end = protected_bounds([row.roles[i] if i >= 0 else "human" for i in origins], self.pruner.params)
        return [i for i in range(start, end) if origins[i] not in row.stubs]

    async def _pruned(self, row: Row, native: list[dict[str, Any]], within: Sequence[int]):
        """The view `native` with the fewest stubs `within` it that fit it (prune_fit.py), or every stub (None:
        none to make); and each stub with the tokens it saves (its text's count against its output's)."""
        turns = row.fmt.turns(native)
        if self.lengths.mode == "turns":
            counts, fixed = await self.counter.acount([t.text for t in turns]), row.measured.overhead
            measured = Measured(sum(counts) + fixed, counts, fixed)
        else:  # with its pieces, which the pruner's edits are measured against
            messages = row.fmt.chat_messages(native, self.config.chat_roles)
            measured = await self.lengths.ameasure([t.text for t in turns], messages, 0)
        pruned = await self.pruner.fit(native, row.fmt, turns, measured, within)
        if pruned is None:
            return None, []
        before = await self.counter.acount([turns[s.index].text for s in pruned.stubbed])
        after = await self.counter.acount([s.text for s in pruned.stubbed])
        return pruned, [(stub, b - a) for stub, b, a in zip(pruned.stubbed, before, after)]

    async def _extended(self, row: Row, seg: Segment, c: int, tokens: int | None, estimated: bool = False) -> Segment:
        """`seg` with the group up to `c`; one that does not fit even so is there, flagged."""
        native = seg.native + [dict(t) for t in row.current[seg.end:c]]
        if tokens is None:  # over: counted whole, since the turns' sum misses the template's closing pieces
            tokens = await self._tokens(row, native)
        return replace(seg, native=native, origins=seg.origins + list(range(seg.end, c)), end=c, tokens=tokens,
                       cannot_fit=seg.cannot_fit or tokens > self.config.target_max_tokens, estimated=estimated)

    async def _fits(self, row: Row, seg: Segment, c: int) -> tuple[int, bool] | None:
        """The row's length with the group up to `c` and whether it is summed from the turns' costs (counted
        when the row is written), or None when that is over the target."""
        target = self.config.target_max_tokens
        estimate = seg.tokens + row.cost(seg.end, c)
        if self.lengths.mode == "turns" or estimate > target * 1.25:  # by turns the sum is exact
            return (estimate, False) if estimate <= target else None
        # chat_template: rendering every candidate cut would count the view again and again. The farthest
        # cut its costs put under the target is counted once; when it fits, so do the cuts before it (a row
        # grows with its turns), which then take their costs' sum.
        key = (seg.new_from, seg.body_from, seg.summarized, seg.carried)
        far = row.ahead.get(key)
        if far is None or far[0] < c:
            far = await self._farthest(row, seg, c, estimate, key)
        if far is not None and far[0] >= c:
            return (far[1], False) if far[0] == c else (estimate, True)
        tokens = await self._tokens(row, seg.native + row.current[seg.end:c])
        return (tokens, False) if tokens <= target else None

    async def _farthest(self, row: Row, seg: Segment, c: int, estimate: int, key: tuple) -> tuple[int, int] | None:
        """The farthest cut from `c` on whose costs' sum is under the target, with its counted length, when
        that fits (kept for `key`'s later cuts); None when it does not, or is `c` itself."""
        target = self.config.target_max_tokens
        ahead = [d for d in row.cut_list if d > c and seg.tokens + row.cost(seg.end, d) <= target]
        if not ahead or estimate > target:
            return None
        tokens = await self._tokens(row, seg.native + row.current[seg.end:ahead[-1]])
        if tokens > target:
            return None
        row.ahead[key] = (ahead[-1], tokens)
        return row.ahead[key]

    async def _tokens(self, row: Row, native: list[dict[str, Any]]) -> int:
        if self.lengths.mode == "turns":
            return sum(await self.counter.acount([t.text for t in row.fmt.turns(native)])) + row.measured.overhead
        messages = row.fmt.chat_messages(native, self.config.chat_roles)
        if row.measured.pieces is not None:  # a view shares most of its rendering's pieces with the input's:
            # only the pieces the input's rendering lacks are counted (exact: split_tokens.py), not the whole
            # view again at every candidate cut
            return await asyncio.to_thread(self.lengths.measure_edit, row.measured, messages)
        return (await self.lengths.ameasure([], messages, None)).total

    async def _reopened(self, row: Row, head: int, at: int) -> Segment:
        """The row a live summary at `at` opens: the head, then the turns from the summary on."""
        native = list(row.current[:head])
        return Segment(native, list(range(head)), at, at, at, await self._tokens(row, native))

    async def _unsummarized(self, row: Row, head: int, at: int) -> Segment:
        """The row of the head and the turns from `at` on, with no summary between: a user-side turn at `at` joins
        the head's user turn as it would join a summary's (_compact), so roles still alternate."""
        if not (row.roles[head - 1] == "human" and row.roles[at] != "gpt" and (row.join or row.roles[at] == "human")):
            return await self._reopened(row, head, at)
        native = folded(row.fmt, row.current[:head] + [row.current[at]], head - 1)
        return Segment(native, list(range(head)), at, at, at + 1, await self._tokens(row, native))

    async def _compact(self, row: Row, seg: Segment, head: int, c: int, previous: str | None, upto: int, index: int):
        """The row after `seg`, made to take the group up to `c`: head, summary, carried tail; with the
        summary's example and its metrics. (None, None, metrics) when no summary could be had."""
        # the summary joins the head's user turn in an alternation, and where the head ends on a user turn (a
        # live summary in the assistant's role follows it): never two user turns in a row
        joins = row.join or row.roles[head - 1] == "human"
        t = self._tail_start(row, seg, head, c, joins)
        # with no tail, the turn after the cut (user-side) joins the summary's user turn: a trainer that cannot
        # mask (LLaMA-Factory) then sees no assistant turn twice, and an observation never follows the summary
        folds = joins and t == seg.end and seg.end < len(row.roles) and row.roles[seg.end] != "gpt"
        end = seg.end + (t == seg.end and seg.end < len(row.roles) and row.roles[seg.end] == "human" and not joins)
        end += folds
        p = Plan(Decision.COMPRESS, 0, head, t, row.cost(head, t), merge_into_next=not joins and t < end
                 and row.roles[t] == "human", merge_into_prev=joins, limit=t)
        measured = await self._measured(row, end)
        passes = self._passes(self._budget(row.cost(head, t)))
        # the head and the tail keep their stubs; the summary is written from the original turns
        fixed = row.measured.overhead
        original = Measured(sum(row.measured.costs[:end]) + fixed, row.measured.costs[:end], fixed) if row.stubs else None
        out, metrics, best = await passes.run(row.current[:end], row.fmt, row.turns[:end], measured,
                                              replace(p, total_tokens=measured.total), original, previous,
                                              max(0, upto - head))
        if best is None:
            return None, None, metrics
        t = best.plan.end
        origins = list(range(head)) + ([] if joins or best.plan.merge_into_next else [-1]) + list(range(t, end))
        tokens = best.tokens
        if folds and t == seg.end:  # (the passes may have summarized the boundary turn too)
            out, origins = folded(row.fmt, out, head - 1), origins[:-1]
            tokens = await self._tokens(row, out)
        made = Segment(out, origins, seg.end, t, end, tokens, t - head, seg.end - t, compacted=True)
        example = self.sourcing.example(best.request, best.sourced.summary.text, index)
        return made, example, metrics

    def _tail_start(self, row: Row, seg: Segment, head: int, c: int, joins: bool) -> int:
        """Where the carried tail starts: `tail_tokens` of whole groups, else `last_n_turns` turns at least;
        then, oldest first, fewer turns while the head, the summary at its budget, the tail and the group up
        to `c` would be over the target (the summary covers them instead), down to no tail. At an assistant
        turn where the summary `joins` a user turn; after the turns the previous summary covers."""
        roles, end = row.roles, seg.end

        if row.join:  # LLaMA-Factory trains every assistant turn of a row: it carries none (the cut's observation
            return end  # or user turn joins the summary's user turn, see _compact)

        def starts_tail(t: int) -> bool:
            if t == end:  # no tail: the next group follows the summary (a user turn after it joins the summary's)
                return True
            return roles[t] == "gpt" if joins else roles[t] != "tool"

        # the summary must have more than the user's words to cover (those it carries verbatim)
        said = next((i for i in range(seg.body_from, end) if roles[i] != "human"), end)
        fits = [t for t in range(said + 1, end + 1) if starts_tail(t)]
        if not fits:
            return end
        if self.config.tail_tokens:
            within = [t for t in fits if row.cost(t, end) <= self.config.tail_tokens]
            wanted = within[0] if within else fits[-1]
        else:
            enough = [t for t in fits if end - t >= self.config.protect_last_n_turns]
            wanted = enough[-1] if enough else fits[0]
        # chosen before the summarizer is asked, from the summary's budget: one summary per compaction
        room = self.config.target_max_tokens - row.measured.overhead - row.cost(0, head)
        takes = [t for t in fits if t >= wanted
                 and self._summary_cost(self._budget(row.cost(head, t))) + row.cost(t, c) <= room]
        return takes[0] if takes else fits[-1]

    async def _measured(self, row: Row, end: int) -> Measured:
        if self.lengths.mode == "turns":
            costs = row.costs[:end]
            return Measured(sum(costs) + row.measured.overhead, costs, row.measured.overhead)
        if row.measured.pieces is not None:  # the view's costs are the input's (its stubs' taken off): the passes
            # plan with them and count each summarized row exactly by the pieces it does not share with the input
            costs = row.costs[:end]
            return Measured(sum(costs) + row.measured.overhead, costs, row.measured.overhead, row.measured.pieces)
        messages = row.fmt.chat_messages(row.current[:end], self.config.chat_roles)
        return await self.lengths.ameasure([t.text for t in row.seen[:end]], messages, 0)

    def _budget(self, span_tokens: int) -> int:
        """A summary's budget: summary_target_tokens, or summary_ratio of the span it replaces, within
        summary_min_tokens and summary_max_tokens (and at most half the target)."""
        cfg = self.config
        if not cfg.summary_ratio:
            return cfg.summary_target_tokens
        budget = min(max(round(span_tokens * cfg.summary_ratio), cfg.summary_min_tokens), cfg.summary_max_tokens)
        return max(1, min(budget, cfg.target_max_tokens // 2))

    def _summary_cost(self, budget: int) -> int:
        """What a summary at `budget` adds to a row as planned: with the template's markers around it and the
        notice (what self.params adds to summary_target_tokens)."""
        return budget + self.params.summary_tokens - self.config.summary_target_tokens

    def _passes(self, budget: int) -> Passes:
        """The passes at this summary's budget."""
        if budget == self.config.summary_target_tokens:
            return self.fixed
        cfg = self.config.replace(summary_target_tokens=budget)
        params = replace(self.params, summary_tokens=self._summary_cost(budget))
        return Passes(cfg, self.counter, self.lengths, params, self.sourcing, Assembler(cfg, self.counter))
