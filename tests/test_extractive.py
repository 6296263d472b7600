"""The extractive summarizer on real Hermes-format turns, measured with real tokenizers."""

from __future__ import annotations

import asyncio
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trajcomp.core.config import CompressionConfig
from trajcomp.core.dialects.rows import Turn
from trajcomp.summarizers import make_summarizer
from trajcomp.summarizers.base import SummaryRequest
from trajcomp.summarizers.extractive import ACTION, ExtractiveSummarizer, Item, extract_items, fit
from trajcomp.core.counting.tokens import TokenCounter

_COUNTERS: dict[str, TokenCounter] = {}


@pytest.fixture(params=["bpe", "wordpiece"], scope="module")
def counter(request) -> TokenCounter:
    path = request.getfixturevalue(f"{request.param}_tokenizer")
    if request.param not in _COUNTERS:
        _COUNTERS[request.param] = TokenCounter(str(path))
    return _COUNTERS[request.param]


class Runaway(Exception):
    """fit() kept calling the tokenizer: it is not converging."""


def guarded(counter: TokenCounter, limit: int = 2000):
    """The real `counter.count`, refusing to be called more than `limit` times (turns a hang into a failure)."""
    calls = 0

    def count(texts):
        nonlocal calls
        calls += 1
        if calls > limit:
            raise Runaway(f"fit() called the tokenizer more than {limit} times")
        return counter.count(texts)

    return count


def summarize(counter: TokenCounter, turns, budget: int) -> str:
    """ExtractiveSummarizer.summarize_sync, with the tokenizer call guard."""
    return fit(extract_items(turns), budget, guarded(counter))


def tokens(counter: TokenCounter, text: str) -> int:
    return counter.count([text])[0]


# --------------------------------------------------------------------------- Hermes builders


def call(name: str, **args) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": args}, ensure_ascii=False) + "\n</tool_call>"


def resp(call_id: str, name: str, content) -> str:
    body = {"tool_call_id": call_id, "name": name, "content": content}
    return "<tool_response>\n" + json.dumps(body, ensure_ascii=False) + "\n</tool_response>"


def gpt(think: str, *calls: str, said: str = "") -> Turn:
    text = f"<think>\n{think}\n</think>\n" if think else ""
    text += said + ("\n" if said else "") + "\n".join(calls)
    return Turn("gpt", text)


def tool(call_id: str, name: str, content) -> Turn:
    return Turn("tool", resp(call_id, name, content))


PYTEST_LOG = (
    "============================= test session starts ==============================\n"
    + "".join(f"tests/test_parser.py::test_case_{i} PASSED\n" for i in range(25))
    + "tests/test_parser.py::test_fields FAILED\n"
    "E   AssertionError: expected 3 fields, got 2\n"
    "E   Traceback: later error line that is not the first\n"
    "=========================== 1 failed, 25 passed in 0.42s ===========================\n"
)


def english_turns() -> list[Turn]:
    return [
        gpt("The parser tests fail, so I will run them first to see the failure. Then fix it.",
            call("terminal", command="pytest -x tests/test_parser.py")),
        tool("call_1", "terminal", {"exit_code": 1, "output": PYTEST_LOG}),
        gpt("The failure is in field splitting. I need to read the parser source.",
            call("read_file", path="src/parser/core.py")),
        tool("call_2", "read_file", "def parse(line):\n    return line.split(',')[:-1]\n"),
        gpt("Let me find where the release was tagged.",
            call("terminal", command="git log -1 --oneline"), call("search_files", query="field separator", pattern="*.py")),
        tool("call_3", "terminal", "3f9a2b1c4d fix parser for release v2.31.0\nProcess exited with code 0"),
        tool("call_4", "search_files", json.dumps({"matches": ["src/parser/fields.py:12", "docs/format.md:3"]})),
        Turn("human", "Also make sure the CLI still works after the change."),
        gpt("", call("terminal", command="python -m parser.cli --help"),
            said="I will check the CLI entry point now."),
        tool("call_5", "terminal", {"returncode": 127, "stderr": "bash: python: command not found\nhint: use python3"}),
    ]


