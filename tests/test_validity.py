"""Every output row is as valid for a trainer as its input, in every dialect (trajcomp/core/dialects/validity.py).

Generated rows in the four dialects trajcomp reads (Hermes ShareGPT, LLaMA-Factory ShareGPT, axolotl's
role/content ShareGPT, OpenAI messages with parallel tool calls) go through the real row core at
tight targets, with the extractive summarizer and with the openai one against the test server.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter

import pytest
from conftest import DEMO_TOKENIZER
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openai_server import ServerThread

from trajcomp.core.compressor import TrajectoryCompressor
from trajcomp.core.config import CompressionConfig
from trajcomp.core.dialects.rows import RowSchema
from trajcomp.core.counting.tokens import TokenCounter
from trajcomp.core.dialects.validity import (
    ALTERNATION_BROKEN, CALL_UNANSWERED, HUMAN_AFTER_HUMAN, LAST_ROLE_CHANGED, RESULT_WITHOUT_CALL, new_problems,
    problems,
)

COUNTER = TokenCounter(str(DEMO_TOKENIZER))
DIALECTS = ("hermes", "llamafactory", "axolotl", "openai")
WORDS = "the build of service fails because a fixture is missing from tests and the cache is stale".split()


def log(seed: int, lines: int) -> str:
    return "\n".join(f"[{seed}:{j:03d}] tests/test_mod{j % 7}.py::case_{j} {'FAILED' if j % 5 == 0 else 'PASSED'}"
                     for j in range(lines))


def sentence(seed: int, n: int) -> str:
    return " ".join(WORDS[(seed + k) % len(WORDS)] for k in range(n)).capitalize() + "."


# --------------------------------------------------------------------------- rows in each dialect
# A row is a list of steps: ("human", words), ("say", words), ("calls", [log lines per call]).


steps = st.lists(
    st.one_of(
        st.tuples(st.just("human"), st.integers(3, 40)),
        st.tuples(st.just("say"), st.integers(3, 40)),
        st.tuples(st.just("calls"), st.lists(st.integers(1, 60), min_size=1, max_size=3)),
    ),
    min_size=1, max_size=14,
)


def call_json(k: int) -> dict:
    return {"name": "terminal", "arguments": {"command": f"pytest tests/test_mod{k}.py"}}


def sharegpt_row(plan, system: bool, names: dict[str, str], keys=("from", "value")) -> dict:
    """Hermes turns (<tool_call> blocks, a tool turn per result) under the given role names."""
    role, text = keys
    turns = [{role: names["system"], text: "You are a coding agent."}] if system else []
    turns.append({role: names["human"], text: sentence(0, 12)})
    for k, (kind, arg) in enumerate(plan):
        if kind == "human":
            turns.append({role: names["human"], text: sentence(k, arg)})
        elif kind == "say":
            turns.append({role: names["gpt"], text: sentence(k, arg)})
        else:
            blocks = "\n".join(f"<tool_call>\n{json.dumps(call_json(k + j))}\n</tool_call>" for j in range(len(arg)))
            turns.append({role: names["gpt"], text: f"<think>{sentence(k, 8)}</think>\n{blocks}"})
            for j, lines in enumerate(arg):
                body = json.dumps({"tool_call_id": f"c{k}_{j}", "name": "terminal", "content": log(k + j, lines)})
                turns.append({role: names["tool"], text: f"<tool_response>\n{body}\n</tool_response>"})
    turns.append({role: names["gpt"], text: sentence(99, 10)})
    return {"conversations": turns}


def llamafactory_row(plan, system: bool) -> dict:
    """LLaMA-Factory's alternation: human, then function_call/observation pairs, a gpt answer; again."""
    turns = [{"from": "system", "value": "You are a coding agent."}] if system else []
    turns.append({"from": "human", "value": sentence(0, 12)})
    for k, (kind, arg) in enumerate(plan):
        if kind == "calls":
            for j, lines in enumerate(arg):
                turns.append({"from": "function_call", "value": json.dumps(call_json(k + j))})
                turns.append({"from": "observation", "value": log(k + j, lines)})
        elif kind == "human" and turns[-1]["from"] != "human":
            turns.append({"from": "gpt", "value": sentence(k, 6)})
            turns.append({"from": "human", "value": sentence(k, arg)})
    turns.append({"from": "gpt", "value": sentence(99, 10)})
    return {"conversations": turns}


