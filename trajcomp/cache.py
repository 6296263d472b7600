"""The summary cache: an SQLite file of summaries by request hash, so a rerun pays for nothing twice."""

from __future__ import annotations

import asyncio
import hashlib
import json
import sqlite3
from pathlib import Path
from typing import Any

from .summarizers.base import Summarizer, Summary, SummaryRequest

# Seconds a connection waits for another's write to finish: worker processes share the file, each on
# its own connection (WAL: readers never wait; writers take turns, each commit one small row).
BUSY_SECONDS = 30.0


def request_key(parts: dict[str, Any]) -> str:
    """A stable hash of everything that decides a summary (model, prompt, temperature, max_tokens)."""
    blob = json.dumps(parts, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class SummaryCache:
    """Summaries with their provenance, committed one by one so a killed run keeps what it paid for."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._db: sqlite3.Connection | None = None

    def open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path, timeout=BUSY_SECONDS)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS summaries (key TEXT PRIMARY KEY, summary TEXT NOT NULL)")
        self._db.commit()

    def get(self, key: str) -> Summary | None:
        row = self._db.execute("SELECT summary FROM summaries WHERE key = ?", (key,)).fetchone()
        return Summary(**json.loads(row[0])) if row else None

    def put(self, key: str, summary: Summary) -> None:
        value = json.dumps({"text": summary.text, "api_calls": summary.api_calls, "errors": summary.errors})
        self._db.execute("INSERT OR REPLACE INTO summaries (key, summary) VALUES (?, ?)", (key, value))
        self._db.commit()

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None


class CachedSummarizer(Summarizer):
    """Any summarizer that can name its requests (`cache_key`), answered from the cache when it can be."""

    def __init__(self, inner: Summarizer, cache: SummaryCache):
        self.inner = inner
        self.name = inner.name
        self.cache = cache
        self.hits = 0

    async def start(self) -> None:
        await self.inner.start()  # the endpoint is checked before the cache file is created
        self.cache.open()

    async def summarize(self, request: SummaryRequest) -> Summary:
        key = await asyncio.to_thread(self.inner.cache_key, request)  # may count and elide: not on the loop
        if key is not None and (hit := self.cache.get(key)) is not None:
            self.hits += 1
            return hit
        summary = await self.inner.summarize(request)
        if key is not None:
            self.cache.put(key, summary)
        return summary

    async def close(self) -> None:
        try:
            await self.inner.close()
        finally:
            self.cache.close()

    def run_stats(self) -> dict[str, Any]:
        return {**self.inner.run_stats(), "cache_hits": self.hits, "cache_file": str(self.cache.path)}

    def live(self) -> dict[str, int]:
        return self.inner.live()

    def secrets(self) -> tuple[str, ...]:
        return self.inner.secrets()
