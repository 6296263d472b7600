"""`--workers N`: rows compressed in N real worker processes give the bytes one process gives; a run
killed or stopped with workers resumes to the same bytes and leaves no worker behind."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import ROOT, run_cli, write_jsonl
from openai_server import ServerThread
from processes import HANG_SECONDS
from test_resume import args, cached_summaries, freeze, hermes_row, thaw, wait_for_parts

from trajcomp.core.counting.batching import usable_cores
from trajcomp.core.config import CompressionConfig
from trajcomp.engines.runners.together import merged_stats
from trajcomp.engines.runners.workers import shares, worker_count

sys.path.insert(0, str(ROOT / "scripts"))
import make_golden  # noqa: E402

ROWS = 24


# ---- how many workers, and their shares of the calls ----------------------------------------------


@given(st.integers(1, 10_000), st.integers(1, 200))
def test_shares_split_the_total_into_near_equal_positive_parts(total, n):
    n = min(n, total)  # worker_count never makes more workers than calls
    parts = shares(total, n)
    assert len(parts) == n and sum(parts) == total
    assert min(parts) >= 1 and max(parts) - min(parts) <= 1


def test_worker_count_zero_is_one_per_usable_core_and_never_more_than_the_calls():
    assert worker_count(CompressionConfig()) == 1  # the default: this process only
    assert worker_count(CompressionConfig(num_workers=0, max_concurrent_requests=1000)) == usable_cores()
    assert worker_count(CompressionConfig(num_workers=6, max_concurrent_requests=4)) == 4
    assert worker_count(CompressionConfig(num_workers=3, max_concurrent_requests=1000)) == 3


def test_merged_stats_sum_the_workers_counts_and_keep_the_slowest_call():
    one = {"model": "m", "http_requests": 3, "retries": 1, "max_calls_in_flight": 2,
           "latency_ms": {"p50": 100, "p95": 200, "max": 250}, "usage": {"prompt_tokens": 30, "completion_tokens": 6},
           "cache_hits": 0, "cache_file": "c.sqlite"}
    two = {**one, "http_requests": 1, "retries": 0, "latency_ms": {"p50": 300, "p95": 300, "max": 300},
           "usage": {"prompt_tokens": 10, "completion_tokens": 2}, "cache_hits": 5}
    merged = merged_stats([one, two])
    assert merged["model"] == "m" and merged["cache_file"] == "c.sqlite"
    assert (merged["http_requests"], merged["retries"], merged["cache_hits"]) == (4, 1, 5)
    assert merged["max_calls_in_flight"] == 4
    assert merged["usage"] == {"prompt_tokens": 40, "completion_tokens": 8}
    assert merged["latency_ms"]["max"] == 300
    assert 100 < merged["latency_ms"]["p50"] < 300  # between the workers', weighted by their requests
    assert merged_stats([]) == {}


# ---- the same bytes as one process ------------------------------------------------------------------


def without_run_fields(report: dict, *summarizer_fields: str) -> dict:
    """The report without what legitimately differs between runs of the same rows: where and when it ran,
    how many processes did it, where the endpoint listened, and the summarizer's timings (its calls, its checks)."""
    kept = {k: v for k, v in report.items() if k != "processing"}
    kept["config"] = json.loads(json.dumps(report["config"]))
    kept["config"]["processing"].pop("num_workers")
    kept["config"]["summarization"].pop("base_url")
    kept["summarization"] = {k: v for k, v in report["summarization"].items() if k not in summarizer_fields}
    return kept


