"""The replay's data (core/segments/segments.py): the output rows in the making, one input row's facts for the
walk with the stubs chosen so far, and the joining of a user-side turn into the one before it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from ..dialects import compaction
from ..dialects.validity import alternation_parity
from ..counting.tokens import Measured
from ..dialects.turn import Turn
from ..planning.pruning import Candidate
from ..row_result import SummaryExample


@dataclass
class Segment:
    """One output row in the making: its turns, each turn's input index (-1: the summary turn), where its
    new turns start, and what its compaction did."""

    native: list[dict[str, Any]]
    origins: list[int]
    new_from: int  # input turns from here on are new in this row (trained)
    body_from: int  # where its input turns after the head (and the summary) start
    end: int  # one past its last input turn
    tokens: int
    summarized: int = 0  # input turns its summary covers
    carried: int = 0  # turns carried from the row before
    cannot_fit: bool = False
    closed: bool = False  # its closing outputs are stubs: the next group opens a new row
    compacted: bool = False  # it opens with a summary its compaction bought (Replay.passes holds them in order)
    estimated: bool = False  # `tokens` summed from the turns' costs (chat_template: counted when it is written)


@dataclass
class Replay:
    """A row's segments, the summaries they used, and the passes' metrics, one per summary."""

    segments: list[Segment]
    examples: list[SummaryExample]
    passes: list[Any]  # RowMetrics of each compaction
    failed: Any = None  # the RowMetrics of a compaction that got no summary


class Row:
    """One input row's facts for the walk, and the stubs chosen so far (the turns as the agent's context holds them)."""

    def __init__(self, native, fmt, turns: Sequence[Turn], measured: Measured, prefix: str):
        self.native, self.fmt, self.turns, self.measured = native, fmt, list(turns), measured
        self.roles = [t.role for t in turns]
        self.join = bool(fmt.alternation) and alternation_parity(self.roles) is not None
        self.summaries = {i for i, t in enumerate(turns) if compaction.is_summary(t.text, prefix)}
        self.current, self.seen, self.costs = list(native), list(turns), list(measured.costs)
        self.stubs: dict[int, Candidate] = {}  # input index -> its stub
        self.closing: dict[int, tuple[Candidate, int]] = {}  # outputs stubbed in one row only, with the tokens saved
        self.cut_list: list[int] = []  # where rows may end (cuts)
        self.ahead: dict[tuple, tuple[int, int]] = {}  # chat_template: a view's farthest cut counted, that fits

    def stub(self, i: int, candidate: Candidate, saved: int) -> None:
        """Input turn `i` a stub from now on, `saved` tokens shorter."""
        self.stubs[i] = candidate
        self.current[i], self.seen[i] = candidate.native, Turn("tool", candidate.text)
        self.costs[i] -= saved

    def cuts(self, head: int) -> list[int]:
        """Where a row may end: before a turn that is no result and follows no human turn; in an alternation
        after any assistant turn (LLaMA-Factory trains a row ending on a function_call: the call, whose
        observation opens the next row's tail with it); before a live summary; the row's end."""
        n, roles = len(self.roles), self.roles
        if self.join:
            ok = [c for c in range(head + 1, n) if roles[c - 1] == "gpt"]
        else:
            ok = [c for c in range(head + 1, n) if roles[c] != "tool" and roles[c - 1] != "human"]
        return sorted(set(ok) | {c for c in self.summaries if c >= head} | {n})

    def cost(self, start: int, end: int) -> int:
        return sum(self.costs[start:end])


def folded(fmt, native: list[dict[str, Any]], into: int) -> list[dict[str, Any]]:
    """`native` with its last turn's text appended to turn `into` (the summary's user turn), that turn gone."""
    texts = [t.text for t in fmt.turns(native)]
    joined = fmt.with_text(native[into], f"{texts[into]}\n\n{texts[-1]}")
    return native[:into] + [joined] + native[into + 1:-1]
