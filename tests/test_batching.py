"""The coalescing counter: the rows in flight are counted together, each gets exactly its own counts."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
from typing import Callable

import pytest
from tokenizers import Tokenizer

from conftest import CORPUS, DEMO_TOKENIZER, SAMPLES, read_jsonl
from processes import HANG_SECONDS

from trajcomp.core.counting.batching import ENCODE_CHARS, MAX_CHARS, MIN_SHARE, CoalescingCounter, split_by_chars
from trajcomp.core.counting.tokens import TokenCounter


@pytest.fixture(scope="module")
def counter() -> TokenCounter:
    return TokenCounter(str(DEMO_TOKENIZER))


def rows_texts() -> list[list[str]]:
    return [[t["value"] for t in row["conversations"]] for row in read_jsonl(SAMPLES / "hermes_coding_runs.jsonl")]


class Recorded:
    """The real count, recording each call's size and thread; `gate` holds calls until set."""

    def __init__(self, counter: TokenCounter):
        self.counter, self.calls, self.texts, self.threads = counter, [], [], set()
        self.gate = threading.Event()
        self.gate.set()

    def __call__(self, texts: list[str]) -> list[int]:
        self.gate.wait(10)
        self.calls.append(len(texts))
        self.texts.append(texts)
        self.threads.add(threading.current_thread().name)
        return self.counter.count(texts)


def test_rows_in_flight_share_tokenizer_calls_and_get_their_own_counts(counter):
    per_row = rows_texts()[:12]
    recorded = Recorded(counter)
    coalescing = CoalescingCounter(recorded)

    async def run():
        recorded.gate.clear()  # the first call holds until every row has asked
        tasks = [asyncio.ensure_future(coalescing.count(texts)) for texts in per_row]
        await asyncio.sleep(0.05)
        recorded.gate.set()
        return await asyncio.gather(*tasks)

    results = asyncio.run(run())
    assert results == [counter.count(texts) for texts in per_row]
    # Every row asked before the first call started: they share a few calls (each at most its share of
    # what waits, test_the_last_requests_are_shared_among_the_counting_threads).
    assert sum(len(text) for texts in per_row for text in texts) < MAX_CHARS
    assert len(recorded.calls) < len(per_row) and sum(recorded.calls) == sum(map(len, per_row))
    assert all(name.startswith("trajcomp-count") for name in recorded.threads)


