"""Who writes a region's summary: the run's summarizer, or the extractive one when it fails and
`on_failure: extractive` asks for a fallback."""

from __future__ import annotations

from dataclasses import dataclass

from ..config import CompressionConfig
from ..row_result import SummaryExample
from .summarizer import Summarizer, Summary, SummaryError, SummaryRequest, make_summarizer
from ..counting.tokens import TokenCounter

EXAMPLE_SYSTEM = "Summarize the turns below for the agent that continues this session."


@dataclass(frozen=True)
class Sourced:
    summary: Summary
    source: str  # the name of the summarizer that wrote it
    error: str | None = None  # the primary summarizer's failure, when the fallback wrote the summary


class Sourcing:
    """The summarizer and its fallback (None: a failure is the row's)."""

    def __init__(self, config: CompressionConfig, counter: TokenCounter, summarizer: Summarizer | None = None):
        self.summarizer = summarizer or make_summarizer(config.summarizer, config, counter)
        self.fallback = None
        if config.on_failure == "extractive" and self.summarizer.name != "extractive":
            self.fallback = make_summarizer("extractive", config, counter)

    async def summarize(self, request: SummaryRequest) -> Sourced:
        try:
            return Sourced(await self.summarizer.summarize(request), self.summarizer.name)
        except SummaryError as exc:
            if self.fallback is None:
                raise
            failed = f"{self.summarizer.name} failed: {exc}"
            try:
                summary = await self.fallback.summarize(request)
            except SummaryError as also:  # keep what the first summarizer cost
                raise SummaryError(f"{failed}; {self.fallback.name} failed: {also}", exc.api_calls, exc.errors,
                                   exc.checks_failed) from None
            return Sourced(Summary(summary.text, exc.api_calls, exc.errors, exc.checks_failed), self.fallback.name, failed)

    def example(self, request: SummaryRequest, summary: str, segment: int) -> SummaryExample:
        """A summary an output row used, as training data: the summarizer's request as chat messages (its own
        body, or, for one that sends none, the turns under a plain instruction) and the summary."""
        body = self.summarizer.request_body(request)
        if body and isinstance(body.get("messages"), list):
            messages = [{"role": m["role"], "content": m["content"]} for m in body["messages"]]
        else:
            turns = "\n\n".join(f"[{t.role}]\n{t.text}" for t in request.turns)
            messages = [{"role": "system", "content": EXAMPLE_SYSTEM}, {"role": "user", "content": turns}]
        return SummaryExample(messages, summary, segment)
