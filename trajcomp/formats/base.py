"""What every format shares: the record a reader yields, the format interface, write-then-rename files."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterator, Sequence

from ..core import json_codec
from ..core.dialects.rows import RowError


def json_text(value: Any) -> str:
    """A value as JSON text, as every output writes it (core/json_codec.py; default=str: Parquet values JSON
    has no type for)."""
    return json_codec.text(value)


@dataclass(frozen=True)
class Record:
    """One input row as read: parsed, or the reason it could not be."""

    source: str
    line: int  # 1-based line (JSONL), element (JSON array) or row number (Parquet)
    raw: str | None  # the row as read, for the rejects file; None where the parsed row or `data` says it all
    row: dict[str, Any] | None = None
    error: RowError | None = None
    # A JSON Lines row read whole: its line's bytes, decoded only if the row goes to the rejects file (most
    # rows never do; decoding every line cost 14 us of a 42 KB row's 75 us parse, docs/benchmarks_notes.md).
    data: bytes | None = None

    def raw_text(self) -> str:
        if self.raw is not None:
            return self.raw
        if self.data is not None:
            return self.data.decode("utf-8").rstrip("\r\n")
        return json_text(self.row)


class InputError(RuntimeError):
    """An input file that cannot be read on (not the format its name says, corrupt, truncated)."""


def read_checked(fmt: "Format", path: Path) -> Iterator[Record]:
    """fmt.read(path), its errors turned into InputError naming the file."""
    return checked(path, lambda: fmt.read(path))


def checked(path: Path, read: Callable[[], Iterator[Any]]) -> Iterator[Any]:
    """What `read()` yields from `path`, its errors turned into InputError naming the file."""
    try:
        yield from read()
    except (ValueError, OSError, EOFError) as exc:
        raise InputError(_named(path, exc)) from None


def input_schema(fmt: "Format", path: Path) -> Any:
    """fmt.schema(path), its errors turned into InputError like read_checked's."""
    try:
        return fmt.schema(path)
    except (ValueError, OSError) as exc:
        raise InputError(_named(path, exc)) from None


def unpack_checked(fmt: "Format", path: Path, dest: Path) -> None:
    """fmt.unpack(path, dest), the input's errors turned into InputError like read_checked's (a full
    disk under `dest` stays an OSError: the input is not to blame)."""
    try:
        fmt.unpack(path, dest)
    except (ValueError, EOFError) as exc:
        raise InputError(_named(path, exc)) from None
    except OSError as exc:
        if exc.filename != str(path):
            raise
        raise InputError(_named(path, exc)) from None


def _named(path: Path, exc: BaseException) -> str:
    message = " ".join(str(exc).split())
    return message if str(path) in message else f"{path}: {message}"


class Format:
    """A file format: stream its rows in, write rows out as parts and join the parts."""

    suffix: str = ""
    writable: bool = True
    splits: bool = False  # `spans` finds where runs of rows lie without reading them: a worker reads its own
    unpacks: bool = False  # `unpack` makes a plain JSON Lines copy, which splits (compressed JSON Lines)
    # Joined, its parts leave no trace: any cut of the rows into parts gives the same bytes (not so where
    # a part is a compressed member or a row group).
    seamless: bool = False
    # `join` is the parts' bytes one after another (JSON Lines, gzip members, zstd frames): a file's parts
    # may then be written into one file in turn (AppendedPart), which becomes the output as it is.
    concatenates: bool = False

    def read(self, path: Path) -> Iterator[Record]:
        """Every row of the file in order; unreadable rows come as Records with an error."""
        raise NotImplementedError

    def spans(self, path: Path, rows: int, skip: int = 0) -> Iterator[tuple]:
        """Where each run of `rows` records after the first `skip` lies in the file (the last maybe
        shorter), as `read_span` takes it: found without parsing a row. Only for formats that split."""
        raise NotImplementedError

    def read_span(self, path: Path, span: tuple) -> Iterator[Record]:
        """The records of one span: the same Records, numbers and errors `read` gives for them."""
        raise NotImplementedError

    def unpack(self, path: Path, dest: Path) -> None:
        """The file's lines as a plain JSON Lines file at `dest` (atomically), with `read`'s errors.
        Only for formats that unpack."""
        raise NotImplementedError

    def schema(self, path: Path) -> Any:
        """The input's own column types, for a writer that can keep them (None when it has none)."""
        return None

    def write_part(self, path: Path, rows: Sequence[dict[str, Any]], schema: Any = None) -> None:
        """`rows` as one complete file at `path` (atomically)."""
        raise NotImplementedError

    def open_part(self, path: Path, schema: Any = None) -> "PartWriter":
        """A part written row by row; by default the rows are kept until `close` calls write_part."""
        return BufferedPart(self, path, schema)

    def join(self, parts: Sequence[Path], dest: Path, schema: Any = None) -> None:
        """The parts, in order, as one file at `dest` (atomically); an empty list gives an empty file."""
        raise NotImplementedError

    def append_part(self, path: Path, at: int) -> "AppendedPart":
        """A part written at byte `at` of `path`, after the file's parts before it (formats that concatenate)."""
        raise NotImplementedError


