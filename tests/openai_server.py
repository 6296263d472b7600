"""A small, real OpenAI-compatible HTTP server for tests, with switchable faults and counters.

Endpoints: ``POST /v1/chat/completions``, ``GET /v1/models`` and the control API
``POST /_control/faults`` (JSON merged into the fault settings), ``GET /_control/stats``,
``POST /_control/reset`` (clear stats, restore the constructor's faults).

Chat request pipeline, decided at arrival (so arrival order is deterministic):
  1. record stats (Authorization header as sent, JSON body);  2. auth (401);
  3. bad JSON / no messages (400);  4. unknown model (404, unless ``"*"`` in models);
  5. at most ONE "first N" fault, the first kind in ``FAULT_ORDER`` whose countdown is > 0
     (that countdown is decremented).  Each ``<kind>_first_n`` is an independent countdown,
     re-armed when set; so ``fail_first_n=2, malformed_first_n=1`` means: requests 1-2 fail,
     request 3 is malformed, request 4 succeeds.  Auth/model errors consume no countdown.
Then ``latency`` seconds are slept (every chat request), and the response is produced.
Two settings replace timing with events, so tests need not guess how fast a loaded machine is:
``hold_until_in_flight=N`` holds every call until N calls have been in flight at once, and
``hang_until_answered=N`` ends a hung call (answering it normally) once N calls have been
answered; both give up after ``hold_seconds`` / ``hang_seconds``.
``think_block`` and ``content_override`` apply to every normal (and "length") answer.
Run as ``python tests/openai_server.py --port 0 --latency 0.05``: prints ``LISTENING <base_url>``.
"""
from __future__ import annotations

import argparse
import asyncio
import copy
import dataclasses
import json
import random
import re
import signal
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from batch_server import BatchEndpoints

FAULT_ORDER = ("drop_connection", "hang", "fail", "malformed", "no_choices",
               "null_content", "empty_content", "length")
THINK_PREFIX = "<think>internal reasoning</think>\n"
MAX_KEPT = 200
MAX_EVENTS = 100_000


@dataclass
class Faults:
    """Fault settings; every field can be set at runtime via ``set_faults`` or the control API."""
    latency: float = 0.0
    fail_first_n: int = 0
    fail_status: int = 500
    retry_after: str | None = None
    retry_after_ms: float | None = None
    hang_first_n: int = 0
    hang_seconds: float = 3600.0
    hang_until_answered: int = 0
    hang_matching: str | None = None  # every call whose messages hold this text hangs (hang_seconds)
    hold_until_in_flight: int = 0
    hold_seconds: float = 10.0
    malformed_first_n: int = 0
    empty_content_first_n: int = 0
    null_content_first_n: int = 0
    no_choices_first_n: int = 0
    length_first_n: int = 0
    drop_connection_first_n: int = 0
    think_block: bool = False
    content_override: str | None = None
    # Answer with this many times the tokens the prompt asks for ("at most about N tokens"), counted
    # with the tokenizer.json at `overshoot_tokenizer`: a model that overshoots a stated length.
    overshoot: float | None = None
    overshoot_tokenizer: str | None = None
    # Answer with ordinary words (no digit, path or name: no identifier at all) of exactly the length
    # the prompt asks for, counted with `overshoot_tokenizer`: a model that ignores identifiers.
    plain_words: bool = False
    # Answer with every marked fact (FACT-<digits>) the request's messages hold, then a few plain words:
    # a summarizer that carries facts, so a test can follow one through updated summaries.
    copy_facts: bool = False
    # A model of `context_limit` tokens counted with the tokenizer.json at `context_tokenizer`: a request
    # whose messages (their contents, plus MESSAGE_MARKUP tokens each) and max_tokens exceed it is refused
    # with a 400 worded as `context_wording` says: "openai", "vllm", "llamacpp" or "llama-cpp-python".
    context_limit: int | None = None
    context_tokenizer: str | None = None
    context_wording: str = "vllm"
    # The Files and Batches endpoints (batch_server.py): hold every batch in progress; expire the next N
    # batches after half their lines; answer these custom ids with an error object.
    batch_hold: bool = False
    batch_expire_first_n: int = 0
    batch_error_ids: list[str] | None = None
    # ---- bad answers (the summary checks, trajcomp/summarizers/checks.py) -----------------------
    # Answer with a bad summary of this kind (BAD_ANSWERS): refusal, refusal_paragraph (as a safety-tuned
    # model writes one), loop, language (Chinese), empty (a label only) or echo (the system prompt back).
    # With `bad_answer_first_per_prompt`, only the first answer to each distinct prompt is bad and the
    # ones after it are normal.
    bad_answer: str | None = None
    bad_answer_first_per_prompt: bool = False
    # ---- end of bad answers ----------------------------------------------------------------------


