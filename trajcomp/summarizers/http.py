"""The HTTP side of LLM summarizers, in one place: headers, timeouts, retry policy, preflight."""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import time
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any, Awaitable, Callable, Mapping

import aiohttp

from ..core.summary.redact import one_line
from ..core.summary.summarizer import SummarizerUnavailable
from ..version import __version__

RETRY_STATUSES = frozenset({408, 409, 429})  # and every 5xx
MAX_SERVER_WAIT = 300.0  # a Retry-After longer than this is not waited for in full


class PreflightError(SummarizerUnavailable):
    """The endpoint cannot serve this run (unreachable, refused credentials, unknown model)."""


class APIError(RuntimeError):
    """A call that retrying could not make succeed (the message is free of secrets)."""


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with full jitter; a server's Retry-After wins over the backoff."""

    max_retries: int
    base_delay: float
    max_delay: float = 60.0

    def delay(self, failures: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, MAX_SERVER_WAIT)
        return random.uniform(0, min(self.max_delay, self.base_delay * 2 ** (failures - 1)))


async def retried(policy: RetryPolicy, attempt: Callable[[], Awaitable["Response | Failure"]], what: str) -> "Response":
    """`attempt` until it answers, retried as `policy` says; APIError naming `what` when it cannot."""
    failures = 0
    while True:
        result = await attempt()
        if isinstance(result, Response):
            return result
        failures += 1
        if not result.retryable or failures > policy.max_retries:
            raise APIError(f"{what}: {result.message} (after {failures} calls)")
        await asyncio.sleep(policy.delay(failures, result.retry_after))


def parse_retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds to wait from `retry-after-ms`, or `Retry-After` as seconds or an HTTP date."""
    if (ms := headers.get("retry-after-ms")) is not None:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = headers.get("Retry-After")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


@dataclass(frozen=True)
class Response:
    data: Any
    seconds: float


@dataclass(frozen=True)
class ContextRefusal:
    """A 400 saying the request is longer than the model's context: its limit and the request's size."""

    limit: int  # the model's context, tokens
    prompt: int  # the request's prompt as the server counted it, tokens


@dataclass(frozen=True)
class Failure:
    message: str  # already free of secrets
    retryable: bool
    retry_after: float | None = None
    seconds: float = 0.0
    refusal: ContextRefusal | None = None  # a context-length refusal: fit the input to its limit, ask again


# How OpenAI, vLLM, llama.cpp's server and llama-cpp-python's word a request over the context: the
# model's limit, and the prompt's size as the server counted it.
_REFUSALS = (
    # OpenAI: "maximum context length is 8192 tokens. However, your messages resulted in 9354 tokens"
    # vLLM: "... However, you requested 9354 tokens (8700 in the messages, 654 in the completion)"
    re.compile(r"maximum context length is (?P<limit>\d+) tokens.*?(?:(?P<messages>\d+) in the messages"
               r"|resulted in (?P<prompt>\d+) tokens)", re.S),
    # newer vLLM: "maximum context length is 8192 tokens and your request has 9354 input tokens"
    re.compile(r"maximum context length is (?P<limit>\d+) tokens.*?request has (?P<prompt>\d+) input tokens", re.S),
    # llama.cpp server: "request (9354 tokens) exceeds the available context size (8192 tokens)"
    re.compile(r"request \((?P<prompt>\d+) tokens\) exceeds the available context size \((?P<limit>\d+) tokens\)"),
    # llama-cpp-python: "Requested tokens (9354) exceed context window of 8192"
    re.compile(r"Requested tokens \((?P<prompt>\d+)\) exceed context window of (?P<limit>\d+)"),
)


def context_refusal(text: str) -> ContextRefusal | None:
    """The limit and prompt size stated by a 400's body, when it is a context-length refusal."""
    try:  # llama.cpp's server also says it in fields of the error object
        error = json.loads(text).get("error")
    except (ValueError, AttributeError):
        error = None
    if isinstance(error, dict) and isinstance(error.get("n_ctx"), int) and isinstance(error.get("n_prompt_tokens"), int):
        return ContextRefusal(error["n_ctx"], error["n_prompt_tokens"])
    for pattern in _REFUSALS:
        if match := pattern.search(text):
            found = match.groupdict()
            return ContextRefusal(int(found["limit"]), int(found.get("messages") or found["prompt"]))
    return None


