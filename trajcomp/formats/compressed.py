"""JSON Lines compressed with gzip (`.jsonl.gz`) or zstd (`.jsonl.zst`), read and written as streams.

Reading decompresses as it goes, so a file of any size is read in constant memory.
Concatenated gzip members and concatenated zstd frames are one valid file (every standard tool
reads them as the concatenation of their contents), which is what lets the parts be joined by
plain concatenation.

Writing: each part is ONE complete gzip member / zstd frame, streamed row by row (`open_part`;
`write_part` goes through the same stream) and compressed deterministically: fixed level; gzip
with mtime 0 and no file name; zstd single-threaded with a checksum. Neither deflate nor zstd
output depends on how the input is cut into writes, so the same rows always give the same bytes
and a resumed run joins to a file identical to an uninterrupted one. (A streamed zstd frame cannot
carry the content size in its header, as its size is not known when the header is written; every
zstd reader handles such frames.) Joining no parts gives an empty member / frame (a valid
compressed file holding nothing), not a zero-byte file that `gzip -d` rejects.

Corrupt or truncated input: every complete line decompressed before the damage is yielded, then
`ValueError("<path>: corrupt gzip data after line N: <detail>")` (or "zstd") is raised, N being the
number of lines read so far. A file cut off inside a zstd frame counts as corrupt too (the
`zstandard` stream reader would silently end there, so frames are decoded here frame by frame
and a frame left unfinished at the end of the file is reported). The partial line at the point
of damage is never yielded.
"""

from __future__ import annotations

import gzip
import io
import zlib
from pathlib import Path
from typing import IO, Any, BinaryIO, Callable, Iterator, Sequence

import zstandard

from .base import AppendedPart, AtomicFile, Format, PartWriter, Record, StreamPart, concat_files
from .jsonl import dumps, read_lines

GZIP_LEVEL = 6
ZSTD_LEVEL = 3
ZSTD_MAX_WINDOW = 1 << 31  # accept frames written with `zstd --long`
READ_CHUNK = 1 << 16


class _CountingLines:
    """The lines of a binary stream, counting how many were handed out (for error messages)."""

    def __init__(self, handle: IO[bytes]):
        self.handle = handle
        self.count = 0

    def __iter__(self) -> Iterator[bytes]:
        for line in self.handle:
            self.count += 1
            yield line


class _ZstdFrames(io.RawIOBase):
    """Decompressed bytes of a file of zstd frames; raises EOFError when the file ends inside a frame."""

    def __init__(self, raw: IO[bytes]):
        self.raw = raw
        self.dctx = zstandard.ZstdDecompressor(max_window_size=ZSTD_MAX_WINDOW)
        self.frame = None  # the decompressor of the frame being read
        self.input = b""  # compressed bytes read but not yet given to a decompressor
        self.output = b""  # decompressed bytes not yet returned
        self.pos = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while self.pos >= len(self.output):
            if not self.input:
                self.input = self.raw.read(READ_CHUNK)
                if not self.input:
                    if self.frame is not None and not self.frame.eof:
                        raise EOFError("the file ends inside a zstd frame (truncated?)")
                    return 0
            if self.frame is None or self.frame.eof:
                self.frame = self.dctx.decompressobj()
            self.output, self.pos = self.frame.decompress(self.input), 0
            self.input = self.frame.unused_data if self.frame.eof else b""
        n = min(len(buffer), len(self.output) - self.pos)
        buffer[:n] = self.output[self.pos : self.pos + n]
        self.pos += n
        return n


class _CompressedPart(StreamPart):
    def abort(self) -> None:
        # End the stream into the doomed temporary file first: left open, a GzipFile would try to
        # finish its member into the closed file when garbage-collected.
        try:
            if self.stream is not None:
                self.stream.close()
        except (OSError, ValueError, zstandard.ZstdError):
            pass
        super().abort()


