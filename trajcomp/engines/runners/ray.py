"""Ray engine: the row core on Ray actors, for runs that need many machines (the `[ray]` extra).

`compress(ds, config)` maps a Ray Dataset (Ray Data reads and writes, actors compress).
`RayPool` is `trajcomp compress --engine ray`: the local engine's run (order, checkpoints, resume,
the report) with its rows compressed by actors spread over the cluster's nodes instead of by local
worker processes. Where every actor reads the input and the work folder as the driver does (shared
storage; always on one machine), actors take whole parts (part_work.py): each reads its part of the
input, writes the part's files and hands back only its figures; otherwise rows go one by one
through the driver. This is the only module that imports ray.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import socket
from pathlib import Path
from typing import Any, Mapping

import pyarrow as pa
import ray

from ...core.compressor import RowResult, TrajectoryCompressor
from ...core.config import CompressionConfig, ConfigError, as_config
from ...core.summary.redact import one_line
from ...core.counting.tokens import TokenCounter
from ...formats import identity
from ...formats.arrow_rows import batch_rows, to_table
from ..flow.progress import warn
from ..parts.store import Store, ThroughStore, reachable
from ..parts.work import Asks, perform
from ..storage.remote import is_uri
from .hf import METRICS_COLUMN_TYPE, core, metrics_value
from .together import Together
from .workers import WorkerDied, build_core, shares

# Actors ask for part of a CPU: a whole one each leaves none for Ray Data's read and write tasks
# (`compress`) and, on nodes of one CPU, places one actor a node at most.
ACTOR_CPUS = 0.5
# A lost actor (its process killed, its node gone) is restarted and its calls retried this many times.
ACTOR_RESTARTS = 3
CONNECT_SECONDS = 10.0  # to reach --ray-address before Ray is asked to join it
STOP_SECONDS = 10.0  # an actor's time to close its summarizer session and hand back its figures


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
        self.compressor = core(config)
        self.loop.run_until_complete(self.compressor.start())

    def compress(self, rows: list[Any]) -> list[RowResult]:
        return self.loop.run_until_complete(self.compressor.compress_rows(rows))

    def __del__(self) -> None:  # Ray Data deletes the UDF when the actor pool shuts down
        loop = getattr(self, "loop", None)
        if loop is not None and not loop.is_closed():
            loop.run_until_complete(self.compressor.close())
            loop.close()


class _Columns(_Actor):
    """`compress`'s UDF: columns in, the rows compressed (rejected rows unchanged; with compression.segments
    an input row gives several, in order, each with its input row's metrics) plus metrics."""

    def __init__(self, config: CompressionConfig, metrics_column: str | None):
        super().__init__(config)
        self.metrics_column = metrics_column

    def __call__(self, batch: pa.Table) -> pa.Table:
        rows = batch_rows(batch)  # as the local Parquet reader reads them (nanosecond times included)
        results = self.compress(rows)
        written = [(r, [row] if r.rejected else list(r.rows)) for r, row in zip(results, rows)]
        table = to_table([out for _, outs in written for out in outs], batch.schema)
        if self.metrics_column is None:
            return table
        metrics = pa.array([metrics_value(r, k) for r, outs in written for k in range(len(outs))], METRICS_COLUMN_TYPE)
        if self.metrics_column in table.column_names:
            table = table.drop_columns([self.metrics_column])
        return table.append_column(pa.field(self.metrics_column, METRICS_COLUMN_TYPE), metrics)


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


# ---- the CLI's engine: the local run, rows compressed by actors ----------------------------------


