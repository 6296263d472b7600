"""The OpenAI `messages` row adapter: validation, its turn view, and real compressions through it.

Every compression here is real: a BPE tokenizer built by conftest, the extractive summarizer and
`TrajectoryCompressor.compress_turns(native, OpenAIMessages())`. The output is checked to be valid
OpenAI messages in which every tool call keeps its answer and every answer keeps its call.
"""

from __future__ import annotations

import asyncio
import copy
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trajcomp.core.compressor import TrajectoryCompressor
from trajcomp.core.config import CompressionConfig
from trajcomp.core.metrics import Outcome
from trajcomp.core.planning.planner import PlanParams, plan
from trajcomp.core.dialects.openai_rows import OpenAIMessages
from trajcomp.core.dialects.openai_rows import parts_shaped as OPENAI_PARTS
from trajcomp.core.dialects.rows import FORMATS_BY_NAME, RowError, ShareGPT, Turn, detect_format
from trajcomp.summarizers import SUMMARY_PREFIX
from trajcomp.core.counting.tokens import TokenCounter

OPENAI = OpenAIMessages()
OPENAI_ROLES = {"system", "developer", "user", "assistant", "tool", "function"}

# --------------------------------------------------------------------------- realistic rows

PYTEST_OUTPUT = (
    "============================= test session starts ==============================\n"
    "collected 42 items\n\n"
    "tests/test_parser.py ....F.....\n\n"
    "=================================== FAILURES ===================================\n"
    "___________________________ test_parse_last_field ____________________________\n"
    "    def test_parse_last_field():\n"
    ">       assert parse('a,b,c') == ['a', 'b', 'c']\n"
    "E       AssertionError: assert ['a', 'b'] == ['a', 'b', 'c']\n"
    "src/parser.py:12: AssertionError\n"
    "=========================== 1 failed, 41 passed in 0.31s ===========================\n"
)
SOURCE = "def parse(line):\n    fields = line.split(',')\n    return fields[:-1]\n\n\ndef main(argv):\n    return run(argv[1:])\n"
FILLER = [
    "The test fails because the parser drops the last field.",
    "Le test échoue parce que le fichier de configuration est absent.",
    "我们需要修复解析器中的错误，然后重新运行测试。",
    "Traceback (most recent call last):\n  File \"src/app.py\", line 12, in <module>\nAssertionError: expected 3",
    "def main(argv):\n    return run(argv[1:])",
]


def call(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


def answer(call_id: str, content: Any, **extra: Any) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content, **extra}


def agent_row() -> dict[str, Any]:
    """A coding-agent trajectory: single calls, one parallel step with 3 calls, extra fields everywhere."""
    m: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent. Use the tools to inspect and fix the repository."},
        {"role": "user", "name": "alice", "content": "The parser test fails; please fix src/parser.py and run the tests."},
        {
            "role": "assistant",
            "content": "<think>\nFirst reproduce the failure.\n</think>\nI'll run the test suite.",
            "tool_calls": [call("call_1", "terminal", command="pytest -x tests/test_parser.py")],
            "weight": 0,
        },
        answer("call_1", PYTEST_OUTPUT, name="terminal"),
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                call("call_2", "read_file", path="src/parser.py"),
                call("call_3", "read_file", path="tests/test_parser.py"),
                call("call_4", "terminal", command="git log --oneline -3"),
            ],
        },
        # Parallel answers, not in call order.
        answer("call_3", "def test_parse_last_field():\n    assert parse('a,b,c') == ['a', 'b', 'c']\n" * 3),
        answer("call_2", [{"type": "text", "text": SOURCE * 3}]),
        answer("call_4", "a1b2c3d fix config loading\n9f8e7d6 add parser\n0123abc initial commit\n" * 2, name="terminal"),
        {
            "role": "assistant",
            "content": "The slice drops the last field; I'll remove it.",
            "tool_calls": [call("call_5", "edit_file", path="src/parser.py", old="fields[:-1]", new="fields")],
        },
        answer("call_5", "edited src/parser.py (1 line changed)\n" + SOURCE * 2),
        {"role": "user", "content": "Also make sure the CLI still works after the change, please."},
        {
            "role": "assistant",
            "content": "Running the full suite and the CLI.",
            "tool_calls": [call("call_6", "terminal", command="pytest -q && python -m app --help")],
        },
        answer("call_6", PYTEST_OUTPUT.replace("1 failed, 41 passed", "42 passed") * 2),
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [call("call_7", "terminal", command="git diff --stat")],
        },
        answer("call_7", " src/parser.py | 2 +-\n 1 file changed, 1 insertion(+), 1 deletion(-)\n"),
        {"role": "assistant", "content": "Fixed: `parse` no longer drops the last field, all 42 tests pass.", "weight": 1},
    ]
    return {"id": "traj-0001", "source": "agent-run", "messages": m, "metadata": {"model": "x", "turns": len(m)}}