class PartWriter:
    """Rows streamed into one part file, which appears only when closed."""

    def write(self, row: dict[str, Any]) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def abort(self) -> None:
        """Drop what was written (the part will be written again)."""


class BufferedPart(PartWriter):
    def __init__(self, fmt: Format, path: Path, schema: Any):
        self.fmt, self.path, self.schema = fmt, path, schema
        self.rows: list[dict[str, Any]] = []

    def write(self, row: dict[str, Any]) -> None:
        self.rows.append(row)

    def close(self) -> None:
        self.fmt.write_part(self.path, self.rows, self.schema)


class StreamPart(PartWriter):
    """Encoded rows written straight to a temporary file through an optional compressing stream."""

    def __init__(self, path: Path, encode: Callable[[dict[str, Any]], bytes], wrap: Callable[[BinaryIO], Any] | None = None):
        self.file = AtomicFile(path)
        self.encode = encode
        self.stream = wrap(self.file.handle) if wrap else None

    def write(self, row: dict[str, Any]) -> None:
        (self.stream or self.file.handle).write(self.encode(row))

    def close(self) -> None:
        if self.stream is not None:
            self.stream.close()  # ends the gzip member / zstd frame; the file stays open
        self.file.commit()

    def abort(self) -> None:
        self.file.abort()


class AppendedPart(PartWriter):
    """A part's encoded rows appended, from byte `at`, to the file that holds its file's parts one after
    another (what a killed run left after `at` is cut off first), hashed as they are written: the part's
    rows are written once and not read back. `piece` then says where they lie."""

    def __init__(self, path: Path, at: int, encode: Callable[[dict[str, Any]], bytes],
                 wrap: Callable[[BinaryIO], Any] | None = None):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path, self.at, self.encode = path, at, encode
        _unshared(path)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            os.ftruncate(fd, at)
            self.handle: BinaryIO = os.fdopen(fd, "r+b")
        except BaseException:
            os.close(fd)
            raise
        self.handle.seek(at)
        self.hashed = _Hashed(self.handle)
        self.stream = wrap(self.hashed) if wrap else None
        self.piece: dict[str, Any] | None = None

    def write(self, row: dict[str, Any]) -> None:
        (self.stream or self.hashed).write(self.encode(row))

    def close(self) -> None:
        if self.stream is not None:
            self.stream.close()  # ends the gzip member / zstd frame; the file stays open
        self.handle.flush()
        os.fsync(self.handle.fileno())
        self.handle.close()
        self.piece = {"at": self.at, "bytes": self.hashed.size, "sha256": self.hashed.sha.hexdigest()}

    def abort(self) -> None:
        """What the part wrote cut off (nothing, once closed: it is committed), whatever failed first."""
        if self.piece is not None:
            return
        try:
            if self.stream is not None:
                self.stream.close()  # else a GzipFile would finish its member into the closed file later
            self.handle.close()  # its buffer's flush may fail (a full disk): closed all the same
        except Exception:  # the error that made the run abort is the one to report
            pass
        os.truncate(self.path, self.at)


def _unshared(path: Path) -> None:
    """`path` made a file of its own when another name shares it (the output a join linked it to, before a
    kill stopped the run): what is written next must not change the file under that name."""
    if path.exists() and path.stat().st_nlink > 1:
        with AtomicFile(path) as copy:
            for chunk in byte_chunks(path):
                copy.handle.write(chunk)


class _Hashed:
    """A binary file's writes, hashed and counted on their way."""

    def __init__(self, handle: BinaryIO):
        self.handle, self.sha, self.size = handle, hashlib.sha256(), 0

    def write(self, data: bytes) -> int:
        self.sha.update(data)
        self.size += len(data)
        return self.handle.write(data)

    def flush(self) -> None:
        self.handle.flush()


def temporary(path: Path) -> Path:
    """Where a file (or folder) is made before it is renamed into place as `path`."""
    return path.with_name(f".{path.name}.trajcomp-tmp")


class AtomicFile:
    """A file written under a temporary name and renamed into place only on commit."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.tmp = temporary(self.path)
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


def write_json(path: Path, data: Any, indent: int | None = None) -> None:
    """`data` as a UTF-8 JSON file, written atomically."""
    with AtomicFile(path) as f:
        f.handle.write((json.dumps(data, indent=indent, ensure_ascii=False) + "\n").encode("utf-8"))


def concat_files(parts: Sequence[Path | tuple[Path, int, int]], dest: Path) -> None:
    """Byte-for-byte concatenation (valid for JSON Lines, gzip members and zstd frames) of whole files
    or of (file, first byte, size) ranges."""
    with AtomicFile(dest) as out:
        for part in parts:
            for chunk in byte_chunks(*(part if isinstance(part, tuple) else (part,))):
                out.handle.write(chunk)


def byte_chunks(path: Path, at: int = 0, size: int | None = None) -> Iterator[bytes]:
    """The file's bytes from `at`, `size` of them (None: to its end), in chunks of at most 1 MiB."""
    with open(path, "rb") as src:
        src.seek(at)
        while size is None or size > 0:
            chunk = src.read(1 << 20 if size is None else min(1 << 20, size))
            if not chunk:
                return
            yield chunk
            if size is not None:
                size -= len(chunk)
