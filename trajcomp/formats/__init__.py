"""Readers and writers by file suffix: a reader streams Records, a writer writes parts then joins them.

Output is written in parts (each a complete file for a fixed range of input rows) and joined
into the final file at the end: that is what lets a killed run resume with identical bytes.
"""

from __future__ import annotations

from pathlib import Path

from .base import AtomicFile, Format, Record
from .compressed import JSONL_GZ, JSONL_ZST
from .json_array import JSON_ARRAY
from .jsonl import JSONL
from .parquet import PARQUET

__all__ = ["AtomicFile", "Format", "Record", "FORMATS", "INPUT_SUFFIXES", "OUTPUT_SUFFIXES", "format_for", "split_suffix"]

FORMATS: dict[str, Format] = {
    ".jsonl": JSONL,
    ".jsonl.gz": JSONL_GZ,
    ".jsonl.zst": JSONL_ZST,
    ".json": JSON_ARRAY,
    ".parquet": PARQUET,
}

INPUT_SUFFIXES = tuple(FORMATS)
OUTPUT_SUFFIXES = tuple(s for s, f in FORMATS.items() if f.writable)


def split_suffix(path: Path) -> tuple[str, str]:
    """('data', '.jsonl.gz') for data.jsonl.gz: the longest known suffix wins."""
    for suffix in sorted(FORMATS, key=len, reverse=True):
        if path.name.endswith(suffix) and len(path.name) > len(suffix):
            return path.name[: -len(suffix)], suffix
    return path.stem, path.suffix


def format_for(path: Path, override: str | None = None) -> Format:
    """The format of `path` by its suffix, or the named one (e.g. '.parquet') when given."""
    suffix = override if override is not None else split_suffix(Path(path))[1]
    if suffix not in FORMATS:
        raise ValueError(f"unsupported file type '{suffix}' ({path}); supported: {', '.join(FORMATS)}")
    return FORMATS[suffix]
