"""Ray Data engine: the row core on a pool of Ray actors, for datasets that need many machines.

`compress(ds, config)` maps a Ray Dataset; `compress_files(...)` is `trajcomp compress --engine ray`:
Ray read tasks -> actors running `TrajectoryCompressor.compress_rows` -> Ray write tasks writing
part files with trajcomp's own formats -> a report. This is the only module that imports ray
(the `[ray]` extra).
"""

from __future__ import annotations

import asyncio
import io
import logging
import os
import pickle
import re
import shutil
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

import pyarrow as pa
import pyarrow.parquet as pq
import ray
from ray.data.datasource import Datasink
from ray.data.datasource.file_based_datasource import FileBasedDatasource

from . import __version__
from .compressor import RowResult, TrajectoryCompressor
from .config import CompressionConfig, ConfigError, as_config
from .formats import Format, Record, format_for, split_suffix
from .formats.base import write_json
from .formats.jsonl import JSONL, parse_line
from .formats.parquet import BATCH_SIZE, _rows, to_table
from .hf import METRICS_COLUMN_TYPE, metrics_value
from .metrics import Aggregate
from .paths import expand_inputs
from .pipeline import Rejected, Written, routed
from .report import Processing, Report, TokenizerInfo, from_aggregate
from .tokens import TokenCounter

SUFFIXES = (".jsonl", ".parquet")  # what Ray reads and writes here
ACTOR_CPUS = 0.5  # a whole CPU per actor starves Ray's read and write tasks on small machines: the run hangs

# Helper columns of the CLI's dataset: which input file and line a row is, and its pickled result.
FILE, LINE, RAW, RESULT = "__trajcomp_file", "__trajcomp_line", "__trajcomp_raw", "__trajcomp_result"


def _absolute(config: CompressionConfig) -> CompressionConfig:
    """Local paths made absolute: Ray's workers do not run in the driver's working directory."""
    changes = {}
    for name in ("tokenizer_name", "prompt_file", "chat_template", "summary_tokenizer"):
        value = getattr(config, name)
        if value and Path(value).exists():
            changes[name] = str(Path(value).resolve())
    return config.replace(**changes)


# ---- the actors ---------------------------------------------------------------------------------


class _Actor:
    """Per actor, opened once: the tokenizer, one summarizer session and the event loop it lives on."""

    def __init__(self, config: CompressionConfig):
        self.loop = asyncio.new_event_loop()
        self.compressor = TrajectoryCompressor(config)
        self.loop.run_until_complete(self.compressor.start())

    def compress(self, rows: list[Any]) -> list[RowResult]:
        return self.loop.run_until_complete(self.compressor.compress_rows(rows))

    def __del__(self) -> None:  # Ray Data deletes the UDF when the actor pool shuts down
        loop = getattr(self, "loop", None)
        if loop is not None and not loop.is_closed():
            loop.run_until_complete(self.compressor.close())
            loop.close()


class _Columns(_Actor):
    """`compress`'s UDF: columns in, the same columns compressed (rejected rows unchanged) plus metrics."""

    def __init__(self, config: CompressionConfig, metrics_column: str | None):
        super().__init__(config)
        self.metrics_column = metrics_column

    def __call__(self, batch: pa.Table) -> pa.Table:
        rows = _rows(batch)  # as the local Parquet reader reads them (nanosecond times included)
        results = self.compress(rows)
        table = to_table([row if r.rejected else r.row for r, row in zip(results, rows)], batch.schema)
        if self.metrics_column is None:
            return table
        metrics = pa.array([metrics_value(r) for r in results], METRICS_COLUMN_TYPE)
        if self.metrics_column in table.column_names:
            table = table.drop_columns([self.metrics_column])
        return table.append_column(pa.field(self.metrics_column, METRICS_COLUMN_TYPE), metrics)


class _Records(_Actor):
    """The CLI's UDF: input records in (JSONL lines or Parquet rows), pickled Written/Rejected out."""

    def __init__(self, config: CompressionConfig, sources: list[str]):
        super().__init__(config)
        self.sources = sources

    def __call__(self, batch: pa.Table) -> pa.Table:
        records = self.records(batch)
        results = iter(self.compress([r.row for r in records if r.error is None]))
        out = [Rejected(r, r.error.reason, r.error.detail) if r.error else routed(r, next(results)) for r in records]
        return pa.table({FILE: batch[FILE], LINE: batch[LINE], RESULT: pa.array(map(_shipped, out), pa.binary())})

    def records(self, batch: pa.Table) -> list[Record]:
        """The batch's rows as the local engine reads them: JSONL lines parsed here, Parquet rows as they are."""
        keys = zip(batch[FILE].to_pylist(), batch[LINE].to_pylist())
        if RAW in batch.column_names:
            return [parse_line(self.sources[f], n, raw) for (f, n), raw in zip(keys, batch[RAW].to_pylist())]
        rows = _rows(batch.drop_columns([FILE, LINE]))
        return [Record(self.sources[f], n, None, row=row) for (f, n), row in zip(keys, rows)]


