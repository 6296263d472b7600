"""`trajcomp compress --summarizer openai` as a real subprocess against the real test server.

Auth and secrets, preflight failures, the summary cache across runs and a run whose calls all
fail. Each CLI process costs seconds (it loads transformers), so the independent runs are
started together once per module (`runs`) and the tests only check their results.
"""
from __future__ import annotations

import json
import socket
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pytest

from conftest import CliResult, read_jsonl, run_cli, write_jsonl
from openai_server import ServerThread, Stats
from test_openai_summarizer import (
    answer_of,
    MODEL, NO_KEY_ENV, SUMMARY_TARGET, TARGET, hermes_rows, strip_metrics, summary_turns,
)
from trajcomp.core.summary.redact import REDACTED
from trajcomp.summarizers.base import SUMMARY_PREFIX

KEY = "sk-test-SECRET123456789abcdef"
KEY_ENV = "MY_KEY"
OTHER_KEY = "sk-server-DIFFERENT-000000000000"
N_OVER, N_UNDER = 4, 1
# The model's answer quotes our key: it must come back redacted, never verbatim.
KEYED_ANSWER = f"The assistant configured the client with key {KEY} and ran pytest -x; 3 tests failed in src/parser.py."


def cli_args(folder: Path, base_url: str, tokenizer: Path, *extra: str) -> list[str]:
    return [
        "compress", str(folder / "in.jsonl"), "-o", str(folder / "out.jsonl"), "--tokenizer", str(tokenizer),
        "--target-max-tokens", str(TARGET), "--summary-target-tokens", str(SUMMARY_TARGET),
        "--summarizer", "openai", "--base-url", base_url, "--model", MODEL,
        "--max-retries", "3", "--retry-delay", "0.01", "--request-timeout", "5", *extra,
    ]


