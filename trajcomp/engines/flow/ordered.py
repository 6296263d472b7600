"""Results in input order from many calls in flight, with memory bounded: how every local run keeps order."""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any, AsyncIterable, AsyncIterator, Awaitable, Callable, Iterable

_END = object()


async def ordered_map(
    items: Iterable | AsyncIterable, fn: Callable[[Any], Awaitable], max_running: int, max_held: int
) -> AsyncIterator:
    """fn over items, results in input order: at most `max_running` calls of fn at once, and at
    most `max_held` items taken and not yet yielded (running, or done and waiting behind a slower one).

    Two bounds, not one: a slow item (a call retrying, a hung endpoint) then stalls only itself
    while the others keep every call busy, until `max_held` items wait behind it.
    Use it with contextlib.aclosing: on an early exit the tasks still running are cancelled and
    waited for, so none outlives the resources (HTTP session, cache) they use.
    """
    waits = isinstance(items, AsyncIterable)  # items that take awaiting (parts whose file's spans a worker finds)
    source = aiter(items) if waits else iter(items)
    pending: deque[asyncio.Future] = deque()  # taken and not yet yielded, in input order
    busy: set[asyncio.Future] = set()
    exhausted = False
    try:
        while True:
            busy = {task for task in busy if not task.done()}
            while not exhausted and len(busy) < max_running and len(pending) < max_held:
                item = await anext(source, _END) if waits else next(source, _END)
                if item is _END:
                    exhausted = True
                    break
                pending.append(asyncio.ensure_future(fn(item)))
                busy.add(pending[-1])
            if not pending:
                return
            if pending[0].done():
                yield pending.popleft().result()
            else:  # the first one is still running, so `busy` is not empty
                await asyncio.wait(busy, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