def chinese_turns() -> list[Turn]:
    return [
        Turn("human", "请修复解析器中的错误，然后重新运行测试。"),
        gpt("我们需要修复解析器中的错误，因为最后一个字段被丢弃了。", call("terminal", command="pytest -x")),
        tool("call_1", "terminal", {"exit_code": 1, "output": "收集了 12 个测试\nAssertionError: 期望 3 个字段\nFAILED tests/test_parser.py"}),
        gpt("问题出在 split 的切片上，需要删除多余的切片。", call("read_file", path="src/parser/core.py")),
        tool("call_2", "read_file", "def parse(line):\n    return line.split(',')[:-1]\n"),
    ]


# --------------------------------------------------------------------------- content


def test_keeps_calls_args_exit_status_errors_paths_and_identifiers(counter):
    text = summarize(counter, english_turns(), 2000)
    # tool call names with their key arguments
    assert "terminal(command=pytest -x tests/test_parser.py)" in text
    assert "read_file(path=src/parser/core.py)" in text
    assert "terminal(command=git log -1 --oneline)" in text
    assert "search_files(query=field separator, pattern=*.py)" in text
    assert "terminal(command=python -m parser.cli --help)" in text
    # exit status, from a dict key, from the log text, and from `returncode`
    pytest_line = next(l for l in text.splitlines() if l.startswith("terminal(command=pytest"))
    assert "exit 1" in pytest_line
    assert "exit 0" in next(l for l in text.splitlines() if l.startswith("terminal(command=git log"))
    assert "exit 127" in next(l for l in text.splitlines() if l.startswith("terminal(command=python"))
    # the FIRST error line of the log, not a later one
    assert "error: tests/test_parser.py::test_fields FAILED" in pytest_line
    assert "later error line" not in pytest_line
    assert "bash: python: command not found" in text
    # files touched (from call arguments and from outputs), identifiers from outputs
    files = next(l for l in text.splitlines() if l.startswith("Files: "))
    for path in ("tests/test_parser.py", "src/parser/core.py"):
        assert path in files
    idents = next(l for l in text.splitlines() if l.startswith("Identifiers: "))
    assert "3f9a2b1c4d" in idents and "v2.31.0" in idents
    # the gist of the reasoning; not the user's words, which the compressor carries verbatim beside it
    assert "Also make sure the CLI still works" not in text
    assert "Reasoning: The parser tests fail, so I will run them first to see the failure." in text
    assert "Then fix it" not in text  # only the first sentence of the reasoning
    assert "Assistant: I will check the CLI entry point now." in text
    assert tokens(counter, text) <= 2000


def test_parallel_calls_pair_with_their_responses_in_order(counter):
    turns = [
        gpt("Three things at once.", call("read_file", path="a/one.py"), call("read_file", path="b/two.py"),
            call("terminal", command="ls -la")),
        tool("c1", "read_file", "x = 1\n"),
        tool("c2", "read_file", "FileNotFoundError: b/two.py not found"),
        tool("c3", "terminal", "total 0\nexit code 0"),
    ]
    lines = summarize(counter, turns, 2000).splitlines()
    assert lines[1].startswith("read_file(path=a/one.py) -> ") and lines[1].endswith(" 6 chars")
    assert lines[2].startswith("read_file(path=b/two.py) -> error: FileNotFoundError")
    assert lines[3].startswith("terminal(command=ls -la) -> exit 0")


def test_several_responses_in_one_tool_turn(counter):
    turns = [
        gpt("", call("terminal", command="whoami"), call("terminal", command="pwd")),
        Turn("tool", resp("c1", "terminal", "root") + "\n" + resp("c2", "terminal", "/work/app")),
    ]
    text = summarize(counter, turns, 2000)
    assert "terminal(command=whoami) -> 1 lines, 4 chars" in text
    assert "terminal(command=pwd) -> 1 lines, 9 chars" in text


def test_chinese_conversation_quotes_reasoning_in_chinese(counter):
    text = summarize(counter, chinese_turns(), 2000)
    assert "我们需要修复解析器中的错误" in text
    assert "问题出在 split 的切片上" in text
    assert "请修复解析器中的错误" not in text  # the user's words: carried by the compressor
    assert "期望 3 个字段" in text  # the first error line, verbatim
    assert "terminal(command=pytest -x) -> exit 1" in text
    assert tokens(counter, text) <= 2000