# --------------------------------------------------------------------------- checks


def assert_paired(messages: list[dict[str, Any]]) -> None:
    """Every tool message answers a call of the nearest non-tool message before it, and every call is answered."""
    for j, message in enumerate(messages):
        if message["role"] == "tool":
            i = j
            while messages[i]["role"] == "tool":
                i -= 1
                assert i >= 0, f"tool message {j} has no call before it"
            ids = [c["id"] for c in messages[i].get("tool_calls") or []]
            assert messages[i]["role"] == "assistant" and message["tool_call_id"] in ids, f"orphan tool message {j}"
        for c in message.get("tool_calls") or []:
            k, answered = j + 1, set()
            while k < len(messages) and messages[k]["role"] == "tool":
                answered.add(messages[k]["tool_call_id"])
                k += 1
            assert c["id"] in answered, f"call {c['id']} of message {j} has no answer"


def text_of(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content)
    return content or ""


def check_output(native, out, metrics, cfg: CompressionConfig) -> None:
    """Valid, paired OpenAI messages; one summary; head and tail verbatim (bar the notice and the merge)."""
    assert all(m["role"] in OPENAI_ROLES for m in out)
    OPENAI.native_turns({"messages": out})  # valid, including the orphan check
    assert_paired(out)
    summaries = sum(text_of(m).count(SUMMARY_PREFIX) for m in out)
    if metrics.outcome is not Outcome.COMPRESSED:
        assert out is native and summaries == 0
        return
    assert summaries == 1
    start, end = metrics.region
    notice = cfg.summary_notice_text if cfg.add_summary_notice else ""
    noticed = False
    for i in range(start):
        if notice and not noticed and OPENAI.turns([native[i]])[0].role == "system":
            noticed = True
            assert OPENAI.turns([out[i]])[0].text == OPENAI.turns([native[i]])[0].text + notice
            assert {k: v for k, v in out[i].items() if k != "content"} == {
                k: v for k, v in native[i].items() if k != "content"
            }
        else:
            assert out[i] == native[i]
    summary = out[start]
    assert summary["role"] == "user" and text_of(summary).startswith(SUMMARY_PREFIX)
    if len(out) == len(native) - (end - start):  # the summary opens the user message at `end`
        original = native[end]
        assert native[end]["role"] == "user"
        assert OPENAI.turns([summary])[0].text.endswith("\n\n" + OPENAI.turns([original])[0].text)
        assert {k: v for k, v in summary.items() if k != "content"} == {
            k: v for k, v in original.items() if k != "content"
        }
        if isinstance(original["content"], list):  # the original parts are all still there, in order
            assert summary["content"][1:] == original["content"]
        assert out[start + 1 :] == native[end + 1 :]
    else:
        assert summary == {"role": "user", "content": summary["content"]}
        # A string, or one text part where the row's first user message holds parts.
        assert isinstance(summary["content"], list if OPENAI_PARTS(native) else str)
        assert out[start + 1 :] == native[end:]
    assert metrics.compressed_turns == len(out)


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def counter(bpe_tokenizer) -> TokenCounter:
    return TokenCounter(str(bpe_tokenizer))


def config(bpe_tokenizer, **kw) -> CompressionConfig:
    kw.setdefault("target_max_tokens", 1500)
    kw.setdefault("summary_target_tokens", 120)
    kw.setdefault("cannot_fit", "shorten")  # the tests are about how messages are shortened
    return CompressionConfig(tokenizer_name=str(bpe_tokenizer), **kw)


def compress(cfg: CompressionConfig, native, counter: TokenCounter | None = None):
    c = TrajectoryCompressor(cfg, counter=counter)
    return asyncio.run(c.compress_turns(native, OpenAIMessages()))


def total_tokens(counter: TokenCounter, native) -> int:
    return sum(counter.count([t.text for t in OPENAI.turns(native)]))


# --------------------------------------------------------------------------- real compressions