@dataclass(frozen=True)
class _Reject:
    """A rejected row as a write task needs it (a Record's RowError does not pickle)."""

    row: dict[str, Any]  # the rejects file's row
    reason: str
    metrics: Any


def _shipped(result: Written | Rejected) -> bytes:
    if isinstance(result, Rejected):
        result = _Reject(result.to_row(), result.reason, result.metrics)
    return pickle.dumps(result)


def _map(ds: "ray.data.Dataset", udf: type, args: tuple, concurrency: int, batch_size: int) -> "ray.data.Dataset":
    # batch_format="pyarrow": nested columns (conversations) as numpy objects do not write back as Parquet.
    return ds.map_batches(
        udf, fn_constructor_args=args, batch_format="pyarrow", batch_size=batch_size,
        compute=ray.data.ActorPoolStrategy(size=concurrency), num_cpus=ACTOR_CPUS,
    )


def compress(
    ds: "ray.data.Dataset",
    config: CompressionConfig | Mapping[str, Any] | str | os.PathLike,
    *,
    concurrency: int = 2,
    batch_size: int = 64,
    metrics_column: str | None = "compression",
) -> "ray.data.Dataset":
    """`ds` with every row compressed by `concurrency` actors; rejected rows stay as they were, their
    `metrics_column` saying `status: rejected`, `reason` and `detail` (None: no metrics column)."""
    cfg = _absolute(as_config(config))
    return _map(ds, _Columns, (cfg, metrics_column), concurrency, batch_size)


# ---- reading and writing files ------------------------------------------------------------------


class _Inputs(FileBasedDatasource):
    """JSONL lines (as bytes, parsed by the actors as the local engine parses them) or Parquet rows,
    each with its input file's index and its line (row) number, for the rejects file and the order."""

    def __init__(self, paths: list[str]):
        super().__init__(paths, file_extensions=None)
        self.index = {os.path.abspath(p): i for i, p in enumerate(paths)}

    def _open_input_source(self, filesystem, path: str, **open_args) -> pa.NativeFile:
        if path.endswith(".parquet"):  # Parquet needs random access
            return filesystem.open_input_file(path)
        return super()._open_input_source(filesystem, path, **open_args)

    def _read_stream(self, f: pa.NativeFile, path: str) -> Iterator[pa.Table]:
        file = self.index[os.path.abspath(path)]
        if path.endswith(".parquet"):
            yield from _parquet_blocks(f, file)
        else:
            yield from _line_blocks(f, file)


def _numbered(table: pa.Table, file: int, lines: Iterable[int]) -> pa.Table:
    files = pa.array([file] * table.num_rows, pa.int64())
    return table.append_column(FILE, files).append_column(LINE, pa.array(lines, pa.int64()))


def _parquet_blocks(f: pa.NativeFile, file: int) -> Iterator[pa.Table]:
    line = 1
    for batch in pq.ParquetFile(f).iter_batches(batch_size=BATCH_SIZE):
        yield _numbered(pa.Table.from_batches([batch]), file, range(line, line + batch.num_rows))
        line += batch.num_rows


def _line_blocks(f: pa.NativeFile, file: int, max_bytes: int = 32 << 20) -> Iterator[pa.Table]:
    lines: list[int] = []
    raws: list[bytes] = []
    size = 0
    for number, data in enumerate(io.BufferedReader(f), 1):  # a stream NativeFile has no readline
        if not data.strip():  # blank lines are not rows (as in the local engine)
            continue
        lines.append(number)
        raws.append(data)
        size += len(data)
        if size >= max_bytes or len(raws) >= BATCH_SIZE:
            yield _numbered(pa.table({RAW: pa.array(raws, pa.binary())}), file, lines)
            lines, raws, size = [], [], 0
    if raws:
        yield _numbered(pa.table({RAW: pa.array(raws, pa.binary())}), file, lines)


@dataclass(frozen=True)
class _Part:
    """What one write task did: its part file (None if all its rows were rejected) and its rows' share."""

    path: str | None
    first: tuple[int, int]
    last: tuple[int, int]
    aggregate: dict[str, Any]
    rejects: list[dict[str, Any]]


