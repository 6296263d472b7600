"""Hugging Face `datasets` folders, as `Dataset.save_to_disk` writes them and `load_from_disk` reads them.

A folder holding `state.json` and `dataset_info.json` is one input (the Arrow files it lists, in
order), detected by its content: it has no suffix. Reading streams the Arrow files' record batches
(memory-mapped, a few rows converted to Python at a time); Record.line is the 1-based row number
over the whole dataset. A folder with no known file suffix given as an output (or `--output-format
hf`) is written as one.

Writing: parts are Parquet files (ParquetFormat's, so columns are typed exactly as a `.parquet`
output's: `conversations` and `compression_metrics` of fixed types, the input's types kept); the
join conforms them to one schema, as the Parquet join does, and streams them into Arrow files of
at most MAX_SHARD_BYTES each (`data-00000-of-0000N.arrow`, named as `save_to_disk` names them),
then writes `dataset_info.json` (the features: the input's own where a column kept its Arrow type,
so e.g. a ClassLabel stays one; derived from the Arrow type otherwise) and `state.json`, whose
`_fingerprint` is a hash of the Arrow files: the same rows give the same folder, byte for byte.
The folder is built under a hidden temporary name beside the output and renamed into place; an
earlier dataset folder of the same name is replaced.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any, Iterator, Sequence

import pyarrow as pa

from .arrow_rows import batch_rows, to_table
from .base import Format, Record, temporary, write_json
from .parquet import PARQUET, conformed_row_groups, joined_schema

STATE = "state.json"
INFO = "dataset_info.json"
ROWS_PER_CHUNK = 64  # rows converted to Python at once (an Arrow batch may hold a thousand trajectories)
MAX_SHARD_BYTES = 500 << 20  # save_to_disk's default max_shard_size


def is_dataset_folder(path: str | Path) -> bool:
    """A folder written by `save_to_disk` (one Dataset, not a DatasetDict's parent folder)."""
    path = Path(path)
    return (path / STATE).is_file() and (path / INFO).is_file()


def data_files(folder: Path) -> list[Path]:
    """The Arrow files of a dataset folder, in order, as its state.json lists them."""
    try:
        state = json.loads((folder / STATE).read_text(encoding="utf-8"))
        files = [folder / entry["filename"] for entry in state["_data_files"]]
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{folder}: {STATE} does not list the dataset's data files ({exc})") from exc
    if state.get("_indices_files"):
        raise ValueError(f"{folder}: datasets saved with an indices mapping are not supported; save_to_disk a flattened copy")
    return files


def _stream(path: Path) -> pa.ipc.RecordBatchStreamReader:
    try:
        return pa.ipc.open_stream(pa.memory_map(str(path)))
    except (pa.ArrowException, OSError) as exc:
        if isinstance(exc, FileNotFoundError):
            raise ValueError(f"{path}: missing (listed in {STATE})") from None
        raise ValueError(f"{path}: not a readable Arrow file: {exc}") from exc


class HfFolderFormat(Format):
    """A `save_to_disk` folder; `suffix` names its part files and the `--output-format hf` choice."""

    suffix = ".hf"

    def read(self, path: Path) -> Iterator[Record]:
        source, number = str(path), 0
        for file in data_files(Path(path)):
            with _stream(file) as reader:
                while True:
                    try:
                        batch = reader.read_next_batch()
                    except StopIteration:
                        break
                    except (pa.ArrowException, OSError) as exc:
                        raise ValueError(f"{file}: corrupt Arrow data after row {number}: {exc}") from exc
                    for start in range(0, batch.num_rows, ROWS_PER_CHUNK):
                        for row in batch_rows(batch.slice(start, ROWS_PER_CHUNK)):
                            number += 1
                            yield Record(source, number, None, row=row)

    def schema(self, path: Path) -> pa.Schema | None:
        files = data_files(Path(path))
        if not files:
            return None
        with _stream(files[0]) as reader:
            return reader.schema

    def write_part(self, path: Path, rows: Sequence[dict[str, Any]], schema: Any = None) -> None:
        PARQUET.write_part(path, rows, schema)

    def join(self, parts: Sequence[Path], dest: Path, schema: pa.Schema | None = None) -> None:
        if parts:
            target = joined_schema(parts, schema)
            tables: Iterator[pa.Table] = conformed_row_groups(parts, target)
        else:
            empty = to_table([], schema)
            target, tables = empty.schema, iter([empty])
        features = _features(target, schema)
        tmp = temporary(dest)
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        try:
            files = _write_shards(tmp, target.with_metadata(_metadata(target, features)), tables)
            info = {"citation": "", "description": "", "features": features.to_dict(), "homepage": "", "license": ""}
            write_json(tmp / INFO, info, indent=2)
            write_json(tmp / STATE, _state(tmp, files), indent=2)
            _replace(tmp, dest)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise


def _features(target: pa.Schema, given: pa.Schema | None):
    """The `datasets` features of `target`: the input's own for columns that kept their Arrow type."""
    from datasets import Features

    features = Features.from_arrow_schema(target.remove_metadata())
    known = _given_features(given)
    for name, feature in known.items():
        if name in features and Features({name: feature}).arrow_schema.field(name).type.equals(target.field(name).type):
            features[name] = feature
    return features


def _given_features(schema: pa.Schema | None) -> dict[str, Any]:
    if schema is None or not schema.metadata or b"huggingface" not in schema.metadata:
        return {}
    from datasets import Features

    try:
        return dict(Features.from_arrow_schema(schema))  # reads the features kept in the metadata
    except (ValueError, TypeError, KeyError):
        return {}


def _metadata(target: pa.Schema, features) -> dict[bytes, bytes]:
    kept = {k: v for k, v in (target.metadata or {}).items() if k != b"huggingface"}
    return {**kept, b"huggingface": json.dumps({"info": {"features": features.to_dict()}}).encode()}


def _write_shards(folder: Path, schema: pa.Schema, tables: Iterator[pa.Table]) -> list[str]:
    """The tables as Arrow stream files of at most MAX_SHARD_BYTES (at least one file); their names."""
    written: list[Path] = []
    writer, size = None, 0
    for table in tables:
        if writer is None or size + table.nbytes > MAX_SHARD_BYTES and size:
            if writer is not None:
                writer.close()
            written.append(folder / f"shard-{len(written):05d}.tmp")
            writer, size = pa.ipc.new_stream(str(written[-1]), schema), 0
        writer.write_table(table)
        size += table.nbytes
    if writer is None:  # no rows at all: one file with the schema
        written.append(folder / "shard-00000.tmp")
        writer = pa.ipc.new_stream(str(written[-1]), schema)
    writer.close()
    names = []
    for index, path in enumerate(written):
        names.append(f"data-{index:05d}-of-{len(written):05d}.arrow")
        path.rename(folder / names[-1])
    return names


def _state(folder: Path, files: list[str]) -> dict[str, Any]:
    return {
        "_data_files": [{"filename": name} for name in files],
        "_fingerprint": _fingerprint(folder, files),
        "_format_columns": None,
        "_format_kwargs": {},
        "_format_type": None,
        "_output_all_columns": False,
        "_split": None,
    }


def _fingerprint(folder: Path, files: list[str]) -> str:
    # datasets wants a 16-hex fingerprint; a hash of the data keeps the folder deterministic.
    digest = hashlib.sha256()
    for name in files:
        with open(folder / name, "rb") as f:
            while chunk := f.read(1 << 20):
                digest.update(chunk)
    return digest.hexdigest()[:16]


def _replace(tmp: Path, dest: Path) -> None:
    """`tmp` renamed to `dest`; an earlier dataset folder (or empty folder) there is removed first."""
    if dest.exists():
        if not (is_dataset_folder(dest) or (dest.is_dir() and not any(dest.iterdir()))):
            raise ValueError(f"{dest}: exists and is not a dataset folder; refusing to replace it")
        old = dest.with_name(f".{dest.name}.trajcomp-old")
        shutil.rmtree(old, ignore_errors=True)
        os.replace(dest, old)
        os.replace(tmp, dest)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, dest)


HF_FOLDER = HfFolderFormat()