def test_compresses_an_agent_row_into_valid_paired_messages(bpe_tokenizer, counter):
    row = agent_row()
    before = copy.deepcopy(row)
    native = OPENAI.native_turns(row)
    total = total_tokens(counter, native)
    cfg = config(bpe_tokenizer, target_max_tokens=total // 2, summary_target_tokens=80)

    out, metrics = compress(cfg, native)  # loads the tokenizer itself, as in a run

    assert metrics.outcome is Outcome.COMPRESSED, metrics
    assert metrics.compressed_tokens < metrics.original_tokens == total
    assert row == before  # input not mutated
    check_output(native, out, metrics, cfg)
    new_row = OPENAI.with_turns(row, out)
    assert {k: v for k, v in new_row.items() if k != "messages"} == {k: v for k, v in row.items() if k != "messages"}
    # The kept messages keep name, tool_call_id, weight and every other field.
    assert out[1] == row["messages"][1] and out[1]["name"] == "alice"
    assert out[2]["weight"] == 0 and out[-1]["weight"] == 1
    assert any(m.get("tool_call_id") for m in out)


def test_the_extractive_summary_sees_the_summarized_calls(bpe_tokenizer, counter):
    native = agent_row()["messages"]
    # Room for every call's line besides the identifier index (up to half the budget).
    cfg = config(bpe_tokenizer, target_max_tokens=total_tokens(counter, native) // 2, summary_target_tokens=400)
    out, metrics = compress(cfg, native, counter)
    assert metrics.outcome is Outcome.COMPRESSED
    start, end = metrics.region
    summary = text_of(out[start])
    summarized_calls = [c for m in native[start:end] for c in m.get("tool_calls") or []]
    assert summarized_calls
    for c in summarized_calls:  # rendered as name(key=value) -> outcome by the extractive summarizer
        args = json.loads(c["function"]["arguments"])
        key = next(k for k in ("command", "path") if k in args)
        assert f"{c['function']['name']}({key}={args[key]}" in summary, summary


def test_every_target_keeps_parallel_calls_with_their_answers(bpe_tokenizer, counter):
    """Sweep the budget so the region ends at every possible place, through the parallel step too."""
    native = agent_row()["messages"]
    total = total_tokens(counter, native)
    ends = set()
    for protect_last in (1, 2, 3, 4, 6):
        for target in range(60, total, max(1, total // 40)):
            cfg = config(bpe_tokenizer, target_max_tokens=target, summary_target_tokens=40, protect_last_n_turns=protect_last)
            out, metrics = compress(cfg, native, counter)
            check_output(native, out, metrics, cfg)
            if metrics.outcome is Outcome.COMPRESSED:
                ends.add(metrics.region)
    # The sweep did cut at several places, never inside a call group.
    assert len(ends) >= 4
    for start, end in ends:
        assert native[start]["role"] != "tool" and (end == len(native) or native[end]["role"] != "tool")


def test_the_planner_never_splits_a_call_group_of_an_openai_row():
    """Pure planner check over every cut the token counts can ask for."""
    native = agent_row()["messages"]
    roles = [t.role for t in OPENAI.turns(native)]
    counts = [10 * (i % 5 + 1) for i in range(len(roles))]
    groups = []  # [assistant, first non-tool after its answers)
    for i, m in enumerate(native):
        if m.get("tool_calls"):
            j = i + 1
            while j < len(native) and native[j]["role"] == "tool":
                j += 1
            groups.append((i, j))
    for protect_last in range(0, 8):
        for target in range(1, sum(counts)):
            p = plan(roles, counts, PlanParams(target, min(target - 1, 20) or 1, protect_last_n_turns=protect_last))
            if p.decision.value != "compress":
                continue
            for a, b in groups:
                inside = [p.start <= k < p.end for k in range(a, b)]
                assert all(inside) or not any(inside), (p, a, b)


def test_summary_merges_into_a_user_message_with_parts(bpe_tokenizer, counter):
    native = agent_row()["messages"]
    image = {"type": "image_url", "image_url": {"url": "https://example.com/screenshot.png"}}
    native[10] = {
        "role": "user",
        "name": "alice",
        "content": [{"type": "text", "text": "Also check the CLI, see "}, image, {"type": "text", "text": "this screenshot."}],
    }
    before = copy.deepcopy(native)
    # The tail starts at the user message and the budget asks for everything before it.
    cfg = config(bpe_tokenizer, target_max_tokens=100, summary_target_tokens=60, protect_last_n_turns=len(native) - 10)
    out, metrics = compress(cfg, native, counter)
    assert native == before
    assert metrics.outcome is Outcome.COMPRESSED and metrics.region[1] == 10
    check_output(native, out, metrics, cfg)
    merged = out[metrics.region[0]]
    assert merged["name"] == "alice"
    assert merged["content"][0]["type"] == "text" and merged["content"][0]["text"].startswith(SUMMARY_PREFIX)
    assert merged["content"][0]["text"].endswith("\n\n")
    assert merged["content"][1:] == native[10]["content"]  # image and text parts untouched
    assert len(out) == len(native) - (10 - metrics.region[0])


def test_notice_is_appended_to_a_developer_message_with_parts(bpe_tokenizer, counter):
    native = agent_row()["messages"]
    native[0] = {"role": "developer", "content": [{"type": "text", "text": "You are a coding agent."}], "cache": "x"}
    cfg = config(bpe_tokenizer, target_max_tokens=total_tokens(counter, native) // 2, summary_target_tokens=80)
    out, metrics = compress(cfg, native, counter)
    assert metrics.outcome is Outcome.COMPRESSED
    check_output(native, out, metrics, cfg)
    assert out[0] == {
        "role": "developer",
        "content": [{"type": "text", "text": "You are a coding agent."}, {"type": "text", "text": cfg.summary_notice_text}],
        "cache": "x",
    }


def test_legacy_function_messages_compress_and_stay_paired(bpe_tokenizer, counter):
    native = [{"role": "system", "content": "You can call functions."}, {"role": "user", "content": "Check the weather."}]
    for k in range(6):
        native.append({"role": "assistant", "content": None, "function_call": {"name": "weather", "arguments": json.dumps({"q": f"city {k}"})}})
        native.append({"role": "function", "name": "weather", "content": FILLER[k % len(FILLER)] * 6})
    native.append({"role": "assistant", "content": "Sunny everywhere."})
    cfg = config(bpe_tokenizer, target_max_tokens=total_tokens(counter, native) // 2, summary_target_tokens=200)
    out, metrics = compress(cfg, native, counter)
    assert metrics.outcome is Outcome.COMPRESSED
    OPENAI.native_turns({"messages": out})
    for i, m in enumerate(out):
        if m["role"] == "function":
            assert out[i - 1].get("function_call") is not None
        if m.get("function_call"):
            assert out[i + 1]["role"] == "function"
    assert "weather(q=city" in text_of(out[metrics.region[0]])


def test_under_target_and_nothing_to_compress_leave_the_row_alone(bpe_tokenizer, counter):
    native = agent_row()["messages"]
    out, metrics = compress(config(bpe_tokenizer, target_max_tokens=10**6, summary_target_tokens=100), native, counter)
    assert out is native and metrics.outcome is Outcome.SKIPPED_UNDER_TARGET
    cfg = config(bpe_tokenizer, target_max_tokens=100, summary_target_tokens=60, protect_last_n_turns=len(native))
    out, metrics = compress(cfg, native, counter)
    assert out is native and metrics.outcome is Outcome.NOTHING_TO_COMPRESS


# --------------------------------------------------------------------------- the turn view


def test_turns_map_roles_and_render_calls_and_answers():
    native = agent_row()["messages"]
    turns = OPENAI.turns(native)
    assert [t.role for t in turns[:5]] == ["system", "human", "gpt", "tool", "gpt"]
    assert turns[1] == Turn("human", native[1]["content"])
    # An assistant message: its text, then one <tool_call> block per call with decoded arguments.
    text, _, blocks = turns[2].text.partition("\n<tool_call>")
    assert text == native[2]["content"]
    assert json.loads(blocks.split("\n")[1]) == {"name": "terminal", "arguments": {"command": "pytest -x tests/test_parser.py"}}
    parallel = turns[4].text
    assert not parallel.startswith("\n") and parallel.count("<tool_call>") == 3
    # A tool message: <tool_response> JSON, named after the call it answers when it has no name.
    body = json.loads(turns[5].text.removeprefix("<tool_response>\n").removesuffix("\n</tool_response>"))
    assert body == {"tool_call_id": "call_3", "name": "read_file", "content": native[5]["content"]}
    body = json.loads(turns[6].text.split("\n")[1])
    assert body["content"] == SOURCE * 3  # list-of-parts content
    # Roles of the other kinds.
    assert OPENAI.turns([{"role": "developer", "content": "d"}]) == [Turn("system", "d")]
    legacy = [
        {"role": "assistant", "content": "", "function_call": {"name": "f", "arguments": "not json"}},
        {"role": "function", "name": "f", "content": "ok"},
    ]
    assert [t.role for t in OPENAI.turns(legacy)] == ["gpt", "tool"]
    assert json.loads(OPENAI.turns(legacy)[0].text.split("\n")[1]) == {"name": "f", "arguments": "not json"}
    assert json.loads(OPENAI.turns(legacy)[1].text.split("\n")[1]) == {"name": "f", "content": "ok"}


def test_parts_text_is_the_concatenation_of_text_parts():
    m = {"role": "user", "content": [{"type": "text", "text": "a "}, {"type": "image_url", "image_url": {"url": "u"}}, {"type": "text", "text": "b"}]}
    assert OPENAI.turns([m])[0].text == "a b"


@pytest.mark.parametrize(
    "message",
    [
        {"role": "user", "content": "hello", "name": "bob"},
        {"role": "system", "content": [{"type": "text", "text": "sys"}, {"type": "image_url", "image_url": {"url": "u"}}]},
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "u"}}]},
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "input_audio"}, {"type": "text", "text": "b"}]},
        {"role": "assistant", "content": "plain", "weight": 0},
        {"role": "assistant", "content": None, "tool_calls": [call("c1", "t", x=1)]},
        {"role": "assistant", "content": "said", "tool_calls": [call("c1", "t", x=1), call("c2", "u")]},
    ],
)
@pytest.mark.parametrize("new", ["[CONTEXT SUMMARY]: s\n\n{old}", "{old}\n\nNote: condensed.", "replaced entirely", ""])
def test_with_text_round_trips_and_keeps_other_fields(message, new):
    before = copy.deepcopy(message)
    old = OPENAI.turns([message])[0].text
    text = new.format(old=old)
    edited = OPENAI.with_text(message, text)
    assert message == before
    calls = "<tool_call>" + old.split("<tool_call>", 1)[1] if message.get("tool_calls") else ""
    if not calls or text.endswith(calls):
        assert OPENAI.turns([edited])[0].text == text
    else:  # the calls cannot be edited away: they are rendered after the new text
        assert OPENAI.turns([edited])[0].text == (f"{text}\n{calls}" if text else calls)
    assert {k: v for k, v in edited.items() if k != "content"} == {k: v for k, v in message.items() if k != "content"}
    if isinstance(message["content"], list):  # non-text parts all kept, in order
        others = [p for p in message["content"] if p["type"] != "text"]
        assert [p for p in edited["content"] if p["type"] != "text"] == others
        if text.endswith(old) or text.startswith(old):  # prefix or suffix: the original parts verbatim
            assert all(p in edited["content"] for p in message["content"])