def test_arguments_given_as_a_json_string_and_unknown_keys(counter):
    turns = [
        Turn("gpt", '<tool_call>\n{"name": "browser", "arguments": "{\\"url\\": \\"https://example.com/x\\"}"}\n</tool_call>'),
        tool("c1", "browser", "<html>ok</html>"),
        Turn("gpt", call("calculator", a=2, b=3, op="add")),
        tool("c2", "calculator", 5),
    ]
    text = summarize(counter, turns, 2000)
    assert "browser(url=https://example.com/x)" in text
    assert "calculator(a=2, b=3)" in text  # no key argument: the first two scalar ones
    assert "calculator(a=2, b=3) -> 1 lines, 1 chars" in text


def test_deterministic(counter):
    turns = english_turns() + chinese_turns()
    first = summarize(counter, turns, 300)
    assert summarize(counter, list(turns), 300) == first
    summarizer = ExtractiveSummarizer(None, counter)
    request = SummaryRequest(tuple(turns), 300)
    text = summarizer.summarize_sync(request).text
    assert summarizer.summarize_sync(SummaryRequest(tuple(list(turns)), 300)).text == text
    assert asyncio.run(summarizer.summarize(request)).text == text
    assert asyncio.run(summarizer.summarize(request)).api_calls == 0
    # The items take the whole length asked for (the compressor has already kept the index's room):
    # more than the half its own reservation for the index used to leave them.
    assert text == summarize(counter, turns, 300) and 300 // 2 < tokens(counter, text) <= 300


def test_registered_by_name(bpe_tokenizer):
    cfg = CompressionConfig(tokenizer_name=str(bpe_tokenizer), target_max_tokens=1000, summary_target_tokens=100)
    counter = TokenCounter(str(bpe_tokenizer))
    summarizer = make_summarizer("extractive", cfg, counter)
    assert isinstance(summarizer, ExtractiveSummarizer) and summarizer.name == "extractive"


# --------------------------------------------------------------------------- malformed input


MALFORMED = [
    Turn("gpt", "<tool_call>\n{\"name\": \"terminal\", \"arguments\": {\"command\": \"ls\"\n</tool_call>"),  # cut JSON
    Turn("tool", "plain text answer with no tags; Error: permission denied for /etc/shadow.conf"),
    Turn("gpt", "<tool_call>[1, 2, 3]</tool_call>"),  # JSON, but not an object
    Turn("tool", "<tool_response>\nnot json at all\n</tool_response>"),
    Turn("gpt", '<tool_call>{"name": "x", "arguments": "{broken"}</tool_call>'),  # arguments: broken JSON string
    Turn("tool", resp("c3", "x", {"exit_code": 2, "stderr": "fatal: not a git repository", "nested": {"a": 1}})),
    Turn("gpt", '<tool_call>{"name": "y", "arguments": null}</tool_call>'),
    Turn("tool", '<tool_response>{"tool_call_id": "c4", "name": "y", "content": ["a", 1, null]}</tool_response>'),
    Turn("gpt", '<tool_call>{"arguments": {"path": "z/w.txt"}}</tool_call>'),  # no name
    Turn("tool", '<tool_response>{"tool_call_id": "c5", "content": null}</tool_response>'),
    Turn("tool", "<tool_response>[\"a list\"]</tool_response>"),  # a response nobody asked for
    Turn("gpt", ""),
    Turn("human", ""),
    Turn("tool", ""),
    Turn("system", "a system turn in the middle"),
    Turn("gpt", "<think></think><think>   </think>"),
    Turn("gpt", "<tool_call></tool_call>"),
    Turn("tool", "<tool_response></tool_response>"),
]


def test_malformed_turns_do_not_crash_and_are_still_reported(counter):
    text = summarize(counter, MALFORMED, 2000)
    assert 'call {"name": "terminal", "arguments": {"command": "ls"' in text
    # plain text with an error label inside a line, not opening one: no failure is claimed for it
    assert 'call {"name": "terminal", "arguments": {"command": "ls" -> 1 lines, 77 chars' in text
    assert "x() -> exit 2; error: fatal: not a git repository" in text  # content given as a dict
    assert "y() -> " in text
    assert "tool(path=z/w.txt)" in text
    assert "z/w.txt" in text and "/etc/shadow.conf" in text
    assert tokens(counter, text) <= 2000


