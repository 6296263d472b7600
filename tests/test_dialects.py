"""Trainer dialects: LLaMA-Factory's and axolotl's ShareGPT rows, through the CLI and the row core.

Rows are built in the shapes the trainers document (LLaMA-Factory's data/README.md sharegpt format,
a JSON array with `conversations` and `tools`; axolotl's chat_template rows with `role`/`content`).
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest

from conftest import read_jsonl, run_cli, write_jsonl

from trajcomp.core.compressor import TrajectoryCompressor
from trajcomp.core.config import ConfigError, load_config
from trajcomp.core.counting.tokens import TokenCounter

TARGET, SUMMARY = "1500", "150"
USER_SIDE = {"human", "observation", "user", "tool"}
GPT_SIDE = {"gpt", "function_call", "assistant"}


def follows_alternation(turns: list[dict], key: str = "from") -> bool:
    """LLaMA-Factory's rule on a row's own names: after an optional system turn, user side at odd
    positions (1-based), gpt side at even ones, ending on the gpt side."""
    names = [t[key] for t in turns]
    body = names[1:] if names[:1] == ["system"] else names
    return len(body) % 2 == 0 and set(body[0::2]) <= USER_SIDE and set(body[1::2]) <= GPT_SIDE


def observation(i: int, k: int) -> str:
    lines = [f"[{k}:{j:02d}] tests/test_service_{i}.py::test_case_{j} PASSED" for j in range(45)]
    return json.dumps({"exit_code": k % 2, "stdout": "\n".join(lines)})


def followup(i: int) -> str:
    return f"Now test all of service-{i}."


def llamafactory_row(i: int, steps: int = 6, system: bool = False) -> dict:
    """A LLaMA-Factory agent row: human, a function_call/observation pair, a gpt answer, then a human
    follow-up, function_call/observation pairs and a final gpt answer. (A row with one user turn has no
    place for the summary, a user turn, but an observation's: it stays as it was.)"""
    conv = [{"from": "system", "value": "You are a build engineer with shell access."}] if system else []
    conv.append({"from": "human", "value": f"Task {i}: the nightly build of service-{i} fails; find out why."})
    for k in range(steps + 1):
        call = {"name": "run_shell", "arguments": {"command": f"make -C svc{i} test STEP={k}"}}
        conv.append({"from": "function_call", "value": json.dumps(call)})
        conv.append({"from": "observation", "value": observation(i, k)})
        if k == 0:
            conv.append({"from": "gpt", "value": f"Step 0 of service-{i} passes; the failure is later."})
            conv.append({"from": "human", "value": followup(i)})
    conv.append({"from": "gpt", "value": f"Service {i}: step 3 fails on a missing fixture; added it."})
    tools = [{"name": "run_shell", "description": "Run a shell command.",
              "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}]
    return {"conversations": conv, "tools": json.dumps(tools), "id": i}


def openai_names_row(i: int) -> dict:
    """Hermes turns under OpenAI-style names in a ShareGPT row (user, assistant, tool)."""
    conv = [{"from": "system", "value": "You are a function calling AI model. <tools>[]</tools>"},
            {"from": "user", "value": f"Task {i}: make the failing test in src/app_{i}.py pass."}]
    for k in range(6):
        call = {"name": "terminal", "arguments": {"command": f"pytest tests/test_{i}_{k}.py -x"}}
        conv.append({"from": "assistant", "value": f"<tool_call>\n{json.dumps(call)}\n</tool_call>"})
        conv.append({"from": "tool", "value": f"<tool_response>\n{observation(i, k)}\n</tool_response>"})
    conv.append({"from": "assistant", "value": f"Task {i} is done."})
    return {"conversations": conv, "id": i}


def axolotl_row(i: int) -> dict:
    """axolotl's chat_template rows: `conversations` of {role, content} (message_property_mappings default)."""
    sharegpt = openai_names_row(i)["conversations"]
    return {"conversations": [{"role": t["from"], "content": t["value"]} for t in sharegpt], "id": i}


# shorten: these rows' protected turns are over TARGET with a summary, and the tests are about how dialects are
# shortened (under the default keep, they would be written as they were)
def args(src: Path, out: Path, tok: Path, *extra: str) -> list[str]:
    return ["compress", str(src), "-o", str(out), "--tokenizer", str(tok), "--target-max-tokens", TARGET,
            "--summary-target-tokens", SUMMARY, "--cannot-fit", "shorten", "-q", *extra]


def write_json_array(path: Path, rows: list[dict]) -> Path:
    path.write_text(json.dumps(rows, indent=2, ensure_ascii=False), encoding="utf-8")
    return path


def config_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "dialect.yaml"
    path.write_text(text, encoding="utf-8")
    return path


_COUNTERS: dict[str, TokenCounter] = {}


def compressor_for(tok: Path, **overrides) -> TrajectoryCompressor:
    """A row core with the CLI tests' budgets and `overrides`; one tokenizer load per test session."""
    if str(tok) not in _COUNTERS:
        _COUNTERS[str(tok)] = TokenCounter(str(tok))
    config = load_config(None, tokenizer_name=str(tok), target_max_tokens=int(TARGET),
                         summary_target_tokens=int(SUMMARY), **{"cannot_fit": "shorten", **overrides})
    return TrajectoryCompressor(config, counter=_COUNTERS[str(tok)])


def core(tok: Path, rows: list[dict], **overrides) -> list:
    """The rows through the row core (in process)."""

    async def compress():
        async with compressor_for(tok, **overrides) as compressor:
            return await compressor.compress_rows(rows)

    return asyncio.run(compress())


def summary_turn(turns: list[dict], key: str = "from", text: str = "value") -> dict:
    found = [t for t in turns if t[text].startswith("[CONTEXT SUMMARY]:")]
    assert len(found) == 1
    return found[0]


# --------------------------------------------------------------------------- LLaMA-Factory through the CLI


def test_llamafactory_rows_keep_their_names_and_alternation(tmp_path, bpe_tokenizer):
    rows = [llamafactory_row(0), llamafactory_row(1, system=True), llamafactory_row(2, steps=9)]
    assert all(follows_alternation(r["conversations"]) for r in rows)
    src = write_json_array(tmp_path / "glaive_like.json", rows)  # LLaMA-Factory keeps datasets as JSON arrays
    out = tmp_path / "out.json"
    result = run_cli(*args(src, out, bpe_tokenizer))
    assert result.code == 0, result.stderr
    written = json.loads(out.read_text(encoding="utf-8"))
    assert [r["id"] for r in written] == [0, 1, 2]
    for before, after in zip(rows, written):
        assert after["compression_metrics"]["outcome"] == "compressed"
        assert after["tools"] == before["tools"]
        turns = after["conversations"]
        assert follows_alternation(turns), [t["from"] for t in turns]
        assert {t["from"] for t in turns} <= {t["from"] for t in before["conversations"]}
        summary = summary_turn(turns)
        assert summary["from"] == "human"
        # The summary stands where the user's follow-up was, and carries it word for word; every
        # function_call is still answered by its observation.
        at = turns.index(summary)
        assert turns[at - 1]["from"] == "gpt" and turns[at + 1]["from"] == "function_call"
        assert followup(before["id"]) in summary["value"]
        names = [t["from"] for t in turns]
        assert all(b == "observation" for a, b in zip(names, names[1:]) if a == "function_call")
        assert turns[-1] == before["conversations"][-1]


def test_dialect_hermes_turns_the_alternation_off(bpe_tokenizer):
    """The same rows under `input.dialect: hermes` are planned by Hermes' rules, which break it."""
    (result,) = core(bpe_tokenizer, [llamafactory_row(0)], input_dialect="hermes")
    turns = result.row["conversations"]
    at = turns.index(summary_turn(turns))
    assert turns[at - 1]["from"] == "observation"  # Hermes keeps a call with its answer ...
    assert not follows_alternation(turns)  # ... and so puts the summary on the gpt side


def test_dialect_llamafactory_applies_to_rows_without_its_names(bpe_tokenizer):
    """`input.dialect: llamafactory` keeps the rule in rows named human/gpt only (plain Hermes would not)."""
    conv = llamafactory_row(0)["conversations"]
    renamed = [{**t, "from": {"function_call": "gpt", "observation": "tool"}.get(t["from"], t["from"])} for t in conv]
    for dialect, alternates in (("auto", False), ("llamafactory", True)):
        (result,) = core(bpe_tokenizer, [{"conversations": renamed}], input_dialect=dialect)
        assert result.metrics.was_compressed
        assert follows_alternation(result.row["conversations"]) is alternates


def test_a_llamafactory_row_that_does_not_alternate_gets_hermes_rules(bpe_tokenizer):
    row = llamafactory_row(0)
    conv = row["conversations"]
    conv.insert(3, {"from": "observation", "value": observation(0, 99)})  # two observations in a row
    assert not follows_alternation(conv)
    (result,) = core(bpe_tokenizer, [row])
    assert result.metrics.was_compressed
    turns = result.row["conversations"]
    assert turns[turns.index(summary_turn(turns)) - 1]["from"] == "observation"  # calls kept with answers


def test_dry_run_plans_llamafactory_rows_as_the_run_does(tmp_path, bpe_tokenizer):
    rows = [llamafactory_row(i, steps=3 + i) for i in range(4)]
    src = write_json_array(tmp_path / "rows.json", rows)
    out = tmp_path / "out.json"
    dry = run_cli(*args(src, out, bpe_tokenizer), "--dry-run", "--json")
    assert dry.code == 0, dry.stderr
    planned = json.loads(dry.stdout)
    assert (planned["rows"], planned["rows_rejected"]) == (4, 0)
    assert run_cli(*args(src, out, bpe_tokenizer)).code == 0
    outcomes = [r["compression_metrics"]["outcome"] for r in json.loads(out.read_text())]
    assert planned["decisions"]["compress"] == outcomes.count("compressed") > 0
    assert planned["decisions"]["nothing_to_compress"] == outcomes.count("nothing_to_compress")


def test_a_row_no_region_of_which_keeps_the_rule_is_left_as_it_was(tmp_path, bpe_tokenizer):
    """Only a region that would put the summary on the gpt side exists: the row stays as it was,
    `nothing_to_compress`, in the run and in the dry run; Hermes' rules would compress it."""
    conv = llamafactory_row(0, steps=1)["conversations"][:3]  # human, function_call, observation
    analysis = "\n".join(f"Step {k}: the fixture loader in conftest_{k}.py reads a stale cache." for k in range(60))
    conv += [{"from": "gpt", "value": analysis}, {"from": "human", "value": "Thanks. Now fix it."},
             {"from": "gpt", "value": "Fixed the loader."}]
    src = write_jsonl(tmp_path / "rows.jsonl", [{"conversations": conv}])
    tail = ("--protect-last-n", "2")  # the tail opens on the human follow-up
    dry = run_cli(*args(src, tmp_path / "dry.jsonl", bpe_tokenizer), *tail, "--dry-run", "--json")
    assert json.loads(dry.stdout)["decisions"]["nothing_to_compress"] == 1
    out = tmp_path / "out.jsonl"
    assert run_cli(*args(src, out, bpe_tokenizer), *tail).code == 0
    (row,) = read_jsonl(out)
    assert row["conversations"] == conv
    assert row["compression_metrics"]["outcome"] == "nothing_to_compress"
    (hermes,) = core(bpe_tokenizer, [{"conversations": conv}], protect_last_n_turns=2, input_dialect="hermes")
    assert hermes.metrics.was_compressed
    assert not follows_alternation(hermes.row["conversations"])


# --------------------------------------------------------------------------- other names, other keys


def test_openai_style_names_and_axolotl_rows_through_the_cli(tmp_path, bpe_tokenizer):
    rows = [openai_names_row(0), axolotl_row(1)]
    src = write_jsonl(tmp_path / "rows.jsonl", rows)
    out = tmp_path / "out.jsonl"
    result = run_cli(*args(src, out, bpe_tokenizer))
    assert result.code == 0, result.stderr
    named, axolotl = read_jsonl(out)
    assert named["compression_metrics"]["outcome"] == "compressed"
    assert summary_turn(named["conversations"])["from"] == "user"  # the row's own name for human
    assert {t["from"] for t in named["conversations"]} == {"system", "user", "assistant", "tool"}
    assert axolotl["compression_metrics"]["outcome"] == "compressed"
    assert all(set(t) == {"role", "content"} for t in axolotl["conversations"])
    assert summary_turn(axolotl["conversations"], "role", "content")["role"] == "user"
    assert not (tmp_path / "out_rejects.jsonl").exists()


def test_axolotl_rows_read_back_from_parquet_keep_their_keys(bpe_tokenizer):
    """A Parquet column has one turn type, so role/content turns come back with null from/value."""
    row = axolotl_row(0)
    row["conversations"] = [{"from": None, "value": None, **t} for t in row["conversations"]]
    (result,) = core(bpe_tokenizer, [row])
    assert result.metrics.was_compressed
    summary = summary_turn(result.row["conversations"], "role", "content")
    assert summary == {"role": "user", "content": summary["content"]}


def test_roles_from_the_config_add_names_and_null_removes_one(tmp_path, bpe_tokenizer):
    """oasst-style names (prompter/assistant) are added; `user: null` makes rows that use it rejects."""
    conv = openai_names_row(0)["conversations"]
    prompter = [{**t, "from": "prompter" if t["from"] == "user" else t["from"]} for t in conv]
    src = write_jsonl(tmp_path / "rows.jsonl", [{"conversations": prompter}, {"conversations": conv}])
    out = tmp_path / "out.jsonl"
    cfg = config_file(tmp_path, "input:\n  roles:\n    prompter: human\n    user: null\n")
    result = run_cli(*args(src, out, bpe_tokenizer), "-c", str(cfg))
    assert result.code == 0, result.stderr
    (written,) = read_jsonl(out)
    assert summary_turn(written["conversations"])["from"] == "prompter"
    (reject,) = read_jsonl(tmp_path / "out_rejects.jsonl")
    assert reject["reason"] == "unknown_role" and "'user'" in reject["detail"] and "input.roles" in reject["detail"]
    report = json.loads((tmp_path / "out_metrics.json").read_text())
    assert report["config"]["input"]["roles"]["prompter"] == "human" and "user" not in report["config"]["input"]["roles"]


@pytest.mark.parametrize("text,needle", [
    ("input:\n  dialect: axolotl2\n", "input.dialect must be one of auto, hermes, llamafactory"),
    ("input:\n  roles:\n    bot: robot\n", "input.roles maps role names to one of system, human, gpt, tool"),
    ("input:\n  roles: [human, gpt]\n", "input.roles must be a mapping"),
])
def test_bad_dialect_or_roles_is_a_config_error(tmp_path, text, needle):
    with pytest.raises(ConfigError, match=re.escape(needle)):
        load_config(config_file(tmp_path, text))


def test_bad_dialect_is_one_line_exit_2(tmp_path, bpe_tokenizer):
    src = write_jsonl(tmp_path / "rows.jsonl", [openai_names_row(0)])
    cfg = config_file(tmp_path, "input:\n  dialect: axolotl2\n")
    result = run_cli(*args(src, tmp_path / "out.jsonl", bpe_tokenizer), "-c", str(cfg))
    assert result.code == 2
    assert "input.dialect must be one of" in result.stderr and result.stderr.count("\n") == 1
    assert not (tmp_path / "out.jsonl").exists()


# --------------------------------------------------------------------------- the row core


def test_row_core_compresses_every_dialect_as_the_cli_does(tmp_path, bpe_tokenizer):
    rows = [llamafactory_row(0), llamafactory_row(1, system=True), openai_names_row(2), axolotl_row(3)]
    src = write_jsonl(tmp_path / "rows.jsonl", rows)
    out = tmp_path / "out.jsonl"
    assert run_cli(*args(src, out, bpe_tokenizer)).code == 0
    results = core(bpe_tokenizer, rows)
    assert not any(r.rejected for r in results)
    assert [r.row for r in results] == read_jsonl(out)
    assert all(r.metrics.was_compressed for r in results)
    for result in results[:2]:
        assert follows_alternation(result.row["conversations"])
    assert rows[0]["conversations"][4]["from"] == "human"  # the input rows are not mutated


def test_compress_trajectory_uses_the_configured_roles(bpe_tokenizer):
    compressor = compressor_for(bpe_tokenizer)
    turns, metrics = asyncio.run(compressor.compress_trajectory(llamafactory_row(0)["conversations"]))
    assert metrics.was_compressed and follows_alternation(turns)