def test_with_text_on_a_parts_list_prefixes_and_suffixes_with_a_new_part():
    parts = [{"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": "u"}}]
    m = {"role": "user", "content": parts}
    assert OPENAI.with_text(m, "S\n\nlook")["content"] == [{"type": "text", "text": "S\n\n"}, *parts]
    assert OPENAI.with_text(m, "look\n\nN")["content"] == [*parts, {"type": "text", "text": "\n\nN"}]
    assert OPENAI.with_text(m, "other")["content"] == [{"type": "text", "text": "other"}, parts[1]]


def test_make_turn_and_with_turns():
    assert OPENAI.make_turn("human", "[CONTEXT SUMMARY]: x") == {"role": "user", "content": "[CONTEXT SUMMARY]: x"}
    assert OPENAI.make_turn("gpt", "y") == {"role": "assistant", "content": "y"}
    assert OPENAI.make_turn("system", "z") == {"role": "system", "content": "z"}
    with pytest.raises(ValueError):
        OPENAI.make_turn("tool", "no call to answer")
    row = {"messages": [], "id": 7}
    assert OPENAI.with_turns(row, [{"role": "user", "content": "u"}]) == {"messages": [{"role": "user", "content": "u"}], "id": 7}
    assert row == {"messages": [], "id": 7}


