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
        self._pending: dict[str, threading.Event] = {}  # texts a call is counting now, and its event when done
        self._lock = threading.Lock()

    def counts(self, texts: Sequence[str], count: Callable[[list[str]], list[int]]) -> list[int]:
        """The counts of `texts`: from the cache, else from one `count` call over the distinct others. A
        text another thread is counting meanwhile is awaited, not counted again (the first rows of a run
        all open with the shared prompt, and their calls go to every core at once)."""
        mine = threading.Event()
        with self._lock:
            found = [self._get(text) for text in texts]
            # a text twice in one call is counted once too
            missing = dict.fromkeys(text for text, n in zip(texts, found) if n is None)
            theirs = {text: self._pending[text] for text in missing if text in self._pending}
            for text in missing.keys() - theirs.keys():
                self._pending[text] = mine
        new = self._count_mine([text for text in missing if text not in theirs], count, mine)
        for event in set(theirs.values()):
            event.wait()
        with self._lock:
            late = {text: self._get(text) for text in theirs}
        # not kept after all (too long for the cache, or their call failed): counted here
        new.update(late)
        left = [text for text, n in late.items() if n is None]
        new.update(zip(left, count(left)) if left else ())
        return [new[text] if n is None else n for text, n in zip(texts, found)]

    def _count_mine(self, texts: list[str], count: Callable[[list[str]], list[int]], mine: threading.Event) -> dict[str, int]:
        try:
            new = dict(zip(texts, count(texts))) if texts else {}
            with self._lock:
                for text, n in new.items():
                    self._put(text, n)
            return new
        finally:
            with self._lock:
                for text in texts:
                    del self._pending[text]
            mine.set()

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
