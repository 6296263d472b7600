"""The Ray engine on a real cluster of two nodes (two `ray start`, one CPU each, on this machine):
the same bytes, rejects and report sums as the local engine, resume after the driver's SIGKILL,
an actor killed mid-run, the same selection; and the Python API on Ray Data.

Ray's start-up is slow, so the module shares one cluster; the CLI runs as a real subprocess
joining it with --ray-address.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import ray

import ray_cluster
from conftest import ROOT, SAMPLES, machine_lock, read_jsonl, run_cli, write_jsonl
from processes import HANG_SECONDS
from openai_server import ServerThread
from test_openai_summarizer import MODEL, NO_KEY_ENV, SUMMARY_TARGET, TARGET, hermes_rows
from test_checked_parts import delete, truncate
from test_public_api import readme_examples, run_example, user_folder  # noqa: F401 (a fixture)
from test_resume import args as resume_args, cached_summaries, freeze, hermes_row, start, thaw, wait_for_parts
from trajcomp.cli.commands import main
from trajcomp.core.compressor import TrajectoryCompressor
from trajcomp.core.config import load_config
from trajcomp.formats import jsonl
import trajcomp.ray as trajcomp_ray

CONFIG = ROOT / "configs" / "demo.yaml"
# The report sections that are sums over the rows: they must not depend on the engine.
ROW_SECTIONS = ("summary", "tokens", "turns", "averages", "distribution", "rows")
BAD = [
    "{not json",
    {"id": "robot", "conversations": [{"from": "robot", "value": "beep"}]},
    {"id": "no-turns"},
]


@pytest.fixture(scope="module")
def cluster(nodes) -> str:
    """The cluster's address."""
    return nodes.address


@pytest.fixture(scope="module")
def nodes():
    """Two nodes of one CPU each (ray_cluster.py); this process joins as a driver. RAY_AUTH_MODE off here
    too, for ray.init and the CLI runs."""
    with ray_cluster.two_nodes() as nodes, pytest.MonkeyPatch.context() as env:
        for name, value in ray_cluster.ENV.items():
            env.setenv(name, value)
        ray.init(address=nodes.address, logging_level="WARNING")
        try:
            yield nodes
        finally:
            ray.shutdown()


def _rows(name: str, n: int) -> list[dict]:
    return read_jsonl(SAMPLES / name)[:n]


@pytest.fixture(scope="module")
def jsonl_inputs(tmp_path_factory) -> Path:
    """Two JSONL files: sample rows, with a blank line, a line that is not JSON and two rows the core rejects."""
    folder = tmp_path_factory.mktemp("ray_in") / "data"
    folder.mkdir()
    research = _rows("hermes_research_runs.jsonl", 6)
    write_jsonl(folder / "a.jsonl", [*research[:3], BAD[0], "", BAD[1], *research[3:], BAD[2]])
    write_jsonl(folder / "b.jsonl", _rows("hermes_coding_runs.jsonl", 5))
    return folder


def _local(inputs: Path, out: Path, *more: str) -> dict:
    result = run_cli("compress", str(inputs), "-c", str(CONFIG), "-o", str(out), "-q", "--no-cache", *more)
    assert result.code == 0, result.stderr
    return json.loads(out.with_name(out.stem + "_metrics.json").read_text() if out.suffix else
                      (out / "compression_metrics.json").read_text())


def _ray(inputs: Path, out: Path, address: str, *more: str) -> dict:
    result = run_cli("compress", str(inputs), "-c", str(CONFIG), "-o", str(out), "--engine", "ray",
                     "--ray-address", address, "--json", "--no-cache", *more)
    assert result.code == 0, result.stderr
    return json.loads(result.stdout)


def _same_report(ray_report: dict, local_report: dict) -> None:
    for section in ROW_SECTIONS:
        assert ray_report[section] == local_report[section], section
    assert ray_report["processing"]["engine"] == "ray"
    assert ray_report["config"] == local_report["config"]