@ray.remote
class _CoreActor:
    """A row core on one node: its tokenizer, summarizer session and the cache, many rows in flight."""

    def __init__(self, config: CompressionConfig, cache: str | None):
        self.core = build_core(config, TokenCounter.for_config(config), cache)
        self.started: asyncio.Task | None = None
        self.scratch: ThroughStore | None = None  # made on the first part through object storage

    async def start(self) -> str:
        """The core started once (also after Ray restarted this actor); the node it runs on."""
        if self.started is None:
            self.started = asyncio.ensure_future(self.core.start())
        await self.started
        return ray.get_runtime_context().get_node_id()

    async def perform(self, work: Any, store: Store | None) -> tuple[Any, dict[str, int]]:
        """A row, a whole part, a file's spans or its join (part_work.perform; through object
        storage when `store` is given, part_store.py), and the summarizer's live figures."""
        await self.start()
        if store is None:
            return await perform(self.core, work), self.core.summarizer.live()
        self.scratch = self.scratch or ThroughStore()
        return await self.scratch.perform(self.core, work, store), self.core.summarizer.live()

    def reaches(self, store: Store) -> str | None:
        """What of the store this actor cannot read (part_store.reachable); None when it reads it."""
        return reachable(store)

    def sees(self, files: list[tuple[str, tuple[int, int]]], probe: str, token: str) -> str | None:
        """What of the driver's files (path, size and time) and its work folder this node lacks; None when
        it has them all: the token the driver wrote in `probe` read here, this actor's answer written beside it."""
        for path, known in files:
            try:
                if tuple(identity(Path(path))) != tuple(known):
                    return path
            except OSError:
                return path
        try:
            if Path(probe).read_text() != token:
                return str(Path(probe).parent)
            Path(f"{probe}.{os.getpid()}").write_text(token)
        except OSError:
            return str(Path(probe).parent)
        return None

    async def stop(self) -> dict[str, Any]:
        await self.core.close()
        if self.scratch is not None:
            self.scratch.close()
        return self.core.summarizer.run_stats()


def _why_lost(exc: Exception, config: CompressionConfig) -> str:
    """Ray's reason an actor is gone, in one line: what follows its generic opening and the actor's
    identity lines (worker exit type and detail, or the creation error), the run's key hidden."""
    lines = [line.strip() for line in str(exc).splitlines()[1:] if line.strip() and not line.startswith("\t")]
    return one_line(" ".join(lines), os.environ.get(config.api_key_env), limit=300) or "no reason given"


def _check_reachable(address: str | None) -> None:
    """A HOST:PORT nothing listens on is one line at once (Ray itself retries for minutes)."""
    host, _, port = (address or "").rpartition(":")
    if not host or not port.isdigit() or "://" in address:
        return  # none (a Ray instance of this machine), `auto`, or a ray:// client address: Ray's to judge
    try:
        socket.create_connection((host, int(port)), timeout=CONNECT_SECONDS).close()
    except OSError as exc:
        raise ConfigError(f"cannot join the Ray cluster at {address}: {exc.strerror or exc}") from None


