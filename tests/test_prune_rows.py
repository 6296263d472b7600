"""compress --prune on rows of every dialect: the stubs' styles, ids and names kept, 0 invalid rows
(property test), LLaMA-Factory's alternation, and the config's errors."""

from __future__ import annotations

import json
import sys
from collections import Counter

import pytest
from conftest import DEMO_TOKENIZER, ROOT, read_jsonl, run_cli, write_jsonl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_dialects import follows_alternation
from test_prune import compress_all, fit_by_pruning, swe_config, tool_outputs
from test_validity import COUNTER, check, config, make_row, steps

from trajcomp.core.dialects.rows import RowSchema
from trajcomp.core.planning.stubs import Output, StubStyle

sys.path.insert(0, str(ROOT / "scripts"))
import swe_rows  # noqa: E402


def stub_contents(row: dict, result_row: dict, dialect: str) -> list[tuple[dict, str]]:
    """(the original output's JSON object, its stub) for every stubbed tool turn."""
    before, after = tool_outputs(row, dialect), tool_outputs(result_row, dialect)
    out = []
    for i, (_, stub) in after.items():
        if stub != before[i][1]:
            stub = json.loads(stub) if dialect == "hermes" else stub
            out.append((json.loads(before[i][1]), stub))
    return out


@pytest.mark.parametrize("dialect", ["hermes", "openai", "llamafactory"])
@pytest.mark.parametrize("style", ["swe-agent", "openhands", "template"])
def test_each_style_writes_its_documented_stub(dialect, style):
    template = "[{tool} `{argument}` exit={exit_code} {lines} lines {chars} chars later={later}]"
    extra = {"prune_style": style, "prune_template": template if style == "template" else None}
    cfg = swe_config(dialect, prune=True, **extra)
    rows = swe_rows.rows(dialect, 6, seed=40)
    seen = 0
    for row, result in zip(rows, compress_all(cfg, rows)):
        if result.metrics.passes:  # a summary moved the turns: stub_contents compares them in place
            continue
        for output, stub in stub_contents(row, result.row, dialect):
            text = output["output"]
            if style == "swe-agent":
                assert stub == f"Old environment output: ({text.count(chr(10)) + 1} lines omitted)"
            elif style == "openhands":
                assert stub == "<MASKED>"
            else:
                assert stub.startswith("[bash `") and f"exit={output['exit_code']} " in stub
                assert f" {text.count(chr(10)) + 1} lines {len(text)} chars later=" in stub
            seen += 1
    assert seen >= 5


def test_the_hermes_stub_names_the_call_its_exit_code_first_error_and_size():
    cfg, fit = fit_by_pruning("hermes", "turns")
    seen = Counter()
    for row, result in fit:
        for output, stub in stub_contents(row, result.row, "hermes"):
            text = output["output"]
            assert stub.startswith("[pruned") and "\n" not in stub
            assert " bash `" in stub and f"-> exit {output['exit_code']}; " in stub
            assert stub.endswith(f"{text.count(chr(10)) + 1} lines, {len(text)} chars")
            if "Traceback" in text:
                assert "; first error: tests/io/test_card.py::test_float_repr FAILED; " in stub
                seen["error"] += 1
            seen["stub"] += 1
    assert seen["error"] and seen["stub"] > seen["error"]


def test_stub_fields_of_outputs_of_every_shape():
    out = Output.of("terminal", '{"command": "npm test", "cwd": "/app"}', "12 passed\nexit code 3")
    assert (out.argument, out.exit_code, out.error, out.lines, len(out.text)) == ("npm test", 3, "", 2, 21)
    out = Output.of("read_file", {"limit": 5, "path": "a.py"}, {"content": {"content": "x = 1\nERROR: boom"}})
    assert (out.argument, out.exit_code, out.error, out.lines) == ("a.py", None, "ERROR: boom", 2)
    assert StubStyle().text(out) == "[pruned] read_file `a.py` -> first error: ERROR: boom; 2 lines, 17 chars"
    assert StubStyle().text(Output.of("", None, "plain text"), later=out) == (
        "[pruned: identical to the later output of read_file `a.py`] 1 lines, 10 chars")
    assert StubStyle("template", "{later}").text(out, later=Output.of("", None, "x")) == "a later output"
    assert StubStyle("template", "{tool}:{exit_code}:{later}").text(Output.of("t", "x", "out")) == "t::"


