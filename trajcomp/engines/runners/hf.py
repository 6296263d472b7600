"""Hugging Face `datasets` engine: a Dataset or IterableDataset through the row core, batch by batch.

`compress_dataset` maps `map_function(config)` over the dataset with `batched=True`. That function
is a small picklable object holding only the config's sections, so `datasets` hashes it the same
in every run (its cache works) and sends it to `num_proc` workers, forked or spawned. In each
process the first batch opens what the process keeps: one event loop in a daemon thread (so the
function also works where a loop is already running, as in Jupyter) and, per config, one started
TrajectoryCompressor (tokenizer loaded once, one summarizer session, calls in flight bounded by
`processing.max_concurrent_requests`). A forked child opens its own.

Per-row metrics go to one place: to `metrics_column` (every row, rejected ones included, one fixed
struct type), and then not into the row; with `metrics_column=None`, rows are exactly what the CLI
writes, `compression_metrics` included when `metrics.per_trajectory` is on.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import threading
from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from ...core.compressor import RowResult, TrajectoryCompressor
from ...core.config import CompressionConfig, as_config
from ...core.metrics import Outcome
from ...core.counting.tokens import TokenCounter
from ...formats.arrow_rows import METRICS, METRICS_TYPE
from .workers import build_core

__all__ = ["BatchFunction", "RowRejected", "SummariesFailing", "compress_dataset", "map_function"]

ON_REJECT = ("keep", "raise")
TURN_COLUMNS = ("conversations", "messages")

# The metrics column: a row's metrics (all null for a row rejected before counting) and why it was rejected.
METRICS_COLUMN_TYPE = pa.struct([*METRICS_TYPE, pa.field("reason", pa.string()), pa.field("detail", pa.string())])


class RowRejected(ValueError):
    """A row the CLI would send to the rejects file, met with on_reject='raise'."""

    def __init__(self, message: str, reason: str = "", detail: str = ""):
        super().__init__(message)
        self.reason, self.detail = reason, detail

    def __reduce__(self):  # raised in a num_proc worker, it crosses to the parent pickled
        return type(self), (str(self), self.reason, self.detail)


class SummariesFailing(RuntimeError):
    """`processing.max_consecutive_failures` summaries in a row failed: the endpoint is likely down."""


def _feature(arrow_type: pa.DataType):
    from datasets import Features

    return Features.from_arrow_schema(pa.schema([pa.field("x", arrow_type)]))["x"]


class BatchFunction:
    """`fn(batch[, indices])` for `Dataset.map(fn, batched=True)`: a dict of columns in, the rows out (with
    compression.segments an input row gives several, in order, each with its input row's metrics)."""

    def __init__(self, config, metrics_column: str | None = "compression", on_reject: str = "keep"):
        if on_reject not in ON_REJECT:
            raise ValueError(f"on_reject must be one of {', '.join(ON_REJECT)}, got {on_reject!r}")
        if metrics_column in TURN_COLUMNS:
            raise ValueError(f"metrics_column {metrics_column!r} would replace the rows' turns")
        self.sections = as_config(config).to_sections()  # plain data: pickles and hashes the same everywhere
        self.metrics_column = metrics_column
        self.on_reject = on_reject

    def config(self) -> CompressionConfig:
        config = as_config(self.sections)
        # With a metrics column the row keeps no second copy of its metrics.
        return config.replace(metrics_per_trajectory=False) if self.metrics_column else config

    def features(self, features):
        """The output's `datasets.Features` for an input with `features` (None when unknown).

        Pass them to `Dataset.map(features=...)`: otherwise `datasets` types each new column from
        the first batch, and a field null in all of its rows (no row compressed yet) fails later."""
        if features is None:
            return None
        from datasets import Features

        out = Features(features)
        if self.config().segments:
            out = _with_segment_fields(out, self.config())
        if self.metrics_column is not None:
            out[self.metrics_column] = _feature(METRICS_COLUMN_TYPE)
        elif self.config().metrics_per_trajectory:
            out[METRICS] = _feature(METRICS_TYPE)
        return out

    def __call__(self, batch: Mapping[str, list], indices: list[int] | None = None) -> dict[str, list]:
        names = list(batch.keys())
        columns = [batch[name] for name in names]
        rows = [dict(zip(names, values)) for values in zip(*columns)]
        results = _process_worker().compress(self.config(), rows)
        out_rows, metrics = [], []
        for i, (row, result) in enumerate(zip(rows, results)):
            if result.rejected and self.on_reject == "raise":
                where = f"row {indices[i]}" if indices is not None else f"row {i} of its batch"
                raise RowRejected(f"{where} rejected: {result.reason}: {result.detail}", result.reason, result.detail)
            written = [row] if result.rejected else [typed_row(out) for out in result.rows]
            out_rows.extend(written)
            metrics.extend(metrics_value(result, k) for k in range(len(written)))
        for row in out_rows:  # columns the core adds (compression_metrics), in order of appearance
            names.extend(name for name in row if name not in names)
        out = {name: [row.get(name) for row in out_rows] for name in names}
        if self.metrics_column is not None:
            out[self.metrics_column] = metrics
        return out


def _with_segment_fields(features, config: CompressionConfig):
    """The features with what compression.segments adds: a turn's mark (ShareGPT's train field, OpenAI's
    weight) and each row's segment field ({"index", "count"})."""
    from datasets import Features

    marks = {"conversations": pa.field(config.train_field, pa.bool_()), "messages": pa.field("weight", pa.int64())}
    fields = []
    for f in features.arrow_schema:
        mark, t = marks.get(f.name), f.type
        if mark is not None and pa.types.is_list(t) and pa.types.is_struct(t.value_type) \
                and mark.name not in t.value_type.names:
            f = f.with_type(pa.list_(pa.struct([*t.value_type, mark])))
        fields.append(f)
    segment = pa.struct([pa.field("index", pa.int64()), pa.field("count", pa.int64())])
    return Features.from_arrow_schema(pa.schema([*fields, pa.field(config.segment_field, segment)]))


def metrics_value(result: RowResult, k: int = 0) -> dict[str, Any]:
    """Output row `k`'s value in the metrics column: its own RowMetrics fields (with segments, its length
    against the target, as the CLI's rows carry them), status, and reason/detail if rejected."""
    value = dict.fromkeys(METRICS_COLUMN_TYPE.names)
    metrics = result.metrics
    if metrics is not None and not result.rejected and k < len(metrics.output_rows):
        metrics = metrics.output_rows[k]
    if metrics is not None:
        value.update(_typed(metrics.to_dict(), value))
    if result.rejected:
        value.update(status="rejected", reason=result.reason, detail=result.detail)
    return value


def typed_row(row: dict[str, Any]) -> dict[str, Any]:
    """The row with its compression_metrics (when it has them) held to METRICS_TYPE."""
    if not isinstance(row.get(METRICS), dict):
        return row
    return {**row, METRICS: _typed(row[METRICS], METRICS_TYPE.names)}


def _typed(metrics: dict[str, Any], names) -> dict[str, Any]:
    # A column's type is fixed (arrow_rows.METRICS_TYPE), as in Parquet outputs: the figures only some
    # runs have (--prune's, the failed checks) are in JSON outputs and the report.
    return {k: v for k, v in metrics.items() if k in names}


def map_function(config, *, metrics_column: str | None = "compression", on_reject: str = "keep") -> BatchFunction:
    """The batched function for `Dataset.map(fn, batched=True, features=fn.features(ds.features))`."""
    return BatchFunction(config, metrics_column, on_reject)


def compress_dataset(dataset, config, *, num_proc: int | None = None, metrics_column: str | None = "compression",
                     on_reject: str = "keep", **map_kwargs):
    """A Dataset compressed into a Dataset (through `Dataset.map`, cached), an IterableDataset into a lazy one.

    `config`: a YAML path, a mapping in the YAML's section layout, or a CompressionConfig.
    `map_kwargs` go to `map` (batch_size, desc, load_from_cache_file, ...)."""
    import datasets

    fn = map_function(config, metrics_column=metrics_column, on_reject=on_reject)
    if isinstance(dataset, (datasets.DatasetDict, datasets.IterableDatasetDict)):
        return type(dataset)({
            split: compress_dataset(part, config, num_proc=num_proc, metrics_column=metrics_column,
                                    on_reject=on_reject, **map_kwargs)
            for split, part in dataset.items()
        })
    kwargs = dict(batched=True, with_indices=True, features=fn.features(dataset.features), **map_kwargs)
    if isinstance(dataset, datasets.IterableDataset):
        if num_proc is not None:
            raise ValueError("num_proc applies to a Dataset; an IterableDataset is compressed as it is read")
        return dataset.map(fn, **kwargs)
    if isinstance(dataset, datasets.Dataset):
        return dataset.map(fn, num_proc=num_proc, **kwargs)
    raise TypeError(f"expected a datasets.Dataset or IterableDataset, got {type(dataset).__name__}")


class _Worker:
    """What one process keeps: an event loop in a daemon thread, and a started compressor per config."""

    def __init__(self):
        self.pid = os.getpid()
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, name="trajcomp-hf-loop", daemon=True).start()
        self.lock = threading.Lock()
        self.compressors: dict[str, TrajectoryCompressor] = {}
        self.failures: dict[str, int] = {}  # summaries failed in a row, per config
        atexit.register(self.close)

    def _run(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def compress(self, config: CompressionConfig, rows: list[dict[str, Any]]) -> list[RowResult]:
        key = repr(config)
        with self.lock:  # the first batch of each config opens its compressor, once
            if key not in self.compressors:
                self.compressors[key] = self._run(_started(config))
        results = self._run(self.compressors[key].compress_rows(rows))
        self._watch(key, results, config.max_consecutive_failures)
        return results

    def _watch(self, key: str, results: list[RowResult], limit: int) -> None:
        """Stop the map (nothing of it is cached) when summaries keep failing: the endpoint is likely down."""
        for result in results:
            outcome = result.metrics.outcome if result.metrics is not None else None
            if outcome is Outcome.COMPRESSED:
                self.failures[key] = 0
            elif outcome is Outcome.FAILED:
                self.failures[key] = self.failures.get(key, 0) + 1
                if limit and self.failures[key] >= limit:
                    self.failures[key] = 0
                    raise SummariesFailing(f"{limit} summaries in a row failed (last: {result.metrics.error}); stopped")

    def close(self) -> None:
        if os.getpid() != self.pid:  # a forked child's copy: the loop thread is the parent's
            return
        for compressor in self.compressors.values():
            try:
                self._run(asyncio.wait_for(compressor.close(), 10))
            except Exception:  # closing at exit: nothing left to save
                pass
        self.loop.call_soon_threadsafe(self.loop.stop)


def core(config: CompressionConfig) -> TrajectoryCompressor:
    """A row core for one process: its summarizer behind the shared cache when `summarization.cache_dir` is set."""
    return build_core(config, TokenCounter.for_config(config), config.cache_dir)


async def _started(config: CompressionConfig) -> TrajectoryCompressor:
    compressor = core(config)
    await compressor.start()  # the summarizer's session and preflight, once per process
    return compressor


_WORKER: _Worker | None = None
_WORKER_LOCK = threading.Lock()


def _process_worker() -> _Worker:
    global _WORKER
    with _WORKER_LOCK:
        if _WORKER is None or _WORKER.pid != os.getpid():
            _WORKER = _Worker()
        return _WORKER


def _after_fork() -> None:
    # The parent's lock may have been held by another thread at the fork: the child starts afresh.
    global _WORKER_LOCK
    _WORKER_LOCK = threading.Lock()


os.register_at_fork(after_in_child=_after_fork)
