"""Batch output files read into the summary cache: OpenAI's and vLLM run_batch's lines alike.

A line is `{"custom_id", "response": {"status_code", "body"}, "error"}`; the custom_id is the cache
key of the request (batch.py writes it so). Each line is an attempt at that key's summary: a usable
answer is kept as the attempt's answer, to be checked against its request when a row first looks it
up (batch_answers.py); anything else is a failed attempt, which a next round asks again and which,
past `max_retries`, gives the row its `on_failure`.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

from ...core import json_codec
from ...core.summary.redact import one_line

KEY = re.compile(r"[0-9a-f]{64}")  # a request key (summarizers.base.request_key): nothing else is trajcomp's


@dataclass
class Taken:
    """What reading results did: answers stored, answers the cache had already, failures by reason."""

    answered: int = 0
    already: int = 0
    failed: Counter = field(default_factory=Counter)
    foreign: int = 0  # lines that are not trajcomp's requests (another custom_id) or not results at all
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def add(self, other: "Taken") -> None:
        self.answered += other.answered
        self.already += other.already
        self.failed.update(other.failed)
        self.foreign += other.foreign
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens


class ResultsReader:
    """Takes result lines into `cache`: `accept` is the summarizer's own reading of an answer."""

    def __init__(self, cache, accept: Callable[[Any, Any], tuple[str | None, str]], secrets: tuple[str, ...] = ()):
        self.cache, self.accept, self.secrets = cache, accept, secrets

    def take_text(self, text: str, attempt: str | None = None) -> tuple[Taken, set[str]]:
        """Every line of a results file; `attempt` names the batch (None: each line's own id).
        Returns the figures and the keys the file answered or failed."""
        taken, seen = Taken(), set()
        for raw in text.splitlines():
            if not raw.strip():
                continue
            key = self.take_line(raw, taken, attempt)
            if key is not None:
                seen.add(key)
        return taken, seen

    def take_line(self, raw: str, taken: Taken, attempt: str | None) -> str | None:
        line = parsed(raw)
        key = line.get("custom_id") if is_result(line) else None
        if not isinstance(key, str) or not KEY.fullmatch(key):
            taken.foreign += 1
            return None
        attempt = attempt or str(line.get("id") or _digest(raw))
        if self.cache.get(key) is not None or attempt in self.cache.attempts(key):  # read twice: kept once
            taken.already += 1
            return key
        text, why = self._answer(line, taken)
        if text is None:
            taken.failed[why] += 1
            self.cache.put_attempt(key, attempt, why=why)
        else:
            taken.answered += 1
            self.cache.put_attempt(key, attempt, answer=text)
        return key

    def _answer(self, line: dict[str, Any], taken: Taken) -> tuple[str | None, str]:
        """The summary text of a result line, or None and why there is none."""
        error = line.get("error")
        if error:
            message = error.get("message") if isinstance(error, dict) else error
            return None, self._clean(f"batch error: {message}")
        response = line.get("response")
        if not isinstance(response, dict):
            return None, "result line has no response"
        body, status = response.get("body"), response.get("status_code")
        if status != 200:
            message = body.get("error", {}).get("message") if isinstance(body, dict) and isinstance(body.get("error"), dict) else body
            return None, self._clean(f"HTTP {status}: {message}")
        usage = (body.get("usage") if isinstance(body, dict) else None) or {}
        taken.prompt_tokens += int(usage.get("prompt_tokens") or 0)
        taken.completion_tokens += int(usage.get("completion_tokens") or 0)
        return self.accept(body, None)

    def _clean(self, why: str) -> str:
        """A reason as reports show it: one line, no secret, at most 200 characters."""
        return one_line(str(why), *self.secrets, limit=200)


def parsed(raw: str) -> Any:
    """A line's JSON value, or None when it is not JSON."""
    try:
        return json_codec.loads(raw)
    except ValueError:
        return None


def is_result(line: Any) -> bool:
    """Whether a parsed line is a batch result (a request line has a body, neither response nor error)."""
    return isinstance(line, dict) and isinstance(line.get("custom_id"), str) and ("response" in line or "error" in line)


def _digest(raw: str) -> str:
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()[:16]
