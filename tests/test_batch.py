"""Summaries bought in batches: `compress --batch` against the test server's Files and Batches endpoints,
and `batch export` -> a runner -> `batch import` -> `compress --batch` with no server at all.

Every run is a real CLI subprocess; the independent ones start together once per module (`runs`)."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from conftest import ROOT, read_jsonl, run_cli, write_jsonl
import processes
from processes import HANG_SECONDS
from openai_server import ServerThread
from test_openai_summarizer import MODEL, SUMMARY_TARGET, TARGET, hermes_rows

from trajcomp.engines.summaries.batch_rounds import Filling
from trajcomp.engines.summaries.batch_results import KEY
from trajcomp.formats.base import AtomicFile

N_OVER, N_UNDER = 6, 1
API_KEY, KEY_ENV = "sk-batch-SECRET-0123456789abcdef", "TRAJCOMP_TEST_BATCH_KEY"


def compress_args(folder: Path, tokenizer: Path, base_url: str, out: str, *extra: str) -> list[str]:
    return ["compress", str(folder / "in.jsonl"), "-o", str(folder / out), "--tokenizer", str(tokenizer),
            "-c", str(folder / "cfg.yaml"), "--target-max-tokens", str(TARGET),
            "--summary-target-tokens", str(SUMMARY_TARGET), "--summarizer", "openai", "--base-url", base_url,
            "--model", MODEL, "--retry-delay", "0.01", "--api-key-env", KEY_ENV, *extra]


def refusing_url() -> tuple[socket.socket, str]:
    """A port bound and never listening: any connection to it is refused (no server there)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    return sock, f"http://127.0.0.1:{sock.getsockname()[1]}/v1"


def cache_lines(folder: Path) -> list[dict]:
    return [json.loads(line) for seg in folder.glob("*.jsonl") for line in seg.read_text().splitlines()]


class Case:
    """A folder with the rows and a config, and the runs made in it."""

    def __init__(self, root: Path, tokenizer: Path, max_requests: int = 50_000):
        self.folder, self.tokenizer = root, tokenizer
        write_jsonl(root / "in.jsonl", hermes_rows(N_OVER, N_UNDER))
        (root / "cfg.yaml").write_text(f"summarization:\n  batch_poll_seconds: 0.05\n  batch_max_requests: {max_requests}\n")

    def run(self, base_url: str, out: str, *extra: str):
        return run_cli(*compress_args(self.folder, self.tokenizer, base_url, out, *extra), env={KEY_ENV: API_KEY})

    def output(self, out: str) -> bytes:
        return (self.folder / out).read_bytes()

    def report(self, out: str) -> dict:
        return json.loads((self.folder / out.replace(".jsonl", "_metrics.json")).read_text())


def killed_while_waiting(case: Case, server: ServerThread) -> dict:
    """`compress --batch` killed (SIGKILL) while its batch is in progress, then the same command again."""
    server.set_faults(batch_hold=True)
    args = compress_args(case.folder, case.tokenizer, server.base_url, "out.jsonl", "--batch")
    proc = subprocess.Popen([sys.executable, "-m", "trajcomp.cli", *args], cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env={**os.environ, "HF_HUB_OFFLINE": "1", KEY_ENV: API_KEY})
    state = case.folder / ".out.jsonl.trajcomp-work" / "batches" / "state.json"
    deadline = time.monotonic() + HANG_SECONDS
    while not (state.exists() and "batch_id" in state.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)  # polling the held batch
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    left = {str(p): p.read_bytes() for p in state.parent.parent.rglob("*") if p.is_file()}
    batches_before = len(server.stats.batch_custom_ids)
    server.set_faults(batch_hold=False)
    again = case.run(server.base_url, "out.jsonl", "--batch")
    return {"left": left, "batches_before": batches_before, "again": again}


