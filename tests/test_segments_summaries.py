"""Segments' summaries through a real OpenAI-compatible test server that copies marked facts: from the third
segment on the summarizer is given the previous summary, and a fact of the first turns reaches the last
segment's summary; and rows a live agent already compacted (its summary turn and its system note)."""

from __future__ import annotations

import asyncio
import re
import sys
from pathlib import Path

import pytest
from conftest import DEMO_TOKENIZER
from openai_server import ServerThread

from trajcomp.core.compressor import TrajectoryCompressor
from trajcomp.core.config import CompressionConfig
from trajcomp.core.dialects.rows import RowSchema
from trajcomp.core.dialects.summary_turn import USERS_HEAD
from trajcomp.core.counting.tokens import TokenCounter
from trajcomp.core.dialects.validity import problems

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
import swe_rows  # noqa: E402

COUNTER = TokenCounter(str(DEMO_TOKENIZER))
UPDATE = "A summary of the turns before these already exists"
LIVE = ("[CONTEXT COMPACTION — REFERENCE ONLY] Earlier turns were compacted into the summary below.\n"
        "## Goal\nFix the float repr. FACT-7777 the parser rounds twice.")
LIVE_NOTE = "\n\n[Note: Some earlier conversation turns have been compacted into a handoff summary.]"


@pytest.fixture(scope="module")
def server():
    with ServerThread(models=["test-model"]) as s:
        s.set_faults(copy_facts=True)
        yield s


def compress(server, row, **overrides):
    cfg = CompressionConfig(tokenizer_name=str(DEMO_TOKENIZER), summarizer="openai", summarization_model="test-model", base_url=server.base_url,
                            api_key_env="TRAJCOMP_TEST_NO_KEY", summary_checks="none", max_retries=0,
                            **{"target_max_tokens": 5000, "summary_target_tokens": 400, **overrides})

    async def go():
        async with TrajectoryCompressor(cfg, counter=COUNTER) as compressor:
            return await compressor.compress_row(row)
    return asyncio.run(go())


def summary_turns(result, prefix="[CONTEXT SUMMARY]:"):
    return [[t["value"] for t in out["conversations"] if t["value"].startswith(prefix) or f"\n\n{prefix}" in t["value"]]
            for out in result.rows]


def test_a_fact_of_the_first_turns_reaches_the_last_segments_summary(server):
    row = swe_rows.row("hermes", 11, 60)
    first = row["conversations"][4]  # the first turn after the protected head
    row["conversations"][4] = {**first, "value": first["value"].replace("Step 1:", "Step 1 (FACT-0001):")}
    server.reset()
    server.set_faults(copy_facts=True)
    result = compress(server, row, segments=True)
    assert len(result.rows) >= 4
    bodies = [b for b in server.stats.bodies if isinstance(b, dict) and "messages" in b]
    assert len(bodies) == len(result.examples) == len(result.rows) - 1
    for k, body in enumerate(bodies):
        user = body["messages"][-1]["content"]
        assert (UPDATE in user) == (k >= 1)  # from the third segment on: the previous summary, updated
        if k >= 1:
            assert "Step 1 (FACT-0001)" not in user  # the fact came through the previous summary
    assert [len(s) for s in summary_turns(result)] == [0] + [1] * (len(result.rows) - 1)
    assert "FACT-0001" in summary_turns(result)[-1][0]
    assert [e.segment for e in result.examples] == list(range(1, len(result.rows)))
    assert all(e.messages == bodies[k]["messages"] for k, e in enumerate(result.examples))


def live_row() -> dict:
    row = swe_rows.row("hermes", 12, 40)
    turns = row["conversations"]
    system = {**turns[0], "value": turns[0]["value"] + LIVE_NOTE}
    return {**row, "conversations": [system, *turns[1:4], {"from": "human", "value": LIVE}, *turns[4:]]}


