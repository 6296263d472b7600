"""What a finished part's checkpoint records of the files it wrote (size and sha256), and the check of
the files against it, so a part torn, overwritten or lost after it was committed is never trusted.

A lost write on a network file system or a fuse-mounted bucket leaves a committed part short or
wrong although it was fsync'd and renamed into place: a resume and a join check every part before
they use it, and one that fails is computed again (the run's bytes do not change).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Iterable

from ...formats.base import byte_chunks


class DamagedPart(RuntimeError):
    """A part that fails its check where this run cannot compute it again (at every join, or a rejects
    part at the run's end): the run stops, and the same command resumes, computing it again."""


# The checkpoint's key: {file name: {"bytes": size, "sha256": hex digest}}; a part written into the file
# that holds its file's parts in turn (formats.base.AppendedPart) has its range there: {"at": first byte, ...}.
FILES = "files"


def digest(path: Path) -> str:
    """The file's sha256, in hex."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def range_digest(path: Path, at: int, size: int) -> str:
    """The sha256 of `size` bytes of the file from byte `at`, in hex."""
    sha = hashlib.sha256()
    for chunk in byte_chunks(path, at, size):
        sha.update(chunk)
    return sha.hexdigest()


def describe(paths: Iterable[Path]) -> dict[str, dict[str, Any]]:
    """The manifest of a part's files that exist, read back once they are committed (fsync'd), so it
    holds what is on disk whatever format wrote them."""
    return {p.name: {"bytes": p.stat().st_size, "sha256": digest(p)} for p in paths if p.is_file()}


def damage(done: Path, checkpoint: dict[str, Any], only: str | tuple[str, ...] | None = None) -> str | None:
    """Why the files of the part whose checkpoint is `done` (those whose names end with `only`, when
    given) differ from it, as '<path>: size 120 bytes, expected 240'; None when they are as written."""
    files = checkpoint.get(FILES)
    if files is None:  # written by a trajcomp from before manifests: nothing to check it against
        return f"{done}: no checksums (an older trajcomp wrote it)"
    folder = done.parent
    for name, expected in files.items():
        if only is not None and not name.endswith(only):
            continue
        reason = file_damage(folder / name, expected)
        if reason is not None:
            whose = f", {done.name.removesuffix('.done.json')}'s bytes" if "at" in expected else ""
            return f"{folder / name}{whose}: {reason}"
    return None


def file_damage(path: Path, expected: dict[str, Any]) -> str | None:
    """Why the file differs from its manifest entry ('missing', its size, its checksum); None when it does not."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return "missing"
    at = expected.get("at")
    if at is None:
        if size != expected["bytes"]:
            return f"size {size} bytes, expected {expected['bytes']}"
        if digest(path) != expected["sha256"]:
            return "sha256 differs from its checkpoint's (overwritten)"
        return None
    end = at + expected["bytes"]
    if size < end:
        return f"size {size} bytes, expected at least {end}"
    if range_digest(path, at, expected["bytes"]) != expected["sha256"]:
        return f"sha256 of bytes {at}-{end} differs from its checkpoint's (overwritten)"
    return None


def listed(checkpoint: dict[str, Any], name: str) -> bool:
    """Whether the part wrote the file `name` (a part whose rows were all rejected has no output)."""
    return name in checkpoint.get(FILES, {})
