"""Worker processes for a local run: rows, or whole parts, go out to N processes, each with its own row core.

One Python process runs a row core's Python work (planning, identifiers, assembly) on one core
whatever the machine; `processing.num_workers` spreads the work over several, each worker on its own
event loop, with its own tokenizer, summarizer session and share of `max_concurrent_requests`.
JSON Lines (plain or compressed) and Parquet go by parts (part_work.py, part_stream.py): a worker
reads a part's rows, compresses and writes them, and sends back its figures; a worker finds a file's
spans (unpacking a compressed file first) and joins its parts; the main process only commits the
parts' checkpoints in order. Other inputs (and --limit, batch runs) go row by row: the main process
reads the rows, sends each to a worker, keeps their order (ordered.ordered_map) and writes the parts.

Why plain processes and pipes, not a ProcessPoolExecutor: a pool's process runs one call at a
time, and a worker must have many rows in flight at once (their summaries wait on the network).
Workers are forked from a fork server (fork_server.py), never from the main process, which has threads
(tokenizer counting, readers); in `turns` mode each counts with the main process's tokenizer, sent.
The summary cache is shared: in a folder each worker appends to a segment of its own (summary_cache.py).

Stopping: workers ignore SIGINT and SIGTERM (a terminal's Ctrl-C and many schedulers signal the
whole process group) and leave stopping to the main process, which sends each a stop, waits for
it, and kills one that does not go within STOP_GRACE seconds. A worker whose main process died
(kill -9) sees its pipe close and ends at once (a part, join or copy it was writing is dropped).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import pickle
import signal
import threading
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Callable

from ...core.counting.batching import usable_cores
from ...core.compressor import TrajectoryCompressor
from ...core.config import CompressionConfig, ConfigError
from ...core.counting.tokens import PortableCounter, TokenCounter
from ...summarizers import make_summarizer
from ..parts.work import Asks, perform
from ..summaries.batch_answers import BatchAnswered
from ..summaries.cache import CachedSummarizer, open_cache
from .fork_server import forking, preload_for, sends_tokenizer
from .together import Together

STOP_GRACE = 10.0  # seconds a worker has to finish closing (its HTTP session, the cache) once told to stop


class WorkerDied(RuntimeError):
    """A worker process ended without being told to (killed, out of memory): the run stops, resumable."""


def build_core(config: CompressionConfig, counter: TokenCounter, cache: str | Path | None) -> TrajectoryCompressor:
    """A row core, its summarizer behind the summary cache at `cache` when that is worth it."""
    summarizer = make_summarizer(config.summarizer, config, counter)
    if config.batch and summarizer.cacheable:  # the batches fill the cache (batch.py); rows read it
        if cache is None or not config.cache:
            raise ConfigError("summarization.batch needs the summary cache (summarization.cache and cache_dir)")
        summarizer = BatchAnswered(summarizer, open_cache(cache), config.max_retries)
    elif cache is not None and config.cache and summarizer.cacheable:
        summarizer = CachedSummarizer(summarizer, open_cache(cache))
    return TrajectoryCompressor(config, counter, summarizer)


def worker_count(config: CompressionConfig) -> int:
    """Worker processes for a run: `num_workers`, 0 meaning one per usable core, at most one per
    allowed summarizer call (every worker needs a share of `max_concurrent_requests`)."""
    wanted = config.num_workers or usable_cores()
    return max(1, min(wanted, config.max_concurrent_requests))


def shares(total: int, n: int) -> list[int]:
    """`total` split into `n` near-equal positive parts (the first ones get the remainder)."""
    return [total // n + (i < total % n) for i in range(n)]


# ---- the worker process -----------------------------------------------------------------------


def _worker(inbox: Connection, outbox: Connection, config: CompressionConfig, cache: str | None,
            environment: dict[str, str], tokenizer: PortableCounter | None, at_once: int) -> None:
    """A worker process: its row core built once, then rows compressed until it is told to stop."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)
    os.environ.clear()  # the run's, not the fork server's: a key set since (multiprocessing passes the folder)
    os.environ.update(environment)
    try:
        counter = (TokenCounter.for_config(config, at_once) if tokenizer is None
                   else TokenCounter.from_portable(tokenizer, at_once))
        core = build_core(config, counter, cache)
    except Exception as exc:
        _send(outbox, ("failed", _portable(exc)))
        return
    asyncio.run(_serve(inbox, outbox, core))


