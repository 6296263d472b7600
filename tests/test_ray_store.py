"""Ray nodes that share no file system with the driver, inputs and output in object storage (SeaweedFS):
actors take whole parts through the store (part_store.py), so no row and no part's byte passes
through the driver; the same bytes as one process, and a part damaged in the store after a kill
computed again.

Each node runs in a mount namespace of its own with an empty tmpfs over the driver's folder (its
stage and work folder), as a machine of its own would; the nodes reach the store through their own
environment, as production nodes do.
"""

from __future__ import annotations

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

import pytest

import ray_cluster
from conftest import ROOT, SAMPLES, read_jsonl, run_cli, write_jsonl
from processes import HANG_SECONDS
from openai_server import ServerThread
from s3_server import get, keys, put
from test_checked_parts import truncate
from test_object_storage import rows_with_rejects, s3  # noqa: F401 (a fixture)
from test_resume import args as resume_args, freeze, hermes_row, thaw
from trajcomp.engines.storage import remote

CONFIG = ROOT / "configs" / "demo.yaml"


@pytest.fixture(scope="module")
def hidden(tmp_path_factory) -> Path:
    """The driver's folder: its stage (TRAJCOMP_STAGE_DIR), where its work folder is too; no node sees it."""
    if (why := ray_cluster.cannot_hide()) is not None:
        pytest.skip(why)
    return tmp_path_factory.mktemp("driver")


@pytest.fixture(scope="module")
def nodes(s3, hidden) -> ray_cluster.Cluster:  # noqa: F811 (the fixture)
    """Two nodes, each with the store's endpoint and credentials and a stage of its own, neither seeing `hidden`."""
    _, env = s3
    nodes_env = {**os.environ, **env, "TRAJCOMP_STAGE_DIR": str(hidden / "node-stage")}
    with ray_cluster.two_nodes(nodes_env, within=ray_cluster.hiding(hidden)) as nodes:
        yield nodes


@pytest.fixture(scope="module")
def cluster(nodes) -> str:
    return nodes.address


def _driver_env(s3_env: dict, stage: Path) -> dict:
    """The driver's environment: the store's, and its stage in the folder no node sees."""
    return {**s3_env, **ray_cluster.ENV, "TRAJCOMP_STAGE_DIR": str(stage)}


# The driver in a process of its own, with spies on what it parses and puts in the store: a process that
# was the driver of another Ray cluster before (test_ray.py's, in this pytest worker) cannot be one again
# (Ray keeps its first session's settings: the new cluster's actors are cancelled before they start).
SPIED_DRIVER = """
import json, sys
from trajcomp.cli.commands import main
from trajcomp.engines.storage import remote
from trajcomp.formats import jsonl
parsed, pushed = [], []
parse_line, push = jsonl.parse_line, remote.WorkMirror.push
jsonl.parse_line = lambda *a: parsed.append(a[1]) or parse_line(*a)
remote.WorkMirror.push = lambda self, root, files: pushed.extend(p.name for p in files) or push(self, root, files)
try:
    main(sys.argv[2:])
except SystemExit as exit:
    code = exit.code
else:
    code = 0
with open(sys.argv[1], "w") as f:
    json.dump([code, parsed, pushed], f)
"""


def spied_driver(tmp_path: Path, argv: list[str]) -> tuple[list, list[str]]:
    """`trajcomp ARGV` run as a Ray driver in its own process, which must succeed: the lines it parsed
    and the names of the files it put in the store."""
    spied = tmp_path / "spied.json"
    run = subprocess.run([sys.executable, "-c", SPIED_DRIVER, str(spied), *argv], cwd=ROOT, env=dict(os.environ),
                         stderr=subprocess.PIPE, text=True, timeout=HANG_SECONDS)
    assert spied.exists(), run.stderr
    code, parsed, pushed = json.loads(spied.read_text())
    assert code == 0, run.stderr
    return parsed, pushed


