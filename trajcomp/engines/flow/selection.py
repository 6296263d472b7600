"""Which rows a run takes: a deterministic sample, one shard of K, the first N."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Iterable, Iterator


def _draw(*parts: object) -> int:
    """A 64-bit number from the parts, the same on every machine and Python version."""
    key = ":".join(map(str, parts)).encode("utf-8")
    return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "big")


@dataclass(frozen=True)
class Selection:
    sample_percent: float = 100.0
    seed: int = 0
    num_shards: int = 1
    shard_index: int = 0
    limit: int | None = None

    def verdict(self, file_key: str, line: int) -> str | None:
        """None when the row is taken, else why not ('other_shards' or 'not_sampled').

        Decided per row from its file and line alone, so it streams and every shard agrees.
        """
        if self.num_shards > 1 and _draw("shard", file_key, line) % self.num_shards != self.shard_index:
            return "other_shards"
        if self.sample_percent < 100 and _draw(self.seed, file_key, line) / 2**64 * 100 >= self.sample_percent:
            return "not_sampled"
        return None

    def as_dict(self) -> dict:
        return dict(vars(self))


class Taker:
    """Applies a Selection to the records of one file after another, counting taken rows for --limit."""

    def __init__(self, selection: Selection, taken: int = 0):
        self.selection = selection
        self.taken = taken  # across all files of the run (a resume starts from its checkpoints' count)

    def select(self, file_key: str, records: Iterable[Any]) -> Iterator[tuple[Any, str | None]]:
        """Each record with why it is not taken (None when it is); ends once the limit is reached."""
        limit = self.selection.limit
        for record in records:
            if limit is not None and self.taken >= limit:
                return
            verdict = self.selection.verdict(file_key, record.line)
            self.taken += verdict is None
            yield record, verdict