def openai_row(plan, system: bool) -> dict:
    messages = [{"role": "system", "content": "You are a coding agent."}] if system else []
    messages.append({"role": "user", "content": sentence(0, 12)})
    for k, (kind, arg) in enumerate(plan):
        if kind == "human":
            messages.append({"role": "user", "content": sentence(k, arg)})
        elif kind == "say":
            messages.append({"role": "assistant", "content": sentence(k, arg)})
        else:
            calls = [{"id": f"call_{k}_{j}", "type": "function",
                      "function": {"name": "terminal", "arguments": json.dumps(call_json(k + j)["arguments"])}}
                     for j in range(len(arg))]
            messages.append({"role": "assistant", "content": None, "tool_calls": calls})
            messages += [{"role": "tool", "tool_call_id": c["id"], "content": log(k + j, lines)}
                         for j, (c, lines) in enumerate(zip(calls, arg))]
    messages.append({"role": "assistant", "content": sentence(99, 10)})
    return {"messages": messages}


HERMES_NAMES = {"system": "system", "human": "human", "gpt": "gpt", "tool": "tool"}
OPENAI_NAMES = {"system": "system", "human": "user", "gpt": "assistant", "tool": "tool"}


def make_row(dialect: str, plan, system: bool) -> dict:
    if dialect == "hermes":
        return sharegpt_row(plan, system, HERMES_NAMES)
    if dialect == "llamafactory":
        return llamafactory_row(plan, system)
    if dialect == "axolotl":
        return sharegpt_row(plan, system, OPENAI_NAMES, ("role", "content"))
    return openai_row(plan, system)


# --------------------------------------------------------------------------- through the row core


def compress(row: dict, cfg: CompressionConfig):
    async def go():
        async with TrajectoryCompressor(cfg, counter=COUNTER) as compressor:
            return await compressor.compress_row(row)
    return asyncio.run(go())


def check(row: dict, cfg: CompressionConfig):
    """The row through the core; the output breaks nothing its input did not."""
    result = compress(row, cfg)
    assert not result.rejected, result.detail
    fmt = RowSchema.from_config(cfg).adapter(row)
    before, after = fmt.native_turns(row), fmt.native_turns(result.row)
    assert new_problems(before, after, fmt) == Counter(), (fmt.turns(before), fmt.turns(after))
    return result


def config(row: dict, frac: float, summary: int, last_n: int, flags, **extra) -> CompressionConfig:
    fmt = RowSchema().adapter(row)
    total = sum(COUNTER.count([t.text for t in fmt.turns(fmt.native_turns(row))]))
    target = max(summary + 1, int(total * frac))
    return CompressionConfig(tokenizer_name=str(DEMO_TOKENIZER), target_max_tokens=target,
                             summary_target_tokens=summary, protect_last_n_turns=last_n, protect_first_gpt=flags[0],
                             protect_first_tool=flags[1], add_summary_notice=flags[2],
                             **{"cannot_fit": "shorten", **extra})


row_cases = st.tuples(st.sampled_from(DIALECTS), steps, st.booleans(), st.floats(0.1, 0.9), st.integers(60, 400),
                      st.integers(0, 5), st.tuples(st.booleans(), st.booleans(), st.booleans()))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(row_cases)
def test_generated_rows_stay_valid_with_the_extractive_summarizer(case):
    dialect, plan, system, frac, summary, last_n, flags = case
    row = make_row(dialect, plan, system)
    if dialect == "llamafactory":
        assert problems(RowSchema().adapter(row).native_turns(row), RowSchema().adapter(row)) == Counter()
    check(row, config(row, frac, summary, last_n, flags))


def test_the_strategies_compress_rows_in_every_dialect():
    """Guards the property against vacuity: each dialect's generated rows are compressed often."""
    compressed: Counter = Counter()

    @settings(max_examples=80, deadline=None, database=None, derandomize=True)
    @given(row_cases)
    def collect(case):
        dialect, plan, system, frac, summary, last_n, flags = case
        row = make_row(dialect, plan, system)
        compressed[dialect] += check(row, config(row, frac, summary, last_n, flags)).metrics.was_compressed

    collect()
    assert all(compressed[d] >= 3 for d in DIALECTS), compressed


