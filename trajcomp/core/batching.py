"""Count the texts of many rows in one tokenizer call: the requests of the rows in flight are coalesced.

A row asks for its turns' counts and awaits them. While a batch is counted on a counting thread,
the requests that arrive meanwhile wait and go together into the next call: a batch grows with the
number of rows in flight, without any timer, and a lone row is never kept waiting. One batch is
counted per core at once (each call on one thread: see tokens.py), so the tokenizer keeps every core
busy while the event loop resolves one batch's rows and reads the next ones; batches are capped so
that the rows in flight make several.
"""

from __future__ import annotations

import asyncio
import os
import weakref
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Sequence


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))  # the CPUs it may run on (taskset, cpuset); not a CPU quota
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


BATCHES_AT_ONCE = max(2, usable_cores())
# Characters per tokenizer call: its encodings take ~100 bytes a token until counted, so up to 8
# cores the calls at once hold ~70 MB (2 MiB of text); above that each call still holds ~5 agent
# rows (256 KiB, ~9 MB), enough that its Python overhead stays small beside the Rust work.
MAX_CHARS = max(256 << 10, (2 << 20) // BATCHES_AT_ONCE)


def split_by_chars(texts: list[str], max_chars: int) -> list[list[str]]:
    """`texts` in consecutive parts of at most `max_chars` characters (a longer text is a part alone)."""
    parts: list[list[str]] = []
    size = 0
    for text in texts:
        if not parts or size + len(text) > max_chars:
            parts.append([])
            size = 0
        parts[-1].append(text)
        size += len(text)
    return parts


class CoalescingCounter:
    """`await count(texts)` from any number of tasks; batched tokenizer calls on counting threads,
    `at_once` of them at a time (a worker process's share of the cores). Counters given the same
    `threads` share that bound."""

    def __init__(self, count: Callable[[list[str]], list[int]], at_once: int = BATCHES_AT_ONCE,
                 threads: ThreadPoolExecutor | None = None):
        self._count = count
        self._at_once = at_once
        self._threads = threads or counting_threads(at_once)
        # Futures belong to one event loop: each loop (a test's asyncio.run, a worker's loop) has its queue.
        self._queues: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Queue] = weakref.WeakKeyDictionary()

    async def count(self, texts: Sequence[str]) -> list[int]:
        loop = asyncio.get_running_loop()
        queue = self._queues.get(loop)
        if queue is None:
            queue = self._queues[loop] = _Queue(self._count, self._threads, self._at_once)
        return await queue.submit(list(texts))


def counting_threads(at_once: int) -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=at_once, thread_name_prefix="trajcomp-count")


class _Queue:
    def __init__(self, count: Callable[[list[str]], list[int]], threads: ThreadPoolExecutor, at_once: int):
        self._count, self._threads, self._at_once = count, threads, at_once
        self._waiting: list[tuple[list[str], asyncio.Future]] = []
        self._draining = 0  # drainers started and not yet finished: counted down inside them, with no await between
        self._tasks: set[asyncio.Task] = set()  # references, so that running drainers are not collected

    async def submit(self, texts: list[str]) -> list[int]:
        if not texts:
            return []
        future = asyncio.get_running_loop().create_future()
        self._waiting.append((texts, future))
        if self._draining < self._at_once:
            self._draining += 1
            drainer = asyncio.get_running_loop().create_task(self._drain())
            self._tasks.add(drainer)
            drainer.add_done_callback(self._tasks.discard)
        return await future

    async def _drain(self) -> None:
        batch: list[tuple[list[str], asyncio.Future]] = []
        try:
            while self._waiting:
                batch = self._take()
                texts = [text for texts, _ in batch for text in texts]
                try:
                    counts = await asyncio.get_running_loop().run_in_executor(self._threads, self._count, texts)
                except Exception:  # one row's text broke the call: count each request on its own
                    await self._one_by_one(batch)
                    continue
                start = 0
                for texts, future in batch:
                    if not future.done():  # a row cancelled meanwhile (Ctrl-C) wants nothing
                        future.set_result(counts[start : start + len(texts)])
                    start += len(texts)
        except BaseException:  # cancelled itself (the loop is closing): no request may wait forever
            for _, future in batch + self._waiting:
                future.cancel()
            self._waiting = []
            raise
        finally:
            # Here, not in a done callback: a request that arrives once the queue looked empty must
            # find this drainer gone and start one, or it would wait forever.
            self._draining -= 1

    async def _one_by_one(self, batch: list[tuple[list[str], asyncio.Future]]) -> None:
        """Each request counted alone, so that a row fails only for its own texts, whatever its batch."""
        for texts, future in batch:
            try:
                counts = await asyncio.get_running_loop().run_in_executor(self._threads, self._count, texts)
            except Exception as exc:
                if not future.done():
                    future.set_exception(exc)
                continue
            if not future.done():
                future.set_result(counts)

    def _take(self) -> list[tuple[list[str], asyncio.Future]]:
        """The oldest requests, up to MAX_CHARS characters (at least one request)."""
        size, n = 0, 0
        for texts, _ in self._waiting:
            chars = sum(map(len, texts))
            if n and size + chars > MAX_CHARS:
                break
            size, n = size + chars, n + 1
        batch, self._waiting = self._waiting[:n], self._waiting[n:]
        return batch
