"""Streaming: rows running and rows held in memory are bounded, whatever the size of the input.

Those bounds are what keep peak memory flat; the memory itself is a measurement, made by
scripts/bench_memory.py (figures in docs/measured.md), not asserted here.
"""

from __future__ import annotations

import asyncio
import random
from contextlib import aclosing

import pytest

from trajcomp.engines.flow.ordered import ordered_map


class Source:
    """Items 0..n-1, counting how many were taken."""

    def __init__(self, n: int):
        self.n, self.taken = n, 0

    def __iter__(self):
        for i in range(self.n):
            self.taken += 1
            yield i


class Work:
    """An async step of random duration that tracks how many calls run at once.

    `slow` items instead wait until `release` is set (a call retrying, a hung endpoint)."""

    def __init__(self, seed: int, slow: tuple[int, ...] = ()):
        self.rng, self.running, self.most = random.Random(seed), 0, 0
        self.slow, self.release, self.finished = slow, asyncio.Event(), []

    async def __call__(self, item: int) -> int:
        self.running += 1
        self.most = max(self.most, self.running)
        try:
            if item in self.slow:
                await self.release.wait()
            else:
                await asyncio.sleep(self.rng.random() * 0.003)
            self.finished.append(item)
            return item * 10
        finally:
            self.running -= 1


async def collect(source: Source, work: Work, running: int, held: int) -> list[int]:
    out = []
    async with aclosing(ordered_map(source, work, running, held)) as results:
        async for result in results:
            assert source.taken - len(out) <= held  # never more than `held` rows taken and not yet written
            out.append(result)
    return out


@pytest.mark.parametrize("running,held", [(1, 1), (3, 3), (4, 50), (16, 40)])
def test_results_in_input_order_with_both_bounds_kept(running, held):
    source, work = Source(300), Work(seed=running)
    assert asyncio.run(collect(source, work, running, held)) == [i * 10 for i in range(300)]
    assert work.most == running  # the bound is used, and never exceeded


def test_a_slow_row_stalls_only_itself_until_the_held_rows_are_full():
    """Row 2 waits; the rows after it keep running until `held` rows are taken, then the run waits."""
    source, work = Source(200), Work(seed=7, slow=(2,))
    running, held = 4, 60
    last_held = 2 + held - 1  # rows 0 and 1 are written; rows 2..61 are held

    async def scenario() -> list[int]:
        task = asyncio.ensure_future(collect(source, work, running, held))
        for _ in range(5000):  # the rows behind the slow one complete without it
            if last_held in work.finished:
                break
            await asyncio.sleep(0.001)
        await asyncio.sleep(0.05)  # time enough to take more rows, were it allowed
        assert source.taken == last_held + 1
        assert sorted(work.finished) == [i for i in range(last_held + 1) if i != 2]
        work.release.set()
        return await task
    assert asyncio.run(scenario()) == [i * 10 for i in range(200)]
    assert work.most == running


def test_an_early_exit_cancels_and_waits_for_the_rows_in_flight():
    source, work = Source(10_000), Work(seed=1)

    async def consume_some() -> list[int]:
        out = []
        async with aclosing(ordered_map(source, work, 8, 32)) as results:
            async for result in results:
                out.append(result)
                if len(out) == 20:
                    break
        return out
    assert asyncio.run(consume_some()) == [i * 10 for i in range(20)]
    assert work.running == 0  # nothing outlives the loop that ran it
    assert source.taken <= 20 + 32
