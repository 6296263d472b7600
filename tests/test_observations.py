"""Observation turns (core/dialects/observations.py): SWE-agent's `OBSERVATION:` and OpenHands v0's `EXECUTION
RESULT of [...]` user turns are tool results to pruning, the summaries and validity, never the user's
words; text calls (core/dialects/text_calls.py) name their tool and argument; and (core/dialects/outcome.py) stubs and
summaries claim an error only where the output reports one and count its lines alike.

The rows are tests/text_call_rows.py's, through the real row core and the demo tokenizer.
"""

from __future__ import annotations

import asyncio
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from conftest import DEMO_TOKENIZER, run_cli, write_jsonl
from text_call_rows import FOLLOW_UP, TASK, as_messages, openhands, swe_agent

from trajcomp.core.compressor import TrajectoryCompressor
from trajcomp.core.config import CompressionConfig, ConfigError, load_config
from trajcomp.core.dialects.rows import RowSchema
from trajcomp.core.planning.stubs import Output, StubStyle
from trajcomp.core.dialects.summary_turn import USERS_HEAD
from trajcomp.core.counting.tokens import TokenCounter
from trajcomp.core.dialects.turn import Turn
from trajcomp.core.dialects.validity import problems
from trajcomp.summarizers.extractive import extract_items

COUNTER = TokenCounter(str(DEMO_TOKENIZER))
SHAPES = {"swe-agent": swe_agent, "swe-agent-fenced": lambda: swe_agent(fenced=True), "openhands": openhands,
          "openhands-messages": lambda: as_messages(openhands())}
HEADS = ("OBSERVATION:", "EXECUTION RESULT of [")
RUNS = {"plain": {}, "prune": {"prune": True}, "segments": {"segments": True},
        "prune+segments": {"prune": True, "segments": True}}


def compress(rows: list[dict], target: int, **extra):
    cfg = CompressionConfig(tokenizer_name=str(DEMO_TOKENIZER), target_max_tokens=target, summary_target_tokens=200,
                            **{"cannot_fit": "shorten", **extra})

    async def go():
        async with TrajectoryCompressor(cfg, counter=COUNTER) as compressor:
            return await compressor.compress_rows(rows)
    return asyncio.run(go())


def turns_of(row: dict) -> list[dict]:
    return row.get("conversations") or row["messages"]


def texts(row: dict) -> list[str]:
    return [t["content"] for t in turns_of(row)]


@pytest.mark.parametrize("shape", SHAPES)
def test_prune_stubs_old_observations_in_their_own_words(shape):
    """--prune alone fits the row: its old observations become stubs that keep their head, name the
    call's tool and command, claim no error the file never reported, and the row stays valid."""
    row = SHAPES[shape]()
    [result] = compress([row], 4500, prune=True)
    out = texts(result.row)
    stubs = [t for t in out if "[pruned]" in t]
    assert len(stubs) >= 3 and "[CONTEXT SUMMARY]" not in "".join(out), out
    tool = "execute_bash" if shape.startswith("openhands") else "bash"
    for stub in stubs:
        assert stub.startswith(HEADS) and re.search(rf"\] {tool} `cat lexer\d\.go` -> \d+ lines", stub), stub
        assert "error" not in stub, stub  # the file's text says error; the output reports none
    fmt = RowSchema().adapter(result.row)
    assert not problems(turns_of(result.row), fmt) - problems(turns_of(row), fmt)


@pytest.mark.parametrize("run", RUNS)
@pytest.mark.parametrize("shape", SHAPES)
def test_no_observation_is_the_users_and_every_user_turn_is_kept(shape, run):
    """In every kind of run: the summaries' 'The user said' quotes no observation, and each real user
    turn (the task, the follow-up) is verbatim in some output row."""
    [result] = compress([SHAPES[shape]()], 1500, **RUNS[run])
    assert not result.rejected and any("[CONTEXT SUMMARY]" in t for r in result.rows for t in texts(r))
    for row in result.rows:
        for text in texts(row):
            said = text.split(USERS_HEAD, 1)[1] if USERS_HEAD in text else ""
            assert not any(head in said for head in HEADS) and "lexer" not in said.replace(TASK, ""), said
    everything = "\n".join(t for r in result.rows for t in texts(r))
    assert TASK in everything and FOLLOW_UP in everything


@pytest.mark.parametrize("shape", SHAPES)
def test_the_summary_names_each_text_calls_tool_and_command(shape):
    row = SHAPES[shape]()
    turns = RowSchema().adapter(row).turns(turns_of(row))
    lines = [item.text for item in extract_items(turns)]
    tool = "execute_bash" if shape.startswith("openhands") else "bash"
    assert f"{tool}(command=cat lexer0.go) -> 41 lines, 2338 chars" in lines, lines
    assert not any("<function=" in line or "DISCUSSION" in line for line in lines), lines


def test_observations_none_or_a_prefix_of_ones_own():
    """`none` reads the observations as the user's again (nothing to stub); a dataset's own prefix is read."""
    row = swe_agent()
    [plain] = compress([row], 4500, prune=True, input_observations="none")
    assert not any("[pruned]" in t for t in texts(plain.row))
    own = {**row, "conversations": [{**t, "content": t["content"].replace("OBSERVATION:", "Tool said:")}
                                    for t in row["conversations"]]}
    [pruned] = compress([own], 4500, prune=True, input_observations=["Tool said:"])
    assert sum(t.startswith("Tool said:\n[pruned]") for t in texts(pruned.row)) >= 3
    assert RowSchema.from_config(load_config(None, input_observations=["auto", "X:"])).observations[-1] == "X:"


