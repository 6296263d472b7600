"""Readers and writers by file suffix: a reader streams Records, a writer writes parts then joins them.

Output is written in parts (each a complete file for a fixed range of input rows) and joined
into the final file at the end: that is what lets a killed run resume with identical bytes.
Imports only `core` (a row's errors).
"""

from __future__ import annotations

from pathlib import Path

from .base import AtomicFile, Format, Record
from .compressed import JSONL_GZ, JSONL_ZST
from .hf_folder import HF_FOLDER, data_files, is_dataset_folder
from .json_array import JSON_ARRAY
from .jsonl import JSONL
from .parquet import PARQUET

__all__ = [
    "AtomicFile", "Format", "Record", "FORMATS", "HF", "INPUT_SUFFIXES", "OUTPUT_FORMATS", "OUTPUT_SUFFIXES",
    "format_for", "identity", "is_dataset_folder", "name_suffix", "split_suffix",
]

FORMATS: dict[str, Format] = {
    ".jsonl": JSONL,
    ".jsonl.gz": JSONL_GZ,
    ".jsonl.zst": JSONL_ZST,
    ".json": JSON_ARRAY,
    ".parquet": PARQUET,
}

INPUT_SUFFIXES = tuple(FORMATS)
OUTPUT_SUFFIXES = tuple(s for s, f in FORMATS.items() if f.writable)

# A `save_to_disk` folder is known by its content, not by a suffix: it is not in FORMATS (a file
# named x.hf is no dataset), only a choice of --output-format.
HF = HF_FOLDER.suffix
OUTPUT_FORMATS = (*OUTPUT_SUFFIXES, HF)


def name_suffix(output_format: str) -> str:
    """What an output of this format adds to its name: '.jsonl' for JSON Lines, nothing for a folder."""
    return "" if output_format == HF else output_format


def split_suffix(path: Path) -> tuple[str, str]:
    """('data', '.jsonl.gz') for data.jsonl.gz: the longest known suffix wins."""
    for suffix in sorted(FORMATS, key=len, reverse=True):
        if path.name.endswith(suffix) and len(path.name) > len(suffix):
            return path.name[: -len(suffix)], suffix
    return path.stem, path.suffix


def format_for(path: Path, override: str | None = None) -> Format:
    """The format of `path` by its suffix, or the named one (e.g. '.parquet') when given.

    A dataset folder, or a path that is no file and has no known suffix (an output folder to be
    written), is a `save_to_disk` folder."""
    if override == HF or (override is None and is_dataset_folder(path)):
        return HF_FOLDER
    suffix = override if override is not None else split_suffix(Path(path))[1]
    if override is None and suffix not in FORMATS and not Path(path).is_file():
        return HF_FOLDER
    if suffix not in FORMATS:
        raise ValueError(f"unsupported file type '{suffix}' ({path}); supported: {', '.join(FORMATS)}")
    return FORMATS[suffix]


def identity(path: Path) -> tuple[int, int]:
    """(size, modification time in ns) of an input: for a dataset folder, its files' total and latest,
    since a folder's own size and time do not change when its files are rewritten."""
    if not is_dataset_folder(path):
        stat = Path(path).stat()
        return stat.st_size, stat.st_mtime_ns
    files = [Path(path) / "state.json", Path(path) / "dataset_info.json", *data_files(Path(path))]
    stats = [f.stat() for f in files if f.exists()]
    return sum(s.st_size for s in stats), max(s.st_mtime_ns for s in stats)
