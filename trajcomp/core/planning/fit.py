"""Whether a row can fit at all, decided before any summary is asked for: what no rule may shorten (its
protected turns, the smallest summary, the template's own tokens) against the target. A row whose floor is
over cannot fit whatever is summarized or stubbed; compression.cannot_fit says what becomes of it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ..dialects import compaction
from ..dialects.validity import alternation_parity
from .planner import PlanParams, summarizable
from ..dialects.turn import Turn


@dataclass(frozen=True)
class Floor:
    """What no rule may shorten in a row, and by how much it is over the target."""

    spans: tuple[tuple[int, int], ...]  # [start, end) of the turns no rule may shorten
    turn_tokens: int  # those turns' tokens
    summary_tokens: int  # the smallest summary turn the row would need (0: no summary could help)
    fixed: int  # the template's own tokens, in no turn
    target: int

    @property
    def tokens(self) -> int:
        return self.turn_tokens + self.summary_tokens + self.fixed

    @property
    def over_by(self) -> int:
        return self.tokens - self.target

    def to_dict(self) -> dict:
        return {"turns": [list(s) for s in self.spans], "turn_tokens": self.turn_tokens,
                "summary_tokens": self.summary_tokens, "tokens": self.tokens, "over_by": self.over_by}

    def describe(self) -> str:
        """One line for the rejects file and the logs: which turns, and how many tokens over."""
        turns = " and ".join(f"{a}-{b - 1}" if b - a > 1 else str(a) for a, b in self.spans if b > a)
        summary = f" with the smallest summary ({self.summary_tokens})" if self.summary_tokens else ""
        return (f"turns {turns or 'none'}{summary} are {self.tokens} tokens, {self.over_by} over the target "
                f"{self.target}: no rule may shorten them")


def plain_floor(turns: Sequence[Turn], costs: Sequence[int], fixed: int, params: PlanParams,
                alternation: bool, prefix: str) -> Floor | None:
    """The floor of a row compressed whole: its protected head and tail and the smallest summary between
    them (the whole row when nothing lies between them); None when it is within the target."""
    roles = [t.role for t in turns]
    start, limit = summarizable(roles, params, alternation_parity(roles) if alternation else None)
    live = compaction.latest(turns, 0, limit, prefix) if start < limit else None
    if live:  # a live agent's summary is no protected turn: the region may start there (compressor.updating)
        start = min(start, live)
    if start >= limit:
        floor = Floor(((0, len(roles)),), sum(costs), 0, fixed, params.target_max_tokens)
    else:
        head, tail = (0, start), (limit, len(roles))
        floor = Floor((head, tail), sum(costs[:start]) + sum(costs[limit:]), params.summary_tokens, fixed,
                      params.target_max_tokens)
    return floor if floor.over_by > 0 else None


def group_floor(head: int, group: tuple[int, int], lasting: Sequence[int], fixed: int, summary_tokens: int,
                target: int) -> Floor:
    """The floor of the segment row of the head, a summary of `summary_tokens` (0: none) and the turns `group`."""
    start, end = group
    return Floor(((0, head), group), sum(lasting[:head]) + sum(lasting[start:end]), summary_tokens, fixed, target)


def segment_floor(head: int, cuts: Sequence[int], lasting: Sequence[int], fixed: int, summary_tokens: int,
                  target: int) -> Floor | None:
    """The floor of a row cut into segments (`cuts`: where its groups end; `lasting`: each turn's tokens no
    rule may shorten): the smallest row a segment could be, the head with the first group after it, or
    the head, the smallest summary and a later group (the carried tail may shrink to nothing). None when
    some segment could fit; else no segment could, and the row is never cut into rows that are all over."""
    groups = list(zip([head, *cuts], cuts))
    floors = [group_floor(head, group, lasting, fixed, summary_tokens if k else 0, target)
              for k, group in enumerate(groups)]
    if not floors:
        head_tokens = sum(lasting[:head])
        return Floor(((0, head),), head_tokens, 0, fixed, target) if head_tokens + fixed > target else None
    best = min(floors, key=lambda f: f.tokens)
    return best if best.over_by > 0 else None