def test_a_batch_never_exceeds_max_chars_and_a_lone_row_is_counted_at_once(counter):
    recorded = Recorded(counter)
    coalescing = CoalescingCounter(recorded)
    big = ["a b c"] + ["a b c " * (MAX_CHARS // 12 + 1)]  # over half a batch

    async def run():
        recorded.gate.clear()
        tasks = [asyncio.ensure_future(coalescing.count(big)) for _ in range(4)]
        await asyncio.sleep(0.05)
        recorded.gate.set()
        await asyncio.gather(*tasks)
        return await coalescing.count(["one"])  # nothing else in flight: its own call, no waiting

    assert asyncio.run(run()) == counter.count(["one"])
    assert recorded.calls == [len(big)] * 4 + [1]


class Held:
    """A count that holds every call inside it until released, and says how many were inside at once."""

    def __init__(self, count: Callable[[list[str]], list[int]]):
        self.count, self.inside, self.peak = count, 0, 0
        self.lock, self.gate = threading.Lock(), threading.Event()

    def __call__(self, texts: list[str]) -> list[int]:
        with self.lock:
            self.inside += 1
            self.peak = max(self.peak, self.inside)
        self.gate.wait(HANG_SECONDS)
        with self.lock:
            self.inside -= 1
        return self.count(texts)

    async def released(self, tasks: list[asyncio.Future], bound: int) -> list:
        """The tasks' results, once `bound` calls are inside (the calls start within milliseconds: fewer
        than that never reach it) and a call past the bound had time to start, were there one."""
        deadline = time.monotonic() + 30
        while self.peak < bound and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.1)
        self.gate.set()
        return await asyncio.gather(*tasks)


@pytest.mark.parametrize("at_once", [1, 3])
def test_at_once_is_how_many_calls_run_at_a_time(counter, at_once):
    """A worker process counts with its share of the cores (WorkerPool.counting_threads): four rows,
    each a call of its own (over half a batch), at most `at_once` of them inside the tokenizer at a time."""
    held = Held(counter.count)
    coalescing = CoalescingCounter(held, at_once)
    big = ["a b c " * (MAX_CHARS // 12 + 1)]

    async def run():
        return await held.released([asyncio.ensure_future(coalescing.count(big)) for _ in range(4)], at_once)

    assert asyncio.run(run()) == [counter.count(big)] * 4
    assert held.peak == at_once


def test_counts_past_the_count_cache_share_the_counters_bound():
    """A rendering counted past the cache (acount_once) and a row's turns (acount) go to the same
    `at_once` threads: with one, never two tokenizer calls at a time."""
    tokens = TokenCounter(str(DEMO_TOKENIZER), at_once=1)
    held = tokens._count = Held(tokens._count)

    async def run():
        turns, rendering = tokens.acount(["a row's turn"]), tokens.acount_once(["a rendering"])
        return await held.released([asyncio.ensure_future(turns), asyncio.ensure_future(rendering)], 1)

    assert asyncio.run(run()) == [held.count(["a row's turn"]), held.count(["a rendering"])]
    assert held.peak == 1


def test_an_urgent_request_goes_into_the_next_call_before_those_waiting(counter):
    """A row about to be summarized, or a summarized row's last count, is counted first and in a call
    of its own (a call shared with the rows waiting would take as long as theirs): the rows behind it
    wait for it to be written."""
    recorded = Recorded(counter)
    coalescing = CoalescingCounter(recorded, at_once=1)
    later = [[f"row {i} " * 2000] for i in range(6)]  # six rows waiting behind the call in flight

    async def run():
        recorded.gate.clear()
        first = asyncio.ensure_future(coalescing.count(["the call in flight"]))
        await asyncio.sleep(0.01)
        waiting = [asyncio.ensure_future(coalescing.count(texts)) for texts in later]
        urgent = asyncio.ensure_future(coalescing.count(["urgent"], urgent=True))
        await asyncio.sleep(0.01)
        recorded.gate.set()
        return await first, await asyncio.gather(*waiting), await urgent

    first, waiting, urgent = asyncio.run(run())
    assert urgent == counter.count(["urgent"]) and waiting == [counter.count(t) for t in later]
    assert recorded.texts[1] == ["urgent"]  # the first call after the one in flight, alone


def test_the_last_requests_are_shared_among_the_counting_threads(counter):
    """At a run's end one call must not take all that is left while the other threads idle: each call
    takes at most its share of what waits (half, with two threads), and at least MIN_SHARE characters:
    four MIN_SHARE of rows go as 2, 1 and 1 MIN_SHARE."""
    recorded = Recorded(counter)
    coalescing = CoalescingCounter(recorded, at_once=2)
    rows = [[f"{i:04d}" + "x" * (MIN_SHARE // 4 - 4)] for i in range(16)]  # MIN_SHARE / 4 characters each

    async def run():
        recorded.gate.clear()
        tasks = [asyncio.ensure_future(coalescing.count(texts)) for texts in rows]
        await asyncio.sleep(0.05)
        recorded.gate.set()
        return await asyncio.gather(*tasks)

    assert asyncio.run(run()) == [counter.count(t) for t in rows]
    chars = [sum(map(len, texts)) for texts in recorded.texts]  # in the order the calls passed the gate
    assert sorted(chars) == [MIN_SHARE, MIN_SHARE, 2 * MIN_SHARE]  # not one call for all that waited


def test_a_lone_request_takes_a_free_thread_while_another_call_runs(counter):
    """A summarized row's last count, alone in the queue while a long call runs: counted at once on
    the other thread, not after that call."""
    release = threading.Event()

    def count(texts):
        if texts == ["the long call"]:
            release.wait(HANG_SECONDS)
        return counter.count(texts)

    coalescing = CoalescingCounter(count, at_once=2)

    async def run():
        long = asyncio.ensure_future(coalescing.count(["the long call"]))
        await asyncio.sleep(0.05)
        try:
            lone = await asyncio.wait_for(coalescing.count(["alone"], urgent=True), 10)
            done_first = not long.done()
        finally:
            release.set()
        return lone, done_first, await long

    lone, done_first, _ = asyncio.run(run())
    assert lone == counter.count(["alone"]) and done_first


def test_a_cancelled_row_leaves_the_others_theirs(counter):
    recorded = Recorded(counter)
    coalescing = CoalescingCounter(recorded)

    async def run():
        recorded.gate.clear()
        first = asyncio.ensure_future(coalescing.count(["x y"]))
        await asyncio.sleep(0.01)
        doomed = asyncio.ensure_future(coalescing.count(["will be cancelled"]))
        kept = asyncio.ensure_future(coalescing.count(["kept row"]))
        await asyncio.sleep(0.01)
        doomed.cancel()
        recorded.gate.set()
        return await first, await kept, await asyncio.gather(doomed, return_exceptions=True)

    first, kept, (doomed,) = asyncio.run(run())
    assert first == counter.count(["x y"]) and kept == counter.count(["kept row"])
    assert isinstance(doomed, asyncio.CancelledError)


def test_a_text_the_tokenizer_refuses_fails_only_its_own_row(counter):
    """Whatever the batch: rows counted together with a failing one still get their counts."""
    recorded = Recorded(counter)

    def flaky(texts):
        if "boom" in texts:
            raise ValueError("tokenizer broke")
        return recorded(texts)

    coalescing = CoalescingCounter(flaky)

    async def run():
        recorded.gate.clear()
        first = asyncio.ensure_future(coalescing.count(["first"]))
        await asyncio.sleep(0.01)
        together = [asyncio.ensure_future(coalescing.count(t)) for t in (["fine"], ["boom"], ["also fine"])]
        await asyncio.sleep(0.01)
        recorded.gate.set()
        return await first, await asyncio.gather(*together, return_exceptions=True)

    _, (fine, bad, also) = asyncio.run(run())
    assert isinstance(bad, ValueError)
    assert fine == counter.count(["fine"]) and also == counter.count(["also fine"])


def test_one_counter_serves_one_event_loop_after_another(counter):
    """A TokenCounter outlives event loops (tests, a worker's loop): each loop gets its own queue."""
    for _ in range(3):
        assert asyncio.run(counter.acount(["hello world"])) == counter.count(["hello world"])


def test_a_row_asking_again_as_the_drainers_finish_is_never_left_waiting(counter):
    """Rows count again right after their counts arrive (a summary's turns): with every drainer just
    finished, a new request must start one, or it waits forever (a hang seen in CI once)."""
    recorded = Recorded(counter)
    coalescing = CoalescingCounter(recorded)
    half = ["a b c " * (MAX_CHARS // 12 + 1)]  # one request per batch: both drainers busy at once

    async def twice(texts):
        first = await coalescing.count(texts)
        return first, await coalescing.count(["again"])

    async def run():
        recorded.gate.clear()
        tasks = [asyncio.ensure_future(twice(half)) for _ in range(4)]
        await asyncio.sleep(0.05)
        recorded.gate.set()
        return await asyncio.wait_for(asyncio.gather(*tasks), 20)

    results = asyncio.run(run())
    assert [again for _, again in results] == [counter.count(["again"])] * 4


def test_a_large_count_is_split_across_threads_in_order_and_each_text_keeps_its_count(counter):
    texts = [t for row in rows_texts() for t in row]
    texts = [""] + texts * (3 * MAX_CHARS // sum(map(len, texts)) + 1) + ["x " * MAX_CHARS, "tail"]
    parts = split_by_chars(texts, MAX_CHARS)
    assert [t for part in parts for t in part] == texts
    assert len(parts) > 3 and all(sum(map(len, p)) <= MAX_CHARS or len(p) == 1 for p in parts)
    alone = {t: counter.count([t])[0] for t in set(texts)}
    assert counter.count(texts) == [alone[t] for t in texts]
    assert asyncio.run(counter.acount(texts)) == [alone[t] for t in texts]  # one request over MAX_CHARS


def test_a_batch_is_encoded_in_calls_small_enough_to_stay_in_the_caches(counter):
    """A counting thread's batch (up to MAX_CHARS) goes to the tokenizer in calls of ENCODE_CHARS, each
    call's encodings counted and freed before the next (calls of 1 MiB were measured 3-5% slower)."""
    fresh = TokenCounter(str(DEMO_TOKENIZER))  # an empty count cache: every text is encoded
    sizes = []
    encode_fast = fresh.encode_fast

    def recorded(texts):
        sizes.append((len(texts), sum(map(len, texts))))
        return encode_fast(texts)

    fresh.encode_fast = recorded
    texts = [f"{i} {t}" for i, t in enumerate(t for row in rows_texts() for t in row)]
    texts += ["x " * ENCODE_CHARS, "tail"]  # a text longer than a call goes alone
    assert sum(map(len, texts)) > 4 * ENCODE_CHARS
    tokenizer = Tokenizer.from_file(str(DEMO_TOKENIZER / "tokenizer.json"))  # not trajcomp's counting
    alone = [len(tokenizer.encode(t, add_special_tokens=False)) for t in texts]
    assert asyncio.run(fresh.acount(texts)) == alone
    assert len(sizes) > 4 and all(chars <= ENCODE_CHARS or n == 1 for n, chars in sizes)
    assert sum(n for n, _ in sizes) == len(texts)


def test_a_counter_turns_the_rust_thread_pool_off_unless_the_user_chose():
    """The Rust pool's spinning threads would compete with trajcomp's own counting threads."""
    probe = (
        "import os, sys; from trajcomp.core.counting.tokens import TokenCounter; TokenCounter(sys.argv[1]); "
        "print(os.environ.get('TOKENIZERS_PARALLELISM'))"
    )
    env = {k: v for k, v in os.environ.items() if k != "TOKENIZERS_PARALLELISM"}
    for user, expected in ((None, "false"), ("true", "true")):
        run_env = env if user is None else {**env, "TOKENIZERS_PARALLELISM": user}
        out = subprocess.run([sys.executable, "-c", probe, str(DEMO_TOKENIZER)], env=run_env,
                             capture_output=True, text=True, check=True).stdout
        assert out.strip() == expected


@pytest.mark.parametrize("kind", ["demo", "bpe", "wordpiece"])
def test_counts_without_offsets_equal_the_full_encodings_lengths(kind, request):
    """count() encodes without character offsets (encode_batch_fast): the same tokens as encode()."""
    folder = DEMO_TOKENIZER if kind == "demo" else request.getfixturevalue(f"{kind}_tokenizer")
    tokens = TokenCounter(str(folder))
    texts = [t for row in rows_texts() for t in row] + CORPUS + ["", " ", "ÉCOLE  naïve\t\n", "🙂" * 9]
    assert tokens.count(texts) == [len(e.ids) for e in tokens.encode(texts)]


def test_a_row_likely_over_its_target_is_told_by_the_characters_a_token_counted_so_far():
    tokens = TokenCounter(str(DEMO_TOKENIZER))
    text = "the quick brown fox jumps over the lazy dog " * 50
    assert not tokens.likely_over([text], 10)  # nothing counted yet: no guess
    (n,) = tokens.count([text])
    assert tokens.likely_over([text], n) and tokens.likely_over([text, text], 2 * n)  # its own count: over 0.9 of it
    assert not tokens.likely_over([text[: len(text) // 2]], n)  # half as long: not
