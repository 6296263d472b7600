"""Measuring on a shared machine: wall time, CPU of what is measured, peak RSS of a process tree,
and how much CPU every other process took meanwhile (from /proc/stat), so noisy figures say so.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

CORES = os.cpu_count() or 1
_TICK = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


@dataclass
class Measurement:
    """One measured run: wall seconds, CPU seconds of what was measured, its peak RSS, others' CPU."""

    wall: float
    cpu: float
    peak_rss_mb: float = 0.0
    others_cpu: float = 0.0  # CPU seconds every other process on the machine used meanwhile
    helper_cpu: float = 0.0  # CPU seconds of the helper processes the run needs (the fake server)

    @property
    def others_share(self) -> float:
        """Others' CPU as a share of the machine's capacity during the run (0.5 = one of two cores)."""
        return self.others_cpu / (self.wall * CORES) if self.wall > 0 else 0.0


def machine_busy_seconds() -> float:
    """CPU seconds the whole machine has spent busy since boot (all cores, /proc/stat)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields[:8]
    return (user + nice + system + irq + softirq + steal) / _TICK


def process_cpu_seconds(pid: int) -> float:
    """utime + stime of one live process (0 once it is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def process_tree(*roots: int) -> set[int]:
    """The roots and all their descendants (one /proc scan)."""
    parents: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                stat = Path(entry.path, "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat[stat.rindex(")") + 2 :].split()[1])
    tree, frontier = set(roots), list(roots)
    while frontier:
        parent = frontier.pop()
        children = [pid for pid, ppid in parents.items() if ppid == parent and pid not in tree]
        tree.update(children)
        frontier.extend(children)
    return tree


def tree_rss_bytes(root: int) -> int:
    """Resident memory of `root` and all its descendants."""
    total = 0
    for pid in process_tree(root):
        try:
            total += int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * _PAGE
        except OSError:
            pass
    return total


class Window:
    """Machine-wide and own CPU counters at the start of a measurement."""

    def __init__(self, helpers: tuple[int, ...]):
        self.helpers = helpers
        self.busy = machine_busy_seconds()
        self.own = _own_cpu()
        self.helper = sum(process_cpu_seconds(p) for p in helpers)
        self.clock = time.perf_counter()

    def close(self, measured_cpu: float, peak: int = 0, own_is_measured: bool = False) -> Measurement:
        wall = time.perf_counter() - self.clock
        busy = machine_busy_seconds() - self.busy
        own = _own_cpu() - self.own  # this script's sampling thread (or the in-process work itself)
        helper = sum(process_cpu_seconds(p) for p in self.helpers) - self.helper
        harness = 0.0 if own_is_measured else own
        others = max(0.0, busy - measured_cpu - helper - harness)
        return Measurement(wall, measured_cpu, peak / 2**20, others, helper)


def _own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure_call(fn: Callable[[], object], helpers: tuple[int, ...] = ()) -> tuple[Measurement, object]:
    """Run fn in this process (all its threads count as measured CPU)."""
    window = Window(helpers)
    result = fn()
    return window.close(_own_cpu() - window.own, own_is_measured=True), result


def measure_command(
    args: list[str], helpers: tuple[int, ...] = (), cwd: Path | None = None, env: dict | None = None,
    interval: float = 0.05,
) -> tuple[Measurement, subprocess.CompletedProcess]:
    """Run a command; its whole process tree's CPU and peak RSS (sampled every `interval` s) are measured."""
    window = Window(helpers)
    children = children_cpu()
    proc = subprocess.Popen(args, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    peak = [0]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(interval):
            peak[0] = max(peak[0], tree_rss_bytes(proc.pid))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    stdout, stderr = proc.communicate()
    done.set()
    sampler.join()
    measurement = window.close(children_cpu() - children, peak[0])
    completed = subprocess.CompletedProcess(args, proc.returncode, stdout.decode(), stderr.decode())
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args[:4])}... exited {proc.returncode}:\n{completed.stderr[-2000:]}")
    return measurement, completed


# `python -m trajcomp.cli ARGS` run so that, at its exit, it writes its own CPU seconds while the
# Runner's method named second ran (`run`: start-up and the tokenizer's loading left out; `_run_files`,
# every file's parts and joins: the engine's start and close left out too, e.g. ray.init and the actors'
# start-up, and the report), and its reaped children's (the fork server, with the workers it forked:
# the CLI reaps it as its run ends), to the file named first.
_SPLIT = """
import atexit, json, resource, sys
from trajcomp.engines.runners import pipeline
out, method, ran = sys.argv[1], sys.argv[2], []
def cpu(who):
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime
async def timed(self, *args, run=getattr(pipeline.Runner, method)):
    before = cpu(resource.RUSAGE_SELF)
    try:
        return await run(self, *args)
    finally:
        ran.append(cpu(resource.RUSAGE_SELF) - before)
setattr(pipeline.Runner, method, timed)
def dump():
    with open(out, "w") as f:
        json.dump([sum(ran), cpu(resource.RUSAGE_CHILDREN)], f)
atexit.register(dump)
sys.argv = ["trajcomp", *sys.argv[3:]]
from trajcomp.cli.commands import main
main()
"""


def measure_split(cli_args: list[str], cwd: Path, env: dict, scratch: Path, timed: str = "run") -> tuple[float, float]:
    """CPU seconds of a trajcomp run's main process while its Runner's `timed` method ran (`run` or
    `_run_files`: every file's parts and joins), and of its worker processes."""
    out = scratch / "cpu.json"
    done = subprocess.run([sys.executable, "-c", _SPLIT, str(out), timed, *cli_args], cwd=cwd, env=env,
                          capture_output=True, text=True)
    if done.returncode not in (0, 3):  # 3: finished, some rows' summaries failed (the fake server's answer)
        raise RuntimeError(f"trajcomp {' '.join(cli_args[:3])}... exited {done.returncode}:\n{done.stderr[-2000:]}")
    own, workers = json.loads(out.read_text())
    return own, workers
