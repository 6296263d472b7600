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
import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pyarrow.fs as pafs

from .checkpoint import WorkDir
from .manifest import FILES
from .part_work import JoinTask, PartTask, Spans, SpanTask, join_file, perform
from .paths import FileJob
from .remote import fetch_input, fetch_object, input_stage, open_uri, put_file


@dataclass(frozen=True)
class Store:
    """Where the driver's work folder `work` (as tasks name it) is copied in object storage: `mirror`."""

    work: Path
    mirror: str

    def uri(self, path: Path) -> str:
        """The URI of the copy of `path`, a file of the driver's work folder."""
        return f"{self.mirror.rstrip('/')}/{path.relative_to(self.work).as_posix()}"


def reachable(store: Store) -> str | None:
    """Why this process cannot read the store's copy of the work folder (its run.json); None when it can."""
    try:
        fs, root = open_uri(store.mirror)
        with fs.open_input_stream(open_uri(store.uri(store.work / "run.json"))[1], compression=None) as f:
            f.read()
    except Exception as exc:  # noqa: BLE001 (pyarrow's errors, a ConfigError: each a reason to say)
        return f"{store.mirror} ({' '.join(str(exc).split())[:200]})"
    return None


class ThroughStore:
    """An actor's scratch folder, and the tasks it does there, fetching from and putting into the store."""

    def __init__(self) -> None:
        self.scratch = Path(tempfile.mkdtemp(prefix="trajcomp-actor-"))
        self.work = self.scratch / "work"  # stands for the driver's work folder

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
        """The file's parts fetched from the store, checked and joined here; the output put at its URI."""
        folder = WorkDir(self.work, {}).part(task.file_index, 0, "").parent
        fs, copies = open_uri(store.uri(store.work / folder.name))
        shutil.rmtree(folder, ignore_errors=True)  # only the store's copies count
        try:
            for info in fs.get_file_info(pafs.FileSelector(copies, allow_not_found=True)):
                name = info.path.rsplit("/", 1)[-1]
                if info.type == pafs.FileType.File and name.startswith("part-"):
                    fetch_object(fs, info, folder / name)
            output = self.scratch / "out" / str(task.file_index) / task.job.output.name
            # The input for its column types (a Parquet output keeps them), from the node's stage.
            job = replace(task.job, input=self._input(task.job, store), output=output)
            damaged = join_file(replace(task, work=self.work, job=job))
            if damaged is not None:  # named as the store names the part
                return damaged[0], damaged[1].replace(str(self.work), store.mirror.rstrip("/"))
            out_fs, key = open_uri(task.job.dest)
            for path in sorted(output.rglob("*")) if output.is_dir() else [output]:  # a dataset folder's files
                if path.is_file():
                    put_file(out_fs, path, f"{key}/{path.relative_to(output).as_posix()}" if path != output else key)
            return None
        finally:
            shutil.rmtree(folder, ignore_errors=True)
            shutil.rmtree(self.scratch / "out" / str(task.file_index), ignore_errors=True)

    def _input(self, job: FileJob, store: Store) -> Path:
        """A local copy of the task's input: the input from its URI (into the node's stage, once a node),
        or a compressed input's plain copy from the store's work folder."""
        if not job.input.is_relative_to(store.work):
            return fetch_input(job, input_stage(job.source))
        fs, key = open_uri(store.uri(job.input))
        info = fs.get_file_info(key)
        if info.type != pafs.FileType.File:
            raise FileNotFoundError(f"{key}: not in object storage")
        fetch_object(fs, info, self._here(job.input, store))
        return self._here(job.input, store)

    def _here(self, path: Path, store: Store) -> Path:
        return self.work / path.relative_to(store.work)

    def _put(self, store: Store, files: list[Path]) -> None:
        """Files written here put at their places in the store's copy of the work folder, then removed here."""
        for path in files:
            fs, key = open_uri(store.uri(store.work / path.relative_to(self.work)))
            put_file(fs, path, key)
            path.unlink()

    def close(self) -> None:
        shutil.rmtree(self.scratch, ignore_errors=True)
