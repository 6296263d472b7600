"""Inputs and outputs in object storage (s3://, gs://, whatever `pyarrow.fs` resolves), through a local stage.

Remote inputs are mirrored into a local folder (fetched again only when their size or modification
time changed, so a rerun resumes), the run reads and writes local files as every run does, and
what it wrote (rows, report, rejects, page) is uploaded once it has finished, each object under a
hidden name and then moved into place, so a reader never sees half of one. The work folder of a
remote output is copied beside it as it grows (WorkMirror), so another machine can resume the run.
For Ray actors that may take whole parts through the store (part_store.py), the stage is lazy: the
inputs they would take are only listed, and whoever reads one fetches it (`fetch_input`), checked
against the listing.
Credentials and the endpoint come from the environment only (AWS_ACCESS_KEY_ID, AWS_ENDPOINT_URL, ...).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from ...core.config import ConfigError
from ...formats import INPUT_SUFFIXES, Record, format_for, identity, split_suffix
from ...formats.base import InputError

# The local stage: mirrors of remote inputs, and each remote output's local run (its work folder too).
STAGE_ENV = "TRAJCOMP_STAGE_DIR"
CHUNK = 8 << 20


def named(records: Iterable[Record], source: str | None) -> Iterable[Record]:
    """Records named `source` (the URI a staged input came from) instead of the local path they were read from."""
    return records if source is None else (dataclasses.replace(r, source=source) for r in records)


def is_uri(text: str | os.PathLike | None) -> bool:
    return isinstance(text, str) and "://" in text and not text.startswith("file://")


def stage_root() -> Path:
    base = os.environ.get(STAGE_ENV) or os.path.join(os.environ.get("XDG_CACHE_HOME") or "~/.cache", "trajcomp", "stage")
    return Path(base).expanduser()


def _digest(uri: str) -> str:
    return hashlib.sha256(uri.encode("utf-8")).hexdigest()[:16]


def input_stage(uri: str) -> Path:
    """Where this machine's stage keeps the input object `uri` (given alone, or a prefix's file as a Ray actor fetches it)."""
    return stage_root() / "inputs" / _digest(uri) / uri.rstrip("/").rsplit("/", 1)[-1]


def open_uri(uri: str):
    """(filesystem, path in it) for a URI, credentials and endpoint from the environment."""
    import pyarrow.fs as pafs

    scheme, _, rest = uri.partition("://")
    if "@" in rest.split("/", 1)[0]:  # the URI would carry them into reports and messages
        raise ConfigError(f"a {scheme}:// URI must not hold credentials: set them in the environment "
                          "(AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, ...)")
    try:
        return pafs.FileSystem.from_uri(uri.rstrip("/"))
    except (pafs.ArrowInvalid, OSError, ValueError) as exc:
        raise ConfigError(f"cannot open {uri}: {exc}") from None


@dataclass
class Stage:
    """A run's remote inputs and output as local paths, and what to upload where once it finished."""

    inputs: list[str]
    output: Path | None
    output_uri: str | None = None
    names: dict[str, str] = field(default_factory=dict)  # local path -> the URI it stands for
    # A lazy stage's inputs not fetched here: local path -> (size, modification time in ns) as listed.
    listed: dict[str, tuple[int, int]] = field(default_factory=dict)
    output_folder: Path | None = None  # the stage's folder standing for the remote output's parent

    def uri(self, local: str | os.PathLike) -> str:
        """The URI a staged local path stands for (itself when it is not staged)."""
        return self.named(str(local))

    def named(self, text: str) -> str:
        """`text` (a message, a path) with every staged local path in it replaced by its URI."""
        for path, uri in sorted(self.names.items(), key=lambda item: -len(item[0])):
            text = text.replace(path, uri.rstrip("/"))
        return text

    def localize(self, layout):
        """The layout with staged inputs and outputs named by their URIs, and its work folder mirrored
        beside a remote output (so a resume on another machine finds it). The default summary cache of a
        remote output is in the store beside it too: a stage path would be a cache of each machine's own,
        lost with it, so a resume elsewhere (or another Ray node) would buy its summaries again."""
        files = [dataclasses.replace(job, source=self._staged(job.input), dest=self._staged(job.output),
                                     listed=self.listed.get(str(job.input))) for job in layout.files]
        if self.output_uri is None:
            return dataclasses.replace(layout, files=files)
        return dataclasses.replace(layout, files=files, work_mirror=self.uri(layout.work),
                                   cache=self._staged(layout.cache) or layout.cache)

    def _staged(self, path: Path) -> str | None:
        return None if self.uri(path) == str(path) else self.uri(path)

    def rename(self, processing) -> None:
        """A report's `processing` naming URIs, not the local stage."""
        for name in ("inputs", "outputs", "skipped_files", "stray_files_in_output", "files_all_rejected"):
            setattr(processing, name, [self.named(p) for p in getattr(processing, name)])
        if processing.rejects_file:
            processing.rejects_file = self.named(processing.rejects_file)

    def upload(self, paths: list[Path], stale: tuple[Path, ...] = ()) -> None:
        """Each of `paths` here (a dataset folder's files too) copied to its URI, whole or not at all (an
        output not here is there already: Ray actors joined it through the store, part_store.py); each of
        `stale` that the run did not write (a rejects file when none was rejected) removed there, so it
        cannot mislead."""
        if self.output_uri is None:
            return
        fs, folder = open_uri(self.names[str(self.output_folder)])
        key = lambda local: f"{folder}/{local.relative_to(self.output_folder).as_posix()}"  # noqa: E731
        for path in paths:
            if path.exists():
                put_tree(fs, path, key(path))
        for path in stale:
            if not path.exists():
                try:
                    fs.delete_file(key(path))
                except FileNotFoundError:
                    pass


