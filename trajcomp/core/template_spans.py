"""Where each turn's span begins in a chat template's rendering: a token belongs to the turn whose
span holds its first character (tokens.TemplateLengths.costs).

A turn's span ends where its text, as the template shows it, ends in the rendering (found by its
last characters, so templates that drop an old <think> block or strip spaces still match); it
holds the markup before its text. What every rendering opens with is the fixed overhead: where a
rendering without turn 0 stops agreeing with this one.
"""

from __future__ import annotations

import bisect
from typing import Any, Callable, Sequence

from .openai_rows import content_text

EDGE_CHARS = 64  # enough of a turn's start or end to find it again, short enough to survive a template's edits


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
