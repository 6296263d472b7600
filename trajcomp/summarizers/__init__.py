"""Summarizers by name: the built-in ones, and more from the `trajcomp.summarizers` entry point group."""

from __future__ import annotations

from importlib import import_module
from importlib.metadata import entry_points

from ..config import ConfigError
from .base import SUMMARY_PREFIX, Summarizer, Summary, SummaryError, SummaryRequest

__all__ = ["SUMMARY_PREFIX", "Summarizer", "Summary", "SummaryError", "SummaryRequest", "make_summarizer", "names"]

BUILTIN = {
    "extractive": "trajcomp.summarizers.extractive:ExtractiveSummarizer",
    "openai": "trajcomp.summarizers.openai:OpenAISummarizer",
}


def _targets() -> dict[str, str]:
    found = dict(BUILTIN)
    for ep in entry_points(group="trajcomp.summarizers"):
        found.setdefault(ep.name, ep.value)
    return found


def names() -> list[str]:
    return sorted(_targets())


def make_summarizer(name: str, config, counter) -> Summarizer:
    """Build the summarizer called `name`; a plugin class takes (config, counter) like the built-ins."""
    target = _targets().get(name)
    if target is None:
        raise ConfigError(f"unknown summarizer '{name}' (available: {', '.join(names())})")
    module, _, attr = target.partition(":")
    return getattr(import_module(module), attr)(config, counter)