def test_two_workers_write_the_goldens(tmp_path):
    """The extractive summarizer: the golden rows, rejects and report, byte for byte, from two workers."""
    out = tmp_path / "out.jsonl"
    result = run_cli("compress", str(make_golden.INPUT.relative_to(ROOT)), "-c", "configs/demo.yaml", "-o", str(out),
                     "-q", "--workers", "2")
    assert result.code == 0, result.stderr
    assert out.read_bytes() == (make_golden.EXPECTED / "out.jsonl").read_bytes()
    assert (tmp_path / "out_rejects.jsonl").read_bytes() == (make_golden.EXPECTED / "out_rejects.jsonl").read_bytes()
    report = json.loads((tmp_path / "out_metrics.json").read_text())
    assert report["processing"]["workers"] == 2
    assert report["config"]["processing"]["num_workers"] == 2
    golden = json.loads((make_golden.EXPECTED / "report.json").read_text())
    assert without_run_fields(make_golden.run_independent(report)) == without_run_fields(golden)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    rows = [hermes_row(i) for i in range(ROWS)]
    rows.insert(5, "this line is not JSON")
    rows.insert(11, {"id": "bad-role", "conversations": [{"from": "narrator", "value": "Once upon a time"}]})
    return write_jsonl(tmp_path_factory.mktemp("data") / "data.jsonl", rows)


@pytest.fixture(scope="module")
def one_worker(tmp_path_factory, dataset, bpe_tokenizer) -> Path:
    """The rows as one process writes them with the openai summarizer (what every run here must write)."""
    out = tmp_path_factory.mktemp("one") / "out.jsonl"
    with ServerThread() as server:
        result = run_cli(*args(dataset, out, bpe_tokenizer, server.base_url, "--workers", "1"))
        assert result.code == 0, result.stderr
        assert server.stats.requests > ROWS // 2  # most rows were summarized, by the endpoint
    return out


def same_rows(out: Path, one_worker: Path) -> bool:
    rejects = [o.parent / "out_rejects.jsonl" for o in (out, one_worker)]
    assert rejects[1].stat().st_size > 0
    return out.read_bytes() == one_worker.read_bytes() and rejects[0].read_bytes() == rejects[1].read_bytes()


def test_two_workers_give_one_workers_bytes_with_the_openai_summarizer(tmp_path, dataset, bpe_tokenizer, one_worker):
    out = tmp_path / "out.jsonl"
    with ServerThread() as server:
        result = run_cli(*args(dataset, out, bpe_tokenizer, server.base_url, "--workers", "2"))
        assert result.code == 0, result.stderr
        assert server.stats.max_in_flight <= 2  # --concurrency is the run's total, split between the workers
    assert same_rows(out, one_worker)
    one, two = (json.loads((o.parent / "out_metrics.json").read_text()) for o in (one_worker, out))
    assert (one["processing"]["workers"], two["processing"]["workers"]) == (1, 2)
    timing = ("latency_ms", "checks_seconds", "max_calls_in_flight", "cache_file", "base_url")
    assert without_run_fields(two, *timing) == without_run_fields(one, *timing)
    assert two["summarization"]["http_requests"] == one["summarization"]["http_requests"] > 0


def test_a_dead_endpoint_stops_two_workers_as_it_stops_one(tmp_path, dataset, bpe_tokenizer):
    results = [run_cli(*args(dataset, tmp_path / f"w{w}" / "out.jsonl", bpe_tokenizer, "http://127.0.0.1:9/v1",
                             "--workers", str(w))) for w in (1, 2)]
    assert [r.code for r in results] == [1, 1]
    assert results[1].stderr == results[0].stderr.replace("/w1/", "/w2/") and results[1].stderr.count("\n") == 1
    assert not (tmp_path / "w2").exists()


# ---- interrupted runs ------------------------------------------------------------------------------


def children(pid: int) -> dict[int, str]:
    """The live child processes of `pid`, by pid, with their start times (/proc: pid reuse shows)."""
    found = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            stat = _stat(int(entry.name))
            if stat is not None and int(stat[1]) == pid:
                found[int(entry.name)] = stat[19]
    return found


def _stat(pid: int) -> list[str] | None:
    """/proc/PID/stat's fields after the command name (state first), or None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()


def descendants(pid: int) -> dict[int, str]:
    """`pid`'s children, theirs, and so on."""
    found = children(pid)
    for child in list(found):
        found |= descendants(child)
    return found


