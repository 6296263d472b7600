"""A real Ray cluster on this machine: two nodes of one CPU each, two `ray start --block` with
separate raylets as two machines would have. tests/test_ray.py runs on it and scripts/bench_ray.py
measures the Ray driver on it; neither imports ray for it (the nodes are subprocesses).

One at a time per machine (`machine_lock`): a local `ray.init()` would join a running cluster.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import processes
from processes import HANG_SECONDS

# Recent Ray turns token authentication on for a new head once a token exists (~/.ray/auth_token,
# made by any local ray.init): off for this local cluster, in its nodes and in whatever joins it.
ENV = {"RAY_AUTH_MODE": "disabled"}
START_SECONDS = HANG_SECONDS  # both nodes up: only a node that hangs takes longer


@contextmanager
def machine_lock(name: str) -> Iterator[None]:
    """A lock every process of this machine shares (make test runs two pytest-xdist workers; the bench
    may run beside them), for what must not run twice at once: a Ray instance."""
    with open(Path(tempfile.gettempdir()) / f"trajcomp-tests-{name}.lock", "w") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"waiting for another process's {name} ({f.name})", file=sys.stderr, flush=True)
            fcntl.flock(f, fcntl.LOCK_EX)
        yield  # released when the file closes


@dataclass
class Cluster:
    address: str  # HOST:PORT of the head, for ray.init(address=...) and --ray-address
    nodes: list[subprocess.Popen]  # the `ray start --block` processes: each the root of its node's processes
    temp: Path  # Ray's temporary folder (logs, sockets)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def two_nodes(env: dict | None = None, within: tuple[str, ...] = ()) -> Iterator[Cluster]:
    """The cluster, started and waited for (under machine_lock("ray")); stopped and its folder removed after.
    `env`: the nodes' environment (their workers' and actors' too), os.environ by default; ENV added.
    `within`: a command each node's `ray start` runs under (another_node's)."""
    with machine_lock("ray"):
        env = {**(os.environ if env is None else env), **ENV}
        port = free_port()
        # A short folder: Ray's socket paths below it must fit in 107 bytes (a pytest-xdist tmp_path does not)
        temp = Path(tempfile.mkdtemp(prefix="ray-", dir="/tmp"))
        address = f"127.0.0.1:{port}"
        nodes = []
        try:
            deadline = time.monotonic() + START_SECONDS
            nodes.append(_start(temp / "head.log", env, "--head", "--node-ip-address", "127.0.0.1", "--port", str(port),
                                "--include-dashboard=false", "--temp-dir", str(temp), within=within))
            _wait(address, 1, nodes[0], temp / "head.log", env, deadline)
            nodes.append(_start(temp / "node.log", env, "--address", address, "--node-ip-address", "127.0.0.1",
                                within=within))
            _wait(address, 2, nodes[1], temp / "node.log", env, deadline)
            yield Cluster(address, nodes, temp)
        finally:
            _stop(nodes)
            shutil.rmtree(temp, ignore_errors=True)


@contextmanager
def another_node(cluster: Cluster, within: tuple[str, ...] = ()) -> Iterator[subprocess.Popen]:
    """One more node of one CPU joined to `cluster` (started by `within ray start ...` when given), stopped after."""
    env = {**os.environ, **ENV}
    log = cluster.temp / f"node-{len(cluster.nodes)}.log"
    node = _start(log, env, "--address", cluster.address, "--node-ip-address", "127.0.0.1", within=within)
    try:
        _wait(cluster.address, len(cluster.nodes) + 1, node, log, env, time.monotonic() + START_SECONDS)
        yield node
    finally:
        _stop([node])


def hiding(folder: Path) -> tuple[str, ...]:
    """A `within` for a node that does not see `folder`, as another machine would not: its `ray start` in
    a mount namespace of its own with an empty tmpfs over the folder (`cannot_hide` says whether it works)."""
    return ("unshare", "-m", "sh", "-c", f'mount -t tmpfs none "{folder}" && exec "$0" "$@"')


def cannot_hide() -> str | None:
    """Why `hiding` cannot work here; None when it can."""
    if subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode != 0:
        return "no mount namespaces here (unshare -m needs root): a node cannot be given its own files"
    return None


def _start(log: Path, env: dict, *flags: str, within: tuple[str, ...] = ()) -> subprocess.Popen:
    """A Ray node in the foreground (--block), in a session of its own, so that stopping it stops just this node."""
    ray_bin = Path(sys.executable).with_name("ray")
    return subprocess.Popen([*within, str(ray_bin), "start", "--block", "--num-cpus", "1", "--disable-usage-stats",
                             *flags], stdout=open(log, "wb"), stderr=subprocess.STDOUT, env=env, start_new_session=True)


def _wait(address: str, nodes: int, node: subprocess.Popen, log: Path, env: dict, deadline: float) -> None:
    while not _alive(address, nodes, env):
        if node.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the Ray node did not start:\n{log.read_text()[-3000:]}")
        time.sleep(1)


def _alive(address: str, nodes: int, env: dict) -> bool:
    code = f"import ray; ray.init(address={address!r}, logging_level='ERROR'); " \
           f"raise SystemExit(sum(n['Alive'] for n in ray.nodes()) < {nodes})"
    return processes.run([sys.executable, "-c", code], env=env).returncode == 0


def _stop(nodes: list[subprocess.Popen]) -> None:
    """Each node's process group killed, the second node first, then the head. Not SIGTERM first: a node takes
    ~30 s to stop gracefully, so a 5 s grace only idled the test worker before the kill; a killed node leaves
    no process behind (its raylet, object store and workers are in its group) and its state is a temporary
    folder, removed after."""
    for node in reversed(nodes):
        processes.kill_group(node)