"""The OpenAI-compatible summarizer against a real HTTP server (tests/openai_server.py).

Faults and retries, Retry-After, timeouts, concurrency, the summary cache, the summary text, the
request body and the report. Everything is real: the server runs on 127.0.0.1 in a thread
(`ServerThread`) or on the test's own loop (`FakeOpenAIServer`), and a run goes through trajcomp's
own CLI entry point called in this process (`trajcomp.cli.main`), so config, pipeline, compressor,
summarizer, cache and HTTP code are all exercised without a subprocess per run.
tests/test_llm_cli.py runs the CLI as a real subprocess (auth, secrets, preflight, cache).
"""
from __future__ import annotations

import asyncio
import contextlib
import io
import json
import re
import os
import time
from dataclasses import dataclass
from email.utils import formatdate, parsedate_to_datetime
from pathlib import Path
from typing import Any

import pytest

from conftest import DEMO_TOKENIZER, read_jsonl, write_jsonl
from openai_server import THINK_PREFIX, FakeOpenAIServer, ServerThread
from openai_server import summarize as server_answer

from trajcomp import cli
from trajcomp.core.config import CompressionConfig
from trajcomp.core.summary.identifiers import INDEX_HEAD
from trajcomp.core.summary.redact import REDACTED
from trajcomp.reports.text import render_report
from trajcomp.core.dialects.rows import Turn
from trajcomp.summarizers.base import SUMMARY_PREFIX, Summary, SummaryError, SummaryRequest
from trajcomp.summarizers.openai import SYSTEM_PROMPT, OpenAISummarizer, clean_summary
from trajcomp.core.counting.tokens import TokenCounter

MODEL = "test-model"
OTHER_MODEL = "other-model"
TARGET = 2000  # rows built by hermes_row(over=True) have ~2700-3600 tokens with the test BPE tokenizer
SUMMARY_TARGET = 200
NO_KEY_ENV = "TRAJCOMP_TESTS_UNSET_API_KEY_4F1C"  # never set: no Authorization header is sent

# --------------------------------------------------------------------------------------------
# Realistic Hermes-style rows
# --------------------------------------------------------------------------------------------

