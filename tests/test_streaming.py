"""Streaming: rows in flight are bounded by the window, whatever the size of the input.

That bound is what keeps peak memory flat; the memory itself is a measurement, made by
scripts/bench_memory.py (figures in the README), not asserted here.
"""

from __future__ import annotations

import asyncio
import random
from contextlib import aclosing

import pytest

from trajcomp.pipeline import ordered_map


class Source:
    """Items 0..n-1, counting how many were taken."""

    def __init__(self, n: int):
        self.n, self.taken = n, 0

    def __iter__(self):
        for i in range(self.n):
            self.taken += 1
            yield i


class Work:
    """An async step of random duration that tracks how many calls run at once."""

    def __init__(self, seed: int):
        self.rng, self.running, self.most = random.Random(seed), 0, 0

    async def __call__(self, item: int) -> int:
        self.running += 1
        self.most = max(self.most, self.running)
        try:
            await asyncio.sleep(self.rng.random() * 0.003)
            return item * 10
        finally:
            self.running -= 1


@pytest.mark.parametrize("window", [1, 3, 16])
def test_results_in_input_order_never_more_than_a_window_read_ahead(window):
    source, work = Source(300), Work(seed=window)

    async def consume() -> list[int]:
        out = []
        async with aclosing(ordered_map(source, work, window)) as results:
            async for result in results:
                assert source.taken - len(out) <= window  # read-ahead bounded, not the whole input
                out.append(result)
        return out
    assert asyncio.run(consume()) == [i * 10 for i in range(300)]
    assert work.most == window  # the window is used, and never exceeded


def test_an_early_exit_cancels_and_waits_for_the_rows_in_flight():
    source, work = Source(10_000), Work(seed=1)

    async def consume_some() -> list[int]:
        out = []
        async with aclosing(ordered_map(source, work, 8)) as results:
            async for result in results:
                out.append(result)
                if len(out) == 20:
                    break
        return out
    assert asyncio.run(consume_some()) == [i * 10 for i in range(20)]
    assert work.running == 0  # nothing outlives the loop that ran it
    assert source.taken <= 20 + 8