class CompressedJsonl(Format):
    """JSON Lines inside a compressed stream; `kind` names the compression in error messages."""

    def __init__(
        self,
        suffix: str,
        kind: str,
        opener: Callable[[IO[bytes]], IO[bytes]],
        compressor: Callable[[BinaryIO], Any],
        errors: tuple[type[BaseException], ...],
    ):
        self.suffix = suffix
        self.kind = kind
        self.opener = opener  # binary file -> decompressed stream
        self.compressor = compressor  # binary file -> compressing stream; closing it ends the member/frame
        self.errors = errors

    unpacks = True
    concatenates = True

    def read(self, path: Path) -> Iterator[Record]:
        with open(path, "rb") as raw, self.opener(raw) as handle:
            lines = _CountingLines(handle)
            yield from self._decoded(path, lines, read_lines(str(path), lines))

    def unpack(self, path: Path, dest: Path) -> None:
        """The decompressed lines, as they are, into `dest`: for whole parts, whose spans a plain file has."""
        with open(path, "rb") as raw, self.opener(raw) as handle, AtomicFile(dest) as out:
            lines = _CountingLines(handle)
            out.handle.writelines(self._decoded(path, lines, iter(lines)))

    def _decoded(self, path: Path, lines: _CountingLines, items: Iterator[Any]) -> Iterator[Any]:
        """`items` (drawn from `lines`) until the stream ends; damage, after the lines before it, as a
        ValueError naming the file, the compression and the last whole line."""
        while True:
            try:
                item = next(items, None)
            except self.errors as exc:
                # A gzip member's checksum is checked at its end: damage in its middle decodes as
                # other bytes until then, so the lines read before may be damaged too.
                late = " (the checksum is checked at the member's end: lines before it may be damaged too)" \
                    if "CRC check failed" in str(exc) else ""
                raise ValueError(f"{path}: corrupt {self.kind} data after line {lines.count}: {exc}{late}") from exc
            if item is None:
                return
            yield item

    def open_part(self, path: Path, schema: Any = None) -> PartWriter:
        return _CompressedPart(path, dumps, self.compressor)

    def append_part(self, path: Path, at: int) -> AppendedPart:
        return AppendedPart(path, at, dumps, self.compressor)

    def write_part(self, path: Path, rows: Sequence[dict[str, Any]], schema: Any = None) -> None:
        part = self.open_part(path, schema)
        try:
            for row in rows:
                part.write(row)
        except BaseException:
            part.abort()
            raise
        part.close()

    def join(self, parts: Sequence[Path], dest: Path, schema: Any = None) -> None:
        if parts:
            concat_files(parts, dest)
        else:
            self.write_part(dest, [])  # an empty member / frame


def _gzip_open(raw: IO[bytes]) -> IO[bytes]:
    return gzip.GzipFile(fileobj=raw, mode="rb")


def _gzip_member(out: BinaryIO) -> gzip.GzipFile:
    # Closing a GzipFile given a fileobj ends the member and leaves the file open.
    return gzip.GzipFile(fileobj=out, mode="wb", compresslevel=GZIP_LEVEL, mtime=0, filename="")


def _zstd_open(raw: IO[bytes]) -> IO[bytes]:
    return io.BufferedReader(_ZstdFrames(raw), buffer_size=READ_CHUNK)


def _zstd_frame(out: BinaryIO) -> Any:
    # threads=0 (the default): single-threaded, so the frame is deterministic; closefd=False: closing
    # the writer ends the frame and leaves the file open.
    compressor = zstandard.ZstdCompressor(level=ZSTD_LEVEL, write_checksum=True)
    return compressor.stream_writer(out, closefd=False)


JSONL_GZ = CompressedJsonl(".jsonl.gz", "gzip", _gzip_open, _gzip_member, (EOFError, gzip.BadGzipFile, zlib.error))
JSONL_ZST = CompressedJsonl(".jsonl.zst", "zstd", _zstd_open, _zstd_frame, (EOFError, zstandard.ZstdError))
