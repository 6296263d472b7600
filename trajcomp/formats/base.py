"""What every format shares: the record a reader yields and the write-then-rename file."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from ..rows import RowError


@dataclass(frozen=True)
class Record:
    """One input row as read: parsed, or the reason it could not be."""

    source: str
    line: int  # 1-based line (JSONL) or row number (columnar formats)
    raw: str  # the text as read, kept for the rejects file
    row: dict[str, Any] | None = None
    error: RowError | None = None


class AtomicFile:
    """A file written under a temporary name and renamed into place only on commit."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.tmp = self.path.with_name(f".{self.path.name}.trajcomp-tmp")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.handle: BinaryIO = open(self.tmp, "wb")

    def commit(self) -> None:
        self.handle.flush()
        os.fsync(self.handle.fileno())
        self.handle.close()
        os.replace(self.tmp, self.path)

    def abort(self) -> None:
        self.handle.close()
        self.tmp.unlink(missing_ok=True)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *exc: object) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.abort()
