"""Fit the turns sent to a summarizer into its context: elide the middle of the longest tool outputs first.

Only what is sent is shortened; the turns kept in the row are never touched.
"""

from __future__ import annotations

from typing import Sequence

from ..core.counting.tokens import TokenCounter
from ..core.dialects.turn import Turn

MARKER = "\n[... {n} tokens left out ...]\n"
MIN_KEPT = 48  # tokens of a turn always sent: its opening and closing lines say what it was
JOIN_SLACK = 2  # tokens a cut's two joins may add to its parts' counts (a word the marker splits)


def fit_turns(turns: Sequence[Turn], room: int, counter: TokenCounter, costs: Sequence[int] | None = None) -> list[str]:
    """The turns' texts, the longest shortened (tool outputs first) so that together they take at most
    `room` tokens; `costs`, the turns' token counts when known, spare counting them again."""
    texts = [t.text for t in turns]
    whole = list(costs) if costs is not None else counter.count(texts)
    costs = list(whole)
    # MIN_KEPT a turn while every turn can have it; below it only when so many turns are sent that
    # even that would not fit (the request would be refused).
    floor = MIN_KEPT if sum(min(c, MIN_KEPT) for c in whole) <= room else 1
    for pool in ([i for i, t in enumerate(turns) if t.role == "tool"], list(range(len(turns)))):
        for _ in range(3):  # a cut's cost is an estimate, on the safe side: tighten while it says over
            over = sum(costs) - room
            if over <= 0:
                return texts
            cap = _cap([costs[i] for i in pool], sum(costs[i] for i in pool) - over, floor)
            cut = [i for i in pool if costs[i] > cap]
            # cut to the cap less the joins' slack, so that each estimate is the cap: one round, not three
            elided, estimates = _elide([turns[i].text for i in cut], cap - JOIN_SLACK, [whole[i] for i in cut], counter)
            for i, text, n in zip(cut, elided, estimates):
                texts[i], costs[i] = text, n
    return texts  # even the shortest form is over: the caller's limit is below the fixed parts


def _cap(costs: list[int], allowed: int, floor: int) -> int:
    """The largest per-turn cap with sum(min(c, cap)) <= allowed, at least `floor` (water-filling)."""
    low, high = floor, max(costs, default=floor)
    while low < high:
        mid = (low + high + 1) // 2
        if sum(min(c, mid) for c in costs) <= allowed:
            low = mid
        else:
            high = mid - 1
    return low


def _elide(texts: list[str], keep: int, totals: list[int], counter: TokenCounter) -> tuple[list[str], list[int]]:
    """Each text (of `totals` tokens) cut to about `keep` tokens: its beginning (3/4) and end (1/4), a
    marker between; and each one's tokens. Batched: a round's cuts share their tokenizer calls. A cut
    text is not counted again: its parts' tokens are known (the edges fall on the whole text's token
    boundaries), and JOIN_SLACK covers what the joins around the marker may add."""
    markers = counter.count([MARKER.format(n=total) for total in totals])
    kept = [max(2, keep - cost) for cost in markers]
    heads = [k * 3 // 4 for k in kept]
    tails = [k - h for k, h in zip(kept, heads)]
    out, costs = list(texts), list(totals)
    cut = [i for i, total in enumerate(totals) if heads[i] + tails[i] < total]  # the others stay whole
    head_ends = _edges([texts[i] for i in cut], [heads[i] for i in cut], [totals[i] for i in cut], counter, False)
    tail_starts = _edges([texts[i] for i in cut], [tails[i] for i in cut], [totals[i] for i in cut], counter, True)
    for i, head_end, tail_start in zip(cut, head_ends, tail_starts):
        if head_end < tail_start:
            left_out = totals[i] - heads[i] - tails[i]
            out[i] = texts[i][:head_end] + MARKER.format(n=left_out) + texts[i][tail_start:]
            costs[i] = heads[i] + markers[i] + tails[i] + JOIN_SLACK
    return out, costs


def _edges(texts: list[str], tokens: list[int], totals: list[int], counter: TokenCounter, from_end: bool) -> list[int]:
    """Where the first (or last) `tokens` tokens of each text end (or start), encoding only that end of it."""
    # Characters to encode: the text's own characters per token, and a margin; widened while too few.
    spans = [int(n * len(text) / max(total, 1) * 1.25) + 16 for text, n, total in zip(texts, tokens, totals)]
    edges = [len(text) if from_end else 0 for text in texts]  # for no tokens at all
    todo = [i for i, n in enumerate(tokens) if n > 0]
    while todo:
        parts = [texts[i][-spans[i]:] if from_end else texts[i][: spans[i]] for i in todo]
        widen = []
        for i, part, encoding in zip(todo, parts, counter.encode(parts)):
            n, length = tokens[i], len(encoding)
            # The word cut at the part's edge may be split otherwise than in the whole text, and may
            # take characters from its neighbour (a contraction's "'d"): the edge must fall two words
            # away from it, so that it depends on the text and hardly ever on the span encoded.
            # (token_to_word and token_to_chars, not word_ids and offsets: no list of every token.)
            if from_end:
                stable = length > n and encoding.token_to_word(length - n) >= encoding.token_to_word(0) + 2
            else:
                stable = length > n and encoding.token_to_word(n - 1) <= encoding.token_to_word(length - 1) - 2
            if not stable and spans[i] < len(texts[i]):
                spans[i] *= 2
                widen.append(i)
            elif from_end:
                edges[i] = len(texts[i]) - len(part) + encoding.token_to_chars(max(0, length - n))[0]
            else:
                edges[i] = encoding.token_to_chars(min(n, length) - 1)[1]
        todo = widen
    return edges
