"""The Ray Data engine on a real local Ray instance: the same rows, rejects and report counts as the local engine.

Ray's start-up is slow, so the module shares one `ray.init(num_cpus=2)`; the CLI runs as a real
subprocess joining it with --ray-address. Each CLI run is compared with one local run of the same input.
"""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import ray

from conftest import ROOT, SAMPLES, read_jsonl, run_cli, write_jsonl
from openai_server import ServerThread
from test_openai_summarizer import MODEL, NO_KEY_ENV, SUMMARY_TARGET, TARGET, hermes_rows
from trajcomp.compressor import TrajectoryCompressor
from trajcomp.config import load_config
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
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, logging_level=logging.WARNING)
    try:
        yield ray.get_runtime_context().gcs_address
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


def _local(inputs: Path, out: Path) -> dict:
    result = run_cli("compress", str(inputs), "-c", str(CONFIG), "-o", str(out), "-q", "--no-cache")
    assert result.code == 0, result.stderr
    return json.loads(out.with_name(out.stem + "_metrics.json").read_text() if out.suffix else
                      (out / "compression_metrics.json").read_text())


def _ray(inputs: Path, out: Path, address: str, *more: str) -> dict:
    result = run_cli("compress", str(inputs), "-c", str(CONFIG), "-o", str(out), "--engine", "ray",
                     "--ray-address", address, "--json", *more, timeout=240)
    assert result.code == 0, result.stderr
    return json.loads(result.stdout)


def _same_report(ray_report: dict, local_report: dict) -> None:
    for section in ROW_SECTIONS:
        assert ray_report[section] == local_report[section], section
    assert ray_report["processing"]["engine"] == "ray"
    assert ray_report["config"] == local_report["config"]


def test_jsonl_file_and_folder_equal_the_local_engine(cluster, jsonl_inputs, tmp_path):
    local = _local(jsonl_inputs, tmp_path / "local")
    local_bytes = b"".join((tmp_path / "local" / name).read_bytes() for name in ("a.jsonl", "b.jsonl"))
    local_rejects = read_jsonl(tmp_path / "local" / "rejects.jsonl")
    assert local["rows"]["rejected"] == 3 and local["summary"]["trajectories_compressed"] > 0

    one = _ray(jsonl_inputs, tmp_path / "one.jsonl", cluster)
    assert (tmp_path / "one.jsonl").read_bytes() == local_bytes  # one file: the same bytes, in input order
    assert read_jsonl(tmp_path / "one_rejects.jsonl") == local_rejects
    assert json.loads((tmp_path / "one_metrics.json").read_text()) == one
    _same_report(one, local)

    parts = _ray(jsonl_inputs, tmp_path / "parts", cluster, "--ray-concurrency", "1")
    written = sorted(p.name for p in (tmp_path / "parts").iterdir())
    assert "compression_metrics.json" in written and "rejects.jsonl" in written
    lines = b"".join((tmp_path / "parts" / n).read_bytes() for n in written if n.startswith("part-"))
    assert sorted(lines.splitlines()) == sorted(local_bytes.splitlines())  # Ray's part files: the same rows
    key = lambda r: (r["source"], r["line"])  # noqa: E731
    assert sorted(read_jsonl(tmp_path / "parts" / "rejects.jsonl"), key=key) == sorted(local_rejects, key=key)
    _same_report(parts, local)


def test_parquet_file_and_folder_equal_the_local_engine(cluster, tmp_path):
    rows = _rows("hermes_coding_runs.jsonl", 8)
    src = tmp_path / "in.parquet"
    pq.write_table(pa.Table.from_pylist(rows), src, row_group_size=3)
    local = _local(src, tmp_path / "local.parquet")
    expected = pq.read_table(tmp_path / "local.parquet")

    one = _ray(src, tmp_path / "one.parquet", cluster)
    got = pq.read_table(tmp_path / "one.parquet")
    assert got.schema == expected.schema and got.to_pylist() == expected.to_pylist()
    _same_report(one, local)

    parts = _ray(src, tmp_path / "parts", cluster)
    tables = [pq.read_table(p) for p in sorted((tmp_path / "parts").glob("part-*.parquet"))]
    assert tables and all(t.schema == expected.schema for t in tables)  # the parts read back as one dataset
    got = pa.concat_tables(tables).to_pylist()
    assert sorted(got, key=lambda r: r["id"]) == sorted(expected.to_pylist(), key=lambda r: r["id"])
    _same_report(parts, local)


def test_openai_summaries_from_each_actors_session_equal_the_local_engine(cluster, bpe_tokenizer, tmp_path):
    src = write_jsonl(tmp_path / "in.jsonl", hermes_rows(3, 1))
    args = ("--tokenizer", str(bpe_tokenizer), "--target-max-tokens", str(TARGET), "--summary-target-tokens",
            str(SUMMARY_TARGET), "--summarizer", "openai", "--model", MODEL, "--api-key-env", NO_KEY_ENV)
    with ServerThread() as server:
        local = run_cli("compress", str(src), "-o", str(tmp_path / "local.jsonl"), "--no-cache", "-q",
                        "--base-url", server.base_url, *args)
        assert local.code == 0, local.stderr
        server.reset()
        one = run_cli("compress", str(src), "-o", str(tmp_path / "one.jsonl"), "--engine", "ray", "--json",
                      "--ray-address", cluster, "--base-url", server.base_url, *args, timeout=240)
        assert one.code == 0, one.stderr
        stats = server.stats
    assert (tmp_path / "one.jsonl").read_bytes() == (tmp_path / "local.jsonl").read_bytes()
    report = json.loads(one.stdout)
    _same_report(report, json.loads((tmp_path / "local_metrics.json").read_text()))
    assert report["summarization"]["api_calls"] == stats.requests == 3
    assert stats.models_requests == 1 + 2  # the driver's preflight, then one session per actor, opened once


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
    code = "import sys, trajcomp, trajcomp.cli, trajcomp.pipeline; assert 'ray' not in sys.modules"
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT).returncode == 0
    src = SAMPLES / "hermes_research_runs.jsonl"
    no_output = run_cli("compress", str(src), "-c", str(CONFIG), "--engine", "ray")
    assert no_output.code == 2 and "needs -o" in no_output.stderr
    limited = run_cli("compress", str(src), "-c", str(CONFIG), "-o", str(tmp_path / "x.jsonl"), "--engine", "ray",
                      "--limit", "3")
    assert limited.code == 2 and "--limit" in limited.stderr
    assert not list(tmp_path.iterdir())