@dataclass
class Stats:
    """Counters; ``responses_by_status`` has int keys (str keys once JSON-encoded)."""
    requests: int = 0
    responses_by_status: dict[int, int] = field(default_factory=dict)
    dropped: int = 0
    in_flight: int = 0
    max_in_flight: int = 0
    hangs_ended_by_answers: int = 0
    context_refusals: int = 0
    headers_seen: list[str | None] = field(default_factory=list)
    bodies: list[Any] = field(default_factory=list)
    # The bodies answered 200, in the order answered (the calls paid), the last MAX_KEPT of them.
    answered_bodies: list[Any] = field(default_factory=list)
    models_requests: int = 0
    request_starts: list[float] = field(default_factory=list)
    request_ends: list[float] = field(default_factory=list)
    files_uploaded: int = 0
    batch_custom_ids: list[list[str]] = field(default_factory=list)  # each batch's requests, in creation order
    batch_polls: int = 0

    def to_dict(self) -> dict[str, Any]:
        """JSON-able copy of the counters."""
        d = dataclasses.asdict(self)
        d["responses_by_status"] = {str(k): v for k, v in self.responses_by_status.items()}
        return d


def _error(status: int, message: str, etype: str, code: str | None = None,
           headers: dict[str, str] | None = None) -> web.Response:
    body = {"error": {"message": message, "type": etype, "param": None, "code": code}}
    return web.json_response(body, status=status, headers=headers)


MESSAGE_MARKUP = 4  # a chat template's role markers around each message, roughly


def prompt_tokens(messages: list[dict[str, Any]], tokenizer_json: str | None) -> int:
    from tokenizers import Tokenizer

    encode = Tokenizer.from_file(tokenizer_json).encode
    return sum(len(encode(_text_of(m.get("content")), add_special_tokens=False).ids) + MESSAGE_MARKUP
               for m in messages)


def context_refusal(wording: str, limit: int, prompt: int, completion: int) -> web.Response:
    """A 400 for a request over the context, as each kind of server words it."""
    if wording == "openai":
        return _error(400, f"This model's maximum context length is {limit} tokens. However, your messages "
                           f"resulted in {prompt} tokens. Please reduce the length of the messages.",
                      "invalid_request_error", "context_length_exceeded")
    if wording == "llamacpp":
        body = {"error": {"code": 400, "message": "the request exceeds the available context size, try increasing it",
                          "type": "exceed_context_size_error", "n_prompt_tokens": prompt, "n_ctx": limit}}
        return web.json_response(body, status=400)
    if wording == "llama-cpp-python":
        return _error(400, f"Requested tokens ({prompt}) exceed context window of {limit}",
                      "invalid_request_error")
    return _error(400, f"This model's maximum context length is {limit} tokens. However, you requested "
                       f"{prompt + completion} tokens ({prompt} in the messages, {completion} in the completion). "
                       "Please reduce the length of the messages or completion.", "BadRequestError")


def _text_of(content: Any) -> str:
    """Text of a message content: a string, or a list of ``{"type": "text"}`` parts."""
    if isinstance(content, list):
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""


def summarize(messages: list[dict[str, Any]]) -> str:
    """Deterministic default answer derived from the last message."""
    last = _text_of(messages[-1].get("content")) if messages else ""
    return f"Summary of {len(last)} chars: " + " ".join(last.split())[:200]


STATED = re.compile(r"at most about (\d+) tokens")
FACT = re.compile(r"FACT-\d+")