def _same_files(ray_out: Path, local_out: Path) -> None:
    """Every file the Ray run wrote (rows, rejects, beside or inside the output) has the local run's bytes."""
    def written(out: Path) -> dict[str, bytes]:
        if out.is_dir():
            return {str(p.relative_to(out)): p.read_bytes() for p in out.rglob("*")
                    if p.is_file() and "metrics" not in p.name}
        return {p.name.replace(out.stem, "OUT"): p.read_bytes() for p in out.parent.glob(out.stem + "*")
                if "metrics" not in p.name}
    assert written(ray_out) == written(local_out)


def test_the_readme_example_runs_before_the_cluster_starts(user_folder):  # noqa: F811 (the fixture)
    """The README's Ray example, also docs/large-runs.md's (its other examples: test_public_api.py), with a local Ray of its own."""
    rows = [json.loads(line) for line in (SAMPLES / "hermes_coding_runs.jsonl").open()][:4]
    (user_folder / "in").mkdir()
    pq.write_table(pa.Table.from_pylist(rows), user_folder / "in" / "part-0.parquet")
    # The example as written, with the store's URIs naming folders here (no object store in this test)
    # and the cluster scaled to this machine: two actors on its two CPUs, not eight.
    code = readme_examples()[2].replace("s3://bucket/trajectories/", str(user_folder / "in")) \
        .replace("s3://bucket/trajectories_compressed/", str(user_folder / "out")) \
        .replace("ray.init()", "ray.init(num_cpus=2)").replace("concurrency=8", "concurrency=2")
    assert code.count(str(user_folder)) == 2 and "concurrency=2" in code
    with machine_lock("ray"):  # a local ray.init must not join the Ray tests' cluster
        run_example(code, user_folder)
    out = pq.read_table(user_folder / "out")
    assert out.num_rows == 4 and "compression" in out.column_names


def test_jsonl_file_and_folder_equal_the_local_engine(cluster, jsonl_inputs, tmp_path):
    local = _local(jsonl_inputs, tmp_path / "local")
    assert local["rows"]["rejected"] == 3 and local["summary"]["trajectories_compressed"] > 0
    folder = _ray(jsonl_inputs, tmp_path / "folder", cluster)
    _same_files(tmp_path / "folder", tmp_path / "local")
    _same_report(folder, local)
    assert folder["processing"]["ray_actors"] == 2 and folder["processing"]["ray_nodes"] == 2  # one actor a node

    _local(jsonl_inputs / "a.jsonl", tmp_path / "l" / "one.jsonl")
    one = _ray(jsonl_inputs / "a.jsonl", tmp_path / "r" / "one.jsonl", cluster, "--ray-concurrency", "1")
    _same_files(tmp_path / "r" / "one.jsonl", tmp_path / "l" / "one.jsonl")
    assert json.loads((tmp_path / "r" / "one_metrics.json").read_text()) == one


def test_parquet_equals_the_local_engine(cluster, tmp_path):
    rows = _rows("hermes_coding_runs.jsonl", 8)
    src = tmp_path / "in.parquet"
    pq.write_table(pa.Table.from_pylist(rows), src, row_group_size=3)
    local = _local(src, tmp_path / "local.parquet", "--checkpoint-rows", "3")
    one = _ray(src, tmp_path / "one.parquet", cluster, "--checkpoint-rows", "3")  # 3 parts: actors take them whole
    expected, got = pq.read_table(tmp_path / "local.parquet"), pq.read_table(tmp_path / "one.parquet")
    assert got.schema == expected.schema and got.to_pylist() == expected.to_pylist()
    _same_report(one, local)


def test_selection_flags_take_the_same_rows_as_the_local_engine(cluster, jsonl_inputs, tmp_path):
    flags = ("--sample-percent", "70", "--seed", "3", "--num-shards", "2", "--shard-index", "1", "--limit", "5")
    local = _local(jsonl_inputs, tmp_path / "local", *flags)
    assert 0 < local["rows"]["read"] and local["processing"]["selection"]["limit"] == 5
    on_ray = _ray(jsonl_inputs, tmp_path / "ray", cluster, *flags)
    _same_files(tmp_path / "ray", tmp_path / "local")
    _same_report(on_ray, local)