def created_before_recorded(case: Case, server: ServerThread) -> dict:
    """A kill after the endpoint created a batch, before its id was recorded: the work folder knows the
    uploaded file only. The run finds the batch by its input file and creates none."""
    import asyncio

    from trajcomp.summarizers.batch_api import BatchAPI
    from trajcomp.summarizers.http import RetryPolicy

    requests = case.folder / "requests.jsonl"
    exported = run_cli("batch", "export", str(case.folder / "in.jsonl"), "-o", str(requests), "--tokenizer",
                       str(case.tokenizer), "-c", str(case.folder / "cfg.yaml"), "--cache-dir", str(case.folder / "cache"),
                       "--summarizer", "openai", "--model", MODEL, "--target-max-tokens", str(TARGET),
                       "--summary-target-tokens", str(SUMMARY_TARGET))
    folder = case.folder / ".out.jsonl.trajcomp-work" / "batches"
    folder.mkdir(parents=True)
    (folder / "00001.jsonl").write_bytes(requests.read_bytes())

    async def submit() -> str:
        api = BatchAPI(server.base_url, KEY_ENV, 10, RetryPolicy(0, 0))
        await api.open()
        try:
            file_id = await api.upload(requests.read_bytes(), "00001.jsonl")
            await api.create(file_id)
            return file_id
        finally:
            await api.close()

    file_id = asyncio.run(submit())
    entry = {"name": "00001.jsonl", "requests": N_OVER, "file_id": file_id}
    (folder / "state.json").write_text(json.dumps({"batches": [entry], "figures": {}}))
    again = case.run(server.base_url, "out.jsonl", "--batch", "--cache-dir", str(case.folder / "cache"))
    return {"exported": exported, "again": again}


def export_run_import(case: Case, server: ServerThread, url: str, then_plain: bool = False) -> dict:
    """batch export -> scripts/run_batch.py against the server -> batch import -> export -> compress --batch
    (`then_plain`: straight after the import, compress without --batch, the server there to be called)."""
    common = ["--tokenizer", str(case.tokenizer), "-c", str(case.folder / "cfg.yaml"), "--cache-dir",
              str(case.folder / "cache"), "--summarizer", "openai"]
    shape = ["--target-max-tokens", str(TARGET), "--summary-target-tokens", str(SUMMARY_TARGET), "--model", MODEL]
    requests, results = case.folder / "requests.jsonl", case.folder / "results.jsonl"
    exported = run_cli("batch", "export", str(case.folder / "in.jsonl"), "-o", str(requests), *common, *shape)
    ran = processes.run([sys.executable, str(ROOT / "scripts" / "run_batch.py"), "-i", str(requests), "-o",
                         str(results), "--base-url", server.base_url], text=True)
    imported = run_cli("batch", "import", str(results), *common)
    if then_plain:
        before = server.stats.requests
        plain = run_cli(*compress_args(case.folder, case.tokenizer, server.base_url, "out.jsonl", "--cache-dir",
                                       str(case.folder / "cache")))
        return {"imported": imported, "plain": plain, "calls": server.stats.requests - before}
    again = run_cli("batch", "export", str(case.folder / "in.jsonl"), "-o", str(case.folder / "again.jsonl"),
                    *common, *shape)
    written = run_cli(*compress_args(case.folder, case.tokenizer, url, "out.jsonl", "--batch", "--cache-dir",
                                     str(case.folder / "cache")))
    return {"exported": exported, "ran": ran, "imported": imported, "again": again, "written": written}