class RayPool(Asks):
    """`actors` Ray actors behind the row core's interface (start, compress_row, close) and whole parts'
    (part_work.Asks), as the local run uses them; spread over the nodes, each with a share of
    `max_concurrent_requests`. A call Ray retries (its actor lost) is answered once."""

    engine = "ray"

    def __init__(self, config: CompressionConfig, counter: TokenCounter, cache: Path | None, actors: int,
                 address: str | None = None, quiet: bool = False):
        self.counter = counter
        self.workers = actors
        config = _absolute(config)  # actors do not run in this working directory
        self.configs = [config.replace(max_concurrent_requests=n) for n in shares(config.max_concurrent_requests, actors)]
        self.cache = str(cache.resolve()) if isinstance(cache, Path) else cache  # a URI, or None
        self.address, self.quiet = address, quiet
        self.summarizer = Together()
        self.nodes: list[str] = []  # where each actor runs, for the tests and the report
        self._actors: list[Any] = []
        self._loads: list[int] = []
        self._store: Store | None = None  # whole parts go through object storage (reaches)
        self._unreachable: str | None = None  # why an actor cannot read the store, for reads' warning
        self._began_ray = False

    async def start(self) -> None:
        preflight = TrajectoryCompressor(self.configs[0], self.counter)
        try:  # a dead endpoint is one line at once, before Ray starts (which takes seconds)
            await preflight.start()
        finally:
            await preflight.close()
        if not ray.is_initialized():
            _check_reachable(self.address)
            try:
                ray.init(address=self.address, log_to_driver=not self.quiet,
                         logging_level=logging.ERROR if self.quiet else logging.INFO)  # -q: errors only
            except (ConnectionError, ValueError, RuntimeError) as exc:
                raise ConfigError(f"cannot join the Ray cluster at {self.address}: {exc}") from None
            self._began_ray = True
        options = dict(num_cpus=ACTOR_CPUS, scheduling_strategy="SPREAD", max_restarts=ACTOR_RESTARTS,
                       max_task_retries=ACTOR_RESTARTS)
        self._actors = [_CoreActor.options(**options).remote(c, self.cache) for c in self.configs]
        self._loads = [0] * len(self._actors)
        self.nodes = await asyncio.gather(*(self._call(a.start) for a in self._actors))
        if self.configs[0].batch and not is_uri(self.cache):
            await self._check_cache_shared()

    async def _check_cache_shared(self) -> None:
        """With summarization.batch the batches' answers reach the actors only through the cache: a
        cache folder some actor does not see would have its rows asked for again every round."""
        folder = Path(self.cache)
        made = not folder.exists()
        folder.mkdir(parents=True, exist_ok=True)
        missing = await self._lacking([], folder)
        if missing is not None:
            if made:  # refused: nothing of the run left behind
                folder.rmdir()
            raise ConfigError(f"--batch with --engine ray needs a summary cache every node reads, and a Ray actor "
                              f"cannot read {missing}: give --cache-dir on storage every node mounts, or in "
                              "object storage (s3://...)")

    async def _ask(self, work: Any) -> Any:
        index = min(range(len(self._actors)), key=self._loads.__getitem__)
        self._loads[index] += 1
        try:
            result, live = await self._call(self._actors[index].perform, work, self._store)
        finally:
            self._loads[index] -= 1
        self.summarizer.lives[index] = live
        return result

    async def reaches(self, store: Store) -> bool:
        """Whether every actor reads `store` (its nodes' environment holds the store's endpoint and
        credentials); from then on whole parts go through it (part_store.py)."""
        unreachable = await asyncio.gather(*(self._call(a.reaches, store) for a in self._actors))
        self._unreachable = next((reason for reason in unreachable if reason is not None), None)
        if self._unreachable is None:
            self._store = store
        return self._store is not None

    async def reads(self, paths: list[Path], work: Path) -> bool:
        """Whether every actor reads `paths` and the work folder as this process does (shared storage,
        or one machine), so that they take whole parts; said once when they do not."""
        missing = await self._lacking(paths, work)
        if missing is None:
            return True
        nor = f", nor {self._unreachable}" if self._unreachable else ""
        warn(f"a Ray actor cannot read {missing} where this process does{nor}: the rows go through this process "
             "one by one (put the inputs and the work folder on storage every node mounts, or inputs and output "
             "in object storage every node reads)")
        return False

    async def _lacking(self, paths: list[Path], folder: Path) -> str | None:
        """What of `paths` and `folder` some actor does not read (and write, in `folder`) where this
        process does, by a probe file there; None when every actor does."""
        token = secrets.token_hex(16)
        probe = folder / f"shared-{token[:8]}"
        probe.write_text(token)
        files = [(str(path), identity(path)) for path in paths]
        try:
            lacking = await asyncio.gather(*(self._call(a.sees, files, str(probe), token) for a in self._actors))
            answers = {p.read_text() for p in folder.glob(probe.name + ".*")}
        finally:
            for leftover in folder.glob(probe.name + "*"):
                leftover.unlink(missing_ok=True)
        return next((what for what in lacking if what is not None), None if answers == {token} else str(folder))

    async def _call(self, method, *args):
        """A remote call's value; the error a row core raised, as it raised it; WorkerDied when the
        actor is gone for good."""
        try:
            return await method.remote(*args)
        except ray.exceptions.RayTaskError as exc:
            raise exc.cause if isinstance(exc.cause, Exception) else exc
        except ray.exceptions.RayActorError as exc:
            raise WorkerDied(f"a Ray actor was lost and could not be restarted ({type(exc).__name__}: "
                             f"{_why_lost(exc, self.configs[0])})") from None

    async def close(self) -> None:
        try:
            stops = [asyncio.wait_for(self._call(a.stop), STOP_SECONDS) for a in self._actors]
            stats = await asyncio.gather(*stops, return_exceptions=True)
            self.summarizer.stats = [s for s in stats if isinstance(s, dict) and s]
        finally:
            for actor in self._actors:
                ray.kill(actor)
            if self._began_ray:
                ray.shutdown()