# --------------------------------------------------------------------------- validation

SYS = {"role": "system", "content": "s"}
USER = {"role": "user", "content": "u"}
CALLER = {"role": "assistant", "content": None, "tool_calls": [call("c1", "t"), call("c2", "t")]}
ANSWER = answer("c1", "ok")


def with_call(**changes):
    c = call("c1", "t", x=1)
    c.update(changes)
    return {"role": "assistant", "content": None, "tool_calls": [c]}


def fn(**fields):
    return {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": fields}]}


REJECTS = [
    ("missing_messages", {"conversations": []}),
    ("messages_not_a_list", {"messages": {"role": "user"}}),
    ("messages_not_a_list", {"messages": None}),
    ("turn_not_an_object", {"messages": [USER, "hello"]}),
    ("turn_not_an_object", {"messages": [[USER]]}),
    ("turn_missing_field", {"messages": [{"content": "no role"}]}),
    ("turn_missing_field", {"messages": [{"role": "user"}]}),
    ("turn_missing_field", {"messages": [USER, {"role": "assistant"}]}),
    ("turn_missing_field", {"messages": [USER, CALLER, {"role": "tool", "content": "ok"}]}),
    ("turn_missing_field", {"messages": [USER, CALLER, {"role": "tool", "tool_call_id": None, "content": "ok"}]}),
    ("turn_not_a_string", {"messages": [{"role": 1, "content": "x"}]}),
    ("turn_not_a_string", {"messages": [{"role": "user", "content": 3}]}),
    ("turn_not_a_string", {"messages": [{"role": "user", "content": {"text": "x"}}]}),
    ("turn_not_a_string", {"messages": [{"role": "user", "content": None}]}),
    ("turn_not_a_string", {"messages": [USER, {"role": "assistant", "content": None}]}),
    ("turn_not_a_string", {"messages": [USER, {"role": "assistant", "content": None, "tool_calls": []}]}),
    ("turn_not_a_string", {"messages": [USER, CALLER, answer("c1", None)]}),
    ("turn_not_a_string", {"messages": [USER, CALLER, answer(5, "ok")]}),
    ("turn_not_a_string", {"messages": [{"role": "user", "content": "u", "name": 5}]}),
    ("unknown_role", {"messages": [{"role": "human", "content": "x"}]}),
    ("unknown_role", {"messages": [USER, {"role": "critic", "content": "x"}]}),
    ("invalid_content_part", {"messages": [{"role": "user", "content": ["plain string part"]}]}),
    ("invalid_content_part", {"messages": [{"role": "user", "content": [{"text": "no type"}]}]}),
    ("invalid_content_part", {"messages": [{"role": "user", "content": [{"type": "text"}]}]}),
    ("invalid_content_part", {"messages": [{"role": "user", "content": [{"type": "text", "text": 1}]}]}),
    ("invalid_tool_call", {"messages": [USER, {"role": "assistant", "content": None, "tool_calls": {"id": "c1"}}]}),
    ("invalid_tool_call", {"messages": [USER, {"role": "assistant", "content": None, "tool_calls": ["c1"]}]}),
    ("invalid_tool_call", {"messages": [USER, with_call(id=None)]}),
    ("invalid_tool_call", {"messages": [USER, with_call(id="")]}),
    ("invalid_tool_call", {"messages": [USER, with_call(type="custom")]}),
    ("invalid_tool_call", {"messages": [USER, with_call(function="t(x=1)")]}),
    ("invalid_tool_call", {"messages": [USER, fn(arguments="{}")]}),
    ("invalid_tool_call", {"messages": [USER, fn(name="t", arguments={"x": 1})]}),
    ("invalid_tool_call", {"messages": [USER, {"role": "assistant", "content": None, "tool_calls": [call("c1", "t"), call("c1", "u")]}]}),
    ("invalid_tool_call", {"messages": [{"role": "user", "content": "u", "tool_calls": [call("c1", "t")]}]}),
    ("invalid_tool_call", {"messages": [USER, {"role": "assistant", "content": None, "function_call": {"name": "f"}}]}),
    ("orphan_tool_message", {"messages": [ANSWER]}),
    ("orphan_tool_message", {"messages": [SYS, USER, ANSWER]}),
    ("orphan_tool_message", {"messages": [USER, CALLER, answer("c9", "ok")]}),
    ("orphan_tool_message", {"messages": [USER, CALLER, ANSWER, USER, answer("c2", "late")]}),
    ("orphan_tool_message", {"messages": [USER, CALLER, {"role": "assistant", "content": "more"}, ANSWER]}),
    ("orphan_tool_message", {"messages": [USER, CALLER, {"role": "assistant", "content": None, "tool_calls": [call("c3", "t")]}, ANSWER]}),
    ("orphan_tool_message", {"messages": [USER, {"role": "function", "name": "f", "content": "ok"}]}),
    ("orphan_tool_message", {"messages": [USER, CALLER, {"role": "function", "name": "f", "content": "ok"}]}),
]


@pytest.mark.parametrize("reason,row", REJECTS, ids=[f"{r}-{i}" for i, (r, _) in enumerate(REJECTS)])
def test_invalid_rows_are_rejected_with_a_stable_reason(reason, row):
    with pytest.raises(RowError) as exc:
        OPENAI.native_turns(row)
    assert exc.value.reason == reason
    assert exc.value.detail


def test_orphan_details_say_what_is_wrong():
    with pytest.raises(RowError, match=r"'c9'.*no assistant message before it"):
        OPENAI.native_turns({"messages": [USER, CALLER, answer("c9", "ok")]})
    with pytest.raises(RowError, match=r"'c2' of message 1, but message 3 comes between"):
        OPENAI.native_turns({"messages": [USER, CALLER, ANSWER, USER, answer("c2", "late")]})


def test_why_misplaced_answers_are_rejected():
    """Unvalidated, an answer separated from its call by a user turn can be kept while its call is summarized."""
    messages = [
        SYS, USER,
        {"role": "assistant", "content": None, "tool_calls": [call("c0", "t")]}, answer("c0", "ok"),
        CALLER, ANSWER, USER, answer("c2", "late"),  # c2 answered after a user turn
        {"role": "assistant", "content": "a"}, USER, {"role": "assistant", "content": "b"},
    ]
    p = plan([t.role for t in OPENAI.turns(messages)], [100] * len(messages), PlanParams(200, 50))
    assert (p.start, p.end) == (4, 6)  # CALLER is summarized, the answer to c2 would be kept alone
    with pytest.raises(RowError) as exc:
        OPENAI.native_turns({"messages": messages})
    assert exc.value.reason == "orphan_tool_message"


ACCEPTED = [
    [],
    [SYS, USER, {"role": "assistant", "content": "hi"}],
    [{"role": "developer", "content": "d"}, USER],
    [USER, CALLER, ANSWER, answer("c2", "ok")],
    [USER, CALLER, answer("c2", "ok"), ANSWER],  # parallel answers in any order
    [USER, {"role": "assistant", "tool_calls": [call("c1", "t")]}, ANSWER],  # content absent with calls
    [USER, {"role": "assistant", "content": [{"type": "text", "text": "x"}], "tool_calls": [call("c1", "t")]}, ANSWER],
    [USER, CALLER, ANSWER, USER, CALLER, ANSWER],  # ids reused by a later call group
    [USER, CALLER],  # calls left unanswered are accepted
    [USER, {"role": "assistant", "content": None, "function_call": {"name": "f", "arguments": "{}"}}, {"role": "function", "name": "f", "content": "ok"}],
    [USER, {"role": "assistant", "content": "x", "tool_calls": None, "function_call": None, "refusal": None}],
    [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "u"}}, {"type": "text", "text": "t"}]}],
]


