"""Fit the turns sent to a summarizer into its context: elide the middle of the longest tool outputs first.

Only what is sent is shortened; the turns kept in the row are never touched.
"""

from __future__ import annotations

from typing import Sequence

from ..rows import Turn
from ..tokens import TokenCounter

MARKER = "\n[... {n} tokens left out ...]\n"
MIN_KEPT = 48  # tokens of a turn always sent: its opening and closing lines say what it was


def fit_turns(turns: Sequence[Turn], room: int, counter: TokenCounter, costs: Sequence[int] | None = None) -> list[str]:
    """The turns' texts, the longest shortened (tool outputs first) so that together they take at most
    `room` tokens; `costs`, the turns' token counts when known, spare counting them again."""
    texts = [t.text for t in turns]
    whole = list(costs) if costs is not None else counter.count(texts)
    costs = list(whole)
    for pool in ([i for i, t in enumerate(turns) if t.role == "tool"], list(range(len(turns)))):
        for _ in range(3):  # the cuts can merge tokens: measure the cut turns again and tighten
            over = sum(costs) - room
            if over <= 0:
                return texts
            cap = _cap([costs[i] for i in pool], sum(costs[i] for i in pool) - over)
            cut = [i for i in pool if costs[i] > cap]
            for i in cut:
                texts[i] = _elide(turns[i].text, cap, whole[i], counter)
            for i, n in zip(cut, counter.count([texts[i] for i in cut])):
                costs[i] = n
    return texts  # even the shortest form is over: the caller's limit is below the fixed parts


def _cap(costs: list[int], allowed: int) -> int:
    """The largest per-turn cap with sum(min(c, cap)) <= allowed, at least MIN_KEPT (water-filling)."""
    low, high = MIN_KEPT, max(costs, default=MIN_KEPT)
    while low < high:
        mid = (low + high + 1) // 2
        if sum(min(c, mid) for c in costs) <= allowed:
            low = mid
        else:
            high = mid - 1
    return low


def _elide(text: str, keep: int, total: int, counter: TokenCounter) -> str:
    """`text` (`total` tokens) cut to about `keep` tokens: its beginning (3/4) and end (1/4), a marker between."""
    marker_cost = counter.count([MARKER.format(n=total)])[0]
    kept = max(2, keep - marker_cost)
    head, tail = kept * 3 // 4, kept - kept * 3 // 4
    if head + tail >= total:
        return text
    head_end = _edge(text, head, counter, from_end=False)
    tail_start = _edge(text, tail, counter, from_end=True)
    if head_end >= tail_start:
        return text
    left_out = total - head - tail
    return text[:head_end] + MARKER.format(n=left_out) + text[tail_start:]


def _edge(text: str, tokens: int, counter: TokenCounter, from_end: bool) -> int:
    """Where the first (or last) `tokens` tokens of `text` end (or start), encoding only that end of it."""
    if tokens <= 0:
        return len(text) if from_end else 0
    span = tokens * 8  # characters: most tokens are shorter; widened until the end holds enough tokens
    while True:
        part = text[-span:] if from_end else text[:span]
        offsets = counter.encode([part])[0].offsets
        # One token more than needed: the last one of a cut part may be cut itself.
        if len(offsets) > tokens or span >= len(text):
            break
        span *= 2
    if from_end:
        start = len(text) - len(part)
        return start + offsets[max(0, len(offsets) - tokens)][0]
    return offsets[min(tokens, len(offsets)) - 1][1]
