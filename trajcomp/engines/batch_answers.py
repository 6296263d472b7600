"""The summarizer of a batch run: every summary comes from the summary cache, none from a live call.

A batch's answers arrive without their requests (batch_results.py keeps them as attempts); the first
row to look one up checks it against its request (the summarizer's `unusable`: the summary checks),
and a good one becomes the key's summary, with the provenance an online run would give it (the
attempts before it, the checks they failed). A request the cache cannot answer is handed to the
engine as SummaryPending (its cache key and the chat request that buys it), to be bought in the next
batch; once it has failed more than `max_retries` times it is a SummaryError, and the row gets its
`on_failure` as after failed calls.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

from ..core.summarizer import Summarizer, Summary, SummaryError, SummaryPending, SummaryRequest
from ..summarizers.checks import CHECK_FAILED
from .summary_cache import Attempt, ObjectCache, SummaryCache


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
                               _checks(failed.values()))
        raise SummaryPending(key, self.inner.request_body(request))

    def _lookup(self, request: SummaryRequest) -> tuple[str, Summary | None, dict[str, str]]:
        """The key's summary, or why each attempt at it failed."""
        key = self.inner.cache_key(request)
        hit = self.cache.get(key)
        if hit is not None and self.inner.unusable(request, hit) is None:
            return key, hit, {}
        attempts = self.cache.attempts(key)
        for attempt, tried in attempts.items():
            if tried.why is not None or tried.answer is None:
                continue
            why = self.inner.unusable(request, Summary(tried.answer))
            if why is None:
                summary = _provenance(tried.answer, attempts)
                if hit is None:  # a stale entry the checks turn away would hide a new one: not stored
                    self.cache.put(key, summary)
                return key, summary, {}
            self.cache.put_attempt(key, attempt, why=why)
            attempts[attempt] = Attempt(why, tried.answer)
        return key, None, {attempt: tried.why for attempt, tried in attempts.items() if tried.why is not None}

    async def close(self) -> None:
        self.cache.close()

    def accept(self, data: Any, body: dict[str, Any] | None = None) -> tuple[str | None, str]:
        return self.inner.accept(data, body)

    def run_stats(self) -> dict[str, Any]:
        # No cache_hits: every summary of a batch run comes from the cache, and rounds look each up again.
        return {**self.inner.run_stats(), "cache_file": str(self.cache.path)}

    def secrets(self) -> tuple[str, ...]:
        return self.inner.secrets()


def _provenance(answer: str, attempts: dict[str, Attempt]) -> Summary:
    """The answer as a summary with what it took: the failed attempts before it, as an online run counts calls."""
    failed = [tried.why for tried in attempts.values() if tried.why is not None]
    return Summary(answer, len(failed) + 1, len(failed), _checks(failed))


def _checks(reasons) -> tuple[str, ...]:
    """The checks among the reasons attempts failed (one name an answer turned away)."""
    return tuple(why[len(CHECK_FAILED):] for why in reasons if why.startswith(CHECK_FAILED))


def _common(failed: dict[str, str]) -> str:
    """The most frequent reason (alphabetically first of equals): the same wherever the ledger was read."""
    return min(Counter(failed.values()).items(), key=lambda kv: (-kv[1], kv[0]))[0]