class _Parts(Datasink):
    """Each write task writes its rows as one part file in trajcomp's formats (the same bytes per row as
    the local engine) and hands its rejects and metrics back to the driver."""

    def __init__(self, folder: Path, fmt: Format, schema: pa.Schema | None):
        self.folder, self.fmt, self.schema = folder, fmt, schema
        self.parts: list[_Part] = []

    def write(self, blocks: Iterable[pa.Table], ctx) -> _Part | None:
        aggregate, rejects, keys, part = Aggregate(), [], [], None
        path = self.folder / f"part-{ctx.task_idx:05d}{self.fmt.suffix}"
        try:
            for block in blocks:
                keys += zip(block[FILE].to_pylist(), block[LINE].to_pylist())
                for result in map(pickle.loads, block[RESULT].to_pylist()):
                    if isinstance(result, Written):
                        part = part or self.fmt.open_part(path, self.schema)
                        part.write(result.row)
                        aggregate.add(result.metrics, source=result.source, line=result.line)
                    else:
                        rejects.append(result.row)
                        aggregate.add_reject(result.reason, result.metrics, result.row["source"], result.row["line"])
        except BaseException:
            if part is not None:
                part.abort()
            raise
        if part is not None:
            part.close()
        if not keys:
            return None
        return _Part(str(path) if part else None, min(keys), max(keys), aggregate.to_state(), rejects)

    def on_write_complete(self, write_result) -> None:
        self.parts = sorted((p for p in write_result.write_returns if p is not None), key=lambda p: p.first)


class RayRunError(RuntimeError):
    """The Ray run failed (a read, an actor, a write): one line for the CLI, exit 1; no output was placed."""


# ---- the CLI's run ------------------------------------------------------------------------------


@dataclass(frozen=True)
class RayPaths:
    """Where a Ray run reads and writes: `output` is one file, or (`folder`) a folder of part files."""

    inputs: list[Path]
    output: Path
    folder: bool
    fmt: Format
    report: Path
    rejects: Path
    skipped: tuple[Path, ...] = ()

    @property
    def staging(self) -> Path:
        """Parts are written here and moved into place only when the run succeeded."""
        return self.output.with_name(f".{self.output.name}.trajcomp-ray")


def ray_paths(inputs: list[str], output: Path | None, config: CompressionConfig, output_format: str | None) -> RayPaths:
    """The paths of a Ray run; what cannot work raises ConfigError (exit 2, nothing written)."""
    found = expand_inputs(inputs, config.output_suffix)
    files = [f for f, _ in found.pairs]
    for f in files:
        if split_suffix(f)[1] not in SUFFIXES:
            raise ConfigError(f"--engine ray reads {' and '.join(SUFFIXES)} files, not {f}")
    if output is None:
        raise ConfigError("--engine ray needs -o: a .jsonl or .parquet file, or a folder for Ray's part files")
    stem, suffix = split_suffix(output)
    if suffix:
        if suffix not in SUFFIXES or (output_format and output_format != suffix):
            raise ConfigError(f"--engine ray writes {' or '.join(SUFFIXES)} files or a folder, not {output}")
        if any(output.resolve() == f.resolve() for f in files):
            raise ConfigError(f"the output {output} would overwrite an input")
        return RayPaths(files, output, False, format_for(output), output.with_name(stem + "_metrics.json"),
                        output.with_name(stem + "_rejects.jsonl"), found.skipped)
    fmt = output_format or split_suffix(files[0])[1]
    if fmt not in SUFFIXES:
        raise ConfigError(f"--engine ray writes {' or '.join(SUFFIXES)}, not {fmt}")
    if output.exists() and any(output.iterdir()):  # Ray's part files would mix with what is there
        raise ConfigError(f"the output folder {output} is not empty; --engine ray writes into a new or empty folder")
    for text in inputs:
        if Path(text).is_dir() and output.resolve().is_relative_to(Path(text).resolve()):
            raise ConfigError(f"the output folder {output} must not be inside the input folder {text}")
    return RayPaths(files, output, True, format_for(Path("x" + fmt)), output / config.metrics_output_file,
                    output / "rejects.jsonl", found.skipped)


def _schema(paths: RayPaths) -> pa.Schema | None:
    """The Parquet inputs' columns, for Parquet output (None: types inferred from the rows, as locally)."""
    if paths.fmt.suffix != ".parquet" or any(split_suffix(f)[1] != ".parquet" for f in paths.inputs):
        return None
    try:
        return pa.unify_schemas([pq.read_schema(f) for f in paths.inputs], promote_options="permissive")
    except (pa.ArrowException, ValueError):
        return None


