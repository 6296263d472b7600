"""The summarizer interface (defined by the row core) and what implementations share."""

from __future__ import annotations

import hashlib
from typing import Any

from ..core import json_codec
from ..core.summary.summarizer import Summarizer, Summary, SummaryError, SummaryRequest  # noqa: F401  (public names)
from ..core.dialects.summary_turn import DEFAULT_PREFIX as SUMMARY_PREFIX  # noqa: F401  (public name)


def request_key(parts: dict[str, Any]) -> str:
    """A stable hash of everything that decides a summary (model, prompt, temperature, max_tokens)."""
    return hashlib.sha256(json_codec.canonical(parts)).hexdigest()
