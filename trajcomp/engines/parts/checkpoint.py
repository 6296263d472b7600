"""The work folder of a run: finished parts and their checkpoints, so a killed run resumes where it stopped.

Each file's rows are cut into parts of a fixed number of input rows. A part is finished when its
checkpoint (its rows' share of the report) is written, after its output and rejects. A rerun with
the same fingerprint skips finished parts; the final files are joined from the parts, so their
bytes do not depend on where, or whether, the run was interrupted.
"""

from __future__ import annotations

import fcntl
import json
import shutil
from pathlib import Path
from typing import Any, Iterator

from ...core.config import ConfigError
from ...formats.base import write_json
from .manifest import FILES, damage, describe, digest


# How a checkpoint describes its part's files, in the run's fingerprint: 2 since a part may be a range of
# WorkDir.rows, which a build that knows only part files would not join.
WORK_FOLDER = 2


class ResumeMismatch(ConfigError):
    """The interrupted run in the work folder was started with other inputs or settings."""


class WorkDir:
    def __init__(self, path: Path, fingerprint: dict[str, Any], mirror=None):
        self.path = path
        self.fingerprint = fingerprint
        self.mirror = mirror  # remote.WorkMirror: a copy in object storage, for a resume on another machine
        self.parts_in_mirror = False  # Ray actors put the parts' files there (part_store.py): push only checkpoints
        self.resumed = False
        self._lock = None
        self._made: list[Path] = []  # the folders above this one that begin() made

    def check(self, restart: bool) -> None:
        """Refuse to resume a different run; with `restart`, forget the interrupted one.

        The folder's lock is taken first, so neither a refusal nor a restart ever touches a run
        that is still going. Creates nothing, but a mirror's run it copies here."""
        if self.path.exists():
            self._take_lock()
        if self.mirror is not None and restart:
            self.mirror.clear()
        elif self.mirror is not None:  # another machine's interrupted run may be there
            self.mirror.pull(self.path)
        if not self.path.exists():
            return
        if self._lock is None:
            self._take_lock()
        if restart:
            self._clear()
        run_file = self.path / "run.json"
        if not run_file.exists():
            return
        previous = json.loads(run_file.read_text(encoding="utf-8"))
        if previous != self.fingerprint:
            changed = "; ".join(_differences(previous, self.fingerprint)[:5])
            raise ResumeMismatch(
                f"an interrupted run in {self.path} differs ({changed}); "
                "rerun with the same inputs and settings to resume, or add --restart to start over"
            )
        self.resumed = True

    def begin(self) -> None:
        """Take the folder for this run (one run at a time) and record its fingerprint."""
        self._made = [p for p in self.path.parents if not p.exists()]  # innermost first, for remove
        self.path.mkdir(parents=True, exist_ok=True)
        if self._lock is None:
            self._take_lock()
        if not self.resumed:
            write_json(self.path / "run.json", self.fingerprint)
            self._push([self.path / "run.json"])

    def _take_lock(self) -> None:
        self._lock = open(self.path / "lock", "w")
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._lock.close()
            self._lock = None
            raise ConfigError(f"another trajcomp run is writing to the same output (its work folder {self.path} is locked)") from None

    def _clear(self) -> None:
        """Everything but the lock we hold and the batches a batch run submitted (paid for: batch.py
        waits on them whatever the run)."""
        for child in self.path.iterdir():
            if child.name in ("lock", "batches"):
                continue
            if child.is_dir():
                shutil.rmtree(child)
            else:
                child.unlink()

    def _file_dir(self, file_index: int) -> Path:
        return self.path / f"file-{file_index:05d}"

    def plain_input(self, file_index: int) -> Path:
        """Where a compressed input's plain copy is made for whole parts (removed once the file is joined)."""
        return self._file_dir(file_index) / "input.jsonl"

    def part(self, file_index: int, part_index: int, suffix: str) -> Path:
        return self._file_dir(file_index) / f"part-{part_index:06d}{suffix}"

    def rows(self, file_index: int, suffix: str) -> Path:
        """The file that holds the output rows of the file's parts written in turn (formats.base.AppendedPart),
        which the join links into place as the output."""
        return self._file_dir(file_index) / f"rows{suffix}"

    def rows_end(self, file_index: int, suffix: str) -> int:
        """Where the next part's rows go in `rows`: after the last finished part's there."""
        name = self.rows(file_index, suffix).name
        return max((piece["at"] + piece["bytes"] for checkpoint in self.checkpoints(file_index)
                    if (piece := checkpoint.get(FILES, {}).get(name)) is not None), default=0)

    def checkpoints(self, file_index: int) -> Iterator[dict[str, Any]]:
        """Checkpoints of the file's finished parts, in order (a gap, or one damaged, ends them)."""
        for index in range(self.finished_parts(file_index)):
            checkpoint = _read(self.part(file_index, index, ".done.json"))
            if checkpoint is None:
                return
            yield checkpoint

    def committed(self, file_index: int) -> list[str]:
        """The sha256 of each finished part's checkpoint, in order: what a join elsewhere must find."""
        return [digest(self.part(file_index, index, ".done.json")) for index in range(self.finished_parts(file_index))]

    def finished_parts(self, file_index: int) -> int:
        """How many checkpoints of the file are there in a row, from the first (readable or not; after
        the resume's check, every one of them is whole)."""
        index = 0
        while self.part(file_index, index, ".done.json").exists():
            index += 1
        return index

    def described(self, file_index: int, part_index: int, checkpoint: dict[str, Any],
                  pieces: dict[str, dict[str, Any]]) -> dict[str, Any]:
        """The checkpoint with the size and sha256 of every file the part wrote (a worker process
        reads them back where it wrote them; the run's process then only commits it), and of its
        `pieces`, the ranges it wrote in files it shares, hashed as written."""
        done = self.part(file_index, part_index, ".done.json")
        files = sorted(p for p in done.parent.glob(done.name.replace(".done.json", ".*")) if p != done)
        return {**checkpoint, FILES: {**describe(files), **pieces}}

    def commit_part(self, file_index: int, part_index: int, checkpoint: dict[str, Any]) -> None:
        """A described checkpoint written: from now on the part counts."""
        done = self.part(file_index, part_index, ".done.json")
        write_json(done, checkpoint)
        written = [] if self.parts_in_mirror else [done.parent / name for name in sorted(checkpoint[FILES])]
        self._push([*written, done])  # the checkpoint last

    def fetch_missing(self, file_index: int, suffix: str | tuple[str, ...]) -> None:
        """The finished parts' files ending with `suffix` that are only in the mirror (Ray actors put
        them there, part_store.py; or a run in another mode) copied here, to be checked and read."""
        if self.mirror is None:
            return
        wanted = [self.part(file_index, index, "").with_name(name)
                  for index, checkpoint in enumerate(self.checkpoints(file_index))
                  for name in checkpoint.get(FILES, {}) if name.endswith(suffix)]
        self.mirror.fetch(self.path, [path for path in wanted if not path.exists()])

    def drop(self, path: Path) -> None:
        """A file of the folder removed, here and in the mirror."""
        path.unlink(missing_ok=True)
        if self.mirror is not None:
            self.mirror.delete(self.path, [path])

    def _push(self, files: list[Path]) -> None:
        if self.mirror is not None:
            self.mirror.push(self.path, files)

    def undo_parts(self, file_index: int, first: int) -> None:
        """Forget finished parts from `first` on (latest first, so no gap ever hides a later one)."""
        for index in range(self.finished_parts(file_index) - 1, first - 1, -1):  # damaged checkpoints too
            done = self.part(file_index, index, ".done.json")
            done.unlink(missing_ok=True)
            if self.mirror is not None:
                self.mirror.delete(self.path, [done])
            for stale in done.parent.glob(f"{done.name.removesuffix('.done.json')}.*"):
                stale.unlink()  # what is here may be older than what Ray actors put in the store for it

    def first_damaged(self, file_index: int, only: str | tuple[str, ...] | None = None) -> tuple[int, str] | None:
        """(index, why) of the file's first finished part whose files (ending with `only`) are not
        as its checkpoint recorded them; None when every one is."""
        readable = 0
        for index, checkpoint in enumerate(self.checkpoints(file_index)):
            reason = damage(self.part(file_index, index, ".done.json"), checkpoint, only)
            if reason is not None:
                return index, reason
            readable += 1
        if readable < self.finished_parts(file_index):  # the next checkpoint is there but cannot be read
            return readable, f"{self.part(file_index, readable, '.done.json')}: unreadable"
        return None

    def is_file_done(self, file_index: int) -> bool:
        return (self._file_dir(file_index) / "joined").exists()

    def mark_file_done(self, file_index: int) -> None:
        write_json(self._file_dir(file_index) / "joined", {})

    def unmark_file_done(self, file_index: int) -> None:
        """The file to be joined again (its parts are redone first)."""
        (self._file_dir(file_index) / "joined").unlink(missing_ok=True)

    def all_checkpoints(self, files: int) -> Iterator[dict[str, Any]]:
        """Every finished part's checkpoint, one at a time (they hold per-row token counts)."""
        for index in range(files):
            yield from self.checkpoints(index)

    def remove(self) -> None:
        if self._lock is not None:
            self._lock.close()
            self._lock = None
        shutil.rmtree(self.path, ignore_errors=True)
        for made in self._made:  # left as they were found: removed while nothing else is in them
            try:
                made.rmdir()
            except OSError:
                break
        if self.mirror is not None:
            self.mirror.clear()


def _read(done: Path) -> dict[str, Any] | None:
    """A checkpoint, or None when it is not whole JSON (torn or overwritten after it was written)."""
    try:
        checkpoint = json.loads(done.read_bytes())
    except (ValueError, FileNotFoundError):
        return None
    return checkpoint if isinstance(checkpoint, dict) and "records" in checkpoint else None


def _differences(old: Any, new: Any, where: str = "") -> list[str]:
    """'config.compression.target_max_tokens: 800 -> 900' for each leaf that changed."""
    if isinstance(old, dict) and isinstance(new, dict):
        keys = list(new) + [k for k in old if k not in new]
        return [d for k in keys for d in _differences(old.get(k), new.get(k), f"{where}.{k}" if where else k)]
    if old == new:
        return []
    if where == "inputs":  # name the file, not the whole list
        return [f"input {n[0]} changed (size or modification time)" for n in new if n not in old] or ["inputs"]
    return [f"{where}: {old!r} -> {new!r}"]
