"""The one async interface every summarizer implements."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

from ..rows import Turn

SUMMARY_PREFIX = "[CONTEXT SUMMARY]:"


@dataclass(frozen=True)
class SummaryRequest:
    turns: tuple[Turn, ...]
    target_tokens: int  # budget for the summary body, the prefix already deducted
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


def strip_prefix(text: str) -> str:
    """The body of a summary, without any leading copies of SUMMARY_PREFIX."""
    text = text.strip()
    while text.startswith(SUMMARY_PREFIX):
        text = text[len(SUMMARY_PREFIX):].strip()
    return text


def with_prefix(body: str) -> str:
    return f"{SUMMARY_PREFIX} {strip_prefix(body)}"
