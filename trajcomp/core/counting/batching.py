"""Count the texts of many rows in one batch: the requests of the rows in flight are coalesced.

A row asks for its turns' counts and awaits them. While a batch is counted on a counting thread,
the requests that arrive meanwhile wait and go together into the next batch: a batch grows with the
number of rows in flight, without any timer, and a lone row is never kept waiting. One batch is
counted per core at once (each batch on one thread: see tokens.py), so the tokenizer keeps every core
busy while the event loop resolves one batch's rows and reads the next ones; batches are capped so
that the rows in flight make several.
"""

from __future__ import annotations

import asyncio
import os
import weakref
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, Sequence


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))  # the CPUs it may run on (taskset, cpuset); not a CPU quota
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


BATCHES_AT_ONCE = max(2, usable_cores())
# Characters per batch a counting thread takes (and per part when count() shares a large call among the
# threads): small enough that the rows in flight make several batches, one per thread, and that an
# urgent row waits for little; up to 8 cores the batches at once hold 2 MiB of text, above that each
# still ~5 agent rows (256 KiB), so that a batch's Python stays small beside the Rust work.
MAX_CHARS = max(256 << 10, (2 << 20) // BATCHES_AT_ONCE)
# Characters per tokenizer call within a batch: each call's encodings (~100 bytes a token, ~0.8 MB) are
# counted and freed before the next (likely why it is faster: they stay in the CPU's caches; not measured).
# Calls of 1 MiB (~25 MB of encodings) were 3-5% slower for the tokenizer alone on the bench's rows, and
# up to 10% in runs; 8 KiB was no faster in the sweeps and makes four times the calls
# (docs/benchmarks_notes.md).
ENCODE_CHARS = 32 << 10


# The least a batch takes when the waiting texts are shared among the counting threads: below it, a
# batch's Python costs more than another thread's help saves.
MIN_SHARE = 64 << 10


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

    async def count(self, texts: Sequence[str], urgent: bool = False) -> list[int]:
        """The counts of `texts`; `urgent` ones go into the next batch before the others waiting (a row
        about to be summarized, or a summarized row's last count: the rows behind it wait on it)."""
        loop = asyncio.get_running_loop()
        queue = self._queues.get(loop)
        if queue is None:
            queue = self._queues[loop] = _Queue(self._count, self._threads, self._at_once)
        return await queue.submit(list(texts), urgent)


def counting_threads(at_once: int) -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=at_once, thread_name_prefix="trajcomp-count")


class _Queue:
    def __init__(self, count: Callable[[list[str]], list[int]], threads: ThreadPoolExecutor, at_once: int):
        self._count, self._threads, self._at_once = count, threads, at_once
        self._waiting: list[_Request] = []  # the urgent ones first, each kind in the order it came
        self._urgent = 0  # how many of _waiting are urgent
        self._chars = 0  # the characters of _waiting
        self._draining = 0  # drainers started and not yet finished: counted down inside them, with no await between
        self._tasks: set[asyncio.Task] = set()  # references, so that running drainers are not collected

    async def submit(self, texts: list[str], urgent: bool = False) -> list[int]:
        if not texts:
            return []
        request = _Request(texts, sum(map(len, texts)), asyncio.get_running_loop().create_future())
        if urgent:
            self._waiting.insert(self._urgent, request)
            self._urgent += 1
        else:
            self._waiting.append(request)
        self._chars += request.chars
        self._start_drainer()
        return await request.future

    def _start_drainer(self) -> None:
        """Another drainer for a new request, up to `at_once` at a time. A drainer ends only when nothing
        waits, so every request waiting has one to take it, even when a take leaves some behind."""
        if self._waiting and self._draining < self._at_once:
            self._draining += 1
            drainer = asyncio.get_running_loop().create_task(self._drain())
            self._tasks.add(drainer)
            drainer.add_done_callback(self._tasks.discard)

    async def _drain(self) -> None:
        batch: list[_Request] = []
        try:
            while self._waiting:
                batch = self._take()
                texts = [text for request in batch for text in request.texts]
                try:
                    counts = await asyncio.get_running_loop().run_in_executor(self._threads, self._count, texts)
                except Exception:  # one row's text broke the call: count each request on its own
                    await self._one_by_one(batch)
                    continue
                start = 0
                for request in batch:
                    if not request.future.done():  # a row cancelled meanwhile (Ctrl-C) wants nothing
                        request.future.set_result(counts[start : start + len(request.texts)])
                    start += len(request.texts)
        except BaseException:  # cancelled itself (the loop is closing): no request may wait forever
            for request in batch + self._waiting:
                request.future.cancel()
            self._waiting, self._urgent, self._chars = [], 0, 0
            raise
        finally:
            # Here, not in a done callback: a request that arrives once the queue looked empty must
            # find this drainer gone and start one, or it would wait forever.
            self._draining -= 1

    async def _one_by_one(self, batch: list[_Request]) -> None:
        """Each request counted alone, so that a row fails only for its own texts, whatever its batch."""
        for request in batch:
            try:
                counts = await asyncio.get_running_loop().run_in_executor(self._threads, self._count, request.texts)
            except Exception as exc:
                if not request.future.done():
                    request.future.set_exception(exc)
                continue
            if not request.future.done():
                request.future.set_result(counts)

    def _take(self) -> list[_Request]:
        """The first requests waiting, up to a share of them all: MAX_CHARS characters, or fewer so that
        every counting thread gets some of the last ones (a lone batch at a run's end leaves cores idle).
        Urgent ones go without the others: a batch of ~1 MiB takes ~0.3 s, which a summary would wait."""
        share = min(MAX_CHARS, max(MIN_SHARE, -(-self._chars // self._at_once)))
        size, n = 0, 0
        for request in self._waiting:
            if n and (size + request.chars > share or n == self._urgent):
                break
            size, n = size + request.chars, n + 1
        batch, self._waiting = self._waiting[:n], self._waiting[n:]
        self._urgent = max(0, self._urgent - n)
        self._chars -= size
        return batch


@dataclass(slots=True)
class _Request:
    texts: list[str]
    chars: int
    future: asyncio.Future
