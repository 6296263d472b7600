"""The work folder of a run: finished parts and their checkpoints, so a killed run resumes where it stopped.

Each file's rows are cut into parts of a fixed number of input rows. A part is finished when its
checkpoint (its rows' share of the report) is written, after its output and rejects. A rerun with
the same fingerprint skips finished parts; the final files are joined from the parts, so their
bytes do not depend on where, or whether, the run was interrupted.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from .config import ConfigError
from .formats import AtomicFile


class ResumeMismatch(ConfigError):
    """The interrupted run in the work folder was started with other inputs or settings."""


class WorkDir:
    def __init__(self, path: Path, fingerprint: dict[str, Any]):
        self.path = path
        self.fingerprint = fingerprint
        self.resumed = False

    def open(self, restart: bool) -> "WorkDir":
        """Start fresh, or resume the run found here when it is the same run."""
        run_file = self.path / "run.json"
        if restart and self.path.exists():
            shutil.rmtree(self.path)
        if run_file.exists():
            previous = json.loads(run_file.read_text(encoding="utf-8"))
            if previous != self.fingerprint:
                changed = ", ".join(k for k in self.fingerprint if previous.get(k) != self.fingerprint[k])
                raise ResumeMismatch(
                    f"an interrupted run in {self.path} used different {changed or 'settings'}; "
                    "rerun with the same inputs and settings to resume, or add --restart to start over"
                )
            self.resumed = True
        else:
            _write_json(run_file, self.fingerprint)
        return self

    def _file_dir(self, file_index: int) -> Path:
        return self.path / f"file-{file_index:05d}"

    def part(self, file_index: int, part_index: int, suffix: str) -> Path:
        return self._file_dir(file_index) / f"part-{part_index:06d}{suffix}"

    def finished_parts(self, file_index: int) -> list[dict[str, Any]]:
        """Checkpoints of the file's finished parts, in order (a gap ends the list)."""
        found = []
        while (meta := self.part(file_index, len(found), ".done.json")).exists():
            found.append(json.loads(meta.read_text(encoding="utf-8")))
        return found

    def finish_part(self, file_index: int, part_index: int, checkpoint: dict[str, Any]) -> None:
        _write_json(self.part(file_index, part_index, ".done.json"), checkpoint)

    def is_file_done(self, file_index: int) -> bool:
        return (self._file_dir(file_index) / "joined").exists()

    def mark_file_done(self, file_index: int) -> None:
        _write_json(self._file_dir(file_index) / "joined", {})

    def all_checkpoints(self, files: int) -> list[dict[str, Any]]:
        return [c for i in range(files) for c in self.finished_parts(i)]

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


def _write_json(path: Path, data: Any) -> None:
    with AtomicFile(path) as f:
        f.handle.write(json.dumps(data, sort_keys=True).encode("utf-8"))
