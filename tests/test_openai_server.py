"""Tests for the fake OpenAI-compatible server used by the rest of the test suite."""
from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import aiohttp
import pytest

try:
    from tests.openai_server import THINK_PREFIX, FakeOpenAIServer, ServerThread, summarize
except ImportError:  # tests/ is not a package: pytest put tests/ itself on sys.path
    from openai_server import THINK_PREFIX, FakeOpenAIServer, ServerThread, summarize

SERVER_SCRIPT = Path(__file__).with_name("openai_server.py")
BODY = {"model": "test-model", "temperature": 0, "max_tokens": 50,
        "messages": [{"role": "system", "content": "Summarise."},
                     {"role": "user", "content": "step 1:   ran   ls\n\nstep 2: read file"}]}


async def post(session: aiohttp.ClientSession, base: str, body: Any = BODY,
               **kw: Any) -> tuple[int, dict[str, str], Any]:
    async with session.post(f"{base}/chat/completions", json=body, **kw) as r:
        text = await r.text()
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            data = text
        return r.status, dict(r.headers), data


def run(coro_fn: Any, **server_kw: Any) -> Any:
    """Run ``coro_fn(server, session)`` against a fresh in-process server."""
    async def main() -> Any:
        async with FakeOpenAIServer(**server_kw) as srv:
            async with aiohttp.ClientSession() as session:
                return await coro_fn(srv, session)
    return asyncio.run(main())


def test_completion_format_is_deterministic_and_models_listed() -> None:
    async def scenario(srv: FakeOpenAIServer, s: aiohttp.ClientSession) -> None:
        assert srv.base_url.startswith("http://127.0.0.1:") and srv.base_url.endswith("/v1")
        st1, _, d1 = await post(s, srv.base_url)
        st2, _, d2 = await post(s, srv.base_url)
        assert st1 == st2 == 200
        assert d1["object"] == "chat.completion" and d1["model"] == "test-model"
        assert isinstance(d1["created"], int) and d1["id"].startswith("chatcmpl-")
        choice = d1["choices"][0]
        assert choice["finish_reason"] == "stop" and choice["message"]["role"] == "assistant"
        assert choice["message"]["content"] == "Summary of 37 chars: step 1: ran ls step 2: read file"
        assert d1["choices"] == d2["choices"] and d1["usage"] == d2["usage"]
        u = d1["usage"]
        assert u["prompt_tokens"] == (10 + 37) // 4
        assert u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"]
        async with s.get(f"{srv.base_url}/models") as r:
            assert (await r.json())["data"] == [
                {"id": "test-model", "object": "model", "created": 0, "owned_by": "trajcomp-tests"}]
        st, _, err = await post(s, srv.base_url, {**BODY, "model": "gpt-x"})
        assert st == 404 and err["error"]["code"] == "model_not_found"
        assert err["error"]["message"] == "The model `gpt-x` does not exist"
        st, _, err = await post(s, srv.base_url, {"model": "test-model"})
        assert st == 400 and "messages" in err["error"]["message"]
        assert srv.stats.requests == 4 and srv.stats.models_requests == 1
        assert srv.stats.responses_by_status == {200: 2, 404: 1, 400: 1}
        assert srv.stats.bodies[0] == BODY and len(srv.stats.request_ends) == 4
    run(scenario)
    assert summarize([{"role": "user", "content": [{"type": "text", "text": "a  b"}]}]) \
        == "Summary of 4 chars: a b"


def test_auth_missing_wrong_and_right_key() -> None:
    async def scenario(srv: FakeOpenAIServer, s: aiohttp.ClientSession) -> None:
        st, _, err = await post(s, srv.base_url)
        assert st == 401 and "error" in err
        st, _, err = await post(s, srv.base_url, headers={"Authorization": "Bearer sk-wrong-123"})
        assert st == 401 and err["error"]["message"] == "Incorrect API key provided: sk-wrong-123"
        st, _, _ = await post(s, srv.base_url, headers={"Authorization": "Bearer sk-good"})
        assert st == 200
        async with s.get(f"{srv.base_url}/models") as r:
            assert r.status == 401
        assert srv.stats.headers_seen == [None, "Bearer sk-wrong-123", "Bearer sk-good"]
        assert srv.stats.responses_by_status == {401: 2, 200: 1}
    run(scenario, api_key="sk-good")


@pytest.mark.parametrize("status", [429, 503, 500])
def test_fail_first_n_with_retry_after(status: int) -> None:
    async def scenario(srv: FakeOpenAIServer, s: aiohttp.ClientSession) -> None:
        results = [await post(s, srv.base_url) for _ in range(3)]
        assert [r[0] for r in results] == [status, status, 200]
        headers = results[0][1]
        if status in (429, 503):
            assert headers["Retry-After"] == "2" and headers["retry-after-ms"] == "1500"
        else:
            assert "Retry-After" not in headers and "retry-after-ms" not in headers
        assert results[0][2]["error"]["message"] == f"Injected fault: HTTP {status}"
        assert srv.stats.responses_by_status == {status: 2, 200: 1}
    run(scenario, fail_first_n=2, fail_status=status, retry_after="2", retry_after_ms=1500)