# --------------------------------------------------------------------------- every dialect, generated


def ids_and_names(row: dict, tools_only: bool = False) -> list:
    """What pairs each tool output with its call, in each dialect: roles, OpenAI ids and names, Hermes JSON
    (every <tool_response> of a turn, each read to its JSON's end)."""
    fmt = RowSchema().adapter(row)
    native = fmt.native_turns(row)
    out = []
    for message, turn in zip(native, fmt.turns(native)):
        key = (message.get("role"), message.get("tool_call_id"), message.get("name"), message.get("from"))
        for piece in turn.text.split("<tool_response>\n")[1:]:
            body = json.JSONDecoder().raw_decode(piece)[0]
            key += (body.get("tool_call_id"), body.get("name"), sorted(body)) if isinstance(body, dict) else (body,)
        if not tools_only or turn.role == "tool":
            out.append(key)
    return out


def is_subsequence(part: list, whole: list) -> bool:
    rest = iter(whole)
    return all(any(item == other for other in rest) for item in part)


SHAPES = ("plain", "close_tag", "no_content", "reversed", "short_beside_long")


def shaped(row: dict, shape: str) -> dict:
    """`row` with the tool outputs of an awkward shape: a literal </tool_response> in each output, Hermes
    payloads whose output is under "result", results in the reverse order of their calls, and (Hermes)
    each call's results in one turn with a short "ok" first."""
    row = json.loads(json.dumps(row))
    turns = row.get("messages") or row["conversations"]
    text = "content" if "messages" in row else ("value" if "value" in turns[0] else "content")
    role = "role" if "role" in turns[0] else "from"
    tools = [i for i, t in enumerate(turns) if t[role] in ("tool", "observation")]
    hermes = "messages" not in row and any("<tool_response>" in turns[i][text] for i in tools)
    for i in tools:
        if shape == "close_tag" and not hermes:
            turns[i][text] += "\nprint('</tool_response>')"
        elif shape in ("close_tag", "no_content") and hermes:
            body = json.loads(turns[i][text].split("\n")[1])
            if shape == "close_tag":
                body["content"] += "\n</tool_response>"
            else:
                body["result"] = body.pop("content")
            turns[i][text] = f"<tool_response>\n{json.dumps(body)}\n</tool_response>"
    groups, group = [], []
    for i in tools:
        if group and i != group[-1] + 1:
            groups.append(group)
            group = []
        group.append(i)
    groups += [group] if group else []
    for group in groups if shape == "reversed" else []:
        turns[group[0] : group[-1] + 1] = turns[group[0] : group[-1] + 1][::-1]
    if shape == "short_beside_long" and hermes:
        for group in groups[::-1]:
            ok = {"tool_call_id": "ok", "name": "terminal", "content": "ok"}
            joined = "\n".join([f"<tool_response>\n{json.dumps(ok)}\n</tool_response>"] + [turns[i][text] for i in group])
            turns[group[0] : group[-1] + 1] = [{**turns[group[0]], text: joined}]
    return row


row_cases = st.tuples(st.sampled_from(("hermes", "llamafactory", "axolotl", "openai")), steps, st.booleans(),
                      st.floats(0.1, 0.9), st.integers(60, 400), st.integers(0, 5),
                      st.tuples(st.booleans(), st.booleans(), st.booleans()),
                      st.sampled_from(("hermes", "swe-agent", "openhands")), st.sampled_from(SHAPES))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(row_cases)
