"""Crash safety: a run killed with SIGKILL or stopped with Ctrl-C resumes to the same bytes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ROOT, read_jsonl, run_cli, write_jsonl
from openai_server import ServerThread
from processes import HANG_SECONDS

from trajcomp.reports.text import render_report

ROWS = 24


def hermes_row(i: int) -> dict:
    turns = [
        {"from": "system", "value": "You are a function calling AI model. <tools>[]</tools>"},
        {"from": "human", "value": f"Task {i}: make the failing test in src/app_{i}.py pass."},
    ]
    for step in range(6):
        call = {"name": "terminal", "arguments": {"command": f"pytest tests/test_{i}_{step}.py -x"}}
        turns.append({"from": "gpt", "value": f"<think>\nRun step {step} of task {i}.\n</think>\n<tool_call>\n{json.dumps(call)}\n</tool_call>"})
        log = "\n".join(f"tests/test_{i}.py::test_{k} PASSED" for k in range(40 + i % 7))
        content = {"tool_call_id": f"call_{i}_{step}", "name": "terminal", "content": log + "\nexit code 1"}
        turns.append({"from": "tool", "value": f"<tool_response>\n{json.dumps(content)}\n</tool_response>"})
    turns.append({"from": "gpt", "value": f"Task {i} is done."})
    return {"id": i, "conversations": turns, "meta": {"k": i}}


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    """The input of this file's runs (none changes it)."""
    rows = [hermes_row(i) for i in range(ROWS)]
    rows.insert(5, "this line is not JSON")
    return write_jsonl(tmp_path_factory.mktemp("resume") / "data.jsonl", rows)


def args(src: Path, out: Path, tok: Path, url: str, *extra: str) -> list[str]:
    """Its rows cannot fit in 800 tokens: under shorten each still buys a summary, so a run lasts long enough to stop."""
    return [
        "compress", str(src), "-o", str(out), "--tokenizer", str(tok), "--target-max-tokens", "800",
        "--summary-target-tokens", "120", "--summarizer", "openai", "--base-url", url, "--model", "test-model",
        "--concurrency", "2", "--checkpoint-rows", "3", "--cannot-fit", "shorten", "-q", *extra,
    ]


