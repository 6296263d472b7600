"""A file's output written in parts of `checkpoint_rows` input rows, each made to count by its checkpoint,
and joined into the output file once every part is done (see checkpoint.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...core.metrics import Aggregate
from ...formats import Format
from ...formats.base import PartWriter
from ...formats.jsonl import JSONL
from ..flow.paths import FileJob
from ..flow.results import Rejected, Skipped, Written
from .checkpoint import WorkDir
from .manifest import digest, listed

REJECTS, EXAMPLES = ".rejects.jsonl", ".examples.jsonl"
SIDE_FILES = (REJECTS, EXAMPLES)  # a part's files beside its output's, each joined into one file at the run's end


class Part:
    """One part of a file's output: rows stream into part files; the checkpoint makes it count."""

    def __init__(self, work: WorkDir, file_index: int, index: int, writer: Format, schema: Any):
        self.work, self.file_index, self.index = work, file_index, index
        self.writer, self.schema = writer, schema
        for suffix in (writer.suffix, *SIDE_FILES):  # a killed run may have left this part's files
            self._path(suffix).unlink(missing_ok=True)
        self.records = 0
        self.taken = 0
        self.aggregate = Aggregate()
        self._rows: PartWriter | None = None
        self._rejects: PartWriter | None = None
        self._examples: PartWriter | None = None

    def add(self, result: Written | Rejected | Skipped) -> None:
        self.records += 1
        if isinstance(result, Skipped):
            setattr(self.aggregate, result.reason, getattr(self.aggregate, result.reason) + 1)
            return
        self.taken += 1
        if isinstance(result, Written):
            self._rows = self._rows or self.writer.open_part(self._path(self.writer.suffix), self.schema)
            for row in result.rows:
                self._rows.write(row)
            if result.examples:
                self._examples = self._examples or JSONL.open_part(self._path(EXAMPLES))
                for row in result.examples:
                    self._examples.write(row)
            self.aggregate.add(result.metrics, source=result.source, line=result.line)
        else:
            self._rejects = self._rejects or JSONL.open_part(self._path(REJECTS))
            self._rejects.write(result.to_row())
            self.aggregate.add_reject(result.reason, result.metrics, result.record.source, result.record.line)

    def _path(self, suffix: str) -> Path:
        return self.work.part(self.file_index, self.index, suffix)

    def finish(self) -> None:
        self.work.commit_part(self.file_index, self.index, self.close())  # last: this makes the part count

    def close(self) -> dict[str, Any]:
        """The part's files committed; its checkpoint, which makes it count once written (commit_part)."""
        for stream in (self._rows, self._rejects, self._examples):
            if stream is not None:
                stream.close()
        checkpoint = {"records": self.records, "taken": self.taken, "aggregate": self.aggregate.to_state()}
        return self.work.described(self.file_index, self.index, checkpoint)

    def abort(self) -> None:
        for stream in (self._rows, self._rejects, self._examples):
            if stream is not None:
                stream.abort()


def join_parts(work: WorkDir, index: int, job: FileJob, writer: Format, schema: Any,
               committed: list[str]) -> tuple[int, str] | None:
    """The file's parts, checked right before they are read, joined into its output; then only the
    checkpoints are still needed. A part that fails its check, or whose checkpoint is not the one
    committed (`committed`: each checkpoint's sha256, in order; one lost or stale on its way to a copy
    of the work folder), is not used: (its index, why) comes back and nothing is written."""
    for part, expected in enumerate(committed):
        done = work.part(index, part, ".done.json")
        if not done.exists():
            return part, f"{done}: missing"
        if digest(done) != expected:
            return part, f"{done}: not the checkpoint committed"
    damaged = work.first_damaged(index)
    if damaged is not None:
        return damaged
    # Only the parts whose checkpoint lists an output (a part whose rows were all rejected has none).
    parts = [work.part(index, i, writer.suffix) for i, c in enumerate(work.checkpoints(index))
             if listed(c, work.part(index, i, writer.suffix).name)]  # one checkpoint in memory at a time
    writer.join(parts, job.output, schema)
    work.mark_file_done(index)
    for p in parts:
        p.unlink()
    return None