@pytest.fixture(scope="module")
def runs(tmp_path_factory, bpe_tokenizer):
    case = lambda name, **kw: Case(tmp_path_factory.mktemp(name), bpe_tokenizer, **kw)  # noqa: E731
    refusing_first = {"bad_answer": "refusal", "bad_answer_first_per_prompt": True}
    overshoot = {"overshoot": 4.0, "overshoot_tokenizer": str(bpe_tokenizer / "tokenizer.json")}
    servers = {
        "online": ServerThread(), "batch": ServerThread(), "kill": ServerThread(api_key=API_KEY),
        "long_online": ServerThread(**overshoot), "long_batch": ServerThread(**overshoot),
        "faults": ServerThread(fail_first_n=3, batch_expire_first_n=1), "down": ServerThread(fail_first_n=10_000),
        "runner": ServerThread(), "workers": ServerThread(), "unrecorded": ServerThread(),
        "checks_online": ServerThread(**refusing_first), "plain_runner": ServerThread(), "checks_batch": ServerThread(**refusing_first),
    }
    for server in servers.values():
        server.__enter__()
    refusing, nowhere = refusing_url()
    plain, kill, faults, down, files, unrecorded, checks, imported = (
        case(n) for n in ("plain", "kill", "faults", "down", "files", "unrecorded", "checks", "imported"))
    long = case("long", max_requests=4)  # a round of 6 requests: two batches
    jobs = {
        "online": lambda: plain.run(servers["online"].base_url, "online.jsonl"),
        "batch": lambda: plain.run(servers["batch"].base_url, "batch.jsonl", "--batch"),
        "workers": lambda: plain.run(servers["workers"].base_url, "workers.jsonl", "--batch", "--workers", "2"),
        "long_online": lambda: long.run(servers["long_online"].base_url, "online.jsonl"),
        "long_batch": lambda: long.run(servers["long_batch"].base_url, "batch.jsonl", "--batch"),
        "kill": lambda: killed_while_waiting(kill, servers["kill"]),
        "faults": lambda: faults.run(servers["faults"].base_url, "out.jsonl", "--batch", "--max-retries", "2"),
        "down": lambda: down.run(servers["down"].base_url, "out.jsonl", "--batch", "--max-retries", "1"),
        "files": lambda: export_run_import(files, servers["runner"], nowhere),
        "imported": lambda: export_run_import(imported, servers["plain_runner"], nowhere, then_plain=True),
        "unrecorded": lambda: created_before_recorded(unrecorded, servers["unrecorded"]),
        "checks_online": lambda: checks.run(servers["checks_online"].base_url, "online.jsonl"),
        "checks_batch": lambda: checks.run(servers["checks_batch"].base_url, "batch.jsonl", "--batch"),
    }
    try:
        with ThreadPoolExecutor(4) as pool:
            futures = {name: pool.submit(job) for name, job in jobs.items()}
            done = {name: future.result() for name, future in futures.items()}
        done["stats"] = {name: server.stats for name, server in servers.items()}
    finally:
        refusing.close()
        for server in servers.values():
            server.__exit__(None, None, None)
    done["cases"] = {"plain": plain, "long": long, "kill": kill, "faults": faults, "down": down, "files": files,
                     "unrecorded": unrecorded, "checks": checks, "imported": imported}
    return done


def test_batch_run_writes_the_bytes_of_an_online_run(runs):
    plain = runs["cases"]["plain"]
    assert runs["online"].code == 0 and runs["batch"].code == 0, runs["batch"].stderr
    assert plain.output("batch.jsonl") == plain.output("online.jsonl")
    assert runs["workers"].code == 0, runs["workers"].stderr  # rows planned in worker processes
    assert plain.output("workers.jsonl") == plain.output("online.jsonl")
    assert sum(r["compression_metrics"]["status"] == "compressed" for r in read_jsonl(plain.folder / "batch.jsonl")) == N_OVER


def test_every_request_is_submitted_in_exactly_one_batch_and_no_live_call_is_made(runs):
    stats = runs["stats"]["batch"]
    submitted = [key for batch in stats.batch_custom_ids for key in batch]
    assert len(submitted) == len(set(submitted)) == N_OVER
    assert stats.requests == 0 and stats.models_requests == 0  # no chat call, not even a preflight
    cached = {line["key"] for line in cache_lines(runs["cases"]["plain"].folder / "batch_summary_cache")}
    assert cached == set(submitted)
    figures = runs["cases"]["plain"].report("batch.jsonl")["summarization"]["batch"]
    assert figures["batches"] == 1 and figures["rounds"] == 1 and figures["requests"] == N_OVER
    assert figures["answered"] == N_OVER and figures["failed"] == 0 and figures["prompt_tokens"] > 0


