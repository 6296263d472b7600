"""The identifier index: as many missing identifiers as fit, found from their own counts and verified.

The bisection on real counts it replaced is kept here as the oracle: the two agree on every text.
"""

from __future__ import annotations

import json

import pytest
from conftest import DEMO_TOKENIZER, SAMPLES
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trajcomp.core.summary.identifiers import INDEX_HEAD, extract, with_index
from trajcomp.core.dialects.rows import Turn
from trajcomp.core.counting.tokens import TokenCounter

_COUNTERS: dict[str, TokenCounter] = {}


def counter_for(path: str) -> TokenCounter:
    if path not in _COUNTERS:
        _COUNTERS[path] = TokenCounter(path)
    return _COUNTERS[path]


def oracle(body: str, identifiers, budget: int, count) -> str:
    """The earlier index: the most identifiers that fit, by bisection on real counts."""
    missing = [ident for ident in identifiers if ident not in body]
    if not missing or count([body])[0] >= budget:
        return body

    def text(k: int) -> str:
        return f"{body}\n{INDEX_HEAD}{', '.join(missing[:k])}"

    low, high = 0, len(missing)
    while low < high:
        mid = (low + high + 1) // 2
        if count([text(mid)])[0] <= budget:
            low = mid
        else:
            high = mid - 1
    return text(low) if low else body


@pytest.fixture(params=["demo", "bpe", "wordpiece"])
def counter(request) -> TokenCounter:
    path = str(DEMO_TOKENIZER) if request.param == "demo" else str(request.getfixturevalue(f"{request.param}_tokenizer"))
    return counter_for(path)


def sample_regions(limit: int = 40) -> list[list[Turn]]:
    regions = []
    for line in (SAMPLES / "hermes_coding_runs.jsonl").read_text(encoding="utf-8").splitlines()[:limit]:
        turns = [Turn(t["from"], t["value"]) for t in json.loads(line)["conversations"]]
        regions.append(turns[3:-4])
    return regions


def test_the_same_index_as_the_bisection_on_sample_regions_in_fewer_counts(counter):
    calls = []

    def counting(texts):
        calls.append(len(texts))
        return counter.count(texts)

    for region in sample_regions():
        ids = extract(region)
        body = "The assistant read the manifests and ran the tests; two failures remain."
        for budget in (60, 150, 300):
            calls.clear()
            assert with_index(body, ids, budget, counting) == oracle(body, ids, budget, counter.count)
            assert len(calls) <= 4  # one batch of the parts' counts, then two or three real ones


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    body=st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=80),
    ids=st.lists(st.text(st.sampled_from("abc/._-0123456789xyzé中"), min_size=1, max_size=12), max_size=30, unique=True),
    budget=st.integers(1, 120),
)
def test_the_same_index_as_the_bisection_on_any_text(counter, body, ids, budget):
    assert with_index(body, ids, budget, counter.count) == oracle(body, ids, budget, counter.count)


def test_the_index_keeps_names_before_the_bare_numbers_of_a_listing(counter):
    listing = "\n".join(f"-rw-r--r-- 1 dev dev {size} Mar  3 10:0{i} {name}" for i, (size, name) in enumerate(
        [(1004, "README.md"), (5143, "setup.py"), (1836, "Makefile"), (9120, "LICENSE"), (2048, "main.go")]))
    turns = [
        Turn("gpt", '<tool_call>\n{"name": "terminal", "arguments": {"command": "cat src/lexer/token.go"}}\n</tool_call>'),
        Turn("tool", "package lexer // see /work/repo/src/lexer/token.go, ParseError on bad input"),
        Turn("gpt", '<tool_call>\n{"name": "terminal", "arguments": {"command": "ls -la"}}\n</tool_call>'),
        Turn("tool", listing),  # the most recent: its sizes came first before
    ]
    found = extract(turns)
    assert set(found) >= {"/work/repo/src/lexer/token.go", "ParseError", "1004", "5143"}
    index = with_index("Summary.", found, 40, counter.count)
    listed = index.split(INDEX_HEAD, 1)[1].split(", ")
    assert "ParseError" in listed and not any(ident.isdigit() for ident in listed)  # it was all byte sizes
    numbers = [i for i, ident in enumerate(found) if ident.isdigit()]
    assert numbers and min(numbers) > max(i for i, ident in enumerate(found) if not ident.isdigit())
