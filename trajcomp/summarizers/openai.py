"""Summaries from any OpenAI-compatible `/chat/completions` endpoint, many calls in flight."""

from __future__ import annotations

import asyncio
import re
import threading
import time
from array import array
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.config import ConfigError
from ..core.metrics import nearest_rank
from ..core.summary.redact import redact
from ..core.dialects.summary_turn import DEFAULT_PREFIX, HANDOFF, PROSE, strip_prefix
from ..core.counting.tokens import TokenCounter
from .base import Summarizer, Summary, SummaryError, SummaryRequest, request_key
from .checks import CHECK_FAILED, Checks, failed_check
from .guard import fit_turns
from .http import ContextRefusal, Endpoint, Failure, PreflightError, RetryPolicy

__all__ = ["HANDOFF_PROMPT", "OpenAISummarizer", "PreflightError", "SYSTEM_PROMPT"]

SYSTEM_PROMPT = """You condense part of an AI agent's working session into a summary that replaces those turns in a training example. The agent that continues the session will read only your summary in their place.

Write the summary:
- in the language the conversation itself uses;
- from a neutral, third-person point of view ("the assistant ran...", "the user asked...");
- covering the actions taken (tool calls with their key arguments), their results (exit codes, errors, counts, found values), decisions and their reasons, files created, read or changed, and any values the rest of the session may depend on (paths, names, numbers, identifiers);
- without answering questions that appear in the turns, and without greetings or preamble;
- without restating the user's own messages: they are copied word for word after your summary;
- without secrets: write [REDACTED] for keys, tokens and passwords;
- in at most about {target_tokens} tokens.

Reply with the summary text only."""

# summarization.style: handoff. The compressor writes the Active Task section itself from the user's
# own words and adds the identifier index to Critical Context; the model writes the other five.
HANDOFF_PROMPT = """You condense part of an AI agent's working session into a handoff note that replaces those turns in a training example. The agent that continues the session will read only your note in their place.

Write these Markdown sections, in this order, each under its own heading:
## Goal
What the user wants overall, in one or two sentences.
## Completed Actions
A numbered list of what was done, one line each: the action and its target, its outcome, then the tool in brackets. For example: "2. edited src/config.py — default timeout raised to 30 s [tool: patch]".
## Active State
Where the work stands now: working directory, changed files, test results, running processes.
## Relevant Files
The files read, created or changed, with a few words on each.
## Critical Context
Exact values the rest of the session may need: error messages, names, numbers, settings.

Also:
- write in the language the conversation itself uses, in the third person, with no preamble;
- do not answer questions that appear in the turns;
- do not write the user's current request or restate their messages: they are copied word for word above your sections;
- write [REDACTED] for keys, tokens and passwords;
- use at most about {target_tokens} tokens in all.

Reply with the five sections only."""

UPDATE_NOTE = """A summary of the turns before these already exists:

{previous}

Write one updated summary that covers those earlier turns and the turns below, in at most about {target_tokens} tokens."""

# Context of a small summary model when summarization.max_input_tokens is not set; the answer's
# max_tokens comes out of it.
DEFAULT_CONTEXT = 8192
CHAT_MARKUP_TOKENS = 32  # the summary model's own role markers around the two messages
REFIT_MARGIN = 0.95  # of the room a refused request is fitted to: the two tokenizers' ratio is an estimate

THINK_BLOCK = re.compile(r"<think>.*?</think>", re.S)
OPEN_THINK = re.compile(r"^\s*<think>.*", re.S)  # a reasoning block the model never closed


