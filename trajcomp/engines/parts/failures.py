"""Stopping a run whose summaries keep failing (the endpoint is likely down), resumable, rather than
writing every later row flagged as failed."""

from __future__ import annotations

from pathlib import Path

from ...core.metrics import Outcome
from .checkpoint import WorkDir


class SummarizerDown(RuntimeError):
    """Too many summaries failed in a row: the run stops, resumable, instead of flagging every row."""


class FailureStreak:
    """Counts the summaries that failed in a row; at `limit` (0: never) the parts holding the streak
    are undone, to be redone by a resume, and the run stops."""

    def __init__(self, limit: int, work: WorkDir, folder: Path):
        self.limit, self.work, self.folder = limit, work, folder
        self.count = 0
        self.began = (0, 0)  # (file, part) where the current streak began

    def see(self, metrics, file_index: int, part_index: int) -> None:
        """Count a row's metrics (None: rejected or skipped, neither a success nor a failure)."""
        if (step := counted(metrics)) is not None:
            self.step(*step, file_index, part_index)

    def step(self, failed: bool, error: str | None, file_index: int, part_index: int) -> None:
        """Count a summary that failed (with its error) or succeeded."""
        if not failed:
            self.count = 0
            return
        if self.count == 0:
            self.began = (file_index, part_index)
        self.count += 1
        if self.limit and self.count >= self.limit:
            began_file, began_part = self.began
            self.work.undo_parts(file_index, began_part if began_file == file_index else 0)
            raise SummarizerDown(
                f"{self.count} summaries in a row failed (last: {error}); stopped. "
                f"Finished parts are kept in {self.folder}: run the same command again to resume"
            )


def counted(metrics) -> tuple[bool, str | None] | None:
    """(failed, its error) for a row whose summary failed or succeeded; None for any other row."""
    if metrics is None or metrics.outcome not in (Outcome.FAILED, Outcome.COMPRESSED):
        return None
    return metrics.outcome is Outcome.FAILED, metrics.error
