"""Where a text falls into pieces that its tokenizer tokenizes independently: an edited chat-template
rendering is measured by counting only the pieces it changed (chat_template mode's summarized rows)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Sequence


@dataclass(frozen=True)
class Pieces:
    """A rendering cut at its split tokens: each piece's token count, so that an edited rendering
    is measured by counting only the pieces it does not share (see `SplitTokens`)."""

    head: str  # the text before the first split token: its tokens may depend on opening the text
    head_tokens: int
    counts: dict[str, int]  # every later piece's text -> its token count


@dataclass(frozen=True)
class Part:
    """A stretch of a rendering that tokenizes on its own: the head, a split token, or a piece."""

    start: int  # where it begins in the rendering
    text: str
    tokens: int
    prefix: str = ""  # what it is counted after (a piece: a split token), whose token is not its own

    @property
    def end(self) -> int:
        return self.start + len(self.text)


class SplitTokens:
    """The added tokens at which a text falls into pieces that tokenize independently of each other.

    A tokenizer finds its added tokens first and tokenizes the text between them piece by piece. A
    token splits the text exactly where its text occurs when it strips no space around it (lstrip,
    rstrip, single_word off), is matched in the raw text (normalized off), and no added token's
    occurrence can overlap or contain it (itself included): then no other match can take it over.
    """

    def __init__(self, added: dict[int, Any], specials_as_text: bool = False, in_model: Callable[[int], bool] | None = None):
        """`in_model`: whether the tokenizer's model can give a token id itself (None: assume any)."""
        tangled = _tangled({t.content for t in added.values() if t.content})
        # A single_word token matched in the raw text looks at the characters around it, across any
        # split: a piece's count would depend on its neighbours. Then none splits.
        word_bound = any(t.single_word and not t.normalized for t in added.values())
        clean = {} if word_bound else {
            i: t.content for i, t in added.items()
            if t.content and t.content not in tangled and not (t.lstrip or t.rstrip or t.single_word or t.normalized)
            and not (specials_as_text and t.special)  # split_special_tokens: they are text like any other
        }
        self.ids = frozenset(clean)
        self._id_of = {content: i for i, content in clean.items()}
        # No split token the model can give itself: its ids are where the text holds its content and
        # nowhere else, so `pieces` finds them by the contents' order (C-speed list.index), not by a
        # Python test of every id (~0.5 ms a 38 KB Qwen3 rendering).
        self._in_order = in_model is not None and not any(map(in_model, clean))
        self._marker = next(iter(clean.values()), "")
        self.splits = bool(clean)  # whether any text falls into pieces
        alternatives = "|".join(map(re.escape, sorted(set(clean.values()), key=len, reverse=True)))
        self._pattern = re.compile(f"({alternatives})") if clean else None

    def pieces(self, text: str, ids: Sequence[int]) -> Pieces | None:
        """`text`'s pieces and their counts, read from its token ids (None: no split tokens, or the ids
        do not split where the text does, so edits of it are counted whole)."""
        if self._pattern is None:
            return None
        parts = self._pattern.split(text)
        at = self._in_order_at(parts, ids) if self._in_order else [k for k, token in enumerate(ids) if token in self.ids]
        if at is None or len(at) != len(parts) // 2:
            return None
        ends = [*at, len(ids)]
        counts: dict[str, int] = {}
        for k, piece in enumerate(parts[2::2]):
            n = ends[k + 1] - ends[k] - 1
            if counts.setdefault(piece, n) != n:
                return None
        return Pieces(parts[0], at[0] if at else len(ids), counts)

    def cut(self, text: str) -> list[str]:
        """`text` cut at its split tokens: its head, then each split token and the piece after it."""
        return self._pattern.split(text) if self._pattern is not None else [text]

    @property
    def marker(self) -> str:
        """The split token a piece is counted after (`count`), as a piece is in a text."""
        return self._marker

    def _in_order_at(self, parts: list[str], ids: Sequence[int]) -> list[int] | None:
        """Where the split tokens of `parts` (the text split by them) are in `ids`, each found after the last."""
        at, pos = [], 0
        try:
            for content in parts[1::2]:
                pos = ids.index(self._id_of[content], pos)
                at.append(pos)
                pos += 1
        except ValueError:
            return None
        return at

    def parts(self, text: str, pieces: Pieces) -> list[Part]:
        """The parts of `text`, whose `pieces` these are, in order: the head, then each split token and
        the piece after it, with its place and its tokens."""
        placed, start = [], 0
        for k, part in enumerate(self._pattern.split(text)):
            tokens = pieces.head_tokens if k == 0 else 1 if k % 2 else pieces.counts[part]
            placed.append(Part(start, part, tokens, self._marker if k and not k % 2 else ""))
            start += len(part)
        return placed

    def count(self, text: str, base: Pieces, count: Callable[[list[str]], list[int]]) -> int:
        """`text`'s token count, counting (with `count`, in one call) only the pieces `base` does not have."""
        parts = self._pattern.split(text)
        pieces = parts[2::2]
        new = list({piece: None for piece in pieces if piece not in base.counts})
        # after a split token, as in the text: a pre-tokenizer may treat a text's opening differently
        texts = [self._marker + piece for piece in new]
        head_changed = parts[0] != base.head
        counts = count(texts + [parts[0]] if head_changed else texts)
        head = counts.pop() if head_changed else base.head_tokens
        known = base.counts | {piece: n - 1 for piece, n in zip(new, counts)}
        return head + len(pieces) + sum(known[piece] for piece in pieces)


def _tangled(contents: set[str]) -> set[str]:
    """The contents an occurrence of some content could overlap or contain, or be contained in."""
    tangled = set()
    starts: dict[str, set[str]] = {}  # a proper prefix -> the contents opening with it
    for c in contents:
        for k in range(1, len(c)):
            starts.setdefault(c[:k], set()).add(c)
    joined = "\0".join(contents)
    for c in contents:
        for k in range(1, len(c)):  # c ends with what another (or c itself) begins with
            if c[-k:] in starts:
                tangled |= starts[c[-k:]] | {c}
        if joined.count(c) > 1:  # inside a longer content
            tangled.add(c)
    return tangled