def copied_facts(messages: list[dict[str, Any]]) -> str:
    """The marked facts of the messages, each once in order of first sight, and a plain sentence."""
    facts = dict.fromkeys(f for m in messages for f in FACT.findall(_text_of(m.get("content"))))
    return "Facts kept: " + " ".join(facts) + ". The agent read files and ran the tests."


PLAIN = ("the assistant looked at what the tools returned and then chose the next step of the work with "
         "care so that the task kept moving toward its end").split()


def overshooting(messages: list[dict[str, Any]], factor: float, tokenizer_json: str | None) -> str:
    """Words of the turns, then ordinary words in a seeded order (long, yet no loop the summary checks
    would turn away), `factor` times as many tokens as the last "at most about N tokens" asks."""
    # each word of the turns once (a tool output that repeats itself is no loop of the model's), no heading
    words = list(dict.fromkeys(w for w in _text_of(messages[-1].get("content")).split() if not w.startswith("#")))
    order = random.Random(len(words))
    return _words_of_length(words + [order.choice(PLAIN) for _ in range(4000)], messages, factor, tokenizer_json)


def plain_words(messages: list[dict[str, Any]], tokenizer_json: str | None) -> str:
    """Ordinary words in a seeded order (no loop the summary checks would turn away), as many tokens as
    the last "at most about N tokens" asks."""
    order = random.Random(len(messages[-1].get("content") or ""))
    return _words_of_length([order.choice(PLAIN) for _ in range(4000)], messages, 1.0, tokenizer_json)


def _words_of_length(words: list[str], messages: list[dict[str, Any]], factor: float, tokenizer_json: str | None) -> str:
    from tokenizers import Tokenizer

    prompt = " ".join(_text_of(m.get("content")) for m in messages)
    stated = int(STATED.findall(prompt)[-1])
    count = Tokenizer.from_file(tokenizer_json).encode
    wanted = round(stated * factor)
    low, high = 1, len(words)
    while low < high:  # the most words within `wanted` tokens
        mid = (low + high + 1) // 2
        if len(count(" ".join(words[:mid]), add_special_tokens=False).ids) <= wanted:
            low = mid
        else:
            high = mid - 1
    return " ".join(words[:low])


# ---- bad answers (Faults.bad_answer): what a model answers that the summary checks must turn away ----
# How safety-tuned models refuse: a paragraph (the refusal, why, an offer of other help), or one line
# with typographic apostrophes (tests/fixtures/refusals.json, English). The "refusal_paragraph"
# answer is one of them, picked by the prompt.
REFUSALS = json.loads((Path(__file__).parent / "fixtures" / "refusals.json").read_text(encoding="utf-8"))
REFUSAL_PARAGRAPHS = tuple(REFUSALS["en"])
BAD_ANSWERS = {
    "refusal": lambda messages: "I'm sorry, but I can't help with that request.",
    "refusal_paragraph": lambda messages: REFUSAL_PARAGRAPHS[len(_text_of(messages[-1].get("content"))) % 3],
    "loop": lambda messages: "The assistant ran the tests again and they failed again. " * 30,
    "language": lambda messages: (
        "助手检查了项目的测试日志，发现解析器在处理最后一个字段时出现了差一错误。随后它阅读了相关的源文件，"
        "定位到循环边界的问题，修改了索引的计算方式，并重新运行了完整的测试套件。"
        "所有测试现在都通过了，持续集成也恢复了正常，没有其他文件被改动。"),
    "empty": lambda messages: "Summary:",
    "echo": lambda messages: _text_of(messages[0].get("content")),
}


def _bad_answer(f: "Faults", messages: list[dict[str, Any]], answered: set[str]) -> str | None:
    """The bad answer the faults ask for, if this request gets one (see Faults.bad_answer)."""
    if f.bad_answer is None:
        return None
    prompt = json.dumps(messages, sort_keys=True)
    first = prompt not in answered
    answered.add(prompt)
    return BAD_ANSWERS[f.bad_answer](messages) if first or not f.bad_answer_first_per_prompt else None


