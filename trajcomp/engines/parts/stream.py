"""The coordinator's side of whole parts: files' parts sent to workers as one stream, committed in order.

A run of files whose parts worker processes or Ray actors take whole (pipeline.py decides which) is
one stream of part tasks (part_work.py): a part of the next file starts while this one's last parts
finish, so a folder of small shards keeps every worker busy. Here the checkpoints come back and are
committed in input order (a part done early waits for those before it, so a kill never leaves a gap),
their summaries counted in order by the failure streak, and each file is joined by a worker as soon
as its last part is in. A worker finds each file's spans (a compressed file's plain copy made
first), the next file's while the parts before it run. An error in finding a file's parts reaches
the run in order, after the parts before it, as a row-by-row run would meet it.
"""

from __future__ import annotations

import asyncio
import shutil
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Callable

from ...formats import format_for
from ..flow.examples import ExampleRows
from ..flow.ordered import ordered_map
from ..flow.paths import FileJob
from ..flow.progress import Progress
from ..flow.selection import Selection
from .checkpoint import WorkDir
from .failures import FailureStreak
from .work import THROUGH_STORE, JoinTask, PartDone, PartTask, Spans, SpanTask


@dataclass(frozen=True)
class _Failed:
    """An error met while finding a file's parts, raised when its place in the stream comes."""

    error: BaseException


