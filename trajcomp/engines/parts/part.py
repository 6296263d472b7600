"""A file's output written in parts of `checkpoint_rows` input rows, each made to count by its checkpoint,
and joined into the output file once every part is done (see checkpoint.py).

Parts written one after another in this process, in a format whose join is their bytes in turn, go
into one file (`WorkDir.rows`) at their place, each checkpoint holding its range: the join checks
them and links that file into place, so each byte is written once. Worker processes and Ray actors write
parts at the same time, each into its own files, which the join copies.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ...core.metrics import Aggregate
from ...formats import Format
from ...formats.base import AppendedPart, PartWriter, concat_files, temporary
from ...formats.jsonl import JSONL
from ..flow.paths import FileJob
from ..flow.results import Rejected, Skipped, Written
from .checkpoint import WorkDir
from .manifest import FILES, digest

REJECTS, EXAMPLES = ".rejects.jsonl", ".examples.jsonl"
SIDE_FILES = (REJECTS, EXAMPLES)  # a part's files beside its output's, each joined into one file at the run's end


class Part:
    """One part of a file's output: rows stream into part files; the checkpoint makes it count."""

    def __init__(self, work: WorkDir, file_index: int, index: int, writer: Format, schema: Any, at: int | None = None):
        """`at`: where the part's rows go in the file's `WorkDir.rows` (None: into a file of the part's own)."""
        self.work, self.file_index, self.index = work, file_index, index
        self.writer, self.schema, self.at = writer, schema, at
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
            self._rows = self._rows or self._open_rows()
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

    def _open_rows(self) -> PartWriter:
        if self.at is None:
            return self.writer.open_part(self._path(self.writer.suffix), self.schema)
        return self.writer.append_part(self.work.rows(self.file_index, self.writer.suffix), self.at)

    def _path(self, suffix: str) -> Path:
        return self.work.part(self.file_index, self.index, suffix)

    @property
    def end(self) -> int | None:
        """Where the next part's rows go in the file's `WorkDir.rows` (once closed)."""
        piece = self._rows.piece if isinstance(self._rows, AppendedPart) else None
        return self.at if piece is None else piece["at"] + piece["bytes"]

    def finish(self) -> None:
        self.work.commit_part(self.file_index, self.index, self.close())  # last: this makes the part count

    def close(self) -> dict[str, Any]:
        """The part's files committed; its checkpoint, which makes it count once written (commit_part)."""
        for stream in (self._rows, self._rejects, self._examples):
            if stream is not None:
                stream.close()
        checkpoint = {"records": self.records, "taken": self.taken, "aggregate": self.aggregate.to_state()}
        pieces = {}
        if isinstance(self._rows, AppendedPart):
            pieces[self.work.rows(self.file_index, self.writer.suffix).name] = self._rows.piece
        return self.work.described(self.file_index, self.index, checkpoint, pieces)

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
    pieces = [piece for i, c in enumerate(work.checkpoints(index))  # one checkpoint in memory at a time
              if (piece := _output(work, index, i, c, writer.suffix)) is not None]
    rows = work.rows(index, writer.suffix)
    if not _linked(pieces, rows, job.output):
        if any(isinstance(piece, tuple) for piece in pieces):
            concat_files(pieces, job.output)  # ranges: parts of both kinds, or no hard links here
        else:
            writer.join(pieces, job.output, schema)
    work.mark_file_done(index)
    for piece in pieces:
        if not isinstance(piece, tuple):
            piece.unlink()
    rows.unlink(missing_ok=True)
    return None


def _output(work: WorkDir, index: int, part: int, checkpoint: dict[str, Any], suffix: str) -> Path | tuple[Path, int, int] | None:
    """Where the part's output rows are: a file of its own, a range of the file's `WorkDir.rows`, or none."""
    files, own, rows = checkpoint.get(FILES, {}), work.part(index, part, suffix), work.rows(index, suffix)
    if own.name in files:
        return own
    if rows.name in files:
        return rows, files[rows.name]["at"], files[rows.name]["bytes"]
    return None


def _linked(pieces: list[Path | tuple[Path, int, int]], rows: Path, dest: Path) -> bool:
    """The output made `rows` itself, when every piece is in it, in order from its start (the rows written
    once): `rows` cut after the last piece (a killed part's bytes may follow) and linked into place. It
    stays until the file is marked joined, so a kill before that finds the parts whole. False, nothing
    done but the cut: the pieces are to be copied (parts of both kinds, or a file system without links)."""
    end = 0
    for piece in pieces:
        if not isinstance(piece, tuple) or piece[1] != end:
            return False
        end += piece[2]
    if not pieces:
        return False
    os.truncate(rows, end)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = temporary(dest)
    tmp.unlink(missing_ok=True)
    try:
        os.link(rows, tmp)
    except OSError:  # another file system, or one without hard links
        return False
    os.replace(tmp, dest)
    return True
