"""The summarizer of a batch run: every summary comes from the summary cache, none from a live call.

A batch's answers arrive without their requests (batch_results.py keeps them as attempts); the first
row to look one up checks it against its request (summary_cache.answered), and a good one becomes
the key's summary, with the provenance an online run would give it. A request the cache cannot
answer is handed to the engine as SummaryPending (its cache key and the chat request that buys it),
to be bought in the next batch; once it has failed more than `max_retries` times it is a
SummaryError, and the row gets its `on_failure` as after failed calls.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

from ...core.summary.summarizer import Summarizer, Summary, SummaryError, SummaryPending, SummaryRequest
from .cache import ObjectCache, SummaryCache, answered, checks_of


class BatchAnswered(Summarizer):
    """`inner`'s summaries as the batches bought them; it never calls `inner`'s endpoint."""

    def __init__(self, inner: Summarizer, cache: SummaryCache | ObjectCache, max_retries: int):
        self.inner, self.cache, self.max_retries = inner, cache, max_retries
        self.name = inner.name

    async def start(self) -> None:
        self.cache.open()  # no preflight: a run whose summaries are all bought needs no endpoint at all

    async def summarize(self, request: SummaryRequest) -> Summary:
        key, found, failed = await asyncio.to_thread(self._lookup, request)  # counts, checks, reads: not on the loop
        if found is not None:
            return found
        if len(failed) > self.max_retries:
            raise SummaryError(f"{_common(failed)} (after {len(failed)} batch requests)", len(failed), len(failed),
                               checks_of(failed.values()))
        raise SummaryPending(key, self.inner.request_body(request))

    def _lookup(self, request: SummaryRequest) -> tuple[str, Summary | None, dict[str, str]]:
        return answered(self.cache, self.inner, request, self.inner.cache_key(request))

    async def close(self) -> None:
        self.cache.close()

    def accept(self, data: Any, body: dict[str, Any] | None = None) -> tuple[str | None, str]:
        return self.inner.accept(data, body)

    def run_stats(self) -> dict[str, Any]:
        # No cache_hits: every summary of a batch run comes from the cache, and rounds look each up again.
        return {**self.inner.run_stats(), "cache_file": str(self.cache.path)}

    def secrets(self) -> tuple[str, ...]:
        return self.inner.secrets()

    def request_body(self, request: SummaryRequest) -> dict[str, Any] | None:
        return self.inner.request_body(request)  # a summary example's request is the inner summarizer's


def _common(failed: dict[str, str]) -> str:
    """The most frequent reason (alphabetically first of equals): the same wherever the ledger was read."""
    return min(Counter(failed.values()).items(), key=lambda kv: (-kv[1], kv[0]))[0]