def put_tree(fs, local: Path, key: str) -> None:
    """`local` put at `key` (put_file); a folder (a dataset folder) file by file below it."""
    if not local.is_dir():
        put_file(fs, local, key)
        return
    for path in sorted(f for f in local.rglob("*") if f.is_file()):
        put_file(fs, path, f"{key}/{path.relative_to(local).as_posix()}")


def put_file(fs, local: Path, key: str) -> None:
    """`local` uploaded beside `key` under a hidden name, then moved there: an upload cut short is
    closed (completed) by pyarrow, so it must never be at the final name."""
    folder, _, name = key.rpartition("/")
    partial = f"{folder}/.{name}.trajcomp-upload" if folder else f".{name}.trajcomp-upload"
    try:
        with open(local, "rb") as src, fs.open_output_stream(partial, compression=None) as dest:
            shutil.copyfileobj(src, dest, CHUNK)
        fs.move(partial, key)
    except BaseException:
        try:
            fs.delete_file(partial)
        except OSError:
            pass
        raise


class WorkMirror:
    """A run's work folder copied to object storage as it grows: each part's files, then its checkpoint."""

    def __init__(self, uri: str):
        self.fs, self.root = open_uri(uri)
        self.root = self.root.rstrip("/")

    def pull(self, local: Path) -> None:
        """The remote copy into `local`, when it holds a run and `local` does not (another machine's run)."""
        import pyarrow.fs as pafs

        if (local / "run.json").exists() or self.fs.get_file_info(f"{self.root}/run.json").type != pafs.FileType.File:
            return
        found = self.fs.get_file_info(pafs.FileSelector(self.root, recursive=True))
        for info in sorted((i for i in found if i.type == pafs.FileType.File), key=lambda i: i.path.endswith(".done.json")):
            relative = info.path[len(self.root) + 1:]
            if relative.rsplit("/", 1)[-1].startswith("."):  # an upload cut short
                continue
            fetch_object(self.fs, info, local / relative)

    def fetch(self, local: Path, files: list[Path]) -> None:
        """Each of `files` (paths in `local`) copied from the mirror; one the mirror lacks is left absent."""
        import pyarrow.fs as pafs

        for path in files:
            info = self.fs.get_file_info(f"{self.root}/{path.relative_to(local).as_posix()}")
            if info.type == pafs.FileType.File:
                fetch_object(self.fs, info, path)

    def push(self, local: Path, files: list[Path]) -> None:
        for path in files:
            put_file(self.fs, path, f"{self.root}/{path.relative_to(local).as_posix()}")

    def delete(self, local: Path, files: list[Path]) -> None:
        for path in files:
            try:
                self.fs.delete_file(f"{self.root}/{path.relative_to(local).as_posix()}")
            except FileNotFoundError:
                pass

    def clear(self) -> None:
        self.fs.delete_dir_contents(self.root, missing_dir_ok=True)


def stage(inputs: list[str], output: str | None, lazy: bool = False) -> Stage:
    """Remote inputs fetched into the stage; a remote output's run given a local place in it. `lazy`:
    the files that workers take whole (JSON Lines, plain or compressed, Parquet) only listed, to be
    fetched by Ray actors (part_store.py), or here on first need (`fetched`)."""
    if not any(map(is_uri, [*inputs, output])):
        return Stage(list(inputs), Path(output) if output else None)
    if output is None:
        raise ConfigError("an input in object storage needs -o (a local path or a URI)")
    result = Stage([], None)
    for text in inputs:
        if is_uri(text):
            try:
                local = _mirror(text, input_stage(text).parent, result.listed if lazy else None)
            except OSError as exc:  # denied, unreachable: pyarrow's message names the bucket and the cause
                raise ConfigError(f"cannot read {text}: {' '.join(str(exc).split())}") from None
            result.names[str(local)] = text
            result.inputs.append(str(local))
        else:
            result.inputs.append(text)
    inside = next((text for text in inputs if is_uri(text) and str(output).startswith(text.rstrip("/") + "/")), None)
    if inside is not None:  # the same command run again would read the outputs as inputs
        raise ConfigError(f"the output {output} must not be inside the input folder {inside}")
    if is_uri(output):
        if "/" not in output.split("://", 1)[1].strip("/"):
            raise ConfigError(f"-o {output} must name an object or a folder inside a bucket")
        open_uri(output)  # a URI pyarrow cannot open, or one holding credentials: refused before any work
        name = output.rstrip("/").rsplit("/", 1)[-1]
        local_parent = stage_root() / "outputs" / _digest(output)
        local_parent.mkdir(parents=True, exist_ok=True)
        result.output = local_parent / name
        result.output_uri, result.output_folder = output, local_parent
        result.names[str(local_parent)] = output.rstrip("/").rsplit("/", 1)[0]
    else:
        result.output = Path(output)
    return result