def test_pruned_rows_equal_the_local_engine(cluster, jsonl_inputs, tmp_path):
    local = _local(jsonl_inputs, tmp_path / "local", "--prune")
    assert local["pruning"]["outputs_pruned"] > 0 and local["pruning"]["rows_fit_without_summary"] > 0
    on_ray = _ray(jsonl_inputs, tmp_path / "ray", cluster, "--prune")
    _same_files(tmp_path / "ray", tmp_path / "local")
    _same_report(on_ray, local)
    assert on_ray["pruning"] == local["pruning"]


def _openai_flags(tok: Path, url: str) -> tuple[str, ...]:
    return ("--tokenizer", str(tok), "--target-max-tokens", str(TARGET), "--summary-target-tokens",
            str(SUMMARY_TARGET), "--summarizer", "openai", "--model", MODEL, "--api-key-env", NO_KEY_ENV,
            "--base-url", url)


def test_openai_summaries_from_each_actors_session_equal_the_local_engine(cluster, bpe_tokenizer, tmp_path):
    src = write_jsonl(tmp_path / "in.jsonl", hermes_rows(3, 1))
    with ServerThread() as server:
        flags = _openai_flags(bpe_tokenizer, server.base_url)
        local = run_cli("compress", str(src), "-o", str(tmp_path / "local.jsonl"), "--no-cache", "-q", *flags)
        assert local.code == 0, local.stderr
        server.reset()
        one = run_cli("compress", str(src), "-o", str(tmp_path / "one.jsonl"), "--engine", "ray", "--json", "--no-cache",
                      "--ray-address", cluster, *flags)
        assert one.code == 0, one.stderr
        stats = server.stats
    assert (tmp_path / "one.jsonl").read_bytes() == (tmp_path / "local.jsonl").read_bytes()
    report = json.loads(one.stdout)
    _same_report(report, json.loads((tmp_path / "local_metrics.json").read_text()))
    assert report["summarization"]["api_calls"] == stats.requests == 3
    assert report["summarization"]["http_requests"] == 3  # the actors' own figures, merged
    assert stats.models_requests == 1 + 2  # the driver's preflight, then one session per actor, opened once


@pytest.fixture(scope="module")
def ray_killed(cluster, bpe_tokenizer, tmp_path_factory):
    """A reference run on one process, and a copy of what a Ray run whose actors take whole parts
    (18 rows, 3 a part, 2 actors) left when its driver was killed with SIGKILL after 2 parts."""
    tmp = tmp_path_factory.mktemp("ray_killed")
    src = write_jsonl(tmp / "data.jsonl", [hermes_row(i) for i in range(18)])
    with ServerThread(latency=0.15) as server:
        ref = tmp / "ref" / "out.jsonl"
        assert run_cli(*resume_args(src, ref, bpe_tokenizer, server.base_url, "--no-cache")).code == 0
        needed = sum(r["compression_metrics"]["was_compressed"] for r in read_jsonl(ref))
        assert needed == 18
        server.reset()
        out = tmp / "run" / "out.jsonl"
        proc = start(resume_args(src, out, bpe_tokenizer, server.base_url, "--engine", "ray", "--ray-address", cluster))
        wait_for_parts(out, 2, proc)
        freeze(server)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert not out.exists()
        time.sleep(2)  # Ray ends a dead driver's actors: let them go before the copy is taken
        shutil.copytree(out.parent, tmp / "killed")
        thaw(server)
        yield SimpleNamespace(src=src, ref=ref, out=out, server=server, tok=bpe_tokenizer, copy=tmp / "killed",
                              needed=needed, paid=cached_summaries(tmp / "killed" / "out_summary_cache"))