def test_each_fault_kind_in_documented_order() -> None:
    kinds = ["drop_connection", "fail", "malformed", "no_choices", "null_content",
             "empty_content", "length"]

    async def scenario(srv: FakeOpenAIServer, s: aiohttp.ClientSession) -> None:
        with pytest.raises(aiohttp.ServerDisconnectedError):
            await post(s, srv.base_url)
        out = [await post(s, srv.base_url) for _ in range(len(kinds))]
        assert out[0][0] == 400                                     # fail
        assert out[1][0] == 200 and out[1][2] == "<html>oops"       # malformed
        assert out[2][2]["choices"] == []                           # no_choices
        assert out[3][2]["choices"][0]["message"]["content"] is None
        assert out[4][2]["choices"][0]["message"]["content"] == ""
        length = out[5][2]["choices"][0]
        assert length["finish_reason"] == "length"
        assert length["message"]["content"] == "FIXED answer sk-secret-42"[:12]
        ok = out[6][2]["choices"][0]                                # all countdowns used up
        assert ok["finish_reason"] == "stop" and ok["message"]["content"] == "FIXED answer sk-secret-42"
        srv.set_faults(think_block=True, content_override=None)
        _, _, d = await post(s, srv.base_url)
        assert d["choices"][0]["message"]["content"] == THINK_PREFIX + summarize(BODY["messages"])
        assert srv.stats.dropped == 1 and srv.stats.requests == 9
        assert srv.stats.responses_by_status == {400: 1, 200: 7}
        assert srv.stats.in_flight == 0
    run(scenario, fail_status=400, content_override="FIXED answer sk-secret-42",
        **{f"{k}_first_n": 1 for k in kinds})


async def eventually(condition, seconds: float = 10.0) -> bool:
    """Poll `condition` until it holds or `seconds` pass (the server runs on this same loop)."""
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    return condition()


def test_hang_times_out_client_and_stop_is_fast() -> None:
    async def scenario(srv: FakeOpenAIServer, s: aiohttp.ClientSession) -> None:
        with pytest.raises(asyncio.TimeoutError):
            await post(s, srv.base_url, timeout=aiohttp.ClientTimeout(total=0.3))
        assert await eventually(lambda: srv.stats.in_flight == 0)  # the handler was cancelled on disconnect
        pending = asyncio.create_task(post(s, srv.base_url))
        assert await eventually(lambda: srv.stats.in_flight == 1)
        t0 = time.monotonic()
        await srv.stop()
        assert time.monotonic() - t0 < 30  # not the hour the handler hangs; loose, for a busy machine
        with pytest.raises(aiohttp.ClientError):
            await pending
        assert srv.stats.responses_by_status == {}
    run(scenario, hang_first_n=2)


def test_max_in_flight_with_ten_concurrent_requests() -> None:
    async def scenario(srv: FakeOpenAIServer, s: aiohttp.ClientSession) -> None:
        t0 = time.monotonic()
        results = await asyncio.gather(*(post(s, srv.base_url) for _ in range(10)))
        elapsed = time.monotonic() - t0
        assert [r[0] for r in results] == [200] * 10
        assert elapsed >= 0.2  # at once, not one after another: max_in_flight below says so, whatever the machine's speed
        assert srv.stats.max_in_flight == 10 and srv.stats.in_flight == 0
        assert len(srv.stats.request_starts) == len(srv.stats.request_ends) == 10
    run(scenario, latency=0.2)


def _http(url: str, body: Any = None) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_server_thread_and_control_api() -> None:
    with ServerThread(fail_first_n=1, fail_status=502) as srv:
        root = srv.base_url[: -len("/v1")]
        assert _http(f"{srv.base_url}/chat/completions", BODY)[0] == 502
        assert _http(f"{srv.base_url}/chat/completions", BODY)[0] == 200
        status, faults = _http(f"{root}/_control/faults", {"fail_first_n": 1, "fail_status": 429})
        assert status == 200 and faults["fail_status"] == 429
        assert _http(f"{srv.base_url}/chat/completions", BODY)[0] == 429
        assert _http(f"{root}/_control/faults", {"nope": 1})[0] == 400
        stats = _http(f"{root}/_control/stats")[1]
        assert stats["requests"] == 3
        assert stats["responses_by_status"] == {"502": 1, "200": 1, "429": 1}
        assert srv.stats.responses_by_status == {502: 1, 200: 1, 429: 1}
        _http(f"{root}/_control/reset", {})
        assert srv.stats.requests == 0
        assert _http(f"{srv.base_url}/chat/completions", BODY)[0] == 502  # constructor faults back
        srv.set_faults(fail_first_n=0, content_override="X")
        _, data = _http(f"{srv.base_url}/chat/completions", BODY)
        assert data["choices"][0]["message"]["content"] == "X"
        srv.reset()
        assert srv.stats.requests == 0 and srv.server.faults.content_override is None


def test_subprocess_cli_prints_listening_and_stops_on_sigterm() -> None:
    proc = subprocess.Popen(
        [sys.executable, str(SERVER_SCRIPT), "--port", "0", "--latency", "0.01",
         "--api-key", "sk-cli", "--models", "a,b", "--think-block"],
        stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline().strip()
        assert line.startswith("LISTENING http://127.0.0.1:") and line.endswith("/v1")
        base = line.split()[1]
        req = urllib.request.Request(f"{base}/models", headers={"Authorization": "Bearer sk-cli"})
        with urllib.request.urlopen(req, timeout=5) as r:
            assert [m["id"] for m in json.loads(r.read())["data"]] == ["a", "b"]
        req = urllib.request.Request(
            f"{base}/chat/completions", data=json.dumps({**BODY, "model": "b"}).encode(),
            headers={"Authorization": "Bearer sk-cli", "Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=5) as r:
            content = json.loads(r.read())["choices"][0]["message"]["content"]
            assert content.startswith(THINK_PREFIX)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=5) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