def test_pruned_rows_stay_valid_keep_ids_and_take_no_stub_more_than_needed(case):
    dialect, plan, system, frac, summary, last_n, flags, style, shape = case
    row = shaped(make_row(dialect, plan, system), shape)
    cfg = config(row, frac, summary, last_n, flags, prune=True, prune_style=style)
    result = check(row, cfg)  # 0 new problems, whatever happened to the row
    m = result.metrics
    if m.passes == 0 and m.pruned_outputs:  # stubs alone: same turns, same ids and names
        assert ids_and_names(result.row) == ids_and_names(row)
    if m.pruned_outputs:  # stubs beside a summary too: each tool turn kept has its input's ids and names
        assert is_subsequence(ids_and_names(result.row, True), ids_and_names(row, True))
    if m.passes == 0 and m.pruned_outputs and not m.still_over_limit:  # fit by stubs alone: the fewest
        assert_minimal(row, result.row, cfg)


def assert_minimal(row: dict, out: dict, cfg) -> None:
    """Restoring the output of the last stub of the order takes the row over the target again."""
    fmt = RowSchema().adapter(row)
    before, after = fmt.native_turns(row), fmt.native_turns(out)
    texts = [t.text for t in fmt.turns(before)]
    changed = [i for i, (a, b) in enumerate(zip(before, after)) if a != b]
    keys = {i: output_key(texts[i]) for i, t in enumerate(fmt.turns(before)) if t.role == "tool"}
    # the order: older copies of a later identical output first, then the others, oldest first
    copies = [i for i in changed if any(keys[j] == keys[i] for j in keys if j > i)]
    others = [i for i in changed if i not in copies]
    last = max(others) if others else max(copies)
    restored = [before[i] if i == last else t for i, t in enumerate(after)]
    assert sum(COUNTER.count([t.text for t in fmt.turns(after)])) <= cfg.target_max_tokens
    assert sum(COUNTER.count([t.text for t in fmt.turns(restored)])) > cfg.target_max_tokens


def output_key(text: str) -> str:
    """An output's own text: its <tool_response>s' outputs (their call ids aside), else the turn's text."""
    if "<tool_response>" not in text:
        return text
    bodies = [json.JSONDecoder().raw_decode(piece)[0] for piece in text.split("<tool_response>\n")[1:]]
    return json.dumps([b.get("content", b.get("result")) for b in bodies])


def test_the_property_prunes_rows_in_every_dialect():
    """Guards the property against vacuity: rows of each dialect are fit by stubs alone often."""
    fit: Counter = Counter()

    @settings(max_examples=80, deadline=None, database=None, derandomize=True)
    @given(row_cases)
    def collect(case):
        dialect, plan, system, frac, summary, last_n, flags, style, shape = case
        row = shaped(make_row(dialect, plan, system), shape)
        m = check(row, config(row, frac, summary, last_n, flags, prune=True, prune_style=style)).metrics
        fit[dialect] += m.passes == 0 and bool(m.pruned_outputs) and not m.still_over_limit

    collect()
    assert sum(fit.values()) >= 10 and len(fit) >= 3, fit


@pytest.mark.parametrize("style", ["hermes", "swe-agent", "openhands"])
@pytest.mark.parametrize("dialect", ["hermes", "llamafactory", "axolotl", "openai"])
def test_a_row_of_each_dialect_fit_by_stubs_keeps_its_ids_and_no_stub_more(dialect, style):
    """The property's fit-by-stubs branch on a fixed row of each dialect (whatever the generator draws)."""
    plan = [("calls", [40]), ("calls", [45]), ("say", 8), ("calls", [50, 35]), ("calls", [30]), ("say", 6)]
    row = make_row(dialect, plan, True)
    fits = 0
    for frac in (0.5, 0.6, 0.7, 0.8):
        cfg = config(row, frac, 60, 1, (True, True, True), prune=True, prune_style=style)
        result = check(row, cfg)
        m = result.metrics
        if m.passes == 0 and m.pruned_outputs and not m.still_over_limit:
            assert ids_and_names(result.row) == ids_and_names(row)
            assert_minimal(row, result.row, cfg)
            fits += 1
    assert fits >= 2