def test_actors_take_whole_parts_through_the_store_and_the_driver_holds_no_part(s3, hidden, cluster, tmp_path,  # noqa: F811
                                                                               monkeypatch):
    """A JSON Lines file with rejects and its gzip copy (unpacked by an actor into the store), 2 records a
    part, 80% sampled: the bytes of one process; the driver fetched no input, parsed no row and put only checkpoints
    in the store."""
    fs, env = s3
    data = tmp_path / "data"
    data.mkdir()
    write_jsonl(data / "a.jsonl", rows_with_rejects())
    (data / "b.jsonl.gz").write_bytes(gzip.compress((data / "a.jsonl").read_bytes(), mtime=0))
    for name in ("a.jsonl", "b.jsonl.gz"):
        put(fs, f"bucket/through/in/{name}", (data / name).read_bytes())
    local = run_cli("compress", str(data), "-c", str(CONFIG), "-o", str(tmp_path / "out"), "-q", "--no-cache",
                    "--checkpoint-rows", "2", "--sample-percent", "80", "--seed", "3")
    assert local.code == 0, local.stderr
    for name, value in _driver_env(env, hidden / "stage").items():
        monkeypatch.setenv(name, value)
    parsed, pushed = spied_driver(tmp_path, [
        "compress", "s3://bucket/through/in", "-c", str(CONFIG), "-o", "s3://bucket/through/out", "-q",
        "--no-cache", "--engine", "ray", "--ray-address", cluster, "--checkpoint-rows", "2",
        "--sample-percent", "80", "--seed", "3"])  # the same rows taken
    assert parsed == []  # the actors read every row
    staged = remote.input_stage("s3://bucket/through/in").parent
    assert staged.is_dir() and not [p for p in staged.rglob("*") if p.is_file()]  # listed here, fetched by the actors
    assert pushed and {name.split(".", 1)[1] if name.startswith("part-") else name for name in pushed} == \
        {"done.json", "run.json"}  # the parts went from the actors to the store, not through this process
    written = sorted(p.name for p in (tmp_path / "out").iterdir() if "metrics" not in p.name)
    assert written == ["a.jsonl", "b.jsonl.gz", "rejects.jsonl"]
    assert keys(fs, "bucket/through/out") == [f"bucket/through/out/{name}" for name in
                                              sorted([*written, "compression_metrics.json"])]  # no work folder left
    for name in written:
        produced = get(fs, f"bucket/through/out/{name}").replace(b"s3://bucket/through/in", str(data).encode())
        assert produced == (tmp_path / "out" / name).read_bytes(), name  # rejects: the store's names for the inputs
    report = json.loads(get(fs, "bucket/through/out/compression_metrics.json"))
    assert report["processing"]["ray_nodes"] == 2
    assert report["rows"] == json.loads((tmp_path / "out" / "compression_metrics.json").read_text())["rows"]