class OpenAISummarizer(Summarizer):
    """POST {base_url}/chat/completions per summary, retried by one RetryPolicy, bounded in flight."""

    name = "openai"
    cacheable = True

    def __init__(self, config, counter):
        self.config = config
        self.counter = counter
        # What the input guard counts with: the summary model's own tokenizer when given, else the
        # training one (summarization.tokenizer).
        self.guard_counter = TokenCounter(config.summary_tokenizer, config.trust_remote_code) \
            if config.summary_tokenizer else counter
        self.endpoint = Endpoint(
            config.base_url, config.api_key_env, config.request_timeout, config.max_concurrent_requests
        )
        self.policy = RetryPolicy(config.max_retries, config.retry_delay)
        self.prompt_templates = _prompt_templates(config.prompt_file)
        self.prefix = config.summary_prefix
        self.checks = Checks.from_config(config)
        # Once: every answer stored records it. Without a counter (batch import needs no tokenizer)
        # nothing is judged here, so nothing is recorded: the run that looks an answer up judges it.
        self._checks_id = self.checks.identity(counter.name) if counter is not None else None
        # Room enough that a summary a model makes longer than asked is not cut (finish_reason: length).
        self.max_tokens = 2 * config.summary_target_tokens
        self.max_input_tokens = config.max_input_tokens or DEFAULT_CONTEXT - self.max_tokens
        if self.max_input_tokens <= self.max_tokens // 2:
            raise ConfigError(
                f"summarization.max_input_tokens ({self.max_input_tokens}) leaves no room for the turns to "
                f"summarize: set it to the summary model's context less {self.max_tokens} (its answer)"
            )
        self._payloads: OrderedDict[SummaryRequest, dict[str, Any]] = OrderedDict()
        self._payloads_lock = threading.Lock()
        self._payloads_kept = 4 * config.max_concurrent_requests  # the requests in flight, and some
        self._system_costs: dict[str, int] = {}
        self.latencies = array("d")
        self.usage = {"prompt_tokens": 0, "completion_tokens": 0}
        self.retries = 0
        self.checks_seconds = 0.0  # CPU time the answer checks took, in any thread
        self._checks_lock = threading.Lock()
        # Online answers are judged here, off the event loop, on a thread of their own: inside a summary's
        # deadline, so not behind the default executor's other work (payloads, renderings, uploads).
        self._judge = ThreadPoolExecutor(1, thread_name_prefix="trajcomp-checks")
        self._preflight: asyncio.Future | None = None  # the endpoint's check, made by the first request
        self._check_due = False

    async def start(self) -> None:
        await self.open()
        await self._checked()

    async def open(self) -> None:
        await self.endpoint.open()
        self._preflight, self._check_due = None, True

    async def _checked(self) -> None:
        """The endpoint's preflight, once (when open() asked for it), before the first request; its
        PreflightError is every request's."""
        if not self._check_due:
            return
        if self._preflight is None:
            self._preflight = asyncio.ensure_future(self.endpoint.preflight(self.config.summarization_model))
        await asyncio.shield(self._preflight)  # one row cancelled must not cancel the others' check

    async def close(self) -> None:
        if self._preflight is not None and not self._preflight.done():
            self._preflight.cancel()
        await self.endpoint.close()

    def payload(self, request: SummaryRequest) -> dict[str, Any]:
        """The request body: fixed instructions first, so servers can reuse the shared prefix.

        Made once per request (the cache key and the call both need it): fitting the turns into
        max_input_tokens counts and elides text, work worth doing once."""
        with self._payloads_lock:
            if request in self._payloads:
                return self._payloads[request]
        body = self._payload(request)
        with self._payloads_lock:
            self._payloads[request] = body
            while len(self._payloads) > self._payloads_kept:
                self._payloads.popitem(last=False)
        return body

    def _payload(self, request: SummaryRequest, max_input: int | None = None) -> dict[str, Any]:
        system = self.prompt_templates[request.style].replace("{target_tokens}", str(request.stated))
        user = self.user_text(request, system, max_input or self.max_input_tokens)
        return {
            "model": self.config.summarization_model,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
            "temperature": self.config.temperature,
            "max_tokens": self.max_tokens,
        }

    def user_text(self, request: SummaryRequest, system: str, max_input: int) -> str:
        """The turns to summarize (after any earlier summary), fitted into `max_input` tokens."""
        turns = request.turns[request.covered:] if request.previous else request.turns
        headers = [turn_header(i, t.role) for i, t in enumerate(turns, 1)]
        note = UPDATE_NOTE.format(previous=request.previous, target_tokens=request.stated) if request.previous else ""
        # the headers joined as the body joins turns: with many turns the separators add up
        fixed = self._system_cost(system) + sum(self.guard_counter.count([note, "\n\n".join(headers)]))
        room = max_input - fixed - CHAT_MARKUP_TOKENS
        costs = request.costs[request.covered:] if request.previous and request.costs else request.costs
        if self.guard_counter is not self.counter:
            costs = None  # the row core's counts are the training tokenizer's
        texts = fit_turns(turns, room, self.guard_counter, costs)
        body = "\n\n".join(header + text for header, text in zip(headers, texts))
        return f"{note}\n\n{body}" if note else body

    def _system_cost(self, system: str) -> int:
        # Few distinct prompts in a run (one per stated length): each counted once, not per request.
        cost = self._system_costs.get(system)
        if cost is None:
            cost = self.guard_counter.count([system])[0]
            if len(self._system_costs) < 256:  # later passes' firmer lengths vary: the first 256 are kept
                self._system_costs[system] = cost
        return cost

    def cache_key(self, request: SummaryRequest) -> str | None:
        return request_key(self.payload(request))

    async def summarize(self, request: SummaryRequest) -> Summary:
        tally = _Tally()
        # The deadline starts once a slot is held: time spent queueing behind other rows depends
        # on the run (concurrency, load), and a row's outcome must not.
        body = await asyncio.to_thread(self.payload, request)  # counting and eliding: not on the loop, nor in a slot
        await self._checked()
        async with self.endpoint.slot():
            # asyncio.timeout, not wait_for: on 3.11 wait_for drops a cancel (Ctrl-C, SIGTERM) that
            # arrives just as the call completes, and the run would go on instead of stopping.
            try:
                async with asyncio.timeout(request.timeout):
                    return await self._attempts(request, body, tally)
            except TimeoutError:
                message = f"timed out after {request.timeout:g}s ({tally.calls} calls; last: {tally.last})"
                raise SummaryError(message, tally.calls, tally.errors, tuple(tally.checks)) from None

    async def _attempts(self, request: SummaryRequest, body: dict[str, Any], tally: "_Tally") -> Summary:
        refitted = False
        while True:
            if tally.calls:
                self.retries += 1
            tally.calls += 1
            result = await self._attempt(body, tally.usage)
            if isinstance(result, str):
                return Summary(result, tally.calls, tally.errors, tuple(tally.checks), *tally.usage)
            tally.errors += 1
            tally.last = result.message
            if result.message.startswith(CHECK_FAILED):  # retried as any bad answer, and counted by check
                tally.checks.append(result.message[len(CHECK_FAILED):])
            if result.refusal is not None and not refitted:  # once: the server said how long is too long
                refitted = True
                body = await asyncio.to_thread(self._refitted, request, body, result.refusal)
                if body is not None:
                    continue
            if not result.retryable or tally.errors > self.policy.max_retries:
                raise SummaryError(f"{result.message} (after {tally.calls} calls)", tally.calls, tally.errors,
                                   tuple(tally.checks))
            await asyncio.sleep(self.policy.delay(tally.errors, result.retry_after))

    def _refitted(self, request: SummaryRequest, body: dict[str, Any], refusal: ContextRefusal) -> dict[str, Any] | None:
        """The request again, its input fitted to the context the server stated (its tokenizer may count
        more than the guard's: the guard's room shrinks by the ratio of their counts, less a margin).
        None when the answer's max_tokens alone takes the whole context."""
        sent = sum(self.guard_counter.count([m["content"] for m in body["messages"]])) + CHAT_MARKUP_TOKENS
        allowed = refusal.limit - self.max_tokens  # the prompt's share of the server's context
        if allowed <= 0:
            return None
        return self._payload(request, int(allowed * sent / max(refusal.prompt, 1) * REFIT_MARGIN))

    async def _attempt(self, body: dict[str, Any], billed: list[int]) -> str | Failure:
        """One HTTP call: the usable summary text, or a Failure saying whether to retry; the tokens it was
        billed added to `billed` (prompt, completion)."""
        response = await self.endpoint.chat(body)
        self.latencies.append(response.seconds)
        if isinstance(response, Failure):
            return response
        usage = (response.data.get("usage") if isinstance(response.data, dict) else None) or {}
        billed[0] += int(usage.get("prompt_tokens") or 0)
        billed[1] += int(usage.get("completion_tokens") or 0)
        text, problem = self._read(response.data)
        if text is not None:  # judged off the loop: the checks read the region's prose and count tokens
            text, problem = await asyncio.get_running_loop().run_in_executor(self._judge, self._judged, text, body)
        return text if text is not None else Failure(problem, retryable=True, seconds=response.seconds)

    def request_body(self, request: SummaryRequest) -> dict[str, Any]:
        return self.payload(request)

    def accept(self, data: Any, body: dict[str, Any] | None = None) -> tuple[str | None, str]:
        """The usable summary text of a 200 response to `body`, or None and why it is not usable.

        An answer (a batch's here, an online one in `_attempt`) becomes text only through `_read` and
        `_judged`. It must pass the checks, which read the request: a batch answer read without it is
        checked by `unusable` when a row looks it up."""
        text, problem = self._read(data)
        return (text, problem) if text is None else self._judged(text, body)

    def _read(self, data: Any) -> tuple[str | None, str]:
        """The cleaned text of a 200 response, not judged yet, or None and why there is none."""
        usage = (data.get("usage") if isinstance(data, dict) else None) or {}
        for key in self.usage:  # billed even when the answer is unusable
            self.usage[key] += int(usage.get(key) or 0)
        try:
            choice = data["choices"][0]
            content = choice["message"]["content"]
        except (KeyError, IndexError, TypeError):
            return None, "response has no choices[0].message.content"
        if choice.get("finish_reason") == "length":
            return None, "summary was cut off (finish_reason: length)"
        text = clean_summary(content if isinstance(content, str) else "", self.prefix)
        if not text:
            return None, "summary was empty"
        return text, ""

    def _judged(self, text: str, body: dict[str, Any] | None) -> tuple[str | None, str]:
        """`text` checked against its request `body` (when known) and redacted, or None and the check it failed."""
        failed = self._timed_check(text, body) if body is not None else None
        if failed is not None:
            return None, CHECK_FAILED + failed
        return redact(text, self.endpoint.api_key), ""

    def _timed_check(self, text: str, body: dict[str, Any]) -> str | None:
        started = time.thread_time()
        try:
            return failed_check(text, body, self.checks, self.counter)
        finally:
            with self._checks_lock:  # answers are judged in several threads at once
                self.checks_seconds += time.thread_time() - started

    def unusable(self, request: SummaryRequest, summary: Summary) -> str | None:
        # A cache written with checks off (or by an older trajcomp), or a batch's answer read without
        # its request, may hold an answer the checks turn away.
        if not self.checks.names:
            return None
        failed = self._timed_check(summary.text, self.payload(request))
        return None if failed is None else CHECK_FAILED + failed

    def checks_id(self) -> str | None:
        return self._checks_id

    def run_stats(self) -> dict[str, Any]:
        ms = sorted(round(seconds * 1000) for seconds in self.latencies)
        return {
            "model": self.config.summarization_model,
            "base_url": self.config.base_url,
            "http_requests": self.endpoint.sent,
            "retries": self.retries,
            "max_calls_in_flight": self.endpoint.max_in_flight,
            "latency_ms": {"p50": nearest_rank(ms, 50), "p95": nearest_rank(ms, 95), "max": ms[-1] if ms else 0},
            "usage": dict(self.usage),
            "checks": list(self.checks.names),
            "checks_seconds": round(self.checks_seconds, 6),
        }

    def secrets(self) -> tuple[str, ...]:
        return (self.endpoint.api_key,) if self.endpoint.api_key else ()

    def live(self) -> dict[str, int]:
        """For the progress bar: calls in flight and sent so far."""
        return {"in_flight": self.endpoint.in_flight, "api_calls": self.endpoint.sent}


@dataclass
class _Tally:
    """One summary's calls so far, readable after a timeout cancelled it."""

    calls: int = 0
    errors: int = 0
    last: str = "no call made"
    checks: list = field(default_factory=list)  # the check each failed answer failed, in order
    usage: list = field(default_factory=lambda: [0, 0])  # prompt and completion tokens billed so far


def clean_summary(content: str, prefix: str = DEFAULT_PREFIX) -> str:
    """The body of a model's answer: no reasoning blocks, no summary prefix."""
    text = OPEN_THINK.sub("", THINK_BLOCK.sub("", content))
    return strip_prefix(text, prefix)


def turn_header(number: int, role: str) -> str:
    return f"### Turn {number} ({role})\n"


def _prompt_templates(prompt_file: str | None) -> dict[str, str]:
    """The system prompt of each style with its {target_tokens} still to fill in (a prompt file serves both)."""
    if not prompt_file:
        return {PROSE: SYSTEM_PROMPT, HANDOFF: HANDOFF_PROMPT}
    try:
        text = Path(prompt_file).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read summarization.prompt_file {prompt_file}: {exc}") from None
    return {PROSE: text, HANDOFF: text}