@dataclass
class Done:
    result: CliResult
    folder: Path
    stats: Stats | None = None
    first_output: bytes = b""  # for a second run: the first run's output

    def files(self) -> set[str]:
        """Every path (files and folders, hidden ones included) under the run's folder."""
        return {str(p.relative_to(self.folder)) for p in self.folder.rglob("*")}

    def blobs(self) -> dict[str, bytes]:
        return {str(p.relative_to(self.folder)): p.read_bytes() for p in self.folder.rglob("*") if p.is_file()}

    def report(self, name: str = "out_metrics.json") -> dict[str, Any]:
        return json.loads((self.folder / name).read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def runs(tmp_path_factory, bpe_tokenizer) -> dict[str, Done]:
    rows = hermes_rows(N_OVER, N_UNDER)
    folders: dict[str, Path] = {}

    def folder(name: str) -> Path:
        folders[name] = tmp_path_factory.mktemp(name)
        write_jsonl(folders[name] / "in.jsonl", rows)
        return folders[name]

    keyed = ServerThread(api_key=KEY, content_override=KEYED_ANSWER)
    other = ServerThread(api_key=OTHER_KEY)
    keyless = ServerThread()
    failing = ServerThread(fail_first_n=10_000, fail_status=503)
    servers = {"keyed": keyed, "other": other, "keyless": keyless, "failing": failing}
    for s in servers.values():
        s.__enter__()
    refusing = socket.socket()  # bound for the whole run and never listening: connections are refused
    refusing.bind(("127.0.0.1", 0))
    unreachable = f"http://127.0.0.1:{refusing.getsockname()[1]}/v1"
    try:
        key_env = {KEY_ENV: KEY}
        jobs: dict[str, Callable[[], CliResult]] = {
            # Not --quiet: the text report goes to stdout and the progress bar to stderr, both checked.
            "keyed": lambda: run_cli(*cli_args(folder("keyed"), keyed.base_url, bpe_tokenizer,
                                               "--api-key-env", KEY_ENV), env=key_env),
            "wrong_key": lambda: run_cli(*cli_args(folder("wrong_key"), other.base_url, bpe_tokenizer,
                                                   "--api-key-env", KEY_ENV), env=key_env),
            "no_key_401": lambda: run_cli(*cli_args(folder("no_key_401"), other.base_url, bpe_tokenizer,
                                                    "--api-key-env", NO_KEY_ENV)),
            "unknown_model": lambda: run_cli(*cli_args(folder("unknown_model"), keyless.base_url, bpe_tokenizer,
                                                       "--api-key-env", NO_KEY_ENV, "--model", "gpt-9-imaginary")),
            "unreachable": lambda: run_cli(*cli_args(folder("unreachable"), unreachable, bpe_tokenizer,
                                                     "--api-key-env", NO_KEY_ENV)),
            "failing": lambda: run_cli(*cli_args(folder("failing"), failing.base_url, bpe_tokenizer,
                                                 "--api-key-env", NO_KEY_ENV, "--max-retries", "1", "--json")),
        }
        with ThreadPoolExecutor(len(jobs)) as pool:
            futures = {name: pool.submit(job) for name, job in jobs.items()}
            results = {name: f.result() for name, f in futures.items()}
        done = {name: Done(results[name], folders[name]) for name in jobs}
        done["keyed"].stats = keyed.stats
        done["failing"].stats = failing.stats
        done["unknown_model"].stats = keyless.stats
        done["wrong_key"].stats = other.stats  # wrong_key and no_key_401 share this server

        # The same run again: every summary comes from the cache.
        first_output = (folders["keyed"] / "out.jsonl").read_bytes()
        keyed.reset()
        again = run_cli(*cli_args(folders["keyed"], keyed.base_url, bpe_tokenizer, "--api-key-env", KEY_ENV,
                                  "--quiet"), env=key_env)
        done["keyed_again"] = Done(again, folders["keyed"], keyed.stats, first_output)
        return done
    finally:
        refusing.close()
        for s in servers.values():
            s.__exit__(None, None, None)


STRAY = ("Traceback", "Unclosed", "Warning", "Exception ignored")


def test_no_stray_output_at_exit(runs):
    """No traceback, unclosed-session warning or other noise from any run (they would show at exit)."""
    for name, run in runs.items():
        for marker in STRAY:
            assert marker not in run.result.stderr and marker not in run.result.stdout, (name, run.result.stderr)


def assert_one_line_error(result: CliResult) -> str:
    assert result.code == 1, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("trajcomp: error: ")
    assert result.stdout == ""
    return lines[0]


# --------------------------------------------------------------------------------------------
# Auth and secrets
# --------------------------------------------------------------------------------------------

def test_api_key_is_sent_as_bearer_and_written_nowhere(runs):
    run = runs["keyed"]
    assert run.result.code == 0, run.result.stderr
    assert run.stats.headers_seen == [f"Bearer {KEY}"] * N_OVER
    rows = read_jsonl(run.folder / "out.jsonl")
    compressed = [r for r in rows if r["compression_metrics"]["was_compressed"]]
    assert len(compressed) == N_OVER
    for row in compressed:
        (summary,) = summary_turns(row)
        assert answer_of(summary) == KEYED_ANSWER.replace(KEY, REDACTED)
    assert "out_metrics.json" in run.files() and "out_summary_cache" in run.files()
    assert KEY not in run.result.stdout and KEY not in run.result.stderr
    # The text report names the summarizer and tells the summaries' calls from this run's requests.
    assert f"openai: {N_OVER} API calls, 0 errors, {N_OVER} HTTP requests by this run\n" in run.result.stdout
    for name, blob in run.blobs().items():
        if name != "in.jsonl":
            assert KEY.encode() not in blob, name
            assert b"SECRET123456789abcdef" not in blob, name


def test_wrong_key_stops_the_run_at_preflight_and_is_never_shown(runs):
    run = runs["wrong_key"]
    line = assert_one_line_error(run.result)
    assert "refused the API key" in line and f"${KEY_ENV}" in line and "HTTP 401" in line
    # The server's 401 body echoes the key it was sent ("Incorrect API key provided: <key>").
    assert KEY not in run.result.stdout + run.result.stderr
    assert run.files() == {"in.jsonl"}  # no output, report, rejects, cache or work folder
    assert all(KEY.encode() not in blob for blob in run.blobs().values())
    assert run.stats.requests == 0  # no chat call after a refused preflight (for either run)


def test_missing_key_for_a_server_that_needs_one(runs):
    line = assert_one_line_error(runs["no_key_401"].result)
    assert "needs an API key" in line and f"set the environment variable {NO_KEY_ENV}" in line
    assert runs["no_key_401"].files() == {"in.jsonl"}


def test_no_key_variable_sends_no_authorization_header(runs):
    run = runs["failing"]
    assert run.stats.requests == 2 * N_OVER
    assert run.stats.headers_seen == [None] * (2 * N_OVER)


# --------------------------------------------------------------------------------------------
# Preflight
# --------------------------------------------------------------------------------------------

def test_unreachable_endpoint(runs):
    run = runs["unreachable"]
    line = assert_one_line_error(run.result)
    assert "cannot reach http://127.0.0.1:" in line
    assert run.files() == {"in.jsonl"}


def test_unknown_model(runs):
    run = runs["unknown_model"]
    line = assert_one_line_error(run.result)
    assert "unknown model 'gpt-9-imaginary'" in line and MODEL in line  # and what the server does serve
    assert run.files() == {"in.jsonl"}
    assert run.stats.requests == 0 and run.stats.models_requests == 1


# --------------------------------------------------------------------------------------------
# A run whose calls all fail (503 every time, --max-retries 1, --on-failure keep by default)
# --------------------------------------------------------------------------------------------

def test_every_call_failing_keeps_every_row_unchanged(runs):
    run = runs["failing"]
    assert run.result.code == 3, run.result.stderr  # completed, but rows could not be summarized
    assert run.result.stderr.count("\n") == 1 and f"{N_OVER} rows could not be summarized" in run.result.stderr
    report = json.loads(run.result.stdout)  # --json: the report on stdout
    assert report == run.report()
    rows = read_jsonl(run.folder / "out.jsonl")
    original = read_jsonl(run.folder / "in.jsonl")
    assert [strip_metrics(r) for r in rows] == original
    failed = [r["compression_metrics"] for r in rows if r["compression_metrics"]["outcome"] == "failed"]
    assert len(failed) == N_OVER == report["summary"]["trajectories_failed"]
    for m in failed:
        assert m["was_compressed"] is False and "HTTP 503" in m["error"]
        assert m["summarization_api_calls"] == m["summarization_errors"] == 2
    assert SUMMARY_PREFIX.encode() not in (run.folder / "out.jsonl").read_bytes()
    s = report["summarization"]
    assert s["api_calls"] == s["errors"] == s["http_requests"] == run.stats.requests == 2 * N_OVER
    assert s["retries"] == N_OVER
    assert not (run.folder / "out_rejects.jsonl").exists()


# --------------------------------------------------------------------------------------------
# The summary cache across processes
# --------------------------------------------------------------------------------------------

def test_second_identical_run_is_served_from_the_cache(runs):
    first, again = runs["keyed"], runs["keyed_again"]
    assert first.stats.requests == N_OVER
    assert again.result.code == 0, again.result.stderr
    assert again.stats.requests == 0  # not one chat call
    assert again.stats.models_requests == 0  # no request to send: the endpoint is not even checked
    assert (again.folder / "out.jsonl").read_bytes() == again.first_output
    report = again.report()
    assert report["summarization"]["cache_hits"] == N_OVER
    assert report["summarization"]["http_requests"] == 0
    for name, blob in again.blobs().items():
        if name != "in.jsonl":
            assert KEY.encode() not in blob, name