@pytest.fixture(scope="module")
def store_killed(s3, hidden, cluster, tmp_path_factory):  # noqa: F811 (the fixture)
    """A reference run on one process, and what a Ray run (input and output in the store) left in the store
    and in its driver's stage when the driver was killed with SIGKILL after 2 parts: taken once, put back
    before each damage (`restore`), as test_ray.py's ray_killed does for a local folder."""
    fs, env = s3
    tmp = tmp_path_factory.mktemp("store_killed")
    home, stage = "bucket/killed", hidden / "stage-killed"
    rows = [hermes_row(i) for i in range(18)]
    src = write_jsonl(tmp / "data.jsonl", [*rows[:4], "{not json", *rows[4:]])  # part 1 rejects a line
    put(fs, f"{home}/data.jsonl", src.read_bytes())
    tok = SAMPLES / "demo_tokenizer"
    ray_flags = ("--no-cache", "--engine", "ray", "--ray-address", cluster)
    with ServerThread(latency=0.15) as server:
        ref = tmp / "ref" / "out.jsonl"
        assert run_cli(*resume_args(src, ref, tok, server.base_url, "--no-cache")).code == 0
        argv = resume_args(f"s3://{home}/data.jsonl", f"s3://{home}/out.jsonl", tok, server.base_url, *ray_flags,
                           "--html")  # the page of rows then reads (fetches) the input and output
        driver_env = {**os.environ, **_driver_env(env, stage)}
        proc = subprocess.Popen([sys.executable, "-m", "trajcomp.cli", *argv], cwd=ROOT, env=driver_env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + HANG_SECONDS
        while sum(k.endswith(".done.json") for k in keys(fs, home)) < 2:
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.poll() is not None else "no parts"
            time.sleep(0.1)
        freeze(server)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        here = [p.name for p in stage.rglob("file-00000/*") if not p.name.startswith(".")]  # but a checkpoint half-written
        assert here and all(name.endswith(".done.json") for name in here)  # the driver holds no part
        with pytest.MonkeyPatch.context() as patch:  # for this check only: the module's other runs have their own
            patch.setenv("TRAJCOMP_STAGE_DIR", str(stage))
            assert not remote.input_stage(f"s3://{home}/data.jsonl").exists()  # nor the input
        time.sleep(2)  # Ray ends a dead driver's actors
        # Checkpoints the driver committed but had not yet put in the store when it was killed (on a busy
        # machine the kill can land between the two): lost on their way, each may rightly be warned about
        # too. Listed after the wait: an upload the kill cut short may still have landed.
        stored = {k.rsplit("/", 1)[1] for k in keys(fs, home) if "/file-00000/" in k}
        in_flight = sorted(set(here) - stored)
        thaw(server)
        # The input is left as it is: put again, its modification time would make the resume refuse it.
        objects = {k: get(fs, k) for k in keys(fs, home) if k != f"{home}/data.jsonl"}
        shutil.copytree(stage, tmp / "stage")

        def restore() -> None:
            """The store's objects under `home` and the driver's stage as the kill left them."""
            for k in keys(fs, home):
                if k != f"{home}/data.jsonl":
                    fs.delete_file(k)
            for k, data in objects.items():
                put(fs, k, data)
            shutil.rmtree(stage)
            shutil.copytree(tmp / "stage", stage)

        yield SimpleNamespace(home=home, src=src, ref=ref, argv=argv, stage=stage, in_flight=in_flight,
                              restore=restore)


# An overwritten part (its size kept) is left to test_checked_parts.py: the part check is the same in every engine.
@pytest.mark.parametrize("damage", [truncate, "delete", "checkpoint_lost", "rejects_truncated"])
def test_a_driver_killed_then_a_part_damaged_in_the_store_resumes_to_the_same_bytes(s3, store_killed, tmp_path,  # noqa: F811
                                                                                  damage):
    """SIGKILL after 2 parts, then a committed part torn or deleted in the store (its
    checkpoint kept), its checkpoint lost on its way there (the driver's copy kept), or its rejects
    torn (fetched by the driver, found damaged; the part's new copy must not be replaced by it): the
    same command warns naming it, computes it again and writes the bytes of an uninterrupted run."""
    fs, env = s3
    k, home = store_killed, store_killed.home
    k.restore()
    (part,) = [key for key in keys(fs, home) if key.endswith("/file-00000/part-000001.jsonl")]
    spoil = truncate if damage == "rejects_truncated" else damage
    if damage == "rejects_truncated":
        part = part.removesuffix(".jsonl") + ".rejects.jsonl"
    if damage == "delete":
        fs.delete_file(part)
    elif damage == "checkpoint_lost":
        fs.delete_file(part.removesuffix(".jsonl") + ".done.json")
    else:
        local = tmp_path / "part"
        local.write_bytes(get(fs, part))
        spoil(local)
        put(fs, part, local.read_bytes())
    again = run_cli(*k.argv, env=_driver_env(env, k.stage))
    assert again.code == 0, again.stderr
    warnings = [line for line in again.stderr.splitlines() if line.startswith("trajcomp: warning:")]
    lost = [w for w in warnings if any(f"/{name}: missing" in w for name in k.in_flight)]
    assert len(warnings) - len(lost) == 1 and len(lost) <= len(k.in_flight), (k.in_flight, again.stderr)
    (warning,) = [w for w in warnings if w not in lost]
    assert "part-000001." in warning
    # Named in the store where an actor found it; a rejects part the driver fetched, as its copy here.
    assert f"s3://{home}/" in warning or damage == "rejects_truncated"
    assert get(fs, f"{home}/out.jsonl") == k.ref.read_bytes()
    report = json.loads(get(fs, f"{home}/out_metrics.json"))
    assert report["processing"]["resumed"] is True
    assert get(fs, f"{home}/out_rejects.jsonl").replace(f"s3://{home}/".encode(), b"") == \
        (k.ref.parent / "out_rejects.jsonl").read_bytes().replace(f"{k.src.parent}/".encode(), b"")
    assert keys(fs, home) == [f"{home}/{name}" for name in ("data.jsonl", "out.jsonl", "out_metrics.html",
                                                            "out_metrics.json", "out_rejects.jsonl",
                                                            "out_rows.html")]  # no work folder


def test_a_driver_killed_and_resumed_pays_no_summary_twice_with_the_default_cache(s3, hidden, cluster, tmp_path):  # noqa: F811
    """The openai summarizer and no --cache-dir: the cache is beside the output in the store, so whatever
    node's actor bought a summary before SIGKILL, the same command run from another machine (a stage of its
    own: the driver's was lost with it), its actors anywhere, asks for none of them again; the bytes of an
    uninterrupted run."""
    fs, env = s3
    home, stage = "bucket/paid-once", hidden / "stage-paid"
    src = write_jsonl(tmp_path / "data.jsonl", [hermes_row(i) for i in range(18)])
    put(fs, f"{home}/data.jsonl", src.read_bytes())
    tok = SAMPLES / "demo_tokenizer"
    with ServerThread(latency=0.15) as server:
        ref = tmp_path / "ref" / "out.jsonl"
        assert run_cli(*resume_args(src, ref, tok, server.base_url, "--no-cache")).code == 0
        needed = sum(r["compression_metrics"]["was_compressed"] for r in read_jsonl(ref))  # one call each
        server.reset()
        argv = resume_args(f"s3://{home}/data.jsonl", f"s3://{home}/out.jsonl", tok, server.base_url,
                           "--engine", "ray", "--ray-address", cluster)
        proc = subprocess.Popen([sys.executable, "-m", "trajcomp.cli", *argv], cwd=ROOT, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, env={**os.environ, **_driver_env(env, stage)})
        try:
            _wait_for(lambda: sum(k.endswith(".done.json") for k in keys(fs, home)) >= 2, proc)
            # Frozen in one step on the server's loop: the calls received so far are answered, later ones hang.
            answering = server._run(lambda: server.server.set_faults(hang_first_n=10**9, hang_seconds=3600)
                                    or len(server.server.stats.bodies))
            _wait_for(lambda: len(keys(fs, f"{home}/out_summary_cache")) >= answering, proc)  # each one stored
        finally:
            proc.kill()
            proc.wait()
        thaw(server)
        again = run_cli(*argv, env=_driver_env(env, stage.with_name("stage-paid-elsewhere")))
        after = server.stats
    assert again.code == 0, again.stderr
    assert get(fs, f"{home}/out.jsonl") == ref.read_bytes()
    report = json.loads(get(fs, f"{home}/out_metrics.json"))
    assert report["processing"]["resumed"] is True
    assert report["summarization"]["cache_file"] == f"s3://{home}/out_summary_cache"
    assert 0 < answering < needed and report["summarization"]["http_requests"] == needed - answering
    # Paid: the calls answered, by either run. A call the killed driver's actors sent as it died may hang
    # unanswered; it is not one.
    paid = [json.dumps(body["messages"]) for body in after.answered_bodies]
    assert len(paid) == needed == len(set(paid))  # none paid twice


def test_batch_with_ray_actors_writes_the_bytes_of_the_local_batch_run(s3, hidden, cluster, tmp_path):  # noqa: F811
    """--batch --engine ray, input and output in object storage, on nodes that share no folder: the driver
    plans each round through the actors and submits the batches; their answers reach the actors through the
    default cache, in the store. The bytes of a local --batch run, the same requests, none online. A cache
    folder the nodes do not see is refused in one line, before anything is written."""
    fs, env = s3
    home = "bucket/batched"
    src = write_jsonl(tmp_path / "data.jsonl", [hermes_row(i) for i in range(8)])
    put(fs, f"{home}/data.jsonl", src.read_bytes())
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("summarization:\n  batch_poll_seconds: 0.05\n")
    tok, batched = SAMPLES / "demo_tokenizer", ("-c", str(cfg), "--batch")
    ray_flags = ("--engine", "ray", "--ray-address", cluster)
    with ServerThread() as server:
        ref = tmp_path / "ref" / "out.jsonl"
        local = run_cli(*resume_args(src, ref, tok, server.base_url, *batched))
        assert local.code == 0, local.stderr
        bought = sorted(key for batch in server.stats.batch_custom_ids for key in batch)
        server.reset()
        argv = resume_args(f"s3://{home}/data.jsonl", f"s3://{home}/out.jsonl", tok, server.base_url, *batched,
                           *ray_flags)
        result = run_cli(*argv, env=_driver_env(env, hidden / "stage-batched"))
        stats = server.stats
        unseen = hidden / "batched" / "out.jsonl"  # its default cache beside it, where no node looks
        unseen.parent.mkdir()
        refused = run_cli(*resume_args(src, unseen, tok, server.base_url, *batched, *ray_flags),
                          env=ray_cluster.ENV)
    assert result.code == 0, result.stderr
    assert get(fs, f"{home}/out.jsonl") == ref.read_bytes()
    assert bought and sorted(key for batch in stats.batch_custom_ids for key in batch) == bought
    assert stats.requests == 0  # no call online
    report = json.loads(get(fs, f"{home}/out_metrics.json"))
    assert report["summarization"]["batch"]["answered"] == len(bought)
    assert report["summarization"]["cache_file"] == f"s3://{home}/out_summary_cache"
    assert refused.code == 2 and refused.stderr.count("\n") == 1 and "--cache-dir" in refused.stderr, refused.stderr
    assert not list(unseen.parent.iterdir())  # no output, work folder or cache


def _wait_for(condition, proc: subprocess.Popen, seconds: float = 240) -> None:
    """Until `condition()` holds while `proc` runs (its stderr shown when it ended)."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert proc.poll() is None, proc.stderr.read()
        assert time.monotonic() < deadline, "the run did not get there"
        time.sleep(0.1)


def test_a_node_that_can_read_neither_gets_the_rows_from_the_driver(s3, hidden, nodes, tmp_path):  # noqa: F811
    """A third node without the store's credentials, which does not see the driver's folder either: the
    driver fetches the input itself and the rows go through it one by one, said once; the same bytes."""
    fs, env = s3
    src = write_jsonl(tmp_path / "a.jsonl", rows_with_rejects())
    put(fs, "bucket/neither/a.jsonl", src.read_bytes())
    assert run_cli("compress", str(src), "-c", str(CONFIG), "-o", str(tmp_path / "a_out.jsonl"), "-q").code == 0
    with ray_cluster.another_node(nodes, within=ray_cluster.hiding(hidden)):  # this process's environment: no AWS_* variables
        result = run_cli("compress", "s3://bucket/neither/a.jsonl", "-c", str(CONFIG), "-o", "s3://bucket/neither/out.jsonl",
                         "--json", "--html", "--engine", "ray", "--ray-address", nodes.address, "--ray-concurrency", "3",
                         "--checkpoint-rows", "2", env=_driver_env(env, hidden / "stage"))
    assert result.code == 0, result.stderr
    assert json.loads(result.stdout)["processing"]["ray_nodes"] == 3
    (warning,) = [line for line in result.stderr.splitlines() if line.startswith("trajcomp: warning:")]
    assert "cannot read" in warning and "nor s3://bucket/neither/" in warning
    assert get(fs, "bucket/neither/out.jsonl") == (tmp_path / "a_out.jsonl").read_bytes()
    assert "bucket/neither/out_rows.html" in keys(fs, "bucket/neither")  # its rows read here, the input fetched