def workers_of(pid: int) -> dict[int, str]:
    """`pid`'s worker processes: the children of its fork server (workers.forking), itself a child of `pid`."""
    servers = [p for p in children(pid) if b"multiprocessing.forkserver" in Path(f"/proc/{p}/cmdline").read_bytes()]
    return {p: t for server in servers for p, t in children(server).items()}


def alive(processes: dict[int, str]) -> list[int]:
    """Those still running: a zombie has ended, and a pid with another start time is another process."""
    return [p for p, started in processes.items() if (s := _stat(p)) is not None and s[0] != "Z" and s[19] == started]


def wait_gone(processes: dict[int, str], timeout: float = HANG_SECONDS) -> list[int]:
    deadline = time.monotonic() + timeout
    while alive(processes) and time.monotonic() < deadline:
        time.sleep(0.05)
    return alive(processes)


def held_with_workers(server: ServerThread, src: Path, out: Path, tok: Path, own_group: bool = False):
    """A real run with two workers, two parts done, then held (its calls hang); its workers, and all the
    processes it started (the fork server, the workers and multiprocessing's resource tracker)."""

    def prepare() -> None:
        if own_group:  # as a terminal starts a command: Ctrl-C goes to its whole process group
            os.setsid()
        signal.signal(signal.SIGINT, signal.SIG_DFL)  # see test_resume.start

    proc = subprocess.Popen([sys.executable, "-m", "trajcomp.cli", *args(src, out, tok, server.base_url, "--workers", "2")],
                            cwd=ROOT, env={**os.environ, "HF_HUB_OFFLINE": "1"}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=prepare)
    wait_for_parts(out, 2, proc)
    freeze(server)
    workers = workers_of(proc.pid)
    assert len(workers) == 2
    return proc, workers, descendants(proc.pid)


def test_kill_9_of_the_main_process_leaves_no_worker_and_the_rerun_gives_the_same_bytes(tmp_path, dataset,
                                                                                       bpe_tokenizer, one_worker):
    with ServerThread(latency=0.1) as server:
        out = tmp_path / "run" / "out.jsonl"
        proc, _, spawned = held_with_workers(server, dataset, out, bpe_tokenizer)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert wait_gone(spawned) == [], "workers outlived their killed main process"  # they see its pipes close
        assert not out.exists()
        paid = cached_summaries(out.parent / "out_summary_cache")  # by both workers, into one file
        thaw(server)
        result = run_cli(*args(dataset, out, bpe_tokenizer, server.base_url, "--workers", "2"))
        assert result.code == 0, result.stderr
    report = json.loads((out.parent / "out_metrics.json").read_text())
    assert report["processing"]["resumed"] is True and report["processing"]["rows_from_checkpoint"] >= 6
    needed = json.loads((one_worker.parent / "out_metrics.json").read_text())["summarization"]["http_requests"]
    assert report["summarization"]["http_requests"] == needed - paid  # the rest came from the shared cache
    assert same_rows(out, one_worker)


STOPS = {  # how a held run is stopped: its exit code, and what stderr says
    "sigterm to the main process": (143, "interrupted"),
    "ctrl-c to the process group": (130, "interrupted"),
    "kill -9 of a worker": (1, "ended unexpectedly (exit code -9)"),
}


