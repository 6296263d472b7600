"""Counting a repeated text once: a count from the cache is the tokenizer's, a text every row shares
is encoded once a process, and the cache stays within the memory it states."""

from __future__ import annotations

import asyncio
import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

from conftest import DEMO_TOKENIZER, SAMPLES, read_jsonl
from test_fits import qwen3_folder

from trajcomp.core.counting.batching import BATCHES_AT_ONCE
from trajcomp.core.counting.count_cache import MAX_BYTES, CountCache, cost
from trajcomp.core.counting.tokens import TokenCounter

FOLDERS = {"demo": DEMO_TOKENIZER, "qwen3": qwen3_folder()}


@pytest.fixture(scope="module")
def pairs() -> dict[str, tuple[TokenCounter, Tokenizer]]:
    """Each tokenizer twice: trajcomp's counter (one cache for the whole module) and the plain Rust one."""
    return {name: (TokenCounter(str(folder)), Tokenizer.from_file(str(folder / "tokenizer.json")))
            for name, folder in FOLDERS.items()}


def truth(tokenizer: Tokenizer, texts: list[str]) -> list[int]:
    return [len(e.ids) for e in tokenizer.encode_batch(texts, add_special_tokens=False)]


# Texts that differ in ways a careless key would miss: a character, case, a trailing space, Unicode
# forms that normalize alike, a lone surrogate's neighbours; and texts drawn again from one pool.
NEAR = ["def f(x):\n    return x", "def f(x):\n    return y", "Def f(x):\n    return x", "def f(x):\n    return x ",
        "café", "cafe\u0301", "ﬁle", "file", "<|im_end|>", "<|im_end|> ", "", " ", "\n\n", "日本語のテキスト"]
TEXTS = st.one_of(st.sampled_from(NEAR), st.text(max_size=200))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(calls=st.lists(st.lists(TEXTS, max_size=12), min_size=1, max_size=6), name=st.sampled_from(sorted(FOLDERS)))
def test_a_count_from_the_cache_is_the_tokenizers(pairs, calls, name):
    counter, tokenizer = pairs[name]
    for texts in calls + calls[::-1]:  # each text counted again, in other company: served from the cache
        assert counter.count(texts) == truth(tokenizer, texts)


def demo_rows() -> list[list[str]]:
    return [[t["value"] for t in row["conversations"]] for row in read_jsonl(SAMPLES / "hermes_coding_runs.jsonl")]


def test_a_text_every_row_shares_is_encoded_once_by_the_rows_in_flight():
    per_row = demo_rows()[:12]
    system = per_row[0][0]
    per_row = [[system, *texts[1:]] for texts in per_row]  # one system prompt and tool schemas for all
    counter = TokenCounter(str(DEMO_TOKENIZER))

    async def run():  # as the row core counts: every row in flight asking at once
        return await asyncio.gather(*(counter.acount(texts) for texts in per_row))

    counts = asyncio.run(run())
    tokenizer = Tokenizer.from_file(str(DEMO_TOKENIZER / "tokenizer.json"))
    assert counts == [truth(tokenizer, texts) for texts in per_row]
    distinct = {text for texts in per_row for text in texts}
    # the prompt once, not 12 times; or once a counting thread, when the first calls begin together
    assert sum(map(len, distinct)) <= counter.chars <= sum(map(len, distinct)) + (BATCHES_AT_ONCE - 1) * len(system)
    before = counter.chars
    assert counter.count(per_row[3]) == counts[3] and counter.chars == before  # a later row: nothing encoded


@pytest.mark.parametrize("sizes", [(5,), (50, 5000), (20_000,), (3, 300, 3000, 30_000, 550_000)])
def test_the_cache_keeps_the_recently_used_within_its_stated_memory(sizes):
    cache = CountCache()
    shared = "the system prompt every row opens with"
    made = 0
    tracemalloc.start()
    try:
        while made < 3 * MAX_BYTES:  # three times what it holds, the shared text asked for all along
            batch = [f"text {made + j} " + "x" * sizes[j % len(sizes)] for j in range(64)] + [shared]
            made += sum(cost(t) for t in batch if len(t) < 500_000)  # the largest are never kept
            cache.counts(batch, lambda texts: [1000 + len(t) for t in texts])  # counts of real size
        del batch
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert held <= MAX_BYTES, f"{held / 2**20:.2f} MiB"
    assert 0.8 * MAX_BYTES < cache.bytes <= MAX_BYTES  # full, by its own account too
    asked = []
    cache.counts([shared, "text 0 " + "x" * sizes[0]], lambda texts: asked.extend(texts) or [0] * len(texts))
    assert asked == ["text 0 " + "x" * sizes[0]]  # the oldest went out; the text in use all along stayed