def compress_files(
    inputs: list[str],
    output: Path | None,
    config: CompressionConfig,
    *,
    output_format: str | None = None,
    address: str | None = None,
    concurrency: int = 2,
    quiet: bool = False,
    counter: TokenCounter | None = None,
) -> tuple[dict[str, Any], RayPaths]:
    """`trajcomp compress --engine ray`: rows and rejects written, the report written and returned."""
    paths = ray_paths(inputs, output, config, output_format)
    config = _absolute(config).replace(cache=False)  # actors on many machines share no SQLite file: the report says so
    counter = counter or TokenCounter.for_config(config)
    asyncio.run(_preflight(TrajectoryCompressor(config, counter)))  # a dead endpoint: one line, before Ray starts
    started, clock = datetime.now(timezone.utc), time.monotonic()
    if not ray.is_initialized():
        ray.init(address=address, log_to_driver=not quiet, logging_level=logging.WARNING if quiet else logging.INFO)
    if quiet:  # Ray Data reports every stage on stderr
        logging.getLogger("ray.data").setLevel(logging.WARNING)
    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = not quiet
    context.execution_options.preserve_order = not paths.folder  # one file: rows in input order
    shutil.rmtree(paths.staging, ignore_errors=True)  # a failed run's parts; never the output
    paths.staging.mkdir(parents=True)
    try:
        schema = _schema(paths)  # reads every Parquet input's footer: once
        sink = _Parts(paths.staging, paths.fmt, schema)
        ds = ray.data.read_datasource(_Inputs([str(f.resolve()) for f in paths.inputs]))
        ds = _map(ds, _Records, (config, [str(f) for f in paths.inputs]), concurrency, 64)
        try:
            ds.write_datasink(sink)
        except ray.exceptions.RayError as exc:
            raise RayRunError(f"the Ray run failed: {_cause(exc)}") from exc
        aggregate = _place(sink.parts, paths, schema)
    finally:
        shutil.rmtree(paths.staging, ignore_errors=True)
    report = _report(aggregate, paths, config, TokenizerInfo(**vars(counter.info)), started, time.monotonic() - clock, concurrency)
    write_json(paths.report, report.to_dict(), indent=2)
    return report, paths


async def _preflight(compressor: TrajectoryCompressor) -> None:
    try:
        await compressor.start()
    finally:
        await compressor.close()


def _cause(exc: BaseException) -> str:
    """The error a Ray failure wraps, on one line (Ray's own message adds remote tracebacks and advice)."""
    while getattr(exc, "cause", None) is not None and exc.cause is not exc:
        exc = exc.cause
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    raised = [line for line in lines if re.match(r"[\w.]+(Error|Exception): ", line)]
    return raised[-1] if raised else f"{type(exc).__name__}: {lines[0] if lines else ''}"


def _place(parts: list[_Part], paths: RayPaths, schema: pa.Schema | None) -> Aggregate:
    """Rows into place (the folder of parts, or the parts joined in input order), the rejects file, the sums."""
    aggregate = Aggregate()
    for part in parts:
        aggregate.merge(part.aggregate)
    for before, after in zip(parts, parts[1:]):
        if not paths.folder and before.last >= after.first:  # preserve_order (one file) keeps parts in input order: check it
            raise RuntimeError(f"Ray returned parts out of input order ({before.last} >= {after.first})")
    written = [Path(p.path) for p in parts if p.path]
    if paths.folder:
        paths.output.mkdir(parents=True, exist_ok=True)
        for part in written:
            os.replace(part, paths.output / part.name)
    else:
        paths.fmt.join(written, paths.output, schema)
    rejects = [row for part in parts for row in part.rejects]
    if rejects:
        JSONL.write_part(paths.rejects, rejects)
    else:
        paths.rejects.unlink(missing_ok=True)
    return aggregate


def _report(aggregate: Aggregate, paths: RayPaths, config: CompressionConfig, tokenizer: TokenizerInfo,
            started: datetime, seconds: float, concurrency: int) -> Report:
    """The local run's kind of report, from the rows' metrics; `processing` says what this engine knows."""
    processing = Processing(
        trajcomp_version=__version__,
        started_at=started.isoformat(timespec="seconds"),
        duration_seconds=round(seconds, 3),
        rows_per_second=round(aggregate.rows_read / seconds, 2) if seconds > 0 else 0.0,
        inputs=[str(f) for f in paths.inputs],
        outputs=[str(paths.output)],
        rejects_file=str(paths.rejects) if aggregate.reject_reasons else None,
        skipped_files=[str(p) for p in paths.skipped],
        engine="ray",
        ray_actors=concurrency,
    )
    # The summarizer's own figures (latency, usage) stay inside the actors.
    return from_aggregate(aggregate, summarizer=config.summarizer, summarizer_stats={}, processing=processing,
                          tokenizer=tokenizer, config=config.to_sections())
