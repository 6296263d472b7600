"""The tokenizer's own count of a rendered row's texts (its assistant turns'), read where it can be from
the encoding of its chat-template rendering, which the run makes anyway: a row under the target is not
encoded again for its `assistant_tokens`.

A text falls into pieces at its split tokens (split_tokens.py), each tokenized on its own: its count is
its head's (what opens it, before its first split token), one a split token, and its pieces'. A piece
the rendering holds has its count in the rendering's `Pieces`; only the head and the pieces it lacks
are counted (SplitTokens.count's rule, which tests/test_split_tokens.py holds exact). In agent rows the
pieces are most of an assistant text: the JSON of each tool call between <tool_call> and </tool_call>.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable, Sequence

from .batching import ENCODE_CHARS, split_by_chars
from .split_tokens import Pieces, SplitTokens


def rendered(split: SplitTokens, encode: Callable[[list[str]], list[Any]], texts: list[str]) -> list[tuple[int, Pieces | None]]:
    """Each rendering's length and pieces, from one fast encoding (ids, no offsets) of it, on a counting
    thread: the pieces of a row under the target are what its assistant texts are counted from."""
    out = []
    for part in split_by_chars(texts, ENCODE_CHARS):
        out += [(len(e), split.pieces(text, e.ids)) for text, e in zip(part, encode(part))]
    return out


async def bare_counts(count: Callable[[Sequence[str]], Awaitable[list[int]]], split: SplitTokens | None,
                      texts: Sequence[str], pieces: Pieces | None) -> list[int]:
    """The token count of each of `texts` alone (no special tokens), as `count` gives it; with the
    rendering's `pieces`, only what they do not hold is passed to `count`."""
    if split is None or pieces is None:
        return await count(texts)
    todo: dict[str, int] = {}  # a text to count -> its place in the one call
    layout = []  # per text: the tokens known, and the counts it takes (place, the split token's to take off)
    for text in texts:
        parts = split.cut(text)
        known, need = len(parts) // 2, []
        if parts[0] == pieces.head:
            known += pieces.head_tokens
        elif parts[0]:
            need.append((todo.setdefault(parts[0], len(todo)), 0))
        for piece in parts[2::2]:
            n = pieces.counts.get(piece)
            if n is not None:
                known += n
            elif piece:  # counted after a split token, as it stands in the text; an empty piece has none
                need.append((todo.setdefault(split.marker + piece, len(todo)), 1))
        layout.append((known, need))
    counts = await count(list(todo)) if todo else []
    return [known + sum(counts[at] - off for at, off in need) for known, need in layout]
