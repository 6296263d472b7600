"""What takes a region's place: its identifiers, the user's words and the summarizer's room, then the
summary turn's body and the new turn list around it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from ..dialects import compaction, summary_turn
from . import identifiers
from ..config import CompressionConfig
from ..planning.planner import Plan
from .redact import kept_whole
from ..dialects.rows import Turn
from ..dialects.summary_turn import UserWords
from ..counting.tokens import TokenCounter


@dataclass(frozen=True)
class Region:
    """What a pass's summary turn is made of besides the summary: the user's words, the identifiers,
    and the length left for the summarizer's own text (`room`)."""

    span: tuple[int, int]  # the region's [start, end)
    identifiers: tuple[str, ...]  # of the summarized turns, most recent first
    words: UserWords
    room: int
    goal: str | None = None  # handoff: the row's first user request


@dataclass(frozen=True)
class Assembled:
    """A summary put in place: the new turns, the body and its length, the summarizer's text's length,
    and the (original index or -1, text) of every turn added or edited."""

    out: list[dict[str, Any]]
    changed: list[tuple[int, str]]
    body: str
    body_tokens: int
    text_tokens: int


class Assembler:
    """Builds the summary turn within `summary_target_tokens` and puts it in the region's place."""

    def __init__(self, config: CompressionConfig, counter: TokenCounter):
        self.config = config
        self.counter = counter
        opening = summary_turn.opening(config.summary_prefix, config.summary_style)
        self.body_budget = max(1, config.summary_target_tokens - counter.count([opening])[0])
        self._user_cap = max(1, int(config.summary_target_tokens * summary_turn.USER_TURN_SHARE))

    def region(self, turns: Sequence[Turn], p: Plan, secrets: Sequence[str]) -> Region:
        """The region's identifiers (a secret is none: the index never writes what redaction would hide),
        the user's words, and the room left for the summarizer: the body's budget less the user's
        words (with handoff's headings) and the index's share (CPU work: off the loop)."""
        ids = tuple(kept_whole(identifiers.extract(turns[p.start : p.end]), *secrets))
        handoff = self.config.summary_style == summary_turn.HANDOFF
        words = summary_turn.user_words(turns, p.start, p.end, self._user_cap, self.counter, handoff,
                                        self.config.summary_prefix)
        skeleton = summary_turn.compose(self.config.summary_style, "", words)
        unlisted = [ident for ident in ids if ident not in skeleton]
        index = identifiers.INDEX_HEAD + ", ".join(unlisted)
        fixed, index_tokens = self.counter.count([skeleton, index])
        index_room = min(int(self.body_budget * identifiers.INDEX_SHARE), index_tokens)
        # The user's words come first; a summarizer crowded out by them still gets a quarter of the budget.
        room = max(self.body_budget // 4, self.body_budget - fixed - index_room, 1)
        # The first request, unless it is the latest, which the Active Task already holds verbatim.
        requests = [t.text for t in turns[: p.end] if t.role == "human"
                    and not compaction.is_summary(t.text, self.config.summary_prefix)] if handoff else []
        goal = requests[0] if len(requests) > 1 else None
        return Region((p.start, p.end), ids, words, room, goal)

    def assemble(self, native, fmt, turns: Sequence[Turn], p: Plan, text: str, region: Region) -> Assembled:
        """The summary body (the user's words, the identifier index) around the summarizer's `text`, and
        the new turns (CPU work: off the loop)."""
        body = summary_turn.compose(self.config.summary_style, text, region.words)
        body = identifiers.with_index(body, region.identifiers, self.body_budget, self.counter.count)
        body_tokens, text_tokens = self.counter.count([body, text])
        out, changed = assemble(native, fmt, turns, p, self.turn_text(body), self._notice())
        return Assembled(out, changed, body, body_tokens, text_tokens)

    def turn_text(self, body: str) -> str:
        return summary_turn.joined(self.config.summary_prefix, self.config.summary_style, body)

    def _notice(self) -> str:
        return self.config.summary_notice_text if self.config.add_summary_notice else ""


def assemble(native, fmt, turns: Sequence[Turn], p: Plan, summary: str, notice: str):
    """The new turn list with `summary` (the summary turn's whole text) in place of the region, and
    the (original index or -1, text) of every turn it adds or edits."""
    out: list[dict[str, Any]] = []
    changed: list[tuple[int, str]] = []
    noticed = False
    for i in range(p.start):
        text = turns[i].text
        if notice and not noticed and turns[i].role == "system":
            noticed = True  # a system prompt that says so already (compaction.noticed) keeps its words
            text += "" if compaction.noticed(text, notice) else notice
        elif p.merge_into_prev and i == p.start - 1:  # the summary joins the head's user turn (alternation)
            text = f"{text}\n\n{summary}"
        out.append(fmt.with_text(native[i], text) if text != turns[i].text else dict(native[i]))
        changed += [(i, text)] if text != turns[i].text else []
    rest = p.end
    if p.merge_into_next:
        text = f"{summary}\n\n{turns[p.end].text}"
        out.append(fmt.with_text(native[p.end], text))
        changed.append((p.end, text))
        rest += 1
    elif not p.merge_into_prev:
        out.append(fmt.make_turn("human", summary, native))  # in the shape of the row's messages
        changed.append((-1, summary))
    out.extend(dict(t) for t in native[rest:])
    return out, changed
