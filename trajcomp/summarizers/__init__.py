"""Summarizers: the extractive one (the default, offline) and the OpenAI-compatible one, with their HTTP
retry policy and input guard. They implement `trajcomp.core.summary.summarizer.Summarizer`; more come from the
`trajcomp.summarizers` entry-point group. Imports only `trajcomp.core`.
"""

from __future__ import annotations

from ..core.summary.summarizer import Summarizer, Summary, SummaryError, SummaryRequest, make_summarizer, names
from .base import SUMMARY_PREFIX

__all__ = ["SUMMARY_PREFIX", "Summarizer", "Summary", "SummaryError", "SummaryRequest", "make_summarizer", "names"]