TOOLS = [
    {"type": "function", "function": {
        "name": "terminal", "description": "Run a shell command in the sandbox and return its output.",
        "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}},
    {"type": "function", "function": {
        "name": "read_file", "description": "Read a text file from the workspace.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}},
]
SYSTEM = (
    "You are a function calling AI model. You are provided with function signatures within <tools></tools> "
    "XML tags. You may call one or more functions to assist with the user query.\n<tools>\n"
    + json.dumps(TOOLS) + "\n</tools>\nFor each function call return a json object with function name and "
    "arguments within <tool_call></tool_call> XML tags."
)
COMMANDS = ["pytest -x tests/", "cat src/parser.py", "grep -rn 'def parse' src/", "git diff --stat",
            "python -m pip list", "ls -la build/"]


def hermes_row(i: int, over: bool = True) -> dict[str, Any]:
    """One agent trajectory: system with <tools>, a request, gpt turns with <think> + <tool_call>,
    tool turns with <tool_response> JSON holding long logs, and a final answer."""
    steps, log_lines = (8 + i % 4, 4 + i % 2) if over else (1, 3)
    request = (f"The CI of project-{i} is red since commit {i:07x}; please find out why and fix it."
               if i % 4 else f"项目 project-{i} 的测试失败了，请修复解析器。")
    conv = [{"from": "system", "value": SYSTEM}, {"from": "human", "value": request}]
    for s in range(steps):
        command = COMMANDS[(i + s) % len(COMMANDS)]
        conv.append({"from": "gpt", "value": (
            f"<think>\nStep {s}: the failure is probably in the tokenizer of parser.py; running `{command}` "
            "should show the failing assertion.\n</think>\n<tool_call>\n"
            + json.dumps({"name": "terminal", "arguments": {"command": command}}) + "\n</tool_call>")})
        log = "\n".join(
            f"[{s}.{k:03d}] tests/test_mod{k % 7}.py::test_case_{i}_{k} "
            + ("PASSED" if (i + s + k) % 5 else "FAILED AssertionError: expected 3, got 2 (src/parser.py:41)")
            for k in range(log_lines))
        conv.append({"from": "tool", "value": "<tool_response>\n" + json.dumps(
            {"tool_call_id": f"call_{i}_{s}", "name": "terminal",
             "content": f"exit code {(i + s) % 2}\n{log}"}) + "\n</tool_response>"})
    conv.append({"from": "gpt", "value": "<think>\nThe fix works.\n</think>\nI fixed the off-by-one in "
                 "src/parser.py; the whole suite passes now."})
    return {"id": f"traj-{i:04d}", "source": "hermes-agent", "conversations": conv}


def hermes_rows(n_over: int, n_under: int = 0) -> list[dict[str, Any]]:
    """`n_over` rows over TARGET with `n_under` short rows spread among them."""
    rows = [hermes_row(i) for i in range(n_over)]
    for j in range(n_under):
        rows.insert(min(len(rows), 2 + 3 * j), hermes_row(1000 + j, over=False))
    return rows


def render(turns: list[dict[str, str]]) -> str:
    """How the turns to summarize must appear in the user message (every test turn is < max_turn_chars)."""
    return "\n\n".join(f"### Turn {k} ({t['from']})\n{t['value']}" for k, t in enumerate(turns, 1))


# --------------------------------------------------------------------------------------------
# Runs: trajcomp's CLI entry point, in this process
# --------------------------------------------------------------------------------------------

@dataclass
class Run:
    code: int
    stdout: str
    stderr: str
    out: Path
    seconds: float

    def sibling(self, suffix: str) -> Path:
        return self.out.with_name(self.out.name[: -len(".jsonl")] + suffix)

    @property
    def report(self) -> dict[str, Any]:
        return json.loads(self.sibling("_metrics.json").read_text(encoding="utf-8"))

    @property
    def rows(self) -> list[dict[str, Any]]:
        return read_jsonl(self.out)

    @property
    def rejects(self) -> list[dict[str, Any]]:
        path = self.sibling("_rejects.jsonl")
        return read_jsonl(path) if path.exists() else []

    @property
    def cache(self) -> Path:
        return self.sibling("_summary_cache")


def base_args(inp: Path, out: Path, tokenizer: Path, base_url: str) -> list[str]:
    return [
        "compress", str(inp), "-o", str(out), "--tokenizer", str(tokenizer),
        "--target-max-tokens", str(TARGET), "--summary-target-tokens", str(SUMMARY_TARGET),
        "--summarizer", "openai", "--base-url", base_url, "--model", MODEL, "--api-key-env", NO_KEY_ENV,
        "--max-retries", "3", "--retry-delay", "0.01", "--request-timeout", "5", "--quiet",
        "--cannot-fit", "shorten",  # these rows are about the summarizer; a later --cannot-fit wins
    ]


def run_inproc(argv: list[str]) -> tuple[int, str, str, float]:
    out, err = io.StringIO(), io.StringIO()
    started = time.monotonic()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            cli.main(argv)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    return code, out.getvalue(), err.getvalue(), time.monotonic() - started


def compress(tmp_path: Path, base_url: str, tokenizer: Path, *extra: str, out_name: str = "out.jsonl") -> Run:
    """Compress tmp_path/in.jsonl (written by the test) into tmp_path/out_name; extra flags win."""
    out = tmp_path / out_name
    code, stdout, stderr, seconds = run_inproc(base_args(tmp_path / "in.jsonl", out, tokenizer, base_url) + list(extra))
    assert code in (0, 3), f"exit {code}\nstdout: {stdout}\nstderr: {stderr}"
    run = Run(code, stdout, stderr, out, seconds)
    failed = run.report["summary"]["trajectories_failed"] + run.report["rows"]["reject_reasons"].get("summary_failed", 0)
    # A completed run with rows whose summary could not be had says so in its exit code, for scripts.
    assert (code == 3) == (failed > 0), (code, failed, stderr)
    assert (code == 3) == ("could not be summarized" in stderr)
    return run


def summary_turns(row: dict[str, Any]) -> list[str]:
    return [t["value"] for t in row["conversations"] if SUMMARY_PREFIX in t["value"]]


def answer_of(summary_turn: str) -> str:
    """The model's answer in a summary turn: without the prefix and the identifier index trajcomp appends."""
    return summary_turn[len(SUMMARY_PREFIX):].split("\n" + INDEX_HEAD)[0].strip()


def body_budget(tokenizer: Path) -> int:
    """What the prompt asks for: the summary turn's budget less its prefix."""
    return SUMMARY_TARGET - TokenCounter(str(tokenizer)).count([SUMMARY_PREFIX + " "])[0]


def strip_metrics(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k != "compression_metrics"}


def server_usage(bodies: list[dict[str, Any]]) -> dict[str, int]:
    """The usage the test server reports for normal answers to these bodies (its own formula)."""
    prompt = sum(sum(len(m["content"]) for m in b["messages"]) // 4 for b in bodies)
    completion = sum(len(server_answer(b["messages"])) // 4 for b in bodies)
    return {"prompt_tokens": prompt, "completion_tokens": completion}


def unique_bodies(bodies: list[dict[str, Any]]) -> list[dict[str, Any]]:
    seen: dict[str, dict[str, Any]] = {}
    for b in bodies:
        seen.setdefault(json.dumps(b, sort_keys=True), b)
    return list(seen.values())


# --------------------------------------------------------------------------------------------
# Fixtures
# --------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def server_thread():
    with ServerThread(models=[MODEL, OTHER_MODEL]) as st:
        yield st


@pytest.fixture
def srv(server_thread):
    """The module's server with clean counters and no faults."""
    assert NO_KEY_ENV not in os.environ
    server_thread.reset()
    yield server_thread
    server_thread.reset()


N_OVER, N_UNDER = 5, 1


@pytest.fixture
def data(tmp_path) -> list[dict[str, Any]]:
    rows = hermes_rows(N_OVER, N_UNDER)
    write_jsonl(tmp_path / "in.jsonl", rows)
    return rows


def test_generated_rows_are_mostly_over_target(srv, data, tmp_path, bpe_tokenizer):
    run = compress(tmp_path, srv.base_url, bpe_tokenizer)
    outcomes = [r["compression_metrics"]["outcome"] for r in run.rows]
    assert outcomes.count("compressed") == N_OVER and outcomes.count("skipped_under_target") == N_UNDER
    assert [strip_metrics(r)["id"] for r in run.rows] == [r["id"] for r in data]  # input order kept
    for row in run.rows:
        m = row["compression_metrics"]
        if m["outcome"] == "compressed":
            assert m["original_tokens"] > TARGET >= m["compressed_tokens"]
            assert m["summary_source"] == "openai" and m["summarization_api_calls"] == 1
            assert len(summary_turns(row)) == 1
    assert srv.stats.requests == N_OVER


# --------------------------------------------------------------------------------------------
# 1. Every fault: retries that suffice, and retries exhausted under each --on-failure
# --------------------------------------------------------------------------------------------

# name -> (countdown kind, settings, extra flags, a fragment of the row's error once retries run out)
FAULTS = {
    "429-retry-after": ("fail", {"fail_status": 429, "retry_after": "0.02"}, [], "HTTP 429"),
    "429-retry-after-ms": ("fail", {"fail_status": 429, "retry_after_ms": 20}, [], "HTTP 429"),
    "500": ("fail", {"fail_status": 500}, [], "HTTP 500"),
    "502": ("fail", {"fail_status": 502}, [], "HTTP 502"),
    "503": ("fail", {"fail_status": 503}, [], "HTTP 503"),
    "hang": ("hang", {"hang_seconds": 30}, ["--request-timeout", "0.25"], "timed out"),
    "malformed": ("malformed", {}, [], "not JSON"),
    "empty-content": ("empty_content", {}, [], "empty"),
    "null-content": ("null_content", {}, [], "empty"),
    "no-choices": ("no_choices", {}, [], "no choices"),
    "length": ("length", {}, [], "cut off"),
    "drop-connection": ("drop_connection", {}, [], "connection error"),
}


@pytest.mark.parametrize("fault", list(FAULTS))
def test_fault_then_retry_compresses_every_row(fault, srv, data, tmp_path, bpe_tokenizer):
    kind, settings, extra, _ = FAULTS[fault]
    srv.set_faults(**settings, **{f"{kind}_first_n": 2})  # the first two requests of the run fail
    run = compress(tmp_path, srv.base_url, bpe_tokenizer, *extra)

    stats = srv.stats
    assert stats.requests == N_OVER + 2
    # The server's answer echoes the turns, <think> blocks included; the summary drops those blocks.
    full_answers = {clean_summary(server_answer(b["messages"])) for b in stats.bodies}
    metrics = [r["compression_metrics"] for r in run.rows]
    assert [m["outcome"] for m in metrics].count("compressed") == N_OVER
    assert sum(m["summarization_errors"] for m in metrics) == 2
    assert sum(m["summarization_api_calls"] for m in metrics) == N_OVER + 2
    for row in run.rows:
        if row["compression_metrics"]["was_compressed"]:
            (summary,) = summary_turns(row)
            assert summary.startswith(SUMMARY_PREFIX + " ")
            # The whole answer of a good call: never a placeholder, never a cut-off (length) answer.
            assert answer_of(summary) in full_answers, summary
            assert row["compression_metrics"]["error"] is None
    s = run.report["summarization"]
    assert s["retries"] == 2 and s["errors"] == 2
    assert s["http_requests"] == s["api_calls"] == stats.requests
    assert run.report["summary"]["trajectories_failed"] == 0


# Every fault with --on-failure keep; reject and extractive (which differ only after the failure) with a few.
EXHAUSTED = [(fault, "keep") for fault in FAULTS] + [
    (fault, mode) for mode in ("reject", "extractive") for fault in ("503", "hang", "length", "null-content")]


@pytest.mark.parametrize("fault, on_failure", EXHAUSTED)
def test_fault_with_retries_exhausted(fault, on_failure, srv, data, tmp_path, bpe_tokenizer):
    kind, settings, extra, error_fragment = FAULTS[fault]
    srv.set_faults(**settings, **{f"{kind}_first_n": 10_000})
    run = compress(tmp_path, srv.base_url, bpe_tokenizer, *extra, "--max-retries", "1", "--on-failure", on_failure)

    assert srv.stats.requests == 2 * N_OVER  # one call and one retry per row that needs a summary
    text = run.out.read_text(encoding="utf-8")
    if run.sibling("_rejects.jsonl").exists():
        text += run.sibling("_rejects.jsonl").read_text(encoding="utf-8")
    assert "Summary of" not in text  # nothing of any (faulty) answer, e.g. a length-cut one, is kept
    by_id = {r["id"]: r for r in data}
    report = run.report
    s = report["summarization"]
    assert s["api_calls"] == s["errors"] == s["http_requests"] == 2 * N_OVER
    assert s["retries"] == N_OVER

    if on_failure == "keep":
        assert len(run.rows) == len(data)
        assert SUMMARY_PREFIX not in text
        failed = [r for r in run.rows if r["compression_metrics"]["outcome"] == "failed"]
        assert len(failed) == N_OVER == report["summary"]["trajectories_failed"]
        for row in run.rows:
            assert strip_metrics(row) == by_id[row["id"]]  # every row exactly as it was
        for row in failed:
            m = row["compression_metrics"]
            assert m["was_compressed"] is False and m["summary_source"] is None
            assert isinstance(m["error"], str) and error_fragment in m["error"]
            assert m["summarization_api_calls"] == m["summarization_errors"] == 2
            assert m["compressed_tokens"] == m["original_tokens"] and m["turns_removed"] == 0
        assert not run.sibling("_rejects.jsonl").exists()
        assert report["summary"]["summaries_by_source"] == {}
    elif on_failure == "reject":
        assert len(run.rows) == N_UNDER and SUMMARY_PREFIX not in text
        assert len(run.rejects) == N_OVER
        for rej in run.rejects:
            assert rej["reason"] == "summary_failed" and error_fragment in rej["detail"]
            original = json.loads(rej["raw"])
            assert original == by_id[original["id"]]
            assert rej["compression_metrics"]["outcome"] == "failed"
        assert report["rows"]["reject_reasons"] == {"summary_failed": N_OVER}
    else:
        assert len(run.rows) == len(data)
        compressed = [r for r in run.rows if r["compression_metrics"]["was_compressed"]]
        assert len(compressed) == N_OVER and report["summary"]["trajectories_failed"] == 0
        for row in compressed:
            m = row["compression_metrics"]
            assert m["summary_source"] == "extractive" and m["outcome"] == "compressed"
            assert m["error"].startswith("openai failed") and error_fragment in m["error"]
            assert m["summarization_api_calls"] == m["summarization_errors"] == 2
            assert len(summary_turns(row)) == 1
        # The fallback is visible in the report, and in its text form, not only row by row.
        assert report["summary"]["summaries_by_source"] == {"extractive": N_OVER}
        assert f"compressed          {N_OVER} (now fit) (extractive: {N_OVER})" in render_report(report, "r.json")


# --------------------------------------------------------------------------------------------
# 2. Non-retryable answers
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("status", [400, 401, 404, 422])
def test_client_errors_are_not_retried(status, srv, data, tmp_path, bpe_tokenizer):
    srv.set_faults(fail_status=status, fail_first_n=10_000)
    run = compress(tmp_path, srv.base_url, bpe_tokenizer, "--max-retries", "5")
    assert srv.stats.requests == N_OVER  # exactly one call per row needing a summary
    failed = [r["compression_metrics"] for r in run.rows if r["compression_metrics"]["outcome"] == "failed"]
    assert len(failed) == N_OVER
    for m in failed:
        assert m["summarization_api_calls"] == m["summarization_errors"] == 1
        assert f"HTTP {status}" in m["error"] and "Injected fault" in m["error"]
    assert run.report["summarization"]["retries"] == 0


def test_408_and_409_are_retried(srv, data, tmp_path, bpe_tokenizer):
    srv.set_faults(fail_status=408, fail_first_n=1)
    compress(tmp_path, srv.base_url, bpe_tokenizer)
    assert srv.stats.requests == N_OVER + 1
    srv.reset()
    srv.set_faults(fail_status=409, fail_first_n=1)
    run = compress(tmp_path, srv.base_url, bpe_tokenizer, "--no-cache")
    assert srv.stats.requests == N_OVER + 1
    assert [r["compression_metrics"]["outcome"] for r in run.rows].count("compressed") == N_OVER


# --------------------------------------------------------------------------------------------
# 3. Retry-After is honoured (summarizer API, server on the same loop)
# --------------------------------------------------------------------------------------------

def make_config(base_url: str, **overrides: Any) -> CompressionConfig:
    values = dict(summarizer="openai", base_url=base_url, summarization_model=MODEL, api_key_env=NO_KEY_ENV,
                  retry_delay=0.01, request_timeout=5.0, max_retries=3, summary_target_tokens=SUMMARY_TARGET,
                  target_max_tokens=TARGET, cannot_fit="shorten")
    values.update(overrides)
    return CompressionConfig(**values)


def request_for(i: int, timeout: float | None = None) -> SummaryRequest:
    row = hermes_row(i)["conversations"]
    return SummaryRequest(tuple(Turn(t["from"], t["value"]) for t in row[2:6]), SUMMARY_TARGET, timeout)


async def with_summarizer(fn, server_kw: dict | None = None, **config_kw):
    """fn(summarizer, server) against a fresh server on this loop; the summarizer is started and closed."""
    async with FakeOpenAIServer(models=[MODEL], **(server_kw or {})) as server:
        summarizer = OpenAISummarizer(make_config(server.base_url, **config_kw), TokenCounter(str(DEMO_TOKENIZER)))
        await summarizer.start()
        try:
            return await fn(summarizer, server)
        finally:
            await summarizer.close()


@pytest.mark.parametrize("status, header, wait", [
    (429, "seconds", 1.0),    # Retry-After: 1
    (429, "http-date", None),  # Retry-After: <now + 2 s>, at one-second resolution
    (429, "ms", 0.6),         # retry-after-ms: 600
    (503, "seconds", 1.0),
])
def test_retry_after_is_honoured(status, header, wait):
    async def scenario(summarizer: OpenAISummarizer, server: FakeOpenAIServer):
        if header == "seconds":
            server.set_faults(retry_after="1")
        elif header == "ms":
            server.set_faults(retry_after_ms=600)
        else:
            server.set_faults(retry_after=formatdate(time.time() + 2, usegmt=True))
        server.set_faults(fail_status=status, fail_first_n=1)
        summary = await summarizer.summarize(request_for(1, timeout=30))
        return summary, server.stats, server.faults.retry_after
    # A 1 ms backoff base: without the server's header the retry would come at once.
    summary, stats, retry_after = asyncio.run(with_summarizer(scenario, retry_delay=0.001))
    assert summary.api_calls == 2 and summary.errors == 1
    retried_at = stats.request_starts[1]
    if wait is None:  # not before the date the server named
        assert retried_at >= parsedate_to_datetime(retry_after).timestamp()
    else:  # the wait runs from the answer, which the client gets after the server sends it
        assert retried_at - stats.request_ends[0] >= wait - 0.01
    assert retried_at - stats.request_starts[0] < 30  # only catches a hang: loose on a busy machine


def test_retry_after_longer_than_the_row_budget_ends_at_the_budget():
    async def scenario(summarizer: OpenAISummarizer, server: FakeOpenAIServer):
        server.set_faults(fail_status=429, fail_first_n=10, retry_after="60")
        started = time.monotonic()
        with pytest.raises(SummaryError) as info:
            await summarizer.summarize(request_for(1, timeout=0.5))
        return time.monotonic() - started, info.value
    elapsed, error = asyncio.run(with_summarizer(scenario))
    assert 0.45 <= elapsed < 30  # not the 60 s the server asked for
    assert "timed out after 0.5s" in str(error) and "HTTP 429" in str(error)
    assert error.api_calls == 1 and error.errors == 1


# --------------------------------------------------------------------------------------------
# 4. --trajectory-timeout
# --------------------------------------------------------------------------------------------

def test_trajectory_timeout_bounds_a_row_whose_calls_all_hang(srv, tmp_path, bpe_tokenizer):
    rows = [hermes_row(7), hermes_row(1001, over=False)]
    write_jsonl(tmp_path / "in.jsonl", rows)
    srv.set_faults(hang_first_n=10_000, hang_seconds=600)
    run = compress(tmp_path, srv.base_url, bpe_tokenizer, "--request-timeout", "300", "--max-retries", "5",
                   "--trajectory-timeout", "0.6")
    # Measured: ~0.65-0.75 s for the whole in-process run (tokenizer load included); without the
    # trajectory timeout it would take the 300 s request timeout or more. The bound is loose, for a busy machine.
    assert 0.55 <= run.seconds < 60, run.seconds
    assert run.report["processing"]["duration_seconds"] < 60
    hung, short = run.rows
    assert strip_metrics(hung) == rows[0] and strip_metrics(short) == rows[1]
    m = hung["compression_metrics"]
    assert m["outcome"] == "failed" and m["was_compressed"] is False
    assert "timed out after 0.6s" in m["error"]
    assert run.report["summary"]["trajectories_failed"] == 1
    assert srv.stats.requests == 1


def test_trajectory_timeout_starts_once_a_slot_is_held():
    """Time queued behind other rows depends on the run, so it does not count against a row."""
    async def scenario(summarizer: OpenAISummarizer, server: FakeOpenAIServer):
        started = time.monotonic()

        async def one(i: int) -> float:
            with pytest.raises(SummaryError, match="timed out after 0.3s"):
                await summarizer.summarize(request_for(i, timeout=0.3))
            return time.monotonic() - started
        return await asyncio.gather(*(one(i) for i in range(3)))
    ends = sorted(asyncio.run(with_summarizer(scenario, {"hang_first_n": 100, "hang_seconds": 60},
                                              max_concurrent_requests=1, request_timeout=30.0)))
    for k, end in enumerate(ends, 1):  # one slot: each row gets its own full 0.3 s in turn
        assert 0.3 * k - 0.05 <= end < 0.3 * k + 30, ends  # the upper bound: not the 60 s hang


def test_outcomes_do_not_depend_on_concurrency():
    """Rows that each fit their timeout succeed whether they wait for a slot or not."""
    async def scenario(summarizer: OpenAISummarizer, server: FakeOpenAIServer):
        results = await asyncio.gather(*(summarizer.summarize(request_for(i, timeout=1.5)) for i in range(8)),
                                       return_exceptions=True)
        return [isinstance(r, Summary) for r in results]
    for concurrency in (1, 8):
        ok = asyncio.run(with_summarizer(scenario, {"latency": 0.3}, max_concurrent_requests=concurrency))
        assert all(ok), (concurrency, ok)


def test_retries_count_only_retries_made():
    async def scenario(summarizer: OpenAISummarizer, server: FakeOpenAIServer):
        with pytest.raises(SummaryError) as info:
            await summarizer.summarize(request_for(1, timeout=0.3))
        return info.value, summarizer.run_stats()
    error, stats = asyncio.run(with_summarizer(scenario, {"hang_first_n": 100, "hang_seconds": 60},
                                               request_timeout=30.0))
    assert error.api_calls == stats["http_requests"] == 1
    assert stats["retries"] == error.api_calls - 1


def test_a_cancel_is_never_swallowed():
    """Ctrl-C and SIGTERM stop a run by cancelling rows mid-summary: a cancel that lands on any
    loop step of a call, even the one where the answer has just arrived, must end the row."""
    async def scenario(summarizer: OpenAISummarizer, server: FakeOpenAIServer):
        swallowed, cancelled = [], 0
        for k in range(240):
            task = asyncio.ensure_future(summarizer.summarize(request_for(k % 5, timeout=5)))
            for _ in range(k % 40):  # a call takes ~15 loop steps here: sweep past its end
                await asyncio.sleep(0)
            accepted = task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                cancelled += 1
                continue
            if accepted:
                swallowed.append(k)
        return swallowed, cancelled
    swallowed, cancelled = asyncio.run(with_summarizer(scenario))
    assert cancelled > 50  # the sweep did cancel calls in flight
    assert swallowed == []


# --------------------------------------------------------------------------------------------
# 5. Concurrency
# --------------------------------------------------------------------------------------------

# Calls in flight are a bound and are asserted; throughput is a speed and is measured by
# scripts/bench_concurrency.py (figures in docs/measured.md), never timed here.

def test_pipeline_keeps_concurrency_calls_in_flight_and_no_more(tmp_path, bpe_tokenizer):
    """The whole pipeline: 40 rows needing a summary, --concurrency 8.

    The server holds the first calls until 8 are in flight at once (giving up after 10 s), so
    reaching C does not depend on how fast this machine tokenizes rows."""
    n, concurrency = 40, 8
    write_jsonl(tmp_path / "in.jsonl", [hermes_row(i) for i in range(n)])
    with ServerThread(models=[MODEL], latency=0.05, hold_until_in_flight=concurrency) as st:
        run = compress(tmp_path, st.base_url, bpe_tokenizer, "--concurrency", str(concurrency))
        stats = st.stats
    assert stats.requests == n
    assert all(r["compression_metrics"]["was_compressed"] for r in run.rows)
    assert stats.max_in_flight == concurrency
    assert run.report["summarization"]["max_calls_in_flight"] == stats.max_in_flight


def test_summarizer_api_keeps_concurrency_calls_in_flight_and_no_more():
    """OpenAISummarizer alone: 40 concurrent SummaryRequests, exactly 8 calls in flight at the peak."""
    n, concurrency = 40, 8

    async def scenario(summarizer: OpenAISummarizer, server: FakeOpenAIServer):
        results = await asyncio.gather(*(summarizer.summarize(request_for(i)) for i in range(n)))
        return results, server.stats, summarizer.run_stats()
    results, stats, run_stats = asyncio.run(with_summarizer(scenario, {"latency": 0.2},
                                                            max_concurrent_requests=concurrency))
    assert len(results) == n and all(isinstance(r, Summary) and r.api_calls == 1 for r in results)
    assert stats.requests == n and stats.max_in_flight == concurrency
    assert run_stats["max_calls_in_flight"] == concurrency and run_stats["http_requests"] == n


def test_a_hung_call_stalls_only_its_own_row(srv, tmp_path, bpe_tokenizer):
    """The first call hangs until the 39 other rows have their summaries, then is answered.

    Were rows held only as many as are running (8 here), the others would wait behind it: the
    call would hang its full 20 s instead, and no hang would be ended by answers."""
    n = 40
    rows = [hermes_row(i) for i in range(n)]
    write_jsonl(tmp_path / "in.jsonl", rows)
    srv.set_faults(hang_first_n=1, hang_until_answered=n - 1, hang_seconds=20)
    run = compress(tmp_path, srv.base_url, bpe_tokenizer, "--concurrency", "2", "--request-timeout", "30")
    stats = srv.stats
    assert stats.hangs_ended_by_answers == 1 and stats.requests == n
    assert all(r["compression_metrics"]["was_compressed"] for r in run.rows)
    assert [strip_metrics(r)["id"] for r in run.rows] == [r["id"] for r in rows]
    assert run.report["processing"]["max_rows_running"] == 8


# --------------------------------------------------------------------------------------------
# 8. The summary cache
# --------------------------------------------------------------------------------------------

def test_cache_hits_and_misses(srv, data, tmp_path, bpe_tokenizer):
    first = compress(tmp_path, srv.base_url, bpe_tokenizer)
    first_bytes = first.out.read_bytes()
    assert srv.stats.requests == N_OVER and first.cache.exists()
    assert first.report["summarization"]["cache_hits"] == 0

    srv.reset()
    again = compress(tmp_path, srv.base_url, bpe_tokenizer)
    assert srv.stats.requests == 0
    assert again.out.read_bytes() == first_bytes
    assert again.report["summarization"]["cache_hits"] == N_OVER

    srv.reset()
    other_model = compress(tmp_path, srv.base_url, bpe_tokenizer, "--model", OTHER_MODEL)
    assert srv.stats.requests == N_OVER and other_model.report["summarization"]["cache_hits"] == 0
    assert {b["model"] for b in srv.stats.bodies} == {OTHER_MODEL}

    srv.reset()
    (tmp_path / "hot.yaml").write_text("summarization:\n  temperature: 0.9\n", encoding="utf-8")
    hot = compress(tmp_path, srv.base_url, bpe_tokenizer, "-c", str(tmp_path / "hot.yaml"))
    assert srv.stats.requests == N_OVER and hot.report["summarization"]["cache_hits"] == 0
    assert {b["temperature"] for b in srv.stats.bodies} == {0.9}

    srv.reset()
    uncached = compress(tmp_path, srv.base_url, bpe_tokenizer, "--no-cache", out_name="nocache.jsonl")
    assert srv.stats.requests == N_OVER and not uncached.cache.exists()
    assert "cache_hits" not in uncached.report["summarization"]
    assert uncached.out.read_bytes() == first_bytes


def test_failed_summaries_are_not_cached(srv, data, tmp_path, bpe_tokenizer):
    srv.set_faults(fail_first_n=10_000, fail_status=500)
    failed = compress(tmp_path, srv.base_url, bpe_tokenizer, "--max-retries", "0")
    assert failed.report["summary"]["trajectories_failed"] == N_OVER and srv.stats.requests == N_OVER
    srv.reset()
    healed = compress(tmp_path, srv.base_url, bpe_tokenizer)
    assert srv.stats.requests == N_OVER and healed.report["summarization"]["cache_hits"] == 0
    assert healed.report["summary"]["trajectories_compressed"] == N_OVER


# --------------------------------------------------------------------------------------------
# 9. Summary text and the request body
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("content, expected", [
    ("<think>plan</think>\nThe assistant ran pytest.", "The assistant ran pytest."),
    ("[CONTEXT SUMMARY]: The assistant ran pytest.", "The assistant ran pytest."),
    ("  [CONTEXT SUMMARY]: [CONTEXT SUMMARY]:  The assistant ran pytest.  ", "The assistant ran pytest."),
    ("<think>a\nb</think>[CONTEXT SUMMARY]: x <think>c</think>y", "x y"),
    ("<think>never closed, all reasoning", ""),
    ("[CONTEXT SUMMARY]:", ""),
])
def test_clean_summary(content, expected):
    assert clean_summary(content) == expected


@pytest.mark.parametrize("think, override", [
    (True, None),
    (False, "[CONTEXT SUMMARY]: The assistant ran pytest -x; 3 tests failed in src/parser.py."),
    (True, "[CONTEXT SUMMARY]: The assistant ran pytest -x; 3 tests failed in src/parser.py."),
])
def test_summary_text_in_rows(think, override, srv, data, tmp_path, bpe_tokenizer):
    srv.set_faults(think_block=think, content_override=override)
    run = compress(tmp_path, srv.base_url, bpe_tokenizer)
    text = run.out.read_text(encoding="utf-8")
    assert "<think>internal reasoning" not in text and THINK_PREFIX.strip() not in text
    compressed = [r for r in run.rows if r["compression_metrics"]["was_compressed"]]
    assert len(compressed) == N_OVER
    for row in compressed:
        (summary,) = summary_turns(row)
        assert summary.count(SUMMARY_PREFIX) == 1 and summary.startswith(SUMMARY_PREFIX + " ")
        if override:
            assert SUMMARY_PREFIX + " " + answer_of(summary) == override
        else:
            assert summary.startswith(SUMMARY_PREFIX + " Summary of ")


def stated_length(body: dict[str, Any], tokenizer: Path) -> int:
    """The length the prompt asks for: the body's budget less the identifier index's room (at most half)."""
    budget = body_budget(tokenizer)
    stated = int(re.findall(r"(\d+) tokens", body["messages"][0]["content"])[-1])
    assert budget - budget // 2 <= stated < budget
    return stated


def test_request_body(srv, data, tmp_path, bpe_tokenizer):
    run = compress(tmp_path, srv.base_url, bpe_tokenizer)
    bodies = srv.stats.bodies
    assert len(bodies) == N_OVER
    for body in bodies:
        assert set(body) == {"model", "messages", "temperature", "max_tokens"}
        assert body["model"] == MODEL and body["temperature"] == 0.3
        assert body["max_tokens"] == 2 * SUMMARY_TARGET
        assert [m["role"] for m in body["messages"]] == ["system", "user"]
        system = SYSTEM_PROMPT.replace("{target_tokens}", str(stated_length(body, bpe_tokenizer)))
        assert body["messages"][0]["content"] == system  # fixed first: a prefix servers can reuse
    # The user message is exactly the summarized region of the row, turn by turn.
    users = sorted(b["messages"][1]["content"] for b in bodies)
    by_id = {r["id"]: r for r in data}
    expected = []
    for row in run.rows:
        region = row["compression_metrics"]["compression_region"]
        if row["compression_metrics"]["was_compressed"]:
            turns = by_id[row["id"]]["conversations"][region["start_idx"]:region["end_idx"]]
            assert turns[0]["from"] == "gpt" and "<tool_call>" in turns[0]["value"]
            expected.append(render(turns))
    assert users == sorted(expected)


def test_prompt_file_replaces_the_system_message(srv, data, tmp_path, bpe_tokenizer):
    (tmp_path / "prompt.txt").write_text("Summarize this agent log in {target_tokens} tokens. Custom v2.",
                                         encoding="utf-8")
    (tmp_path / "cfg.yaml").write_text("summarization:\n  prompt_file: ./prompt.txt\n  temperature: 0.0\n",
                                       encoding="utf-8")
    compress(tmp_path, srv.base_url, bpe_tokenizer, "-c", str(tmp_path / "cfg.yaml"))
    bodies = srv.stats.bodies
    assert len(bodies) == N_OVER
    for body in bodies:
        assert body["messages"][0] == {"role": "system",
                                       "content": f"Summarize this agent log in {stated_length(body, bpe_tokenizer)} tokens. Custom v2."}
        assert body["temperature"] == 0.0


# --------------------------------------------------------------------------------------------
# 6. Secrets in a model's answer are redacted before they reach rows, cache or report
# --------------------------------------------------------------------------------------------

SECRET_SUMMARY = (
    "The assistant read .env and found OPENAI_API_KEY=sk-abcdefghijklmnopqrstuvwx, a GitHub token "
    "ghp_abcdefghijklmnopqrstuvwxyz0123456789, the AWS key AKIAIOSFODNN7EXAMPLE and password=hunter2. "
    "It printed id_rsa:\n-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7v1xQm3nq0ZkR2c9bq1TQ0lH9k3w8sYb\n"
    "-----END RSA PRIVATE KEY-----\nand sent the header Authorization: Bearer abc.def.ghi to the API; "
    "then pytest passed."
)
SECRET_VALUES = ["sk-abcdefghijklmnopqrstuvwx", "ghp_abcdefghijklmnopqrstuvwxyz0123456789", "AKIAIOSFODNN7EXAMPLE",
                 "hunter2", "MIIEowIBAAKCAQEA7v1xQm3nq0ZkR2c9bq1TQ0lH9k3w8sYb", "PRIVATE KEY", "abc.def.ghi"]


def test_secrets_in_summaries_are_redacted(srv, data, tmp_path, bpe_tokenizer):
    srv.set_faults(content_override=SECRET_SUMMARY)
    run = compress(tmp_path, srv.base_url, bpe_tokenizer)
    compressed = [r for r in run.rows if r["compression_metrics"]["was_compressed"]]
    assert len(compressed) == N_OVER
    for row in compressed:
        (summary,) = summary_turns(row)
        assert summary.count(REDACTED) == 6
        assert "The assistant read .env" in summary and "then pytest passed." in summary
    for path in tmp_path.rglob("*"):
        if path.is_file() and path.name != "in.jsonl":
            blob = path.read_bytes()
            for value in SECRET_VALUES:
                assert value.encode() not in blob, (value, path.name)


# Any string may be a key: one in a known format, and ones no redaction pattern knows.
@pytest.mark.parametrize("key", ["sk-live-ECHOED0123456789abcdefXYZ", "correct horse battery staple 42",
                                 "Zz-9f8e7d6c-ключ-ÿ", "x7"])
def test_echoed_api_key_in_an_error_body_never_reaches_the_row(key, monkeypatch, tmp_path, bpe_tokenizer):
    """The server refuses our key and echoes it (401): the row's error says so without the key."""
    from trajcomp.core.compressor import TrajectoryCompressor

    monkeypatch.setenv("TRAJCOMP_TEST_ECHO_KEY", key)

    async def scenario():
        async with FakeOpenAIServer(models=[MODEL], api_key="sk-the-right-one-0000000000") as server:
            config = make_config(server.base_url, api_key_env="TRAJCOMP_TEST_ECHO_KEY",
                                 tokenizer_name=str(bpe_tokenizer))
            summarizer = OpenAISummarizer(config, TokenCounter(str(bpe_tokenizer)))
            await summarizer.endpoint.open()  # no preflight: the refusal comes on the chat call itself
            compressor = TrajectoryCompressor(config, TokenCounter(str(bpe_tokenizer)), summarizer)
            try:
                turns, metrics = await compressor.compress_trajectory(hermes_row(3)["conversations"])
            finally:
                await compressor.close()
            return turns, metrics, server.stats
    turns, metrics, stats = asyncio.run(scenario())
    assert stats.headers_seen == [f"Bearer {key}"]  # one call: a 401 is not retried
    assert metrics.outcome.value == "failed" and turns == hermes_row(3)["conversations"]
    assert "HTTP 401" in metrics.error and "Incorrect API key provided" in metrics.error
    assert key not in metrics.error and REDACTED in metrics.error
    assert key not in json.dumps(metrics.to_dict(), ensure_ascii=False)


# --------------------------------------------------------------------------------------------
# 10. The report
# --------------------------------------------------------------------------------------------

def test_report_summarization_section(srv, data, tmp_path, bpe_tokenizer):
    srv.set_faults(latency=0.02, fail_status=500, fail_first_n=3)
    run = compress(tmp_path, srv.base_url, bpe_tokenizer)
    stats = srv.stats
    s = run.report["summarization"]
    metrics = [r["compression_metrics"] for r in run.rows]
    assert s["summarizer"] == "openai" and s["model"] == MODEL and s["base_url"] == srv.base_url
    assert s["api_calls"] == sum(m["summarization_api_calls"] for m in metrics) == N_OVER + 3
    assert s["errors"] == sum(m["summarization_errors"] for m in metrics) == 3
    assert s["http_requests"] == stats.requests == N_OVER + 3
    assert s["retries"] == 3 and s["cache_hits"] == 0
    lat = s["latency_ms"]
    assert set(lat) >= {"p50", "p95"} and all(isinstance(v, int) for v in lat.values())
    assert 20 <= lat["p50"] <= lat["p95"] <= lat["max"] < 5000  # milliseconds, under the 5 s request timeout
    assert s["usage"] == server_usage(unique_bodies(stats.bodies))  # one good answer per row
    assert s["max_calls_in_flight"] >= 1


def test_report_usage_counts_answers_without_choices(srv, data, tmp_path, bpe_tokenizer):
    srv.set_faults(no_choices_first_n=1)
    run = compress(tmp_path, srv.base_url, bpe_tokenizer)
    bodies = srv.stats.bodies
    assert len(bodies) == N_OVER + 1
    assert run.report["summarization"]["usage"] == server_usage(bodies)  # all N+1 answers carried usage