@pytest.mark.parametrize("index", range(len(MALFORMED)))
def test_each_malformed_turn_alone(counter, index):
    text = summarize(counter, [MALFORMED[index]], 50)
    assert isinstance(text, str)
    assert tokens(counter, text) <= 50


def test_no_turns_gives_an_empty_summary(counter):
    assert summarize(counter, [], 100) == ""
    assert summarize(counter, [Turn("gpt", "")], 100) == ""
    # A system turn inside the region is kept as a fact of its own.
    assert summarize(counter, [Turn("gpt", ""), Turn("system", "x")], 100) == "System: x"


def test_content_as_dict_with_status_key_variants(counter):
    for key, said in (("exit_code", "exit"), ("returncode", "exit"), ("exit_status", "exit"), ("status_code", "HTTP")):
        turns = [Turn("gpt", call("terminal", command="make")), tool("c", "terminal", {key: 3, "out": "done"})]
        assert f"terminal(command=make) -> {said} 3; " in summarize(counter, turns, 500)


# --------------------------------------------------------------------------- budgets


def omission_note_tokens(counter: TokenCounter) -> int:
    return tokens(counter, "line\n(99 less important items omitted)")


COMMANDS = ["pytest -x", "ls -la src", "git status", "make build", "cat README.md", "grep -rn TODO src/app"]
THINKS = [
    "The build fails because the config file is missing. I will create it.",
    "我们需要修复解析器中的错误，然后重新运行测试。",
    "Le test échoue parce que le fichier de configuration est absent. Je vais le créer.",
    "Run the tests again.",
]
OUTPUTS = [
    "ok",
    "Traceback (most recent call last):\n  File \"src/app.py\", line 12, in <module>\nAssertionError: expected 3\n",
    "commit 0123abcd4567ef\nversion 1.4.2\n" + "log line\n" * 20,
    "Process exited with code 2\nerror: linker failed",
    "",
]


@st.composite
def trajectories(draw) -> list[Turn]:
    turns: list[Turn] = []
    for i in range(draw(st.integers(0, 12))):
        kind = draw(st.integers(0, 9))
        if kind == 0:
            turns.append(Turn("human", draw(st.sampled_from(["continue", "请继续", "Now add a test for src/new.py."]))))
            continue
        n_calls = draw(st.integers(0, 3))
        calls = [call(draw(st.sampled_from(["terminal", "shell"])), command=draw(st.sampled_from(COMMANDS)))
                 for _ in range(n_calls)]
        turns.append(gpt(draw(st.sampled_from(THINKS + [""])), *calls))
        for j in range(n_calls):
            out = draw(st.sampled_from(OUTPUTS)) * draw(st.integers(1, 6))
            content = {"exit_code": j, "output": out} if draw(st.booleans()) else out
            turns.append(tool(f"call_{i}_{j}", "terminal", content))
    return turns


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(turns=trajectories(), budget=st.integers(20, 2000))
def test_fits_the_budget(counter, turns, budget):
    """Budgets 20..2000 (only those above the size of the '(N less important items omitted)' note:
    below it, see test_budget_smaller_than_the_omission_note)."""
    budget = max(budget, omission_note_tokens(counter) + 1)
    text = summarize(counter, turns, budget)
    assert tokens(counter, text) <= budget
    assert summarize(counter, turns, budget) == text  # deterministic
    if turns and extract_items(turns) and budget >= 2000:
        assert text


@pytest.mark.parametrize("budget", [30, 40, 60, 100, 200, 400, 800, 1200, 2000])
def test_fits_fixed_budgets_on_realistic_turns(counter, budget):
    for turns in (english_turns(), chinese_turns(), english_turns() * 6):
        text = summarize(counter, turns, budget)
        assert tokens(counter, text) <= budget


def test_big_budget_keeps_everything(counter):
    items = extract_items(english_turns())
    text = summarize(counter, english_turns(), 100_000)
    assert text == "\n".join(i.text for i in items)
    assert "omitted" not in text