def _mirror(uri: str, into: Path, listed: dict | None) -> Path:
    """The object (or every object under the prefix) at `uri` in `into`, named as in the store (_take)."""
    import pyarrow.fs as pafs

    fs, key = open_uri(uri)
    key = key.rstrip("/")
    name = key.rsplit("/", 1)[-1]
    info = fs.get_file_info(key)
    if info.type == pafs.FileType.File:
        _take(fs, info, into / name, listed)
    elif info.type == pafs.FileType.Directory:
        found = fs.get_file_info(pafs.FileSelector(key, recursive=True))
        wanted = {into / name / i.path[len(key) + 1:]: i for i in found if i.type == pafs.FileType.File}
        for local, item in wanted.items():
            _take(fs, item, local, listed)
        for stale in [p for p in (into / name).rglob("*") if p.is_file() and p not in wanted]:
            stale.unlink()  # deleted from the store since the last run: not an input any more
    else:
        raise ConfigError(f"input not found: {uri}")
    return into / name


def _take(fs, info, local: Path, listed: dict | None) -> None:
    """The object fetched; in a lazy stage (`listed`), a file that workers take whole only listed (a
    copy here that is not the object's removed: nothing may read it in the object's place)."""
    reader = format_for(local) if split_suffix(local)[1] in INPUT_SUFFIXES else None
    if listed is None or reader is None or not (reader.splits or reader.unpacks):
        fetch_object(fs, info, local)
        return
    listed[str(local)] = (info.size, info.mtime_ns)
    local.parent.mkdir(parents=True, exist_ok=True)
    if local.exists() and tuple(identity(local)) != listed[str(local)]:
        local.unlink()


def fetch_object(fs, info, local: Path) -> None:
    """One object copied, unless the copy already there has its size and time (a rerun resumes)."""
    stamp = info.mtime_ns
    if local.is_file() and local.stat().st_size == info.size and (stamp is None or local.stat().st_mtime_ns == stamp):
        return
    local.parent.mkdir(parents=True, exist_ok=True)
    # A name of its own: several processes (Ray actors on one node) may fetch the same object at once.
    with tempfile.NamedTemporaryFile(dir=local.parent, prefix=f".{local.name}.", suffix=".part", delete=False) as dest:
        try:
            with fs.open_input_stream(info.path, compression=None) as src:
                shutil.copyfileobj(src, dest, CHUNK)
        except BaseException:
            os.unlink(dest.name)
            raise
    if stamp is not None:  # to the nanosecond: identity() of the copy is the listing's (size, time)
        os.utime(dest.name, ns=(stamp, stamp))
    os.replace(dest.name, local)


def fetch_input(job, local: Path) -> Path:
    """The input object `job.source` (a paths.FileJob's) copied to `local` unless it is there already; an
    InputError when it is gone, or not what the run listed (`job.listed`: it changed since)."""
    import pyarrow.fs as pafs

    changed = f"{job.source} changed in object storage while the run was going (size or modification time)"
    try:
        fs, key = open_uri(job.source)
        info = fs.get_file_info(key)
        if info.type != pafs.FileType.File:
            raise InputError(f"{job.source}: no longer in object storage")
        if job.listed is not None and (info.size, info.mtime_ns) != tuple(job.listed):
            raise InputError(changed)  # before fetching: a good copy here stays as it is
        fetch_object(fs, info, local)
    except OSError as exc:
        if exc.errno is not None:  # this machine's (a full disk under the stage): the input is not to blame
            raise
        raise InputError(f"cannot read {job.source}: {' '.join(str(exc).split())}") from None
    if job.listed is not None and tuple(identity(local)) != tuple(job.listed):
        raise InputError(changed)
    return local


def fetched_output(job, into: Path) -> Path:
    """The job's output: here, or, when Ray actors put it straight into object storage, fetched into `into`."""
    if job.output.exists() or job.dest is None:
        return job.output
    try:
        return _mirror(job.dest, into, None)
    except ConfigError as exc:  # not there: the page goes without it
        raise FileNotFoundError(str(exc)) from None


def fetched(job):
    """The job, its input fetched into the stage here when it was only listed (a lazy stage: the driver of
    Ray actors that take whole parts through object storage reads no input)."""
    if job.listed is not None:
        fetch_input(job, job.input)
    return job
