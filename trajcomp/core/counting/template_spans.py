"""Where each turn's span begins in a chat template's rendering: a token belongs to the turn whose
span holds its first character (tokens.TemplateLengths.costs).

A turn's span ends where its text, as the template shows it, ends in the rendering (found by its
last characters, so templates that drop an old <think> block or strip spaces still match); it
holds the markup before its text. What every rendering opens with is the fixed overhead: where a
rendering without turn 0 stops agreeing with this one. What a row's frame (its top-level system prompt
and tools, frame.py) adds is overhead too, wherever the template puts it (Qwen3: the tools after a
system turn's text): the stretch where the rendering stops and starts again agreeing with the
rendering of the bare messages.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ..dialects.openai_rows import content_text

EDGE_CHARS = 64  # enough of a turn's start or end to find it again, short enough to survive a template's edits


@dataclass(frozen=True)
class Spans:
    """Where each turn's span begins in a rendering, and the stretch its frame added (None: none)."""

    starts: list[int]
    frame: tuple[int, int] | None = None

    def owner(self, at: int) -> int:
        """The turn whose span holds the character `at`; -1 for the overhead (kept last)."""
        if self.frame is not None and self.frame[0] <= at < self.frame[1]:
            return -1
        return owner(self.starts, at)

    def whole(self, start: int, end: int) -> int | None:
        """The one owner of the characters [start, end), or None when a span or the frame's stretch
        begins or ends inside them (the frame's stretch may lie inside a turn's span: Qwen3's tools)."""
        edges = sorted([*self.starts, *(self.frame or ())])
        if bisect.bisect_right(edges, start) != bisect.bisect_right(edges, end - 1):
            return None
        return self.owner(start)


def spans(messages: Sequence[dict[str, Any]], text: str, render: Callable[[Sequence[dict[str, Any]]], str]) -> Spans:
    """The spans of `text`, the rendering of `messages` (a Chat, with its frame, or plain messages)."""
    starts = turn_starts(messages, text, render)
    frame = getattr(messages, "frame", None)
    if not frame:
        return Spans(starts)
    return Spans(starts, _added(render(list(messages)), text))


def _added(bare: str, text: str) -> tuple[int, int]:
    """The one stretch of `text` that holds what it has and `bare` lacks: between their shared prefix and
    shared suffix. (Where a template puts the frame in two places, the turns between go with it.)"""
    start = _shared_prefix(bare, text)
    end = min(_shared_prefix(bare[::-1], text[::-1]), min(len(bare), len(text)) - start)
    return start, len(text) - end


def turn_starts(messages: Sequence[dict[str, Any]], text: str, render: Callable[[Sequence[dict[str, Any]]], str]) -> list[int]:
    """Where each turn's span begins in `text`, the rendering of `messages` by `render`."""
    starts = [fixed_end(messages, text, render)]
    cursor = starts[0]
    for message in messages[:-1]:
        end = _find_end(message, text, cursor)
        cursor = end if end is not None else cursor  # not found: this turn's text goes to the next
        starts.append(cursor)
    return starts


def owner(starts: list[int], at: int) -> int:
    """The turn whose span holds the character `at`; -1 before the first span (the overhead, kept last)."""
    return bisect.bisect_right(starts, at) - 1


def fixed_end(messages: Sequence[dict[str, Any]], text: str, render: Callable[[Sequence[dict[str, Any]]], str]) -> int:
    """Where the fixed overhead ends: what a rendering without turn 0 shares with this one, but never
    past turn 0's own text (templates that move the system prompt into a later turn)."""
    if len(messages) < 2:
        return 0
    try:
        shared = _shared_prefix(render(messages[1:]), text)
    except Exception:  # templates that insist on a role order refuse to open on turn 1
        return 0
    start = _find_start(messages[0], text)
    return shared if start is None else min(shared, start)


def _find_start(message: dict[str, Any], text: str) -> int | None:
    """Where `message`'s text begins in the rendering (by its first characters; None: not found)."""
    head = content_text(message.get("content")).lstrip()[:EDGE_CHARS]
    found = text.find(head) if head else -1
    return None if found < 0 else found


def _find_end(message: dict[str, Any], text: str, cursor: int) -> int | None:
    """Where `message`'s text ends in the rendering `text`, searching from `cursor` (None: not found)."""
    tail = content_text(message.get("content")).rstrip()[-EDGE_CHARS:]
    if not tail:
        return None
    found = text.find(tail, cursor)
    return None if found < 0 else found + len(tail)


def _shared_prefix(a: str, b: str) -> int:
    """How many leading characters `a` and `b` share."""
    if b.startswith(a):
        return len(a)
    low, high = 0, min(len(a), len(b))
    while low < high:  # the longest shared prefix, by bisection on C-speed comparisons
        mid = (low + high + 1) // 2
        if b.startswith(a[:mid]):
            low = mid
        else:
            high = mid - 1
    return low