def start(argv: list[str]) -> subprocess.Popen:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    # A shell running the suite in the background may hand its children SIGINT ignored: undo that,
    # as an interactive terminal would have it.
    return subprocess.Popen([sys.executable, "-m", "trajcomp.cli", *argv], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def wait_for_parts(out: Path, parts: int, proc: subprocess.Popen, timeout: float = HANG_SECONDS) -> None:
    deadline = time.monotonic() + timeout
    while sum(len(list(work.glob("file-*/*.done.json"))) for work in work_folders(out)) < parts:
        assert proc.poll() is None, "the run ended before it could be interrupted"
        assert time.monotonic() < deadline, "no progress"
        time.sleep(0.05)


def freeze(server: ServerThread, seconds: float = 3600) -> None:
    """Every call from now on hangs (then is answered), so the run cannot finish before the test stops it."""
    server.set_faults(hang_first_n=10**9, hang_seconds=seconds)


def thaw(server: ServerThread) -> None:
    server.set_faults(hang_first_n=0)


def work_folders(out: Path) -> list[Path]:
    """Where a run writing `out` keeps its work: beside an output file or dataset folder, inside an output folder."""
    return [out.parent / f".{out.name}.trajcomp-work", out / ".trajcomp-work"]


def run_held_midway(server: ServerThread, src: Path, out: Path, tok: Path, parts: int, *extra: str,
                    seconds: float = 3600) -> subprocess.Popen:
    """A real run (`extra` flags added) with `parts` parts done, then held there: its calls hang `seconds` (see freeze)."""
    proc = start(args(src, out, tok, server.base_url, *extra))
    wait_for_parts(out, parts, proc)
    freeze(server, seconds)
    return proc


def killed_midway(server: ServerThread, argv: list[str], out: Path, parts: int = 1) -> None:
    """A run of `argv` SIGKILLed once `parts` parts are done, its calls held (see freeze); killed whatever
    happened, so a test leaves nothing running."""
    proc = start(argv)
    try:
        wait_for_parts(out, parts, proc)
        freeze(server)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate()


def cached_summaries(cache: Path) -> int:
    """Lines in the cache's segments: a summary paid twice would be written twice."""
    return sum(len(seg.read_bytes().splitlines()) for seg in cache.glob("*.jsonl"))


def reference_run(tmp_path: Path, src: Path, tok: Path, url: str, *extra: str, name: str = "out.jsonl") -> Path:
    out = tmp_path / "ref" / name
    result = run_cli(*args(src, out, tok, url, "--no-cache", *extra))
    assert result.code == 0, result.stderr
    return out


@pytest.fixture(scope="module")
def reference(tmp_path_factory, dataset, bpe_tokenizer) -> Path:
    """An uninterrupted run of `dataset` (its output, rejects beside it): the bytes each interrupted run here
    must end with. Once for the file: neither the endpoint's address nor its latency is in what is written."""
    with ServerThread() as server:
        return reference_run(tmp_path_factory.mktemp("reference"), dataset, bpe_tokenizer, server.base_url)


@pytest.mark.parametrize("parts_before_kill", [1, 4])
def test_kill_9_then_rerun_gives_identical_bytes_and_pays_no_summary_twice(tmp_path, dataset, reference, bpe_tokenizer, parts_before_kill):
    with ServerThread(latency=0.15) as server:
        out = tmp_path / "run" / "out.jsonl"
        proc = run_held_midway(server, dataset, out, bpe_tokenizer, parts_before_kill)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert not out.exists(), "a killed run must not leave a final output behind"
        paid = cached_summaries(out.parent / "out_summary_cache")
        thaw(server)

        result = run_cli(*args(dataset, out, bpe_tokenizer, server.base_url))
        assert result.code == 0, result.stderr
        needed = sum(r["compression_metrics"]["was_compressed"] for r in read_jsonl(reference))
    report = json.loads((out.parent / "out_metrics.json").read_text())
    # Summaries received before the kill come from the cache: only the others are requested.
    assert report["summarization"]["http_requests"] == needed - paid

    assert out.read_bytes() == reference.read_bytes()
    assert (out.parent / "out_rejects.jsonl").read_bytes() == (reference.parent / "out_rejects.jsonl").read_bytes()
    assert report["processing"]["resumed"] is True
    assert report["processing"]["rows_from_checkpoint"] >= 3 * parts_before_kill
    this_run = ROWS + 1 - report["processing"]["rows_from_checkpoint"]  # rows/s is over these
    assert render_report(report, "r.json").startswith(f"trajcomp: {ROWS + 1} rows read, {this_run} of them in this run:")
    assert report["rows"]["read"] == ROWS + 1 and report["rows"]["written"] == ROWS
    assert not (out.parent / ".out.jsonl.trajcomp-work").exists()


@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_ctrl_c_or_sigterm_stops_gracefully_and_resumes(tmp_path, dataset, reference, bpe_tokenizer, sig, code):
    with ServerThread(latency=0.15) as server:
        out = tmp_path / "run" / "out.jsonl"
        proc = run_held_midway(server, dataset, out, bpe_tokenizer, 2)
        proc.send_signal(sig)
        _, stderr = proc.communicate(timeout=HANG_SECONDS)
        assert proc.returncode == code, stderr
        assert "resume" in stderr and "Traceback" not in stderr
        assert not out.exists()
        thaw(server)
        result = run_cli(*args(dataset, out, bpe_tokenizer, server.base_url))
        assert result.code == 0, result.stderr
    assert out.read_bytes() == reference.read_bytes()


def test_resume_with_other_settings_refuses_and_restart_starts_over(tmp_path, dataset, bpe_tokenizer):
    with ServerThread(latency=0.15) as server:
        out = tmp_path / "run" / "out.jsonl"
        proc = run_held_midway(server, dataset, out, bpe_tokenizer, 1)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        thaw(server)
        changed = args(dataset, out, bpe_tokenizer, server.base_url)
        changed[changed.index("800")] = "900"
        refused = run_cli(*changed)
        assert refused.code == 2
        assert refused.stderr.count("\n") == 1 and "--restart" in refused.stderr and "config" in refused.stderr
        assert not out.exists()
        restarted = run_cli(*changed, "--restart")
        assert restarted.code == 0, restarted.stderr
    report = json.loads((out.parent / "out_metrics.json").read_text())
    assert report["processing"]["resumed"] is False
    assert report["config"]["compression"]["target_max_tokens"] == 900


def test_a_resume_may_use_the_endpoint_at_a_new_address(tmp_path, dataset, reference, bpe_tokenizer):
    """Where the server listens is not part of what is written: a server restarted on another port resumes."""
    with ServerThread(latency=0.05) as server:
        out = tmp_path / "run" / "out.jsonl"
        proc = run_held_midway(server, dataset, out, bpe_tokenizer, 1)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    with ServerThread(latency=0.05) as moved:
        resumed = run_cli(*args(dataset, out, bpe_tokenizer, moved.base_url))
        assert resumed.code == 0, resumed.stderr
    assert json.loads((out.parent / "out_metrics.json").read_text())["processing"]["resumed"] is True
    assert out.read_bytes() == reference.read_bytes()


def test_a_second_run_on_the_same_output_is_refused_even_with_restart(tmp_path, dataset, reference, bpe_tokenizer):
    """--restart must not pull the work folder from under a run still going."""
    with ServerThread(latency=0.05) as server:
        out = tmp_path / "run" / "out.jsonl"
        proc = run_held_midway(server, dataset, out, bpe_tokenizer, 1, seconds=5)  # calls wait 5 s, then are answered
        for extra in ([], ["--restart"]):
            second = run_cli(*args(dataset, out, bpe_tokenizer, server.base_url), *extra)
            assert second.code == 2, second.stderr
            assert "another trajcomp run is writing to the same output" in second.stderr
        thaw(server)
        _, stderr = proc.communicate(timeout=HANG_SECONDS)
        assert proc.returncode == 0, stderr
    assert out.read_bytes() == reference.read_bytes()


def test_a_failing_endpoint_stops_the_run_resumably(tmp_path, dataset, reference, bpe_tokenizer):
    """Rows are not flagged failed one after another while the server is down: the run stops."""
    with ServerThread(latency=0.05) as server:
        server.set_faults(fail_first_n=10_000, fail_status=503)
        out = tmp_path / "run" / "out.jsonl"
        down = run_cli(*args(dataset, out, bpe_tokenizer, server.base_url, "--max-retries", "0",
                             "--retry-delay", "0"), "-c", str(write_limit(tmp_path, 4)))
        assert down.code == 1 and "4 summaries in a row failed" in down.stderr and "resume" in down.stderr
        assert not out.exists() and (out.parent / ".out.jsonl.trajcomp-work").exists()
        server.set_faults(fail_first_n=0)
        back = run_cli(*args(dataset, out, bpe_tokenizer, server.base_url, "--max-retries", "0",
                             "--retry-delay", "0"), "-c", str(write_limit(tmp_path, 4)))
        assert back.code == 0, back.stderr
    # The parts holding the failures were undone and redone: the same bytes as a run that never failed.
    assert out.read_bytes() == reference.read_bytes()


def write_limit(tmp_path: Path, limit: int) -> Path:
    path = tmp_path / "stop.yaml"
    path.write_text(f"processing:\n  max_consecutive_failures: {limit}\n")
    return path


# A selection that leaves rows out three ways; the limit is reached before the input ends.
SELECTION = ("--sample-percent", "90", "--seed", "7", "--limit", "14")
OTHER_SELECTIONS = {
    "limit": ("--sample-percent", "90", "--seed", "7", "--limit", "15"),
    "seed": ("--sample-percent", "90", "--seed", "8", "--limit", "14"),
    "num_shards": (*SELECTION, "--num-shards", "2", "--shard-index", "0"),
}


def test_a_resume_with_another_selection_is_refused_and_the_same_one_resumes(tmp_path, dataset, bpe_tokenizer):
    """Rows a resume takes must be the ones the interrupted run took: another selection is refused."""
    with ServerThread(latency=0.15) as server:
        ref = reference_run(tmp_path, dataset, bpe_tokenizer, server.base_url, *SELECTION)
        out = tmp_path / "run" / "out.jsonl"
        proc = run_held_midway(server, dataset, out, bpe_tokenizer, 2, *SELECTION)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        thaw(server)
        for name, other in OTHER_SELECTIONS.items():
            refused = run_cli(*args(dataset, out, bpe_tokenizer, server.base_url, *other))
            assert refused.code == 2, (name, refused.stderr)
            assert f"selection.{name}: " in refused.stderr and "--restart" in refused.stderr
            assert refused.stderr.count("\n") == 1 and not out.exists()
        resumed = run_cli(*args(dataset, out, bpe_tokenizer, server.base_url, *SELECTION))
        assert resumed.code == 0, resumed.stderr
    report = json.loads((out.parent / "out_metrics.json").read_text())
    assert report["processing"]["resumed"] is True
    assert report["rows"]["written"] + report["rows"]["rejected"] == 14
    assert out.read_bytes() == ref.read_bytes()
    assert (out.parent / "out_rejects.jsonl").read_bytes() == (ref.parent / "out_rejects.jsonl").read_bytes()


def test_a_limit_over_several_files_resumes_with_the_rows_taken_before(tmp_path, bpe_tokenizer):
    """--limit counts across files: a resume in the second file counts the first file's rows too."""
    src = tmp_path / "data"
    src.mkdir()
    write_jsonl(src / "a.jsonl", [hermes_row(i) for i in range(9)])
    write_jsonl(src / "b.jsonl", [hermes_row(i) for i in range(9, 24)])
    limit = ("--limit", "21")  # all of a (3 parts), 12 rows (4 parts) of b's 15
    with ServerThread(latency=0.15) as server:
        ref = reference_run(tmp_path, src, bpe_tokenizer, server.base_url, *limit, name="out")
        out = tmp_path / "run" / "out"
        proc = run_held_midway(server, src, out, bpe_tokenizer, 4, *limit)  # a done, b's first part done
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        thaw(server)
        resumed = run_cli(*args(src, out, bpe_tokenizer, server.base_url, *limit))
        assert resumed.code == 0, resumed.stderr
    report = json.loads((out / "compression_metrics.json").read_text())
    assert report["processing"]["resumed"] is True and report["rows"]["written"] == 21
    for name in ("a.jsonl", "b.jsonl"):
        assert (out / name).read_bytes() == (ref / name).read_bytes()
    assert len(read_jsonl(out / "b.jsonl")) == 12