def test_a_row_asked_again_takes_another_round_and_still_matches_online(runs):
    long = runs["cases"]["long"]
    assert runs["long_batch"].code == 0, runs["long_batch"].stderr
    assert long.output("batch.jsonl") == long.output("online.jsonl")
    metrics = [r["compression_metrics"] for r in read_jsonl(long.folder / "batch.jsonl")]
    figures = long.report("batch.jsonl")["summarization"]["batch"]
    # a round for each attempt of the row that needed most: its passes, and its answers asked again
    assert max(m["passes"] for m in metrics) > 1
    assert figures["rounds"] == max(m["summarization_api_calls"] for m in metrics)
    submitted = [key for batch in runs["stats"]["long_batch"].batch_custom_ids for key in batch]
    # each attempt bought once, as the online run called: a pass asks something new, a request is asked
    # again only after its answer failed (a check, here)
    assert len(submitted) == sum(m["summarization_api_calls"] for m in metrics)
    assert len(submitted) - len(set(submitted)) <= sum(m["summarization_errors"] for m in metrics)
    sizes = [len(batch) for batch in runs["stats"]["long_batch"].batch_custom_ids]
    assert sizes[:2] == [4, 2] and max(sizes) <= 4 and figures["batches"] == len(sizes)


def test_killed_while_waiting_resumes_on_its_batch_without_submitting_again(runs):
    killed, plain = runs["kill"], runs["cases"]["plain"]
    assert killed["batches_before"] == 1
    assert killed["again"].code == 0, killed["again"].stderr
    assert len(runs["stats"]["kill"].batch_custom_ids) == 1  # the resume waited on the batch it had
    assert runs["cases"]["kill"].output("out.jsonl") == plain.output("online.jsonl")
    assert killed["left"] and not any(API_KEY.encode() in blob for blob in killed["left"].values())
    report = (runs["cases"]["kill"].folder / "out_metrics.json").read_text()
    assert API_KEY not in report + killed["again"].stdout + killed["again"].stderr


def test_a_batch_created_but_not_recorded_before_a_kill_is_found_not_bought_again(runs):
    done, plain = runs["unrecorded"], runs["cases"]["plain"]
    assert done["exported"].code == 0 and done["again"].code == 0, done["again"].stderr
    assert len(runs["stats"]["unrecorded"].batch_custom_ids) == 1  # the test's own: the run created none
    assert runs["cases"]["unrecorded"].output("out.jsonl") == plain.output("online.jsonl")


def test_a_batch_answer_that_fails_a_check_is_asked_again_as_online(runs):
    checks = runs["cases"]["checks"]
    assert runs["checks_batch"].code == 0, runs["checks_batch"].stderr
    assert checks.output("batch.jsonl") == checks.output("online.jsonl")
    rows = read_jsonl(checks.folder / "batch.jsonl")
    assert "sorry" not in checks.output("batch.jsonl").decode().lower()
    compressed = [r["compression_metrics"] for r in rows if r["compression_metrics"]["status"] == "compressed"]
    assert len(compressed) == N_OVER and all(m["summary_checks_failed"] == ["refusal"] for m in compressed)
    figures = checks.report("batch.jsonl")["summarization"]["batch"]
    assert figures["rounds"] == 2 and figures["requests"] == 2 * N_OVER  # each refusal bought once more


def test_failed_requests_and_an_expired_batch_go_to_the_next_round(runs):
    faults = runs["cases"]["faults"]
    assert runs["faults"].code == 0, runs["faults"].stderr
    rows = read_jsonl(faults.folder / "out.jsonl")
    assert len(rows) == N_OVER + N_UNDER
    assert sum(r["compression_metrics"]["status"] == "compressed" for r in rows) == N_OVER
    figures = faults.report("out.jsonl")["summarization"]["batch"]
    reasons = figures["failed_by_reason"]
    assert reasons.get("batch expired") and any(why.startswith("HTTP 500") for why in reasons), reasons
    assert figures["rounds"] >= 2 and figures["failed"] == sum(reasons.values())
    assert figures["requests"] == figures["answered"] + figures["failed"]


def test_a_server_that_always_fails_gives_every_row_its_on_failure(runs):
    down = runs["cases"]["down"]
    assert runs["down"].code == 3, runs["down"].stderr  # rows could not be summarized
    rows = read_jsonl(down.folder / "out.jsonl")
    assert [r["conversations"] for r in rows] == [r["conversations"] for r in read_jsonl(down.folder / "in.jsonl")]
    assert sum(r["compression_metrics"]["status"] == "failed" for r in rows) == N_OVER
    cached = cache_lines(down.folder / "out_summary_cache")
    assert cached and all("failed" in line for line in cached)  # failed attempts only: nothing served
    figures = down.report("out.jsonl")["summarization"]["batch"]
    assert figures["rounds"] == 2 and figures["answered"] == 0  # max_retries 1: asked twice, then on_failure


