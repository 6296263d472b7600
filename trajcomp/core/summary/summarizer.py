"""The one async interface every summarizer implements, and the lookup of one by name.

The row core depends on this interface only: an implementation is passed in by whoever builds the
compressor, or named by `config.summarizer` and found through the `trajcomp.summarizers` entry-point
group, where the built-in ones are registered like any plugin (pyproject.toml): the core names no
summarizer module.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any

from ..config import ConfigError
from ..dialects.turn import Turn


@dataclass(frozen=True)
class SummaryRequest:
    turns: tuple[Turn, ...]
    # The length of the summarizer's own text: the summary turn's budget less its prefix, the
    # user's words carried verbatim and the room kept for the identifier index (assembly.py).
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
    # The checks the failed attempts' answers failed (summarizers/checks.py), one name per answer.
    checks_failed: tuple[str, ...] = ()
    # The tokens its calls were billed (the endpoint's usage; 0 for a summarizer that sends none).
    prompt_tokens: int = 0
    completion_tokens: int = 0


class SummaryError(Exception):
    """No usable summary could be had; the row is left as it was."""

    def __init__(self, message: str, api_calls: int = 0, errors: int = 0, checks_failed: tuple[str, ...] = ()):
        super().__init__(message)
        self.api_calls = api_calls
        self.errors = errors
        self.checks_failed = checks_failed


class SummarizerUnavailable(RuntimeError):
    """The summarizer cannot serve this run at all (its endpoint failed its check): the run stops, no row
    is blamed. The row core lets it through to the engine."""


class SummaryPending(Exception):
    """The summary is bought later, in a batch (summarization.batch): the row waits for it.

    Not a failure: the row core lets it through to the engine, which collects `body` under `key`."""

    def __init__(self, key: str, body: dict[str, Any]):
        super().__init__(key, body)
        self.key, self.body = key, body


class Summarizer(ABC):
    """Turns a run of turns into a summary body within a token budget."""

    name: str = "base"
    cacheable: bool = False  # worth a summary cache (costly calls); see cache_key

    async def start(self) -> None:
        """Open resources and check they work, before the first row (default: nothing)."""

    async def open(self) -> None:
        """Open resources, to be checked only before the first request: a run whose every summary comes
        from a cache needs none (default: start)."""
        await self.start()

    @abstractmethod
    async def summarize(self, request: SummaryRequest) -> Summary:
        """A summary of `request.turns`, or SummaryError."""

    async def close(self) -> None:
        """Release resources (default: nothing)."""

    def cache_key(self, request: SummaryRequest) -> str | None:
        """A key naming everything that decides this summary, or None when not worth caching."""
        return None

    def request_body(self, request: SummaryRequest) -> dict[str, Any] | None:
        """The chat request this summary is bought with, for a batch file (None: it cannot be batched)."""
        return None

    def accept(self, data: Any, body: dict[str, Any] | None = None) -> tuple[str | None, str]:
        """A chat completion's usable summary text, or None and why not (a batch answer is read here too)."""
        return None, f"{self.name} reads no chat completions"

    def unusable(self, request: SummaryRequest, summary: Summary) -> str | None:
        """Why a summary this run did not just check (cached, or bought in a batch) may not stand for
        `request` (one stored under other checks may not); None when it may."""
        return None

    def checks_id(self) -> str | None:
        """A name for the checks `unusable` applies this run; a cached summary recorded as having passed
        checks of this name is not judged again. None: nothing recorded, every hit judged."""
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


def _registered() -> dict[str, Any]:
    """The `trajcomp.summarizers` entry points by name (the built-in ones are registered there too)."""
    found: dict[str, Any] = {}
    for ep in entry_points(group="trajcomp.summarizers"):
        found.setdefault(ep.name, ep)
    return found


def names() -> list[str]:
    return sorted(_registered())


def summarizer_class(name: str) -> type[Summarizer]:
    """The class registered as `name`, or ConfigError naming those there are."""
    entry = _registered().get(name)
    if entry is None:
        raise ConfigError(f"unknown summarizer '{name}' (available: {', '.join(names())})")
    return entry.load()


def summarizer_module(name: str) -> str | None:
    """The module the summarizer `name` is registered from, without importing it (None: not registered)."""
    entry = _registered().get(name)
    return None if entry is None else entry.module


def make_summarizer(name: str, config, counter) -> Summarizer:
    """Build the summarizer called `name`; a plugin class takes (config, counter) like the built-ins."""
    return summarizer_class(name)(config, counter)
