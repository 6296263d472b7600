"""Whole parts through object storage, for Ray actors on nodes that do not see the driver's files.

When the inputs and the output of a run are in object storage and the nodes share no file system,
an actor does a part task (part_work.py) in a scratch folder of its own: it fetches the input from
its URI itself (once a node: into that node's stage), writes the part there and puts its files beside
the driver's work folder's copy in the store (remote.WorkMirror); a file's join fetches the file's
parts from there, checks them and puts the output at its URI. The driver commits the checkpoints and
pushes them to the same copy, and no row or byte of a part passes through it.
"""

from __future__ import annotations

import asyncio
import secrets
import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pyarrow.fs as pafs

from ...formats.base import InputError
from ..flow.paths import FileJob
from ..storage.remote import WorkMirror, fetch_input, input_stage, open_uri, put_tree
from .checkpoint import WorkDir
from .manifest import FILES
from .work import JoinTask, PartTask, Spans, SpanTask, join_file, perform


@dataclass(frozen=True)
class Store:
    """Where the driver's work folder `work` (as tasks name it) is copied in object storage: `mirror`;
    `inputs`: an input URI of each bucket the run reads, to probe."""

    work: Path
    mirror: str
    inputs: tuple[str, ...] = ()


def reachable(store: Store) -> str | None:
    """What of the store this process cannot read or write (the copy of the work folder, an input's
    bucket); None when it can do both."""
    try:
        mirror = WorkMirror(store.mirror)
        with mirror.fs.open_input_stream(f"{mirror.root}/run.json", compression=None) as f:
            f.read()
        probe = f"{mirror.root}/.probe-{secrets.token_hex(8)}"
        with mirror.fs.open_output_stream(probe, compression=None) as f:
            f.write(b"trajcomp")
        mirror.fs.delete_file(probe)
    except Exception as exc:  # noqa: BLE001 (pyarrow's errors, a ConfigError: each a reason to say)
        return _why(store.mirror, exc)
    for uri in store.inputs:
        try:
            fs, key = open_uri(uri)
            if fs.get_file_info(key).type != pafs.FileType.File:
                return f"{uri} (not found)"
        except Exception as exc:  # noqa: BLE001
            return _why(uri, exc)
    return None


def _why(uri: str, exc: Exception) -> str:
    return f"{uri} ({' '.join(str(exc).split())[:200]})"


class ThroughStore:
    """An actor's scratch folder, and the tasks it does there, fetching from and putting into the store."""

    def __init__(self) -> None:
        self.scratch = Path(tempfile.mkdtemp(prefix="trajcomp-actor-"))
        self.work = self.scratch / "work"  # stands for the driver's work folder
        self._mirrors: dict[str, WorkMirror] = {}

    def _mirror(self, store: Store) -> WorkMirror:
        if store.mirror not in self._mirrors:
            self._mirrors[store.mirror] = WorkMirror(store.mirror)
        return self._mirrors[store.mirror]

    async def perform(self, core, task: Any, store: Store) -> Any:
        """part_work.perform's answer to `task`, the task done here with the store's copies."""
        if isinstance(task, PartTask):
            return await self._part(core, task, store)
        if isinstance(task, SpanTask):
            return await self._spans(core, task, store)
        if isinstance(task, JoinTask):
            return await asyncio.to_thread(self._join, task, store)
        return await perform(core, task)  # a row

    async def _part(self, core, task: PartTask, store: Store) -> Any:
        job = replace(task.job, input=await asyncio.to_thread(self._input, task.job, store))
        done = await perform(core, replace(task, work=self.work, job=job))
        if done.checkpoint is not None:
            folder = WorkDir(self.work, {}).part(task.file_index, task.index, "").parent
            await asyncio.to_thread(self._put, store, [folder / name for name in sorted(done.checkpoint[FILES])])
        return done

    async def _spans(self, core, task: SpanTask, store: Store) -> Spans:
        job = replace(task.job, input=await asyncio.to_thread(self._input, task.job, store))
        if task.copy is None:
            found = await perform(core, replace(task, job=job))
            return replace(found, job=task.job)
        copy = self._here(task.copy, store)
        found = await perform(core, replace(task, job=job, copy=copy))
        await asyncio.to_thread(self._put, store, [copy])
        # Read from the store by whichever actor takes a part of it.
        return replace(found, job=replace(found.job, input=task.copy))

    def _join(self, task: JoinTask, store: Store) -> tuple[int, str] | None:
        """The file's committed parts fetched from the store, checked and joined here; the output put at its URI."""
        work, mirror = WorkDir(self.work, {}), self._mirror(store)
        folder = work.part(task.file_index, 0, "").parent
        output = self.scratch / "out" / str(task.file_index) / task.job.output.name
        shutil.rmtree(folder, ignore_errors=True)  # only the store's copies count
        try:
            mirror.fetch(self.work, [work.part(task.file_index, i, ".done.json") for i in range(len(task.checkpoints))])
            mirror.fetch(self.work, [folder / name for checkpoint in work.checkpoints(task.file_index)
                                     for name in checkpoint.get(FILES, {})])
            # The input for its column types (a Parquet output keeps them), from the node's stage.
            job = replace(task.job, input=self._input(task.job, store), output=output)
            damaged = join_file(replace(task, work=self.work, job=job))
            if damaged is not None:  # named as the store names the part
                return damaged[0], damaged[1].replace(str(self.work), store.mirror.rstrip("/"))
            fs, key = open_uri(task.job.dest)
            put_tree(fs, output, key)
            return None
        finally:
            shutil.rmtree(folder, ignore_errors=True)
            shutil.rmtree(output.parent, ignore_errors=True)

    def _input(self, job: FileJob, store: Store) -> Path:
        """A local copy of the task's input: the input from its URI (into the node's stage, once a node),
        or a compressed input's plain copy from the store's work folder."""
        if not job.input.is_relative_to(store.work):
            return fetch_input(job, input_stage(job.source))
        here = self._here(job.input, store)
        self._mirror(store).fetch(self.work, [here])
        if not here.exists():
            raise InputError(f"{job.source}: its plain copy is missing from {store.mirror}")
        return here

    def _here(self, path: Path, store: Store) -> Path:
        return self.work / path.relative_to(store.work)

    def _put(self, store: Store, files: list[Path]) -> None:
        """Files written here put at their places in the store's copy of the work folder, then removed here."""
        self._mirror(store).push(self.work, files)
        for path in files:
            path.unlink()

    def close(self) -> None:
        shutil.rmtree(self.scratch, ignore_errors=True)
