"""Processes the tests start: each command in a process group of its own, killed whole when the test
is done with it, and a limit that only a hang reaches, never a slow machine.

CI runs on shared two-core machines that may be busy with other work: a test that fails because the
machine was slow tells nobody anything, and a process it leaves behind slows every test after it.
"""

from __future__ import annotations

import io
import os
import signal
import subprocess
import tempfile
import time
from contextlib import suppress

# The longest a command a test runs may take before it counts as hung: far beyond the slowest one on a
# loaded machine (the quick benchmark, ~3 min on a busy two-core machine), and below pytest's own limit
# (pyproject.toml), so the test fails with what the command printed rather than a bare timeout.
HANG_SECONDS = 1200

# Every process the suite starts inherits this variable; what is still running when the session ends is
# ended then (conftest.py), whichever test started it and however it failed.
SESSION_MARK = "TRAJCOMP_TEST_SESSION"


def run(argv: list[str], timeout: float = HANG_SECONDS, text: bool = False, **popen) -> subprocess.CompletedProcess:
    """`subprocess.run(capture_output=True)` whose command and everything it starts end with it: on a timeout,
    an error or an interrupt (pytest's own timeout) the whole process group is killed, grandchildren
    included. Output goes through files, not pipes: a server the command leaves running would hold a pipe
    open, and reading it to its end would wait for the hang guard."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        with subprocess.Popen(argv, start_new_session=True, stdout=out, stderr=err, **popen) as proc:
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                raise subprocess.TimeoutExpired(argv, timeout, _read(out, False), _read(err, False)) from None
            finally:
                kill_group(proc)  # also what a finished command left running in its group (a server it did not stop)
        return subprocess.CompletedProcess(argv, proc.returncode, _read(out, text), _read(err, text))


def _read(file, text: bool) -> bytes | str:
    file.seek(0)
    data = file.read()
    return io.TextIOWrapper(io.BytesIO(data)).read() if text else data  # as subprocess's text mode reads it


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL to `proc`'s process group (it leads one: start_new_session), then reap `proc`."""
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def stop_groups(procs: list[subprocess.Popen], grace: float) -> None:
    """SIGTERM to each process group, in order, then up to `grace` seconds in all for them to end; a
    group still running then is killed."""
    for proc in procs:
        with suppress(ProcessLookupError, PermissionError):  # one that failed to start may be gone
            os.killpg(proc.pid, signal.SIGTERM)
    stop_by = time.monotonic() + grace
    for proc in procs:
        try:
            proc.wait(max(0.1, stop_by - time.monotonic()))
        except subprocess.TimeoutExpired:
            kill_group(proc)


def marked_processes(mark: str) -> list[int]:
    """The pids of this machine's processes whose environment holds SESSION_MARK=mark (this one left out)."""
    needle = f"{SESSION_MARK}={mark}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        with suppress(OSError):
            with open(f"/proc/{entry}/environ", "rb") as f:
                if needle in f.read().split(b"\0"):
                    found.append(int(entry))
    return found


def end_marked(mark: str) -> list[str]:
    """Kill every process left with `mark`; their command lines, to name them (not this process's own
    multiprocessing helpers, a worker pool's fork server and resource tracker: they end with it)."""
    left = []
    for pid in marked_processes(mark):
        with suppress(OSError):
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                line = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
            with open(f"/proc/{pid}/stat") as f:
                parent = int(f.read().rsplit(")", 1)[1].split()[1])
            if not (parent == os.getpid() and "from multiprocessing." in line):
                left.append(line[:160])
        with suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    return left
