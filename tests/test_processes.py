"""The suite's own promise: a process a test starts never outlives it (tests/processes.py)."""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from pathlib import Path

import pytest

import processes


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] != "Z"  # a zombie has ended
    except FileNotFoundError:
        return False


def gone(pid: int) -> bool:
    """Whether `pid` ends within a minute of being killed (its parent, init, reaps it when it gets to it)."""
    deadline = time.monotonic() + 60
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not alive(pid)


def test_a_command_that_hangs_is_ended_with_what_it_started(tmp_path: Path):
    pid_file = tmp_path / "grandchild"
    with pytest.raises(subprocess.TimeoutExpired):
        processes.run(["sh", "-c", f"sleep 600 & echo $! > {pid_file}; sleep 600"], timeout=1)
    assert gone(int(pid_file.read_text()))


def test_a_command_that_leaves_a_server_running_has_it_ended(tmp_path: Path):
    pid_file = tmp_path / "server"
    done = processes.run(["sh", "-c", f"sleep 600 & echo $! > {pid_file}; echo started"], text=True)
    assert done.returncode == 0 and done.stdout == "started\n"
    assert gone(int(pid_file.read_text()))


def test_what_the_session_left_running_is_ended_and_named():
    mark = uuid.uuid4().hex
    env = {**os.environ, processes.SESSION_MARK: mark}
    # in a session of its own, as a server a test forgot would be, and not a child of the sweep's caller
    proc = subprocess.Popen(["sleep", "600"], env=env, start_new_session=True)
    try:
        # Until the child has exec'd, /proc shows the environment it was forked with: wait for the mark
        # (on a loaded machine the first look came before the exec).
        deadline = time.monotonic() + processes.HANG_SECONDS
        while processes.marked_processes(mark) != [proc.pid] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert processes.marked_processes(mark) == [proc.pid]
        assert processes.end_marked(mark) == ["sleep 600"]
        assert proc.wait() == -9
        assert processes.marked_processes(mark) == []
    finally:
        proc.kill()
        proc.wait()