# Torn and missing: each kind of damage is checked in test_checked_parts.py; here, that Ray's resume checks.
@pytest.mark.parametrize("damage", [truncate, delete])
def test_driver_killed_then_a_part_damaged_resumes_to_the_same_bytes_paying_no_summary_twice(ray_killed, cluster,
                                                                                            damage):
    """A finished part damaged after the kill is computed again (its summaries come from the cache)."""
    k = ray_killed
    shutil.rmtree(k.out.parent, ignore_errors=True)
    shutil.copytree(k.copy, k.out.parent)
    k.server.reset()
    part = k.out.parent / ".out.jsonl.trajcomp-work" / "file-00000" / "part-000001.jsonl"
    damage(part)
    again = run_cli(*resume_args(k.src, k.out, k.tok, k.server.base_url, "--engine", "ray", "--ray-address", cluster))
    assert again.code == 0, again.stderr
    assert "trajcomp: warning: " in again.stderr and "part-000001.jsonl" in again.stderr
    report = json.loads((k.out.parent / "out_metrics.json").read_text())
    assert report["processing"]["resumed"] is True and report["processing"]["rows_from_checkpoint"] == 3  # part 0
    assert report["summarization"]["http_requests"] == k.needed - k.paid  # what was paid came from the cache
    assert k.out.read_bytes() == k.ref.read_bytes()


def test_an_actor_killed_mid_run_loses_and_duplicates_no_row(ray_killed, cluster, bpe_tokenizer, tmp_path):
    """The input and reference run of ray_killed; a slower endpoint, so that the kill lands mid-run."""
    src, ref = ray_killed.src, ray_killed.ref
    with ServerThread(latency=0.3) as server:
        out = tmp_path / "run" / "out.jsonl"
        proc = start(resume_args(src, out, bpe_tokenizer, server.base_url, "--engine", "ray", "--ray-address", cluster))
        wait_for_parts(out, 1, proc)
        actors = subprocess.run(["pgrep", "-f", "^ray::_CoreActor"], capture_output=True, text=True).stdout.split()
        assert len(actors) == 2
        os.kill(int(actors[0]), signal.SIGKILL)  # Ray restarts it and retries the calls it held
        _, stderr = proc.communicate(timeout=HANG_SECONDS)
        assert proc.returncode == 0, stderr
    assert out.read_bytes() == ref.read_bytes()


def test_actors_take_whole_parts_and_the_driver_parses_no_row(cluster, jsonl_inputs, tmp_path, monkeypatch):
    """The run in this process (a driver of the cluster already): a file of 9 records and its gzip copy
    (unpacked by an actor), 2 records a part, 2 actors."""
    src, flags = tmp_path / "in", ("--checkpoint-rows", "2")
    src.mkdir()
    shutil.copy(jsonl_inputs / "a.jsonl", src / "a.jsonl")
    (src / "b.jsonl.gz").write_bytes(gzip.compress((src / "a.jsonl").read_bytes(), mtime=0))
    _local(src, tmp_path / "l", *flags)
    parsed = []
    parse_line = jsonl.parse_line
    monkeypatch.setattr(jsonl, "parse_line", lambda *a: parsed.append(a[1]) or parse_line(*a))
    with pytest.raises(SystemExit) as exit:
        main(["compress", str(src), "-c", str(CONFIG), "-o", str(tmp_path / "r"), "-q", "--no-cache",
              "--engine", "ray", "--ray-address", cluster, *flags])
    assert exit.value.code == 0
    assert parsed == []  # the actors read every row
    _same_files(tmp_path / "r", tmp_path / "l")


def test_actors_that_cannot_read_the_input_get_its_rows_from_the_driver(cluster, nodes, jsonl_inputs, tmp_path):
    """A third node that does not see the driver's folder (its own mount namespace, an empty tmpfs over
    this test's folder), as a node without the shared storage: one warning, rows one by one, same bytes."""
    if subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode != 0:
        pytest.skip("no mount namespaces here (unshare -m needs root): a node cannot be given its own files")
    src = tmp_path / "a.jsonl"
    shutil.copy(jsonl_inputs / "a.jsonl", src)
    hide = ("unshare", "-m", "sh", "-c", f'mount -t tmpfs none "{tmp_path}" && exec "$0" "$@"')
    _local(src, tmp_path / "l" / "a.jsonl", "--checkpoint-rows", "2")
    with ray_cluster.another_node(nodes, within=hide):
        result = run_cli("compress", str(src), "-c", str(CONFIG), "-o", str(tmp_path / "r" / "a.jsonl"), "--json",
                         "--no-cache", "--engine", "ray", "--ray-address", cluster, "--ray-concurrency", "3",
                         "--checkpoint-rows", "2")
    assert result.code == 0, result.stderr
    assert json.loads(result.stdout)["processing"]["ray_nodes"] == 3
    (warning,) = [line for line in result.stderr.splitlines() if "warning" in line]
    assert "cannot read" in warning and str(src) in warning
    _same_files(tmp_path / "r" / "a.jsonl", tmp_path / "l" / "a.jsonl")