@pytest.fixture(scope="module")
def server():
    with ServerThread(models=["test-model"]) as running:
        yield running


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(row_cases)
def test_generated_rows_stay_valid_with_the_openai_summarizer(server, case):
    dialect, plan, system, frac, summary, last_n, flags = case
    row = make_row(dialect, plan, system)
    check(row, config(row, frac, summary, last_n, flags, summarizer="openai", base_url=server.base_url,
                      summarization_model="test-model", api_key_env="TRAJCOMP_TEST_NO_KEY", cache=False))


# --------------------------------------------------------------------------- named rows


def test_the_issues_llamafactory_row_comes_out_valid():
    """h f o f o f o f o g h g, target below the row: no region keeps every call with its result, so
    the row stays as it was (the summary once stood for an observation, a call answered by the user)."""
    names = ["human", "function_call", "observation", "function_call", "observation", "function_call",
             "observation", "function_call", "observation", "gpt", "human", "gpt"]
    turns = []
    for k, name in enumerate(names):
        value = log(k, 80) if name == "observation" else json.dumps(call_json(k)) if name == "function_call" \
            else sentence(k, 10)
        turns.append({"from": name, "value": value})
    row = {"conversations": turns}
    for last_n in (4, 2, 0):
        result = check(row, config(row, 0.3, 100, last_n, (True, True, True)))
        assert result.metrics.cannot_fit and result.row["conversations"] == turns
        # the only region left is the short user turn near the end, if the tail lets it go
        assert result.metrics.outcome.value == ("nothing_to_compress" if last_n else "no_net_savings")


@pytest.mark.parametrize("roles, expected", [
    (["human", "gpt<call>", "tool", "gpt"], {}),
    (["human", "gpt<call>", "human", "gpt"], {CALL_UNANSWERED: 1}),
    (["human", "tool", "gpt"], {RESULT_WITHOUT_CALL: 1}),
    (["human", "human", "gpt"], {HUMAN_AFTER_HUMAN: 1}),
    (["human", "gpt<call>", "tool", "tool", "gpt"], {}),
])
def test_problems_of_hermes_rows(roles, expected):
    fmt = RowSchema().adapter({"conversations": []})
    turns = [{"from": r.split("<")[0], "value": "<tool_call>{}</tool_call>" if "<call>" in r else "x"} for r in roles]
    assert problems(turns, fmt) == Counter(expected)


def test_problems_of_openai_rows():
    fmt = RowSchema().adapter({"messages": []})
    call = {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    two = [call, {**call, "id": "b"}]
    ok = [{"role": "user", "content": "x"}, {"role": "assistant", "content": None, "tool_calls": two},
          {"role": "tool", "tool_call_id": "b", "content": "1"}, {"role": "tool", "tool_call_id": "a", "content": "2"},
          {"role": "assistant", "content": "done"}]
    assert problems(ok, fmt) == Counter()
    missing = ok[:3] + ok[4:]
    assert problems(missing, fmt) == Counter({CALL_UNANSWERED: 1})
    assert new_problems(ok, missing, fmt) == Counter({CALL_UNANSWERED: 1})
    assert new_problems(ok, ok[:2] + [{"role": "user", "content": "summary"}] + ok[4:], fmt) == \
        Counter({CALL_UNANSWERED: 2})
    assert new_problems(ok, ok[:4], fmt) == Counter({LAST_ROLE_CHANGED: 1})


def test_alternation_is_a_problem_only_in_llamafactory_rows():
    lf = [{"from": n, "value": "x"} for n in ("human", "function_call", "observation", "observation", "gpt")]
    fmt = RowSchema().adapter({"conversations": lf})
    assert fmt.alternation and problems(lf, fmt)[ALTERNATION_BROKEN] == 1


def test_a_continued_segment_may_end_on_its_call_and_nothing_else_is_forgiven():
    call = {"from": "function_call", "value": '{"name": "bash", "arguments": {"command": "ls"}}'}
    turns = [{"from": "human", "value": "List the files."}, call, {"from": "observation", "value": "a.py"}, call]
    row = {"conversations": turns}
    fmt = RowSchema().adapter(row)
    assert problems(turns, fmt) == Counter({CALL_UNANSWERED: 1})
    assert problems(turns, fmt, continued=True) == Counter()  # its observation opens the next segment
    early = [turns[0], call, {"from": "gpt", "value": "Done."}, {"from": "human", "value": "Again."}, call]
    assert problems(early, fmt, continued=True)[CALL_UNANSWERED] == 1  # a call inside the row still needs its result