@pytest.mark.parametrize("budget", [20, 21])
def test_budget_smaller_than_the_omission_note(counter, budget):
    text = summarize(counter, english_turns(), budget)
    assert tokens(counter, text) <= budget, f"{tokens(counter, text)} tokens for a budget of {budget}: {text!r}"


def test_small_budget_with_one_short_item_terminates(bpe_tokenizer):
    counter = _COUNTERS.get("bpe") or TokenCounter(str(bpe_tokenizer))
    # A follow-up and a thinking turn: the long reasoning is dropped, and the omission note alone
    # does not fit either (the follow-up gives no item: the compressor carries the user's words).
    turns = [Turn("human", "continue"),
             gpt("The build fails because the configuration file is missing from the repository root.")]
    text = summarize(counter, turns, 20)  # guarded: raises Runaway instead of hanging
    assert tokens(counter, text) <= 20


def test_drops_less_important_items_before_tool_calls(counter):
    turns = english_turns()
    items = extract_items(turns)
    actions = [i.text for i in items if i.priority == ACTION]
    violations = []
    for budget in range(60, 700, 10):
        lines = set(summarize(counter, turns, budget).splitlines())
        kept_lower = [i.text for i in items if i.priority > ACTION and i.text in lines]
        missing = [a for a in actions if a not in lines]
        if kept_lower and missing:
            violations.append((budget, missing[0][:40], kept_lower[0][:40]))
    assert not violations, violations[:3]


# --------------------------------------------------------------------------- extraction bugs


def test_issue_numbers_are_kept_as_identifiers(counter):
    turns = [Turn("gpt", call("terminal", command="gh pr view")),
             tool("c1", "terminal", "PR #4521 fixes issue #1234 (release 1.2.3)")]
    text = summarize(counter, turns, 2000)
    assert "1.2.3" in text
    assert "#4521" in text and "#1234" in text


def test_first_sentence_of_chinese_reasoning(counter):
    turns = [gpt("第一步是运行测试。第二步是阅读源代码。第三步是修复错误。", call("terminal", command="pytest"))]
    text = summarize(counter, turns, 2000)
    assert "Reasoning: 第一步是运行测试。" in text
    assert "第二步" not in text


def test_unanswered_call_does_not_mislabel_later_responses(counter):
    turns = [
        gpt("", call("terminal", command="make build"), call("read_file", path="a/b.py")),
        tool("c1", "terminal", "exit code 0"),  # read_file never answered
        gpt("", call("web_search", query="linker error")),
        tool("c3", "web_search", "3 results"),
        gpt("", call("write_file", path="x/y.txt")),
        Turn("human", "stop, that is enough"),  # write_file never answered
    ]
    text = summarize(counter, turns, 2000)
    assert "web_search(query=linker error) -> " in text
    assert "write_file(path=x/y.txt)" in text


def test_paths_inside_list_values_of_a_dict_result(counter):
    turns = [Turn("gpt", call("search_files", query="separator")),
             tool("c1", "search_files", json.dumps({"matches": ["src/parser/fields.py:12", "docs/format.md:3"]}))]
    text = summarize(counter, turns, 2000)
    assert "src/parser/fields.py" in text and "docs/format.md" in text


def test_fit_keeps_order_and_respects_priorities_when_the_note_is_cheap(counter):
    """fit() on hand-made items: the least important are dropped first, oldest first within a priority."""
    items = [Item(ACTION, f"action number {i} " + "x" * 30) for i in range(4)]
    items += [Item(5, f"identifier line {i} " + "y" * 30) for i in range(4)]
    costs = counter.count([i.text for i in items])
    note = tokens(counter, "(9 less important items omitted)")
    budget = sum(costs[:4]) + 4 + sum(costs[6:]) + 2 + note + 10  # actions + the two newest identifier lines
    text = fit(items, budget, guarded(counter))
    lines = text.splitlines()
    assert lines[:4] == [i.text for i in items[:4]]
    assert items[7].text in lines and items[0].text in lines
    assert items[4].text not in lines  # the oldest of the least important goes first
    assert tokens(counter, text) <= budget


# --------------------------------------------------------------------------- failed calls