async def _core(config, rows):
    async with TrajectoryCompressor(config) as compressor:
        return await compressor.compress_rows(rows)


def test_python_compress_equals_the_core(cluster):
    ds = ray.data.from_items([*_rows("hermes_research_runs.jsonl", 6), BAD[1]])
    rows = ds.take_all()  # as the dataset holds them: a column the robot row lacks is null in it
    expected = asyncio.run(_core(load_config(CONFIG), rows))
    sections = {"tokenizer": {"name": str(ROOT / "data_samples" / "demo_tokenizer")},
                "compression": {"target_max_tokens": 4000, "summary_target_tokens": 300}}
    got = trajcomp_ray.compress(ds, sections, batch_size=4).take_all()
    order = [r["id"] for r in rows]
    got.sort(key=lambda r: order.index(r["id"]))  # two actors: the batches come back in either order
    columns = dict.fromkeys(k for k in got[0] if k != "compression")  # a column is in every row
    assert [{k: r[k] for k in columns} for r in got] == [
        {**columns, **(row if e.rejected else e.row)} for e, row in zip(expected, rows)
    ]
    metrics = [r["compression"] for r in got]
    assert [m["status"] for m in metrics] == [e.metrics.status for e in expected[:-1]] + ["rejected"]
    assert metrics[-1]["reason"] == "unknown_role" and metrics[-1]["detail"]
    assert any(m["status"] == "compressed" for m in metrics)
    for m, e in zip(metrics, expected[:-1]):
        assert {k: m[k] for k in e.metrics.to_dict()} == e.metrics.to_dict()


def test_nothing_else_imports_ray_and_bad_ray_flags_exit_2(tmp_path):
    code = "import sys, trajcomp, trajcomp.cli, trajcomp.engines.runners.pipeline; assert 'ray' not in sys.modules"
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT).returncode == 0
    src = SAMPLES / "hermes_research_runs.jsonl"
    bad = run_cli("compress", str(src), "-c", str(CONFIG), "-o", str(tmp_path / "x.jsonl"), "--engine", "spark")
    assert bad.code == 2 and bad.stderr.count("\n") == 1 and "--engine" in bad.stderr
    nowhere = run_cli("compress", str(src), "-c", str(CONFIG), "-o", str(tmp_path / "x.jsonl"), "--engine", "ray",
                      "--ray-address", f"127.0.0.1:{ray_cluster.free_port()}")
    assert nowhere.code == 2 and "cannot join the Ray cluster" in nowhere.stderr and "Traceback" not in nowhere.stderr
    assert not (tmp_path / "x.jsonl").exists()
    both = run_cli("compress", str(src), "-c", str(CONFIG), "-o", str(tmp_path / "x.jsonl"), "--engine", "ray",
                   "--workers", "2")
    assert both.code == 2 and both.stderr.count("\n") == 1 and "--ray-concurrency" in both.stderr


def test_a_lost_actor_is_said_with_rays_reason_in_one_line_and_no_key(monkeypatch):
    """The run stops with why Ray says the actor is gone (a killed worker, a creation error), not only its type."""
    from trajcomp.core.config import CompressionConfig
    from trajcomp.engines.runners.ray import _why_lost

    monkeypatch.setenv("OPENAI_API_KEY", "local-key-0123456789")
    lost = ray.exceptions.RayActorError(error_msg=(
        "The actor died unexpectedly before finishing this task.\n\tclass_name: _CoreActor\n\tpid: 12\n"
        "The actor is dead because its worker process has died.\nWorker exit type: SYSTEM_ERROR "
        "Worker exit detail: killed with local-key-0123456789 in its environment"))
    assert _why_lost(lost, CompressionConfig()) == (
        "The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR "
        "Worker exit detail: killed with [REDACTED] in its environment")
    assert _why_lost(ray.exceptions.ActorDiedError(), CompressionConfig()) == "no reason given"
