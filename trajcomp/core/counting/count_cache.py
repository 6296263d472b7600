"""Counts of texts this process has counted, so that a repeated text is encoded once.

Rows of one agent framework repeat themselves: every row opens with the same system prompt and tool
schemas, and agents read the same file again and again. A text's count never changes, so the counts
are kept in a dict keyed by the text itself: Python's own string hash (computed once per string, under
the GIL, with no copy: a digest needs each text encoded to bytes, and hashlib releases the GIL on long
ones, a switch among the counting threads), and on a hash collision the texts compared, so a count
served is always the tokenizer's count of that very text. The dict holds its texts (references: a
row's own string, not a copy) up to MAX_BYTES, least recently used first out.
"""

from __future__ import annotations

import sys
import threading
from collections import OrderedDict
from typing import Callable, Sequence

MAX_BYTES = 4 << 20  # the texts held and their entries, at most (measured in tests/test_count_cache.py)
# An entry's own cost beside its text: the ordered dict's slot, links and hash, and the count (measured:
# 145 to 180 bytes while entries come and go). A text is charged sys.getsizeof (its characters at 1, 2
# or 4 bytes each, and its header).
ENTRY_BYTES = 200


def cost(text: str) -> int:
    """What keeping `text`'s count costs: its string and its entry."""
    return sys.getsizeof(text) + ENTRY_BYTES


class CountCache:
    """Bounded, thread-safe: `counts(texts, count)` counts with `count` only the texts it has not seen."""

    def __init__(self, max_bytes: int = MAX_BYTES):
        self.max_bytes = max_bytes
        # A text costing more would push out a good part of the others (the shared prompt among them): it
        # is counted each time it comes.
        self.max_text = max_bytes // 8
        self.bytes = 0  # what the texts held cost, by `cost`
        self._counts: OrderedDict[str, int] = OrderedDict()
        self._lock = threading.Lock()

    def counts(self, texts: Sequence[str], count: Callable[[list[str]], list[int]]) -> list[int]:
        """The counts of `texts`: from the cache, else from one `count` call over the distinct others."""
        with self._lock:
            found = [self._get(text) for text in texts]
        # a text twice in one call is counted once too
        missing = list(dict.fromkeys(text for text, n in zip(texts, found) if n is None))
        if not missing:
            return found  # type: ignore[return-value]
        new = dict(zip(missing, count(missing)))
        with self._lock:
            for text, n in new.items():
                self._put(text, n)
        return [new[text] if n is None else n for text, n in zip(texts, found)]

    def _get(self, text: str) -> int | None:
        n = self._counts.get(text)
        if n is not None:
            self._counts.move_to_end(text)
        return n

    def _put(self, text: str, n: int) -> None:
        size = cost(text)
        if size > self.max_text or text in self._counts:  # in: another thread counted it meanwhile
            return
        self._counts[text] = n
        self.bytes += size
        while self.bytes > self.max_bytes:
            old, _ = self._counts.popitem(last=False)
            self.bytes -= cost(old)

    def __len__(self) -> int:
        return len(self._counts)
