"""Rows in the shapes public agent datasets come in (tests/fixtures/agent_rows, hand-written from the
formats' documentation), through `stats`, `compress` (plain, --prune, --segments, both; both count
modes), `show` and a Parquet round trip, checking what must hold whatever the shape: every row out or
rejected with a reason, calls paired, no field lost, the task (the first user turn) verbatim.

The CLI runs in this process (`main`), once per mode over the whole folder. The issue 45 items that
other branches build (the system / tools / reasoning counts, observations written as user turns) are
not asserted here yet: this file states what holds now.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import read_jsonl
from test_fits import qwen3_folder

from trajcomp.cli.commands import main
from trajcomp.core.dialects.openai_rows import OpenAIMessages
from trajcomp.formats.parquet import PARQUET

FIXTURES = Path(__file__).parent / "fixtures" / "agent_rows"
SHAPES = sorted(p.stem for p in FIXTURES.glob("*.jsonl"))
MODES = {"plain": (), "prune": ("--prune",), "segments": ("--segments",), "both": ("--prune", "--segments")}


def cli(*args: str) -> None:
    with pytest.raises(SystemExit) as exit:
        main(list(args))
    assert exit.value.code == 0


def turns_of(row: dict) -> list[dict]:
    return row.get("messages") or row.get("conversations") or []


def text_of(turn: dict) -> str:
    value = turn.get("content", turn.get("value"))
    return "".join(p.get("text", "") for p in value) if isinstance(value, list) else value or ""


def first_user(row: dict) -> str:
    return next(text_of(t) for t in turns_of(row) if t.get("role", t.get("from")) in ("user", "human"))


def test_the_fixtures_hold_every_shape():
    assert SHAPES == ["agentlab", "openhands_sdk", "openhands_v0", "swe_agent", "tool_use"]
    rows = {shape: read_jsonl(FIXTURES / f"{shape}.jsonl") for shape in SHAPES}
    sdk = rows["openhands_sdk"]
    assert {"messages", "tools", "metadata"} <= set(sdk[0])
    assert {type(m["content"]) for r in sdk for m in r["messages"]} == {list, str}
    assert any("reasoning_content" in m for m in sdk[0]["messages"])
    for shape in ("openhands_v0", "swe_agent", "agentlab"):
        assert all(isinstance(r["system"], str) and r["conversations"][0]["role"] == "user" for r in rows[shape])
    assert all(isinstance(json.loads(r["tools"]), list) for r in rows["tool_use"])


@pytest.mark.parametrize("count_mode", ["turns", "chat_template"])
@pytest.mark.parametrize("mode", list(MODES))
def test_every_shape_compresses_keeping_rows_fields_calls_and_the_task(tmp_path, count_mode, mode):
    out = tmp_path / "out"
    cli("compress", str(FIXTURES), "-o", str(out), "-q", "--tokenizer", str(qwen3_folder()),
        "--count-mode", count_mode, "--target-max-tokens", "500", "--summary-target-tokens", "120", *MODES[mode])
    compressed = 0
    rejects = read_jsonl(out / "rejects.jsonl") if (out / "rejects.jsonl").exists() else []
    assert all(r["reason"] and r["detail"] for r in rejects)
    reasons = {(Path(r["source"]).stem, json.loads(r["raw"])["id"]): r["reason"] for r in rejects}
    # Qwen3's template cannot render content given as a list of parts (it adds the content to a string), nor
    # can a trainer with it: in chat_template mode that row is rejected as template_error, named.
    known = {("openhands_sdk", "oh-sdk-0"): "template_error"} if count_mode == "chat_template" else {}
    assert reasons == known
    for shape in SHAPES:
        rows = read_jsonl(FIXTURES / f"{shape}.jsonl")
        written = read_jsonl(out / f"{shape}.jsonl")
        rejected = {row_id for (stem, row_id) in reasons if stem == shape}
        for row in rows:
            outs = [w for w in written if w.get("id") == row["id"]]
            assert bool(outs) != (row["id"] in rejected), (shape, row["id"])  # out, or rejected with its reason
            if not outs:
                continue
            assert all(set(row) <= set(w) for w in outs), (shape, "a field lost")
            assert any(first_user(row) in text_of(t) for w in outs for t in turns_of(w)), (shape, "the task cut")
            for w in outs:
                if "messages" in w:
                    OpenAIMessages().native_turns(w)  # valid, every call with its answer
                compressed += w != row
    assert compressed, "the target is low enough that some rows change"


def test_stats_and_show_read_every_shape(tmp_path, capsys):
    cli("stats", str(FIXTURES), "--tokenizer", str(qwen3_folder()), "--target-max-tokens", "1000", "--json")
    stats = capsys.readouterr().out
    assert all(shape in stats for shape in SHAPES)
    out = tmp_path / "out"
    cli("compress", str(FIXTURES), "-o", str(out), "-q", "--tokenizer", str(qwen3_folder()),
        "--target-max-tokens", "500", "--summary-target-tokens", "120")
    for shape in SHAPES:
        cli("show", str(out / f"{shape}.jsonl"), "--limit", "1")
        shown = capsys.readouterr().out
        assert shown.strip(), shape


@pytest.mark.parametrize("shape", SHAPES)
def test_every_shape_round_trips_through_parquet(tmp_path, shape):
    rows = read_jsonl(FIXTURES / f"{shape}.jsonl")
    PARQUET.write_part(tmp_path / "a.parquet", rows[:1])
    PARQUET.write_part(tmp_path / "b.parquet", rows[1:])
    PARQUET.join([tmp_path / "a.parquet", tmp_path / "b.parquet"], tmp_path / "out.parquet")
    back = [r.row for r in PARQUET.read(tmp_path / "out.parquet")]
    assert [json.dumps(r, sort_keys=True) for r in back] == [json.dumps(r, sort_keys=True) for r in rows]