class Endpoint:
    """An OpenAI-compatible base URL: one session and connection pool, at most `concurrency` calls in flight."""

    def __init__(self, base_url: str, api_key_env: str, timeout: float, concurrency: int):
        self.base_url = base_url.rstrip("/")
        self.api_key_env = api_key_env
        self.api_key = os.environ.get(api_key_env) or None
        if self.api_key and any(ord(c) < 32 or ord(c) == 127 for c in self.api_key):
            raise PreflightError(f"the API key in ${api_key_env} holds control characters (a stray newline?)")
        self.timeout = timeout
        self.concurrency = concurrency
        self.in_flight = 0
        self.max_in_flight = 0
        self.sent = 0  # chat requests sent, answered or not
        self._session: aiohttp.ClientSession | None = None
        self._slots: asyncio.Semaphore | None = None

    def headers(self) -> dict[str, str]:
        headers = {"Accept": "application/json", "User-Agent": f"trajcomp/{__version__}"}
        if self.api_key:  # local servers need none, and must not be sent an empty one
            headers["Authorization"] = f"Bearer {self.api_key}"
        return headers

    async def open(self) -> None:
        connector = aiohttp.TCPConnector(limit=self.concurrency)
        self._session = aiohttp.ClientSession(connector=connector, headers=self.headers())
        self._slots = asyncio.Semaphore(self.concurrency)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def scrub(self, text: str) -> str:
        return one_line(text, self.api_key)

    def slot(self) -> asyncio.Semaphore:
        """Held by one summary from its first call to its last: at most `concurrency` at once."""
        return self._slots

    async def chat(self, body: dict[str, Any]) -> Response | Failure:
        """POST /chat/completions once; never raises for network or HTTP trouble. Call it holding a slot."""
        self.in_flight += 1
        self.sent += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            return await self.call("POST", "/chat/completions", body)
        finally:
            self.in_flight -= 1

    async def call(self, method: str, path: str, body: Any = None, form: aiohttp.FormData | None = None,
                   raw: bool = False) -> Response | Failure:
        """One call to the API (chat, files, batches); never raises for network or HTTP trouble.
        A 200's body is read as JSON, or kept as text when `raw` (a file's content)."""
        started = time.monotonic()
        try:
            status, headers, text = await self._send(method, path, body, self.timeout, form)
        except asyncio.TimeoutError:
            return Failure("request timed out", True, seconds=time.monotonic() - started)
        except aiohttp.ClientError as exc:
            message = self.scrub(f"connection error: {type(exc).__name__}: {exc}")
            return Failure(message, True, seconds=time.monotonic() - started)
        if raw and status == 200:
            return Response(text, time.monotonic() - started)
        return self._interpret(status, headers, text, time.monotonic() - started)

    async def _send(self, method: str, path: str, body: Any, timeout: float,
                    form: aiohttp.FormData | None = None) -> tuple[int, Mapping[str, str], str]:
        client_timeout = aiohttp.ClientTimeout(total=timeout)
        payload = {"data": form} if form is not None else {"json": body}
        async with self._session.request(method, self.base_url + path, timeout=client_timeout, **payload) as resp:
            return resp.status, resp.headers, await resp.text(errors="replace")

    def _interpret(self, status: int, headers: Mapping[str, str], text: str, seconds: float) -> Response | Failure:
        if status == 200:
            try:
                return Response(json.loads(text), seconds)
            except ValueError:
                return Failure("response body is not JSON", True, seconds=seconds)
        retryable = status in RETRY_STATUSES or status >= 500
        retry_after = parse_retry_after(headers) if retryable else None
        refusal = context_refusal(text) if status == 400 else None
        return Failure(f"HTTP {status}: {self.error_text(text)}", retryable, retry_after, seconds, refusal)

    def error_text(self, text: str) -> str:
        """The message of an error body (OpenAI style when it is), without secrets, at most 300 chars."""
        try:
            error = json.loads(text).get("error")
            message = error.get("message") if isinstance(error, dict) else error
        except (ValueError, AttributeError):
            message = None
        return self.scrub(str(message or text))[:300]

    async def preflight(self, model: str) -> None:
        """One cheap call before the first request; raises PreflightError with a one-line reason."""
        try:
            status, _, text = await self._send("GET", "/models", None, min(self.timeout, 30.0))
        except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
            raise PreflightError(f"cannot reach {self.base_url}: {self.scrub(type(exc).__name__ + ' ' + str(exc))}") from None
        if status in (404, 405):  # some servers have no model list: ask for one token instead
            status, text = await self._tiny_chat(model)
        self._check_auth(status)
        if status != 200:
            raise PreflightError(f"{self.base_url} answered HTTP {status}: {self.error_text(text)}")
        served = _model_ids(text)
        if served and model not in served:
            shown = ", ".join(served[:10]) + (" ..." if len(served) > 10 else "")
            raise PreflightError(f"unknown model '{model}' at {self.base_url} (it serves: {shown})")

    async def _tiny_chat(self, model: str) -> tuple[int, str]:
        body = {"model": model, "messages": [{"role": "user", "content": "ping"}], "max_tokens": 1}
        try:
            status, _, text = await self._send("POST", "/chat/completions", body, min(self.timeout, 60.0))
        except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
            raise PreflightError(f"cannot reach {self.base_url}: {type(exc).__name__}") from None
        return status, "" if status == 200 else text

    def _check_auth(self, status: int) -> None:
        if status not in (401, 403):
            return
        if self.api_key:
            raise PreflightError(f"{self.base_url} refused the API key in ${self.api_key_env} (HTTP {status})")
        raise PreflightError(f"{self.base_url} needs an API key (HTTP {status}): set the environment variable {self.api_key_env}")


def _model_ids(text: str) -> list[str]:
    try:
        data = json.loads(text).get("data", [])
        return [m["id"] for m in data if isinstance(m, dict) and "id" in m]
    except (ValueError, AttributeError, TypeError):
        return []
