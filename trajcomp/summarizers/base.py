"""The one async interface every summarizer implements."""

from __future__ import annotations

import hashlib
import json
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

from ..rows import Turn
from ..summary_turn import DEFAULT_PREFIX as SUMMARY_PREFIX  # noqa: F401  (public name)


def request_key(parts: dict[str, Any]) -> str:
    """A stable hash of everything that decides a summary (model, prompt, temperature, max_tokens)."""
    blob = json.dumps(parts, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class SummaryRequest:
    turns: tuple[Turn, ...]
    # The length of the summarizer's own text: the summary turn's budget less its prefix, the
    # user's words carried verbatim and the room kept for the identifier index (compressor.py).
    target_tokens: int
    # Seconds for this summary, all retries included. Summarizers enforce it themselves, from the
    # moment they start working on it (not while queueing for capacity).
    timeout: float | None = None
    # The length to ask a model for: below the budget when an earlier answer overshot it.
    stated_tokens: int | None = None
    # A summary of the first `covered` turns, made by an earlier pass: a model updates it with
    # the turns after them rather than summarizing a summary blindly.
    previous: str | None = None
    covered: int = 0
    # The token counts of the turns' texts when the caller has them: no need to count them again.
    costs: tuple[int, ...] | None = None
    # The turns' identifiers (identifiers.extract), when the caller has them: the summary's index lists them.
    identifiers: tuple[str, ...] | None = None
    # The summary's shape (summary_turn.STYLES): `handoff` asks for its Markdown sections.
    style: str = "prose"
    # The row's first user request, the session's goal (handoff only): the turns may not show it.
    goal: str | None = None

    @property
    def stated(self) -> int:
        return self.target_tokens if self.stated_tokens is None else self.stated_tokens


@dataclass(frozen=True)
class Summary:
    """A summary body (no prefix) and its own provenance, which travels with it into rows and the cache."""

    text: str
    api_calls: int = 0
    errors: int = 0  # failed attempts before the one that succeeded


class SummaryError(Exception):
    """No usable summary could be had; the row is left as it was."""

    def __init__(self, message: str, api_calls: int = 0, errors: int = 0):
        super().__init__(message)
        self.api_calls = api_calls
        self.errors = errors


class Summarizer(ABC):
    """Turns a run of turns into a summary body within a token budget."""

    name: str = "base"
    cacheable: bool = False  # worth a summary cache (costly calls); see cache_key

    async def start(self) -> None:
        """Open resources and check they work, before the first row (default: nothing)."""

    @abstractmethod
    async def summarize(self, request: SummaryRequest) -> Summary:
        """A summary of `request.turns`, or SummaryError."""

    async def close(self) -> None:
        """Release resources (default: nothing)."""

    def cache_key(self, request: SummaryRequest) -> str | None:
        """A key naming everything that decides this summary, or None when not worth caching."""
        return None

    def live(self) -> dict[str, int]:
        """Facts for the progress bar, such as calls in flight."""
        return {}

    def secrets(self) -> tuple[str, ...]:
        """Values that must never be written anywhere (an API key), for redaction."""
        return ()

    def run_stats(self) -> dict[str, Any]:
        """Facts about this run for the report (calls, retries, latency...)."""
        return {}