@pytest.mark.parametrize("segments", [False, True])
def test_a_live_compaction_is_updated_never_the_users_words_and_the_notice_not_doubled(server, segments):
    server.reset()
    server.set_faults(copy_facts=True)
    result = compress(server, live_row(), segments=segments)
    bodies = [b for b in server.stats.bodies if isinstance(b, dict) and "messages" in b]
    assert bodies and "FACT-7777" in bodies[0]["messages"][-1]["content"]
    assert UPDATE in bodies[0]["messages"][-1]["content"]  # the live summary is the previous one
    for out in result.rows[1:] if segments else result.rows:
        texts = [t["value"] for t in out["conversations"]]
        assert not any(t.startswith("[CONTEXT COMPACTION") for t in texts)  # updated: one summary turn
        ours = [t for t in texts if t.startswith("[CONTEXT SUMMARY]:")]
        assert len(ours) == 1 and "FACT-7777" in ours[0]
        assert "[CONTEXT COMPACTION" not in ours[0].partition(USERS_HEAD)[2]  # not among the user's words
        assert texts[0] == live_row()["conversations"][0]["value"]  # the live note stands for the notice
    # one example per summary the output used, as the server was asked for it, its answer in its row
    assert len(result.examples) == result.metrics.summaries >= 1
    assert segments or len(result.examples) == 1
    for e in result.examples:
        assert e.messages in [b["messages"] for b in bodies]
        assert any(e.summary in t["value"] for t in result.rows[e.segment]["conversations"])


def stated(body) -> int:
    return int(re.search(r"at most about (\d+) tokens", body["messages"][0]["content"]).group(1))


def test_summary_ratio_sizes_each_summary_by_its_span_within_its_bounds(server):
    row = swe_rows.row("hermes", 13, 40)
    asked = {}
    for bound in (200, 900):
        server.reset()
        server.set_faults(copy_facts=True)
        compress(server, row, segments=True, summary_ratio=0.2, summary_min_tokens=bound, summary_max_tokens=bound)
        asked[bound] = [stated(b) for b in server.stats.bodies if isinstance(b, dict) and "messages" in b]
    assert asked[200] and all(n <= 200 for n in asked[200])
    assert min(asked[900]) > max(asked[200])


def test_tail_tokens_carries_whole_turns_within_the_budget(server):
    row = swe_rows.row("hermes", 14, 40)
    carried = {}
    for budget in (300, 1500):
        result = compress(server, row, segments=True, tail_tokens=budget)
        for out in result.rows[1:]:
            m = out["compression_metrics"]
            tail = out["conversations"][len(out["conversations"]) - m["turns_new"] - m["turns_carried"]:][:m["turns_carried"]]
            assert sum(COUNTER.count([t["value"] for t in tail])) <= budget
        carried[budget] = sum(out["compression_metrics"]["turns_carried"] for out in result.rows[1:])
    assert carried[1500] > carried[300]


def assistant_live_row(dialect: str) -> dict:
    """A live agent's compaction in the assistant's role, right after the task's human turn."""
    row = swe_rows.row(dialect, 15, 40)
    fmt = RowSchema().adapter(row)
    native = fmt.native_turns(row)
    at = [t.role for t in fmt.turns(native)].index("human") + 1
    return fmt.with_turns(row, [*native[:at], fmt.make_turn("gpt", LIVE), *native[at:]])


@pytest.mark.parametrize("dialect", ["hermes", "openai"])
@pytest.mark.parametrize("segments", [False, True])
def test_a_live_compaction_in_the_assistants_role_joins_the_users_turn_before_it(server, dialect, segments):
    server.reset()
    server.set_faults(copy_facts=True)
    row = assistant_live_row(dialect)
    fmt = RowSchema().adapter(row)
    native = fmt.native_turns(row)
    task = fmt.turns(native)[1].text
    result = compress(server, row, segments=segments)
    trained = []
    for k, out in enumerate(result.rows):
        turns = fmt.native_turns(out)
        views = fmt.turns(turns)
        assert not problems(turns, fmt) - problems(native, fmt)  # never two user turns in a row
        assert views[1].role == "human" and views[1].text.startswith(task)  # the user's words whole, first
        live = [t for t, v in zip(turns, views) if v.text.startswith("[CONTEXT COMPACTION")]
        assert all(t.get("train", t.get("weight")) in (False, 0) for t in live) if segments else not live
        ours = [v.text for v in views if "[CONTEXT SUMMARY]:" in v.text]
        assert len(ours) == (k > 0 or not segments) and all("FACT-7777" in t for t in ours)
        trained += [t for t, v in zip(turns, views) if v.role == "gpt" and "train" not in t and "weight" not in t]
    if segments:  # the live summary is no agent's turn: trained nowhere, every other assistant turn once
        assert trained == [t for t, v in zip(native, fmt.turns(native)) if v.role == "gpt" and v.text != LIVE]