@dataclass
class PartStream:
    """What the stream needs of the run: its work folder, the pool (part_work.Asks: a WorkerPool or
    a RayPool) and how its workers take parts (`how`: SHARED or THROUGH_STORE, pipeline.Runner._parts_go), its settings, and what it reports
    to (streak, progress);
    `undo` forgets a damaged part and those after it (pipeline.Runner._undo); `finished`: each file's
    parts already committed."""

    work: WorkDir
    pool: Any
    how: str
    selection: Selection
    checkpoint_rows: int
    streak_limit: int
    max_running: int
    max_held: int
    failures: FailureStreak
    progress: Progress
    undo: Callable[[int, int, str], None]
    finished: dict[int, int]
    examples: ExampleRows | None = None  # --summary-examples: the parts write them too
    _parts: dict[int, int] = field(default_factory=dict)  # file -> its parts, once all were found
    _finding: dict[int, asyncio.Task] = field(default_factory=dict)  # file -> its spans, being found by a worker

    async def run(self, files: list[tuple[int, FileJob]]) -> list[tuple[int, FileJob]] | None:
        """The files' remaining parts computed and committed, each file joined; the files whose join
        found a damaged part come back (to be computed row by row). None, nothing committed, when
        there are fewer parts than workers (rows spread better), unless the parts go through object
        storage (this process holds none of them: a file started by parts is finished by parts)."""
        in_flight = 2 * self.pool.workers  # a worker starts its next part while its last rows finish
        tasks = self._tasks(files, max(1, self.max_held // in_flight))
        ahead = []  # the scans go no further than they must
        async for task in tasks:
            ahead.append(task)
            if len(ahead) == self.pool.workers:
                break
        if len(ahead) < self.pool.workers and self.how != THROUGH_STORE and not any(isinstance(t, _Failed) for t in ahead):
            await self._drop_copies(files)
            return None
        unjoined, damaged = dict(files), []
        committed = dict(self.finished)
        try:
            async with aclosing(ordered_map(_after(ahead, tasks), self._perform, in_flight, in_flight)) as done:
                async for part in done:
                    await self._commit(part)
                    committed[part.file_index] = part.index + 1
                    for index in [i for i in unjoined if i < part.file_index or committed.get(i, 0) == self._parts.get(i)]:
                        damaged += await self._join(index, unjoined.pop(index))
            for index, job in list(unjoined.items()):
                damaged += await self._join(index, unjoined.pop(index))
        finally:
            await self._drop_copies(list(unjoined.items()))
        return damaged

    async def _perform(self, task: PartTask | _Failed) -> PartDone:
        if isinstance(task, _Failed):
            raise task.error
        return await self.pool.compress_part(task)

    async def _commit(self, part: PartDone) -> None:
        for failed, error in part.summaries:
            self.failures.step(failed, error, part.file_index, part.index)
        if part.checkpoint is None:  # stopped early: its streak has stopped the run above
            raise RuntimeError(f"part {part.index} of file {part.file_index} stopped without a reason")
        # Off the event loop, which meanwhile takes the workers' answers and sends them parts: with a
        # copy of the work folder in object storage, a checkpoint's upload takes milliseconds.
        await asyncio.to_thread(self.work.commit_part, part.file_index, part.index, part.checkpoint)
        self.progress.advance(part.shown)

    async def _join(self, index: int, job: FileJob) -> list[tuple[int, FileJob]]:
        """The file joined by a worker (part_work.join_file); the file back, to be redone, when a part was damaged."""
        if self.how == THROUGH_STORE:  # the actor puts the output at its URI: an earlier run's copy here
            _remove(job.output)           # would be uploaded over it at the end
        committed = await asyncio.to_thread(self.work.committed, index)  # every checkpoint read: off the loop
        damaged = await self.pool.join_file(JoinTask(self.work.path, index, job.absolute(), committed))
        self._drop_copy(index, job)
        if damaged is not None:
            self.undo(index, *damaged)
            return [(index, job)]
        if self.how == THROUGH_STORE:  # an actor joined it (in its own folder) and put the output at its URI
            self.work.mark_file_done(index)
        return []

    async def _tasks(self, files: list[tuple[int, FileJob]], held: int) -> AsyncIterator[PartTask | _Failed]:
        """The files' remaining parts for the workers (each holding at most `held` of a part's rows),
        found as the stream reaches them; an error as an item in its place, ending the stream."""
        try:
            for k, (index, job) in enumerate(files):
                finding = self._find(index, job)
                if k + 1 < len(files):
                    self._find(*files[k + 1])  # the next file's spans found while this one's parts run
                found: Spans = await finding
                del self._finding[index]
                done = self.finished.get(index, 0)
                for part, span in enumerate(found.spans, start=done):
                    yield PartTask(self.work.path, index, part, found.job.absolute(), self.selection, span,
                                   min(self.max_running, held), held, self.streak_limit, self.examples)
                self._parts[index] = done + len(found.spans)
        except Exception as exc:
            yield _Failed(exc)

    def _find(self, index: int, job: FileJob) -> asyncio.Task:
        """The file's spans being found by a worker (part_work.find_spans), a compressed file's after it made its plain copy."""
        if index not in self._finding:
            self._finding[index] = asyncio.ensure_future(self._spans(index, job))
        return self._finding[index]

    async def _spans(self, index: int, job: FileJob) -> Spans:
        copy = None if format_for(job.input).splits else self.work.plain_input(index)
        # The rest of the file after the rows its committed parts hold, whatever size those parts had
        # (a short file's, cut for another number of workers, or the row path's): read off the loop.
        skip = await asyncio.to_thread(self._rows_committed, index) if self.finished.get(index) else 0
        # A short file cut into a part for every worker, where the cut leaves no trace in the output.
        parts = self.pool.workers if format_for(job.output).seamless else 1
        return await self.pool.find_spans(SpanTask(job.absolute(), self.checkpoint_rows, copy, skip, parts))

    def _rows_committed(self, index: int) -> int:
        return sum(checkpoint["records"] for checkpoint in self.work.checkpoints(index))

    async def _drop_copies(self, files: list[tuple[int, FileJob]]) -> None:
        """Spans still being found (plain copies being made) stopped, and the plain copies of `files` removed."""
        for task in self._finding.values():
            task.cancel()
        await asyncio.gather(*self._finding.values(), return_exceptions=True)
        self._finding.clear()
        for index, job in files:
            self._drop_copy(index, job)

    def _drop_copy(self, index: int, job: FileJob) -> None:
        """A compressed file's plain copy removed, here and in the store."""
        if not format_for(job.input).splits:
            self.work.drop(self.work.plain_input(index))


def _remove(path) -> None:
    """A file or a dataset folder removed, if it is there."""
    if path.is_dir():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


async def _after(first: list, rest: AsyncIterator) -> AsyncIterator:
    """`first`'s items, then `rest`'s."""
    for item in first:
        yield item
    async for item in rest:
        yield item