# ---- end of bad answers ---------------------------------------------------------------------------


class FakeOpenAIServer:
    """In-process server; ``async with FakeOpenAIServer(latency=0.1) as srv: srv.base_url``."""

    def __init__(self, *, port: int = 0, api_key: str | None = None,
                 models: list[str] | None = None, **faults: Any) -> None:
        self.port, self.api_key = port, api_key
        self.models = list(models) if models else ["test-model"]
        self._initial = Faults(**faults)
        self.faults = Faults(**faults)
        self.stats = Stats()
        self._remaining = {k: getattr(self.faults, f"{k}_first_n") for k in (*FAULT_ORDER, "batch_expire")}
        self.batches = BatchEndpoints(self)
        self._answered: set[str] = set()  # the prompts answered so far, for bad_answer_first_per_prompt
        self._runner: web.AppRunner | None = None
        self._stopping = asyncio.Event()
        self._changed: asyncio.Condition | None = None  # made on the server's loop, in start()
        self.base_url = ""

    def set_faults(self, **kw: Any) -> None:
        """Merge fault settings; setting ``<kind>_first_n`` re-arms that countdown."""
        unknown = set(kw) - {f.name for f in dataclasses.fields(Faults)}
        if unknown:
            raise ValueError(f"unknown fault settings: {sorted(unknown)}")
        for name, value in kw.items():
            setattr(self.faults, name, value)
            if name.endswith("_first_n"):
                self._remaining[name[: -len("_first_n")]] = int(value)

    def reset(self) -> None:
        """Clear stats and restore the constructor's fault settings (countdowns re-armed)."""
        self.stats = Stats()
        self.faults = Faults()
        self._answered.clear()
        self.set_faults(**dataclasses.asdict(self._initial))

    async def start(self) -> str:
        """Bind 127.0.0.1 on ``port`` (0 = random) and return the ``.../v1`` base URL."""
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)
        self.batches.routes(app)
        app.router.add_post("/_control/faults", self._ctl_faults)
        app.router.add_get("/_control/stats", self._ctl_stats)
        app.router.add_post("/_control/reset", self._ctl_reset)
        self._stopping = asyncio.Event()
        self._changed = asyncio.Condition()
        self._runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=0.5,
                                     access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.port)
        await site.start()
        self.port = self._runner.addresses[0][1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        return self.base_url

    async def stop(self) -> None:
        """Wake hung requests (their connections are dropped) and shut down."""
        self._stopping.set()
        await self.batches.stop()
        await self._notify()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeOpenAIServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.stop()

    def _auth_error(self, request: web.Request) -> web.Response | None:
        if not self.api_key:
            return None
        header = request.headers.get("Authorization")
        if header is None:
            return _error(401, "You didn't provide an API key.", "invalid_request_error")
        got = header[len("Bearer "):] if header.startswith("Bearer ") else header
        if got != self.api_key:
            return _error(401, f"Incorrect API key provided: {got}", "invalid_request_error",
                          "invalid_api_key")
        return None

    async def _notify(self) -> None:
        """Wake the calls held by hold_until_in_flight or hang_until_answered to look again."""
        if self._changed is not None:
            async with self._changed:
                self._changed.notify_all()

    async def _hold(self, until: Any, seconds: float) -> bool:
        """Wait until `until()` is true (or the server stops, or `seconds` pass); True if it is."""
        async with self._changed:
            try:
                async with asyncio.timeout(seconds):
                    await self._changed.wait_for(lambda: until() or self._stopping.is_set())
            except TimeoutError:
                pass
        return until()

    def _context_error(self, body: dict[str, Any]) -> web.Response | None:
        f = self.faults
        if f.context_limit is None:
            return None
        prompt = prompt_tokens(body["messages"], f.context_tokenizer)
        completion = int(body.get("max_tokens") or 0)
        if prompt + completion <= f.context_limit:
            return None
        self.stats.context_refusals += 1
        return context_refusal(f.context_wording, f.context_limit, prompt, completion)

    def _matched(self, body: dict[str, Any]) -> str | None:
        text = self.faults.hang_matching
        return "hang" if text and any(text in str(m.get("content")) for m in body["messages"]) else None

    def _pick_fault(self) -> str | None:
        for kind in FAULT_ORDER:
            if self._remaining[kind] > 0:
                self._remaining[kind] -= 1
                return kind
        return None

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        s = self.stats
        s.requests += 1
        s.in_flight += 1
        s.max_in_flight = max(s.max_in_flight, s.in_flight)
        _append(s.request_starts, time.time(), MAX_EVENTS)
        _append(s.headers_seen, request.headers.get("Authorization"), MAX_EVENTS)
        await self._notify()
        try:
            try:
                body = await request.json()
            except (json.JSONDecodeError, UnicodeDecodeError):
                body = None
            _append(s.bodies, body, MAX_KEPT)
            error = self._auth_error(request) or _validate(body, self.models) or self._context_error(body)
            fault = None if error else self._pick_fault() or self._matched(body)
            if self.faults.hold_until_in_flight:
                await self._hold(lambda: s.max_in_flight >= self.faults.hold_until_in_flight,
                                 self.faults.hold_seconds)
            if self.faults.latency > 0:
                await asyncio.sleep(self.faults.latency)
            response = error or await self._answer(body, fault)
            if response is None:
                s.dropped += 1
                if request.transport is not None:
                    request.transport.close()
                raise asyncio.CancelledError  # aborts the handler without writing a response
            s.responses_by_status[response.status] = s.responses_by_status.get(response.status, 0) + 1
            if response.status == 200:
                _append(s.answered_bodies, body, MAX_KEPT)
            return response
        finally:
            s.in_flight -= 1
            _append(s.request_ends, time.time(), MAX_EVENTS)
            await self._notify()

    async def _answer(self, body: dict[str, Any], fault: str | None) -> web.Response | None:
        """Build the response for a valid request; None means "drop the connection"."""
        f = self.faults
        if fault == "hang" and f.hang_until_answered:
            answered = lambda: self.stats.responses_by_status.get(200, 0) >= f.hang_until_answered  # noqa: E731
            if await self._hold(answered, f.hang_seconds):
                self.stats.hangs_ended_by_answers += 1
            elif self._stopping.is_set():
                return None
            fault = None
        if fault == "hang":
            try:  # an early wake-up means the server is stopping: drop the connection
                await asyncio.wait_for(self._stopping.wait(), f.hang_seconds)
                return None
            except asyncio.TimeoutError:
                fault = None
        if fault == "drop_connection":
            return None
        if fault == "fail":
            return self._fail_response(f.fail_status)
        if fault == "malformed":
            return web.Response(status=200, text="<html>oops", content_type="text/html")
        if f.content_override is not None:
            content: str | None = f.content_override
        elif f.overshoot is not None:
            content = overshooting(body["messages"], f.overshoot, f.overshoot_tokenizer)
        elif f.plain_words:
            content = plain_words(body["messages"], f.overshoot_tokenizer)
        elif f.copy_facts:
            content = copied_facts(body["messages"])
        else:
            content = summarize(body["messages"])
        content = _bad_answer(f, body["messages"], self._answered) or content
        finish = "stop"
        if fault == "length":
            content, finish = content[: max(1, len(content) // 2)], "length"
        if f.think_block:
            content = THINK_PREFIX + content
        if fault == "empty_content":
            content = ""
        elif fault == "null_content":
            content = None
        return web.json_response(_completion(body, content, finish, fault == "no_choices"))

    def _fail_response(self, status: int) -> web.Response:
        headers: dict[str, str] = {}
        if status in (429, 503):
            if self.faults.retry_after is not None:
                headers["Retry-After"] = str(self.faults.retry_after)
            if self.faults.retry_after_ms is not None:
                ms = self.faults.retry_after_ms
                headers["retry-after-ms"] = str(int(ms) if float(ms).is_integer() else ms)
        etype = {429: "rate_limit_exceeded", 400: "invalid_request_error",
                 401: "invalid_request_error"}.get(status, "server_error")
        return _error(status, f"Injected fault: HTTP {status}", etype, headers=headers)

    async def _models(self, request: web.Request) -> web.Response:
        self.stats.models_requests += 1
        data = [{"id": m, "object": "model", "created": 0, "owned_by": "trajcomp-tests"}
                for m in self.models]
        return self._auth_error(request) or web.json_response({"object": "list", "data": data})

    async def _ctl_faults(self, request: web.Request) -> web.Response:
        try:
            self.set_faults(**await request.json())
        except (ValueError, TypeError) as exc:
            return _error(400, str(exc), "invalid_request_error")
        return web.json_response(dataclasses.asdict(self.faults))

    async def _ctl_stats(self, request: web.Request) -> web.Response:
        return web.json_response(self.stats.to_dict())

    async def _ctl_reset(self, request: web.Request) -> web.Response:
        self.reset()
        return web.json_response({"ok": True})


def _append(items: list[Any], value: Any, limit: int) -> None:
    items.append(value)
    if len(items) > limit:
        del items[0]


def _validate(body: Any, models: list[str]) -> web.Response | None:
    """400 for a malformed request, 404 for an unknown model."""
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
        return _error(400, "Request body must be JSON with a 'messages' list.",
                      "invalid_request_error")
    model = body.get("model")
    if "*" not in models and model not in models:
        return _error(404, f"The model `{model}` does not exist", "invalid_request_error",
                      "model_not_found")
    return None


def _completion(body: dict[str, Any], content: str | None, finish: str,
                no_choices: bool) -> dict[str, Any]:
    prompt = sum(len(_text_of(m.get("content"))) for m in body["messages"]
                 if isinstance(m, dict)) // 4
    completion = len(content or "") // 4
    choices = [] if no_choices else [{"index": 0, "finish_reason": finish,
                                      "message": {"role": "assistant", "content": content}}]
    return {"id": "chatcmpl-" + uuid.uuid4().hex[:24], "object": "chat.completion",
            "created": int(time.time()), "model": body.get("model"), "choices": choices,
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                      "total_tokens": prompt + completion}}


class ServerThread:
    """Run a FakeOpenAIServer on its own event loop in a daemon thread (for sync tests)."""

    def __init__(self, **kwargs: Any) -> None:
        self.server = FakeOpenAIServer(**kwargs)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self.base_url = ""

    def _run(self, fn: Any, *args: Any, **kw: Any) -> Any:
        """Call ``fn`` (sync or async) on the server's loop and return its result."""
        async def call() -> Any:
            result = fn(*args, **kw)
            return await result if asyncio.iscoroutine(result) else result
        return asyncio.run_coroutine_threadsafe(call(), self._loop).result(30)

    def __enter__(self) -> ServerThread:
        self._thread.start()
        try:
            self.base_url = self._run(self.server.start)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            self._run(self.server.stop)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self._loop.close()

    @property
    def stats(self) -> Stats:
        """A snapshot copy of the counters."""
        return self._run(copy.deepcopy, self.server.stats)

    def set_faults(self, **kw: Any) -> None:
        self._run(self.server.set_faults, **kw)

    def reset(self) -> None:
        self._run(self.server.reset)


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--api-key", default=None)
    p.add_argument("--models", default="test-model", help="comma-separated model ids")
    for f in dataclasses.fields(Faults):
        flag = "--" + f.name.replace("_", "-")
        if f.default is False:
            p.add_argument(flag, action="store_true")
        else:
            kind = {"retry_after_ms": float}.get(f.name, str if f.default is None else type(f.default))
            p.add_argument(flag, type=kind, default=f.default)
    return p.parse_args(argv)


async def _serve(args: argparse.Namespace) -> None:
    faults = {f.name: getattr(args, f.name) for f in dataclasses.fields(Faults)}
    server = FakeOpenAIServer(port=args.port, api_key=args.api_key,
                              models=[m for m in re.split(r"\s*,\s*", args.models) if m],
                              **faults)
    done = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, done.set)
    print(f"LISTENING {await server.start()}", flush=True)
    await done.wait()
    await server.stop()


def main(argv: list[str] | None = None) -> None:
    asyncio.run(_serve(_parse_args(argv)))


if __name__ == "__main__":
    main()