def test_export_a_runner_and_import_then_compress_with_no_server(runs):
    files, plain, done = runs["cases"]["files"], runs["cases"]["plain"], runs["files"]
    assert done["exported"].code == 0 and f"{N_OVER} requests written" in done["exported"].stdout
    lines = read_jsonl(files.folder / "requests.jsonl")
    assert all(KEY.fullmatch(line["custom_id"]) and line["url"] == "/v1/chat/completions" for line in lines)
    assert done["ran"].returncode == 0, done["ran"].stderr
    assert done["imported"].code == 0 and f"took {N_OVER} answers" in done["imported"].stdout
    assert done["again"].code == 0 and "nothing to export" in done["again"].stdout
    assert not (files.folder / "again.jsonl").exists()
    assert done["written"].code == 0, done["written"].stderr
    assert files.output("out.jsonl") == plain.output("online.jsonl")


def test_batch_needs_the_cache_and_batch_files_a_cache_and_a_model(tmp_path, bpe_tokenizer):
    case = Case(tmp_path, bpe_tokenizer)
    refused = case.run("http://127.0.0.1:9/v1", "out.jsonl", "--batch", "--no-cache")
    assert refused.code == 2 and len(refused.stderr.strip().splitlines()) == 1 and "--batch" in refused.stderr
    exported = run_cli("batch", "export", str(tmp_path / "in.jsonl"), "-o", str(tmp_path / "r.jsonl"),
                       "--tokenizer", str(bpe_tokenizer))
    assert exported.code == 2 and "--cache-dir" in exported.stderr
    extractive = run_cli("batch", "import", str(tmp_path / "in.jsonl"), "--cache-dir", str(tmp_path / "c"),
                         "--tokenizer", str(bpe_tokenizer))
    assert extractive.code == 2 and "--summarizer" in extractive.stderr
    assert not list(tmp_path.glob(".*trajcomp-work")) and not (tmp_path / "r.jsonl").exists()


def test_batch_files_are_cut_to_the_provider_limits(tmp_path):
    filling = Filling(AtomicFile(tmp_path / "b.jsonl"), {"requests": 0})
    for _ in range(3):
        assert filling.fits(b"x" * 10, 4, 35)
        filling.add(b"x" * 10)
    assert not filling.fits(b"x" * 10, 4, 35) and filling.fits(b"x" * 5, 4, 35)  # bytes
    filling.add(b"x" * 5)
    assert not filling.fits(b"", 4, 1000)  # requests
    filling.file.commit()
    assert (tmp_path / "b.jsonl").read_bytes() == b"x" * 35


def test_the_report_text_page_and_compare_show_the_batches(runs):
    from trajcomp.cli.compare import compare_reports
    from trajcomp.reports.comparison import FIGURES
    from trajcomp.reports.html.page import comparison_page, report_page
    from trajcomp.reports.reading import load
    from trajcomp.reports.text import render_comparison, render_report

    faults = runs["cases"]["faults"].folder
    report = load(faults / "out_metrics.json")
    text = render_report(report, "out_metrics.json")
    assert "batches             2 batches in 2 rounds" in text and "batch expired" in text
    assert "batch rounds" in report_page(report) and "batch expired" in report_page(report)
    plain = runs["cases"]["plain"].folder
    reports, comparison = compare_reports([plain / "online_metrics.json", faults / "out_metrics.json"])
    assert comparison.values["batch_rounds"][0] is None and comparison.values["batch_rounds"][1] >= 2
    assert "batch rounds" in render_comparison(comparison, FIGURES) and "batch rounds" in comparison_page(reports, comparison)


def test_plain_compress_uses_imported_answers_and_pays_for_none(runs):
    """Straight after batch import, a compress without --batch (the endpoint reachable) takes the imported
    answers, checked as a row asks for each: not one chat call."""
    done = runs["imported"]
    assert done["imported"].code == 0 and done["plain"].code == 0, done["plain"].stderr
    assert done["calls"] == 0
    assert runs["cases"]["imported"].output("out.jsonl") == runs["cases"]["plain"].output("online.jsonl")