@pytest.mark.parametrize("how", list(STOPS))
def test_sigterm_ctrl_c_or_a_dead_worker_stops_every_worker_and_the_run_resumes(tmp_path, dataset, bpe_tokenizer,
                                                                               one_worker, how):
    with ServerThread(latency=0.1) as server:
        out = tmp_path / "run" / "out.jsonl"
        ctrl_c = how.startswith("ctrl-c")
        proc, workers, spawned = held_with_workers(server, dataset, out, bpe_tokenizer, own_group=ctrl_c)
        if ctrl_c:  # a terminal's Ctrl-C reaches every process of the foreground group, the workers too
            os.killpg(proc.pid, signal.SIGINT)
        elif how.startswith("sigterm"):
            proc.send_signal(signal.SIGTERM)
        else:
            os.kill(min(workers), signal.SIGKILL)
        _, stderr = proc.communicate(timeout=HANG_SECONDS)
        code, said = STOPS[how]
        assert proc.returncode == code, stderr
        assert said in stderr and "resume" in stderr and "Traceback" not in stderr
        assert alive(workers) == [], "the main process ended before its workers"
        assert wait_gone(spawned) == []  # the resource tracker too, once its main process is gone
        thaw(server)
        result = run_cli(*args(dataset, out, bpe_tokenizer, server.base_url, "--workers", "2"))
        assert result.code == 0, result.stderr
    assert same_rows(out, one_worker)


def test_a_worker_dying_with_no_row_fails_the_rows_the_others_hold(bpe_tokenizer):
    """The run stops when any worker dies, not once the rows of the living ones are answered: here the
    only row in flight waits in worker 0 on a held call, and worker 1, idle, is killed."""
    from test_openai_summarizer import NO_KEY_ENV

    from trajcomp.core.counting.tokens import TokenCounter
    from trajcomp.engines.runners.workers import WorkerDied, WorkerPool

    with ServerThread(latency=0.1) as server:
        config = CompressionConfig(
            tokenizer_name=str(bpe_tokenizer), target_max_tokens=800, summary_target_tokens=120, summarizer="openai",
            base_url=server.base_url, summarization_model="test-model", api_key_env=NO_KEY_ENV, max_concurrent_requests=2,
            cannot_fit="shorten",  # the row cannot fit in 800: shortened, it buys the summary held here
        )

        async def run() -> None:
            pool = WorkerPool(config, TokenCounter(str(bpe_tokenizer)), None, 2)
            await pool.start()
            freeze(server)  # after the workers' preflight: from now on calls are held
            try:
                row = asyncio.ensure_future(pool.compress_row(hermes_row(1)))
                deadline = time.monotonic() + 30
                while server.server.stats.in_flight == 0:  # the row's summary call is held by the server
                    assert time.monotonic() < deadline and not row.done(), "the row made no summary call"
                    await asyncio.sleep(0.05)
                os.kill(pool._procs[1].pid, signal.SIGKILL)
                with pytest.raises(WorkerDied, match="worker process 1"):
                    await asyncio.wait_for(row, 30)
            finally:
                thaw(server)
                await pool.close()

        asyncio.run(run())


def test_workers_take_the_runs_folder_and_environment_not_the_fork_servers(bpe_tokenizer, tmp_path, monkeypatch):
    """In a long-lived process the fork server stays from one run to the next, with the folder and environment
    it started in: the next run's workers read a tokenizer named relative to the run's folder and send the
    key set since (as spawned workers did)."""
    from trajcomp.core.counting.tokens import TokenCounter
    from trajcomp.engines.runners.fork_server import start_forking
    from trajcomp.engines.runners.workers import WorkerPool

    start_forking()  # in this folder, with no key
    monkeypatch.chdir(bpe_tokenizer.parent)
    monkeypatch.setenv("TRAJCOMP_TEST_KEY", "sk-test-worker-key-0123456789")
    with ServerThread(latency=0.0) as server:
        config = CompressionConfig(
            tokenizer_name=f"./{bpe_tokenizer.name}", target_max_tokens=800, summary_target_tokens=120, summarizer="openai",
            base_url=server.base_url, summarization_model="test-model", api_key_env="TRAJCOMP_TEST_KEY",
            max_concurrent_requests=2, cannot_fit="shorten")  # the row buys a summary, so the key is sent

        async def run() -> None:
            pool = WorkerPool(config, TokenCounter(str(bpe_tokenizer)), None, 2)
            await pool.start()
            try:
                await pool.compress_row(hermes_row(1))
            finally:
                await pool.close()

        asyncio.run(run())
        assert server.server.stats.headers_seen[-1] == "Bearer sk-test-worker-key-0123456789"
