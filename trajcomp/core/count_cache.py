"""Counts of texts this process has counted, so that a repeated text is encoded once.

Rows of one agent framework repeat themselves: every row opens with the same system prompt and tool
schemas, and agents read the same file again and again. A text's count never changes, so the counts
are kept, keyed by a 128-bit digest of the text (never the text: an entry costs the same for a 50 KB
file as for a word), least recently used first out. A false hit needs two texts with one BLAKE2b
digest: the count served is the tokenizer's.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from typing import Callable, Sequence

# ~220 bytes an entry (a 16-byte digest, its count, the ordered dict's slot and links): ~3.6 MB at
# most, measured in tests/test_count_cache.py. Rows in flight ask for ~30 texts each, so the texts
# every row shares are asked for again long before 16,384 others pass them.
ENTRIES = 16384
MAX_BYTES = 4 << 20  # the bound the test holds the full cache to


def digest(text: str) -> bytes:
    # surrogatepass: a lone surrogate (JSON allows "\ud800") still has a key; the tokenizer decides
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


class CountCache:
    """Bounded, thread-safe: `counts(texts, count)` counts with `count` only the texts it has not seen."""

    def __init__(self, entries: int = ENTRIES):
        self.entries = entries
        self._counts: OrderedDict[bytes, int] = OrderedDict()
        self._lock = threading.Lock()

    def counts(self, texts: Sequence[str], count: Callable[[list[str]], list[int]]) -> list[int]:
        """The counts of `texts`: from the cache, else from one `count` call over the distinct others."""
        keys = [digest(text) for text in texts]
        with self._lock:
            found = [self._get(key) for key in keys]
        missing: dict[bytes, str] = {}
        for key, text, n in zip(keys, texts, found):
            if n is None:
                missing.setdefault(key, text)  # a text twice in one call is counted once too
        if not missing:
            return found  # type: ignore[return-value]
        new = dict(zip(missing, count(list(missing.values()))))
        with self._lock:
            for key, n in new.items():
                self._put(key, n)
        return [new[key] if n is None else n for key, n in zip(keys, found)]

    def _get(self, key: bytes) -> int | None:
        n = self._counts.get(key)
        if n is not None:
            self._counts.move_to_end(key)
        return n

    def _put(self, key: bytes, n: int) -> None:
        self._counts[key] = n
        self._counts.move_to_end(key)
        if len(self._counts) > self.entries:
            self._counts.popitem(last=False)

    def __len__(self) -> int:
        return len(self._counts)