@pytest.mark.parametrize("value", ["sometimes", [""], ["OBSERVATION:", 3]])
def test_a_bad_observations_value_is_a_config_error(value):
    with pytest.raises(ConfigError, match="input.observations must be"):
        load_config(None, input_observations=value)


def test_the_flag_reaches_the_run_and_a_bad_config_is_one_line_and_exit_2(tmp_path):
    rows = write_jsonl(tmp_path / "in.jsonl", [swe_agent()])
    common = ("compress", str(rows), "--tokenizer", str(DEMO_TOKENIZER), "--target-max-tokens", "4500", "--prune", "--cannot-fit", "shorten", "-q")
    done = run_cli(*common, "-o", str(tmp_path / "none.jsonl"), "--observations", "none")
    assert done.code == 0, done.stderr
    assert "[pruned]" not in (tmp_path / "none.jsonl").read_text()
    bad = tmp_path / "bad.yaml"
    bad.write_text("input:\n  observations: sometimes\n")
    failed = run_cli(*common, "-o", str(tmp_path / "bad.jsonl"), "-c", str(bad))
    assert failed.code == 2 and len(failed.stderr.strip().splitlines()) == 1, failed.stderr
    assert "input.observations" in failed.stderr and not (tmp_path / "bad.jsonl").exists()


GO_FILE = "// lexer.go\nfunc Tokenise(s string) ([]Token, error) {\n\treturn scan(s)\n}\n"
FAILURES = {
    "traceback": 'Traceback (most recent call last):\n  File "a.py", line 1\nValueError: bad token',
    "label": "Error: lexer.go:3: undefined: scan",
    "exit": "--- FAIL: TestTokenise\nFAIL\nexit status 1",
}


def test_a_stub_claims_no_error_an_output_did_not_report():
    stub = StubStyle().text(Output.of("bash", {"command": "cat lexer.go"}, GO_FILE))
    assert "error" not in stub.split("->", 1)[1], stub
    for name, text in FAILURES.items():  # each failure reported: by its error line, or its exit status
        stub = StubStyle().text(Output.of("bash", {"command": "go test"}, text))
        assert ("first error: " in stub) != (name == "exit") and ("exit 1;" in stub) == (name == "exit"), stub


@pytest.mark.parametrize("content", [GO_FILE, GO_FILE.rstrip("\n"), {"output": GO_FILE, "exit_code": 0},
                                     '{"output": "a\\nb\\n", "exit_code": 2}', FAILURES["exit"]])
def test_a_stub_and_the_summary_count_the_same_lines(content):
    import json
    stub = StubStyle().text(Output.of("bash", {"command": "cat lexer.go"}, content))
    payload = json.dumps({"name": "bash", "content": content})
    turns = [Turn("gpt", '<tool_call>\n{"name": "bash", "arguments": {"command": "cat lexer.go"}}\n</tool_call>'),
             Turn("tool", f"<tool_response>\n{payload}\n</tool_response>")]
    [action] = [i.text for i in extract_items(turns) if i.text.startswith("bash(")]
    counted = re.compile(r"(\d+) lines, (\d+) chars")
    assert counted.search(stub).groups() == counted.search(action).groups(), (stub, action)


def test_the_openai_summarizer_is_shown_observations_as_tool_turns():
    """The summary model's request labels each observation a tool turn, never a human one."""
    from openai_server import ServerThread

    with ServerThread(models=["test-model"]) as server:
        [result] = compress([swe_agent()], 1500, summarizer="openai", base_url=server.base_url,
                            summarization_model="test-model", api_key_env="TRAJCOMP_TEST_NO_KEY", cache=False)
        bodies = [m["content"] for body in server.stats.bodies for m in body["messages"] if m["role"] == "user"]
    assert not result.rejected and bodies
    shown = "\n".join(bodies)
    assert re.search(r"### Turn \d+ \(tool\)\nOBSERVATION:", shown), shown[:500]
    assert not re.search(r"### Turn \d+ \(human\)\nOBSERVATION:", shown)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shape=st.sampled_from(["swe-agent", "swe-agent-fenced", "openhands", "openhands-messages"]),
       files=st.integers(2, 6), lines=st.integers(3, 40), follow_at=st.integers(0, 6),
       share=st.floats(0.25, 0.9), run=st.sampled_from(list(RUNS)))
def test_any_such_row_keeps_its_users_words_and_breaks_nothing(shape, files, lines, follow_at, share, run):
    """Whatever the row's length, where the follow-up falls and the run: no observation is quoted as the
    user's, each real user turn is verbatim in some output row, and no output row breaks a rule its
    input kept (a call followed by its observation among them)."""
    build = {"swe-agent": swe_agent, "swe-agent-fenced": lambda **k: swe_agent(fenced=True, **k),
             "openhands": openhands, "openhands-messages": lambda **k: as_messages(openhands(**k))}[shape]
    row = build(files=files, lines=lines, follow_at=follow_at)
    length = sum(COUNTER.count(texts(row)))
    [result] = compress([row], max(1000, int(length * share)), **RUNS[run])
    assert not result.rejected, result.detail
    everything = "\n".join(t for r in result.rows for t in texts(r))
    real = [t for t in texts(row) if not t.startswith(HEADS) and t in (TASK, FOLLOW_UP)]
    assert all(t in everything for t in real)
    fmt = RowSchema().adapter(row)
    for out in result.rows:
        said = [t.split(USERS_HEAD, 1)[1] for t in texts(out) if USERS_HEAD in t]
        assert not any(head in s for s in said for head in HEADS)
        if not RUNS[run].get("segments"):  # a segment row may end on a call its next segment answers
            assert not problems(turns_of(out), fmt) - problems(turns_of(row), fmt)