@pytest.mark.parametrize("messages", ACCEPTED)
def test_valid_rows_are_accepted_and_returned_as_is(messages):
    row = {"messages": messages}
    assert OPENAI.native_turns(row) is messages


# --------------------------------------------------------------------------- detection


def test_detect_format():
    assert detect_format({"messages": []}) is FORMATS_BY_NAME["openai"]
    assert detect_format({"conversations": [], "id": 1}) is FORMATS_BY_NAME["sharegpt"]
    assert detect_format({"conversations": [], "messages": [USER]}).name == "openai"  # a messages list wins
    assert detect_format({"conversations": [], "messages": "log text"}).name == "sharegpt"
    fmt = detect_format({"messages": "not a list"})
    assert fmt.name == "openai"
    with pytest.raises(RowError) as exc:
        fmt.native_turns({"messages": "not a list"})
    assert exc.value.reason == "messages_not_a_list"
    with pytest.raises(RowError) as exc:
        detect_format({"text": "neither"})
    assert exc.value.reason == "missing_conversations"
    assert "'conversations'" in exc.value.detail and "'messages'" in exc.value.detail


def test_formats_by_name():
    assert set(FORMATS_BY_NAME) == {"sharegpt", "openai"}
    assert isinstance(FORMATS_BY_NAME["sharegpt"], ShareGPT) and isinstance(FORMATS_BY_NAME["openai"], OpenAIMessages)
    for name, fmt in FORMATS_BY_NAME.items():
        assert fmt.name == name
    assert FORMATS_BY_NAME["openai"].key == "messages" and FORMATS_BY_NAME["sharegpt"].key == "conversations"
    # ShareGPT keeps its behaviour.
    sharegpt = FORMATS_BY_NAME["sharegpt"]
    native = sharegpt.native_turns({"conversations": [{"from": "human", "value": "hi"}]})
    assert sharegpt.turns(native) == [Turn("human", "hi")]
    assert sharegpt.make_turn("human", "x") == {"from": "human", "value": "x"}