async def _serve(inbox: Connection, outbox: Connection, core: TrajectoryCompressor) -> None:
    try:
        await core.start()  # the summarizer's session (its endpoint checked before its first request), the cache
    except Exception as exc:
        await core.close()
        _send(outbox, ("failed", _portable(exc)))
        return
    loop = asyncio.get_running_loop()
    messages: asyncio.Queue = asyncio.Queue()
    threading.Thread(target=_receive, args=(inbox, loop, messages.put_nowait), daemon=True).start()
    running: set[asyncio.Task] = set()

    async def one(key: int, work: Any) -> None:
        try:  # a row, a whole part, a file's spans or its join (part_work.perform)
            result = await perform(core, work)
        except Exception as exc:  # as in one process: the error reaches the run, which stops
            reply = ("error", key, _portable(exc))
        else:
            reply = ("done", key, result, core.summarizer.live())
        try:
            sent = _send(outbox, reply)
        except Exception as exc:  # a value that does not pickle: the row must still be answered
            sent = _send(outbox, ("error", key, RuntimeError(f"the row's result cannot be sent back: {exc}")))
        if not sent:
            messages.put_nowait(None)  # the main process is gone

    _send(outbox, ("ready", None))
    try:
        while (message := await messages.get()) is not None:
            task = asyncio.create_task(one(*message))
            running.add(task)
            task.add_done_callback(running.discard)
    finally:
        for task in running:  # the main process stopped wanting them
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)
        await core.close()
    _send(outbox, ("stats", core.summarizer.run_stats()))


def _receive(inbox: Connection, loop: asyncio.AbstractEventLoop, put: Callable[[Any], None]) -> None:
    """The worker's pipe read on a thread: rows to the loop as they come; None once told to stop."""
    while True:
        try:
            message = inbox.recv()
        except (EOFError, OSError):
            # Orphaned (the main process was killed): end now, not after a join or unpacking in
            # progress, which a resumed run would do again beside it. The cache writes each entry whole.
            os._exit(0)
        try:
            loop.call_soon_threadsafe(put, message)
        except RuntimeError:  # the loop has ended: the worker is on its way out
            return
        if message is None:
            return


def _send(conn: Connection, message: Any) -> bool:
    """Whether the message went (False: the other side is gone)."""
    try:
        conn.send(message)
    except (OSError, EOFError):
        return False
    return True


def _portable(exc: BaseException) -> BaseException:
    """`exc` if it survives pickling, else a RuntimeError saying what it was."""
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:
        return RuntimeError(f"{type(exc).__name__}: {exc}")


# ---- the main process's side ------------------------------------------------------------------


