"""Fit a row by pruning: the fewest stubs of pruning.py's order that bring it under the target,
counted as the trainer counts (`count_mode`), each stub counted alone where counting allows."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace
from itertools import accumulate
from typing import Any, Sequence

from ..metrics import RowMetrics
from .planner import Decision, PlanParams
from .pruning import Candidate, candidates
from .stubs import StubStyle
from ..counting.tokens import Measured
from ..dialects.turn import Turn


@dataclass(frozen=True)
class Pruned:
    """A row with stubs: its turns (native and as the planner sees them), its length, the stubs in order."""

    native: list[dict[str, Any]]
    turns: list[Turn]
    measured: Measured
    stubbed: tuple[Candidate, ...]


class Pruner:
    """Stubs a row's old tool outputs, as few as it takes to fit, with the compressor's counting."""

    def __init__(self, config, lengths, params: PlanParams):
        self.style = StubStyle(config.prune_style, config.prune_template)
        self.min_chars = config.prune_min_chars
        self.chat_roles = config.chat_roles
        self.target = config.target_max_tokens
        self.lengths, self.params = lengths, params

    async def fit(self, native, fmt, turns: Sequence[Turn], measured: Measured, within: Sequence[int] | None = None) -> Pruned | None:
        """The row with the fewest stubs that fit it, or with every stub when none do; None: nothing to stub.
        `within`: the turns that may be stubbed, instead of those outside the protected head and tail.
        CPU work off the loop; in `turns` mode the stubs are counted together with the other rows in flight."""
        found = await asyncio.to_thread(self._candidates, native, fmt, turns, within)
        counts = await self.lengths.counter.acount([c.text for c in found]) if self._counted(found) else None
        return await asyncio.to_thread(self._choose, native, fmt, turns, found, counts, measured)

    def fit_here(self, native, fmt, turns: Sequence[Turn], measured: Measured) -> Pruned | None:
        """`fit` on this thread (stats and --dry-run, which count in batches of their own)."""
        found = self._candidates(native, fmt, turns)
        counts = self.lengths.counter.count([c.text for c in found]) if self._counted(found) else None
        return self._choose(native, fmt, turns, found, counts, measured)

    def _candidates(self, native, fmt, turns: Sequence[Turn], within: Sequence[int] | None = None) -> list[Candidate]:
        return candidates(native, fmt, turns, self.params, self.style, self.min_chars, within)

    def _counted(self, found: list[Candidate]) -> bool:
        """Whether the stubs are counted alone (`turns` mode), before choosing."""
        return bool(found) and self.lengths.mode == "turns"

    def _choose(self, native, fmt, turns, found: list[Candidate], counts: list[int] | None,
                measured: Measured) -> Pruned | None:
        if not found:
            return None
        if counts is not None:
            return self._fit_by_turns(native, turns, found, counts, measured)
        return self._fit_by_template(native, fmt, turns, found, measured)

    def _fit_by_turns(self, native, turns, found: list[Candidate], counts: list[int], measured: Measured) -> Pruned | None:
        # A turn's count does not depend on its neighbours: each stub changes the row by its own difference.
        costs, total, chosen = list(measured.costs), measured.total, []
        for candidate, count in zip(found, counts):
            if count >= costs[candidate.index]:  # a stub not shorter than its output: the output stays
                continue
            total -= costs[candidate.index] - count
            costs[candidate.index] = count
            chosen.append(candidate)
            if total <= self.target:
                break
        return _pruned(native, turns, chosen, Measured(total, costs, measured.overhead)) if chosen else None

    def _fit_by_template(self, native, fmt, turns, found: list[Candidate], measured: Measured) -> Pruned | None:
        """The stubs' savings estimated by their texts, then the rendering measured exactly, one stub
        more or less at a time, until the fewest stubs that fit are found (CPU work: off the loop)."""
        counter = self.lengths.counter
        before = counter.count([turns[c.index].text for c in found])
        after = counter.count([c.text for c in found])
        useful = [(c, b - a) for c, b, a in zip(found, before, after) if a < b]
        if not useful:
            return None
        chosen = [c for c, _ in useful]
        left = [measured.total - saved for saved in accumulate(s for _, s in useful)]
        k = next((j + 1 for j, total in enumerate(left) if total <= self.target), len(chosen))
        length = self._edited_length(native, fmt, chosen[:k], measured)
        while length > self.target and k < len(chosen):
            k += 1
            length = self._edited_length(native, fmt, chosen[:k], measured)
        while k > 1 and (shorter := self._edited_length(native, fmt, chosen[: k - 1], measured)) <= self.target:
            k, length = k - 1, shorter
        pruned = self._measured(native, fmt, turns, chosen[:k], measured)
        while pruned.measured.total > self.target and k < len(chosen):  # the estimate was short: one stub more
            k += 1
            pruned = self._measured(native, fmt, turns, chosen[:k], measured)
        return pruned

    def _measured(self, native, fmt, turns, chosen: list[Candidate], measured: Measured) -> Pruned:
        """The row with `chosen` stubbed, measured exactly."""
        pruned = _pruned(native, turns, chosen, measured)
        messages = fmt.chat_messages(pruned.native, self.chat_roles)
        return replace(pruned, measured=self.lengths.measure([t.text for t in pruned.turns], messages, self.target))

    def _edited_length(self, native, fmt, chosen: list[Candidate], measured: Measured) -> int:
        stubbed = _stubbed_native(native, chosen)
        return self.lengths.measure_edit(measured, fmt.chat_messages(stubbed, self.chat_roles))


def _stubbed_native(native, chosen: Sequence[Candidate]) -> list[dict[str, Any]]:
    out = list(native)
    for candidate in chosen:
        out[candidate.index] = candidate.native
    return out


def _pruned(native, turns: Sequence[Turn], chosen: list[Candidate], measured: Measured) -> Pruned:
    new_turns = list(turns)
    for candidate in chosen:
        new_turns[candidate.index] = Turn("tool", candidate.text)
    return Pruned(_stubbed_native(native, chosen), new_turns, measured, tuple(chosen))


def kept_and_saved(original: Measured, pruned: Pruned, region: range) -> tuple[list[Candidate], int]:
    """The stubs a summary of `region` leaves, and the tokens they save, counted from the input `original`."""
    kept = [c for c in pruned.stubbed if c.index not in region]
    if pruned.measured.costs and len(kept) < len(pruned.stubbed):
        return kept, sum(original.costs[c.index] - pruned.measured.costs[c.index] for c in kept)
    return kept, original.total - pruned.measured.total


def summary_avoided(pruned: Pruned, target: int, plain: Decision) -> bool:
    """Whether stubs spared the row a summary: they fit it, and without them it would have been summarized
    (`plain`: its plan without stubs). The one definition of the report's and stats' summaries_avoided."""
    return pruned.measured.total <= target and plain is Decision.COMPRESS


def with_pruning(metrics: RowMetrics, original: Measured, pruned: Pruned) -> RowMetrics:
    """`metrics` of a pruned row, counted from the input: its length, and the stubs a summary did not replace."""
    start, end = metrics.region if metrics.was_compressed and metrics.region else (0, 0)
    kept, saved = kept_and_saved(original, pruned, range(start, end))
    return replace(
        metrics, original_tokens=original.total, pruned_outputs=len(kept),
        deduplicated_outputs=sum(c.duplicate for c in kept), pruned_tokens=saved,
    )