# --------------------------------------------------------------------------- property: pairing always holds

TOOLS = [("terminal", "command"), ("read_file", "path"), ("search", "query"), ("edit_file", "path")]


def filler(seed: int, size: int) -> str:
    out, k = [], seed
    while sum(map(len, out)) < size:
        out.append(FILLER[k % len(FILLER)])
        k += 1
    return "\n".join(out)[:size]


def maybe_parts(draw, text: str):
    if draw(st.integers(0, 4)) == 0:
        cut = draw(st.integers(0, len(text)))
        return [{"type": "text", "text": text[:cut]}, {"type": "image_url", "image_url": {"url": "u"}}, {"type": "text", "text": text[cut:]}]
    return text


@st.composite
def conversations(draw):
    sizes = st.integers(0, 700)
    seeds = st.integers(0, 50)
    messages: list[dict[str, Any]] = []
    if draw(st.booleans()):
        messages.append({"role": draw(st.sampled_from(["system", "developer"])), "content": filler(draw(seeds), draw(sizes))})
    messages.append({"role": "user", "content": maybe_parts(draw, filler(draw(seeds), draw(sizes)))})
    reuse_ids = draw(st.booleans())  # some datasets number calls per step: call_0, call_1 again and again
    next_id = 0
    for _ in range(draw(st.integers(1, 14))):
        kind = draw(st.sampled_from(["calls", "calls", "calls", "calls", "text", "user", "developer"]))
        if kind == "user":
            messages.append({"role": "user", "content": maybe_parts(draw, filler(draw(seeds), draw(sizes)))})
        elif kind == "developer":
            messages.append({"role": "developer", "content": filler(draw(seeds), draw(st.integers(0, 100)))})
        elif kind == "text":
            messages.append({"role": "assistant", "content": filler(draw(seeds), draw(sizes))})
        else:
            k = draw(st.integers(1, 3))
            calls = []
            for j in range(k):
                name, key = draw(st.sampled_from(TOOLS))
                cid = f"call_{j}" if reuse_ids else f"call_{next_id}"
                next_id += 1
                calls.append(call(cid, name, **{key: filler(draw(seeds), draw(st.integers(1, 60)))}))
            content = draw(st.sampled_from([None, "", "text"]))
            assistant = {"role": "assistant", "content": filler(draw(seeds), draw(sizes)) if content == "text" else content, "tool_calls": calls}
            if draw(st.booleans()):
                assistant["weight"] = draw(st.integers(0, 1))
            messages.append(assistant)
            for j in draw(st.permutations(range(k))):
                extra = {"name": calls[j]["function"]["name"]} if draw(st.booleans()) else {}
                messages.append(answer(calls[j]["id"], maybe_parts(draw, filler(draw(seeds), draw(sizes))), **extra))
    if draw(st.booleans()):
        messages.append({"role": "assistant", "content": filler(draw(seeds), draw(sizes))})
    return messages


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    messages=conversations(),
    target=st.integers(20, 4000),
    summary=st.integers(5, 300),
    protect_last=st.integers(0, 8),
    flags=st.lists(st.booleans(), min_size=4, max_size=4),
    notice=st.booleans(),
)
def test_property_compression_always_keeps_calls_and_answers_paired(
    bpe_tokenizer, counter, messages, target, summary, protect_last, flags, notice
):
    assert_paired(messages)
    OPENAI.native_turns({"messages": messages})
    cfg = CompressionConfig(
        tokenizer_name=str(bpe_tokenizer),
        cannot_fit="shorten",
        target_max_tokens=max(target, summary + 1),
        summary_target_tokens=summary,
        protect_last_n_turns=protect_last,
        protect_first_system=flags[0],
        protect_first_human=flags[1],
        protect_first_gpt=flags[2],
        protect_first_tool=flags[3],
        add_summary_notice=notice,
    )
    before = copy.deepcopy(messages)
    out, metrics = compress(cfg, messages, counter)
    assert messages == before
    check_output(messages, out, metrics, cfg)


def as_parts(native: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages with each string content made one text part (as OpenHands SDK rows hold them)."""
    return [{**m, "content": [{"type": "text", "text": m["content"]}]} if isinstance(m.get("content"), str) else m
            for m in native]


@pytest.mark.parametrize("shape", ["parts", "string"])
def test_a_new_summary_message_takes_the_shape_of_the_rows_messages(bpe_tokenizer, counter, shape):
    native = agent_row()["messages"]
    native = as_parts(native) if shape == "parts" else native
    cfg = config(bpe_tokenizer, target_max_tokens=700, summary_target_tokens=100)
    out, metrics = compress(cfg, native, counter)
    assert metrics.outcome is Outcome.COMPRESSED
    check_output(native, out, metrics, cfg)
    added = [m for m in out if m not in native and m["role"] == "user"]
    assert len(added) == 1 and added[0]["role"] == "user"  # the summary, a message of its own
    if shape == "parts":
        assert [p["type"] for p in added[0]["content"]] == ["text"]
        assert added[0]["content"][0]["text"].startswith(SUMMARY_PREFIX)
    else:
        assert added[0]["content"].startswith(SUMMARY_PREFIX)