class WorkerPool(Asks):
    """N worker processes behind the row core's interface (start, compress_row, close) and whole parts'
    (part_work.Asks), as the engine uses them; `summarizer` and `counter` give the report and the
    progress bar what they read."""

    def __init__(self, config: CompressionConfig, counter: TokenCounter, cache: Path | None, workers: int):
        self.counter = counter  # the main process's: it names the tokenizer in the report
        self.workers = workers
        calls = shares(config.max_concurrent_requests, workers)  # the run's total, split
        self.configs = [config.replace(max_concurrent_requests=n) for n in calls]
        self.cache = str(cache) if cache is not None else None
        self.tokenizer = counter.portable() if sends_tokenizer(config) else None  # what each worker counts with
        # Each worker's tokenizer calls at once: its share of the cores. A thread a core in every worker
        # only makes the threads take turns (2 workers on 2 cores: ~4% slower in pass-through).
        self.counting_threads = max(1, usable_cores() // workers)
        self.summarizer = Together()
        self._procs: list[multiprocessing.Process] = []
        self._pipes: list[Connection] = []  # to each worker
        self._loads: list[int] = []  # rows each worker holds
        self._pending: dict[int, tuple[asyncio.Future, int]] = {}  # row key -> its result, its worker
        self._ready: list[asyncio.Future] = []
        self._stopped: list[asyncio.Future] = []  # each worker's run stats, once it stopped
        self._keys = 0
        self._broken: BaseException | None = None
        self._closing = False

    async def start(self) -> None:
        """Start the workers and wait until each has its row core started (a dead endpoint fails here)."""
        loop = asyncio.get_running_loop()
        context = forking(preload_for(self.configs[0]))
        for index, config in enumerate(self.configs):
            self._spawn(context, loop, index, config)
        try:
            await asyncio.gather(*self._ready)
        except BaseException:
            self._closing = True
            for future in self._ready:  # one failure is raised; the others' are not worth a warning
                if future.done() and not future.cancelled():
                    future.exception()
            self._kill()
            raise

    def _spawn(self, context, loop: asyncio.AbstractEventLoop, index: int, config: CompressionConfig) -> None:
        rows_in, rows_out = context.Pipe(duplex=False)
        results_in, results_out = context.Pipe(duplex=False)
        args = (rows_in, results_out, config, self.cache, dict(os.environ), self.tokenizer, self.counting_threads)
        proc = context.Process(target=_worker, args=args, name=f"trajcomp-worker-{index}", daemon=True)
        proc.start()
        rows_in.close()  # the worker's ends: so that a worker's death closes its pipe here
        results_out.close()
        self._procs.append(proc)
        self._pipes.append(rows_out)
        self._loads.append(0)
        self._ready.append(loop.create_future())
        self._stopped.append(loop.create_future())
        arrived = lambda message: self._arrived(index, message)  # noqa: E731
        threading.Thread(target=_collect, args=(results_in, proc, loop, arrived), daemon=True,
                         name=f"trajcomp-worker-{index}-results").start()

    async def reads(self, paths: list[Path], work: Path) -> bool:
        """The workers read `paths` and write into `work` themselves: on this machine, always."""
        return True

    async def _ask(self, work: Any) -> Any:
        if self._broken is not None:
            raise self._broken
        index = min(range(self.workers), key=self._loads.__getitem__)
        key = self._keys = self._keys + 1
        future = asyncio.get_running_loop().create_future()
        self._pending[key] = (future, index)
        self._loads[index] += 1
        try:
            if not _send(self._pipes[index], (key, work)):
                raise self._broken or WorkerDied(f"worker process {index} is gone")
            return await future
        finally:
            if self._pending.pop(key, None) is not None:
                self._loads[index] -= 1

    def _arrived(self, index: int, message: Any) -> None:
        kind = message[0]
        if kind == "done":
            _, key, result, live = message
            self.summarizer.lives[index] = live
            self._settle(key, lambda f: f.set_result(result))
        elif kind == "error":
            self._settle(message[1], lambda f: f.set_exception(message[2]))
        elif kind == "ready":
            _resolve(self._ready[index], None)
        elif kind == "failed" and not self._closing:
            _resolve(self._ready[index], message[1], failed=True)
        elif kind == "stats":
            _resolve(self._stopped[index], message[1])
        elif kind == "gone":
            self._gone(index, message[1])

    def _settle(self, key: int, settle: Callable[[asyncio.Future], None]) -> None:
        entry = self._pending.pop(key, None)
        if entry is None:  # a row the run stopped waiting for
            return
        future, index = entry
        self._loads[index] -= 1
        if not future.done():
            settle(future)

    def _gone(self, index: int, exitcode: int | None) -> None:
        """A worker's results pipe closed: expected once it stopped, otherwise it died."""
        if self._stopped[index].done() or self._closing:
            _resolve(self._stopped[index], {})  # stopped without its figures (killed after the grace)
            return
        error = WorkerDied(f"worker process {index} (pid {self._procs[index].pid}) ended unexpectedly "
                           f"(exit code {exitcode})")
        self._broken = error
        _resolve(self._ready[index], error, failed=True)
        _resolve(self._stopped[index], {})
        # Every row in flight, not only the dead worker's: the run stops now, and must not wait on
        # the other workers' rows first (they may be waiting on a slow endpoint).
        for future, _ in list(self._pending.values()):
            if not future.done():
                future.set_exception(error)

    async def close(self) -> None:
        """Stop every worker: told to, then waited for up to STOP_GRACE seconds, then killed."""
        self._closing = True
        try:
            for pipe in self._pipes:
                _send(pipe, None)
            done, _ = await asyncio.wait(self._stopped, timeout=STOP_GRACE) if self._stopped else (set(), set())
            self.summarizer.stats = [f.result() for f in done if f.result()]
            await asyncio.to_thread(self._join, STOP_GRACE)
        finally:
            self._kill()  # also when a second Ctrl-C interrupts the wait: no worker outlives the run

    def _join(self, timeout: float) -> None:
        for proc in self._procs:
            proc.join(timeout)

    def _kill(self) -> None:
        for proc in self._procs:
            if proc.is_alive():
                proc.kill()
            proc.join()
        for pipe in self._pipes:
            pipe.close()


def _collect(conn: Connection, proc: multiprocessing.Process, loop: asyncio.AbstractEventLoop,
             arrived: Callable[[Any], None]) -> None:
    """A worker's results read on a thread and handed to the loop; ("gone", exit code) when its pipe closes."""
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            proc.join(STOP_GRACE)  # its exit code, for the message
            message = ("gone", proc.exitcode)
        try:
            loop.call_soon_threadsafe(arrived, message)
        except RuntimeError:  # the loop is closed: nobody is waiting any more
            return
        if message[0] == "gone":
            conn.close()
            return


def _resolve(future: asyncio.Future, value: Any, failed: bool = False) -> None:
    if not future.done():
        (future.set_exception if failed else future.set_result)(value)