def outcome_of(counter, content, name: str = "terminal", **args) -> str:
    """The summary's line for one call answered with `content` (Hermes: a dict as JSON text)."""
    content = json.dumps(content) if isinstance(content, dict) else content
    turns = [Turn("gpt", call(name, **(args or {"command": "x"}))), tool("c1", name, content)]
    return summarize(counter, turns, 2000)


GIT_LOG = ("a1b2c3d fix: retry entry fetch on transient errors\n"
           "e4f5a6b test: a failing fetch raises FetchError\n9c8d7e6 docs: error codes")
TEST_FILE = ('35|def test_rejects_bad_payload():\n36|    with pytest.raises(ValueError):\n'
             '37|        parse({"error": "boom"})\n38|    # Traceback (most recent call last): is not expected')
LOGS = ("2025-03-13T06:49:20.454Z ERROR [worker-3] quillmark: httpx.ConnectError: Name or service not known\n"
        "Traceback (most recent call last):\n  File \"/app/quillmark/jobs.py\", line 216, in compute_node\n"
        "httpx.ConnectError: [Errno -2] Name or service not known")


@pytest.mark.parametrize("content, name", [
    ({"output": GIT_LOG, "exit_code": 0, "error": None}, "terminal"),  # the issue's two examples
    ({"content": TEST_FILE, "total_lines": 58, "truncated": False}, "read_file"),
    ({"output": LOGS, "exit_code": 0, "error": None}, "terminal"),  # logs that show an error: the call worked
    ({"success": True, "data": "3 results for 'linker error fatal'"}, "web_search"),
    ({"status_code": 200, "body": "error budget dashboard"}, "browser"),
    ("3f9a2b1 fix: failed uploads no longer crash\nProcess exited with code 0", "terminal"),  # plain text, exit 0
    ("Tests for error handling: 12 passed", "terminal"),  # plain text: no status, no failure marker
])
def test_a_successful_call_that_quotes_error_words_is_not_said_to_fail(counter, content, name):
    text = outcome_of(counter, content, name)
    assert "error:" not in text and "Errors seen" not in text, text


def test_an_http_status_is_said_as_one_not_as_an_exit_status(counter):
    text = outcome_of(counter, {"status_code": 200, "body": "ok"}, "browser")
    assert "HTTP 200" in text and "exit" not in text, text


@pytest.mark.parametrize("content, said", [
    ({"output": "fatal: not a git repository", "exit_code": 128, "error": "command exited with code 128"},
     "exit 128; error: fatal: not a git repository"),
    ({"output": "", "exit_code": 1, "error": "command exited with code 1"}, "exit 1; error: command exited with code 1"),
    ({"error": "File does not exist: src/app.py"}, "error: File does not exist: src/app.py"),  # no error word
    ({"success": False, "data": "quota exceeded"}, "-> failed; 1 lines"),  # no line says what: "failed"
    ({"status_code": 503, "body": "Service Unavailable: upstream failure"}, "HTTP 503; error: Service Unavailable"),
    ("Traceback (most recent call last):\n  File \"x.py\", line 3, in <module>\nKeyError: 'user'",
     "error: KeyError: 'user'"),  # past the traceback's header, to the exception itself
    ("fatal: could not read Username for 'https://github.com'", "error: fatal: could not read Username"),
    ("build output\nexit code 2\nlinker failed", "exit 2; error: linker failed"),
])
def test_a_call_whose_output_says_it_failed_is_said_to_fail(counter, content, said):
    text = outcome_of(counter, content)
    assert said in text, text


ERROR_WORDS = st.sampled_from(["error", "Error:", "ERROR", "failed", "FAILED", "raises", "ValueError", "fatal",
                               "panic", "denied", "not found", "Traceback", "exception", "fix:", "36|", "ok"])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(st.lists(ERROR_WORDS, min_size=1, max_size=6).map(" ".join), min_size=1, max_size=8),
       code=st.integers(0, 255))
def test_only_the_status_of_a_structured_result_says_whether_it_failed(counter, lines, code):
    output = "\n".join(lines)
    text = outcome_of(counter, {"output": output, "exit_code": code, "error": None if code == 0 else f"exit {code}"})
    assert (f"exit {code}; error: " in text) is (code != 0), text
    assert ("Errors seen" in text) is (code != 0)