# --------------------------------------------------------------------------- LLaMA-Factory, through the CLI


def test_llamafactory_agent_rows_are_fit_by_stubs_and_keep_the_alternation(tmp_path):
    """One request, then only calls and observations: nothing a summary may replace (LLaMA-Factory would
    truncate them), but stubs fit them; every row written keeps LLaMA-Factory's alternation."""
    rows = swe_rows.rows("llamafactory", 12)
    src = write_jsonl(tmp_path / "lf.jsonl", rows)
    cfg = tmp_path / "lf.yaml"
    cfg.write_text(f"input:\n  dialect: llamafactory\ntokenizer:\n  name: {DEMO_TOKENIZER}\n"
                   "compression:\n  target_max_tokens: 6000\n  summary_target_tokens: 300\n  cannot_fit: shorten\n",
                   encoding="utf-8")
    outcomes = {}
    for flag in ("", "--prune"):
        out = tmp_path / f"out{flag}.jsonl"
        run = run_cli("compress", str(src), "-c", str(cfg), "-o", str(out), "-q", *([flag] if flag else []))
        assert run.code == 0, run.stderr
        written = read_jsonl(out)
        assert len(written) == len(rows) and all(follows_alternation(r["conversations"]) for r in written)
        outcomes[flag] = Counter(r["compression_metrics"]["outcome"] for r in written)
        statuses = Counter(r["compression_metrics"]["status"] for r in written)
    assert outcomes[""]["nothing_to_compress"] >= 6 and "nothing_to_compress" not in outcomes["--prune"]
    pruning = json.loads((tmp_path / "out--prune_metrics.json").read_text(encoding="utf-8"))["pruning"]
    stats = run_cli("stats", str(src), "-c", str(cfg), "--prune", "--json")
    # rows nothing could summarize avoided no summary: without --prune, none was asked for
    assert pruning["rows_fit_without_summary"] >= 6 and pruning["summaries_avoided"] == 0
    assert json.loads(stats.stdout)["pruning"]["summaries_avoided"] == 0, stats.stderr
    assert statuses["compressed"] == outcomes[""]["nothing_to_compress"] and not statuses["cannot_fit"]


@pytest.mark.parametrize("yaml_text,message", [
    ("compression:\n  prune_style: terse\n", "compression.prune_style must be one of hermes, swe-agent"),
    ("compression:\n  prune_style: template\n", "prune_style template needs compression.prune_template"),
    ("compression:\n  prune_style: template\n  prune_template: '{tool} {size}'\n", "unknown field {size}"),
    ("compression:\n  prune_template: '{tool}'\n", "prune_template is used only with prune_style: template"),
    ("compression:\n  prune_style: template\n  prune_template: 'exit {exit_code:d}'\n",
     "prune_template fails on an output with no exit code or error: Unknown format code 'd'"),
    ("compression:\n  prune_style: template\n  prune_template: '{exit_code:s}'\n", "fails on an output: Unknown format code 's'"),
    ("compression:\n  prune_min_chars: -1\n", "compression.prune_min_chars must be >= 0"),
    ("compression:\n  prune: 'yes'\n", "compression.prune must be bool"),
])
def test_bad_pruning_config_is_one_line_and_exit_2(tmp_path, yaml_text, message):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text(yaml_text, encoding="utf-8")
    src = write_jsonl(tmp_path / "in.jsonl", swe_rows.rows("hermes", 1))
    run = run_cli("compress", str(src), "-c", str(cfg), "--tokenizer", str(DEMO_TOKENIZER), "-q")
    assert run.code == 2 and message in run.stderr and len(run.stderr.strip().splitlines()) == 1, run.stderr
