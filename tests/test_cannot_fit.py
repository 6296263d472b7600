"""compression.cannot_fit: a row no rule can make fit is decided before any summary is asked for (core/planning/fit.py).

The rows are SWE-agent-like: a long system prompt and a demonstration in the second human turn, so the
protected head alone is over the target. The OpenAI-compatible summarizer runs against the real test
server, whose request log shows what was asked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import write_jsonl
from openai_server import BAD_ANSWERS
from test_fits import qwen3_folder
from test_openai_summarizer import compress, server_thread, srv, summary_turns  # noqa: F401 (fixtures)
from test_segments import assert_trainable

TARGET = 900
WORDS = ("the agent reads the repository layout runs the failing test inspects the traceback and edits "
         "the parser module until every case passes ").split()


def prose(n_words: int, seed: int) -> str:
    return " ".join(f"{WORDS[(seed + k) % len(WORDS)]}{'' if k % 9 else str(k)}" for k in range(n_words))


def swe_row(i: int, steps: int = 6) -> dict:
    """A long system prompt, the task, a demonstration in the second human turn, then calls and results."""
    conv = [{"from": "system", "value": "SYSTEM PROMPT. " + prose(500, i)},
            {"from": "human", "value": "DEMONSTRATION of a solved task. " + prose(500, i + 1)},
            {"from": "human", "value": f"Task {i}: fix the off-by-one in src/parser.py."}]
    for s in range(steps):
        conv.append({"from": "gpt", "value": f'<tool_call>\n{{"name": "terminal", "arguments": {{"command": "pytest -k case{s}"}}}}\n</tool_call>'})
        conv.append({"from": "tool", "value": "<tool_response>\n" + json.dumps(
            {"tool_call_id": f"c{i}_{s}", "name": "terminal", "content": prose(250, i + s)}) + "\n</tool_response>"})
    conv.append({"from": "gpt", "value": "I fixed the off-by-one in src/parser.py; the suite passes."})
    return {"id": f"swe-{i}", "conversations": conv}


def short_row() -> dict:
    return {"id": "short", "conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "hello"}]}


NONE_BOUGHT = {"summaries": 0, "prompt_tokens": 0, "completion_tokens": 0}
MODES = {"turns": [], "chat_template": ["--count-mode", "chat_template"]}
SHAPES = {"plain": [], "prune": ["--prune"], "segments": ["--segments"], "both": ["--prune", "--segments"]}


def run(tmp_path: Path, srv, tok, mode: str, shape: str, cannot_fit: str, summarizer: str, name: str, *more: str):
    extra = [*MODES[mode], *SHAPES[shape], "--target-max-tokens", str(TARGET), "--cannot-fit", cannot_fit,
             "--summarizer", summarizer, "--no-cache", *more]
    if mode == "chat_template":
        extra += ["--tokenizer", str(qwen3_folder())]
    return compress(tmp_path, srv.base_url, tok, *extra, out_name=f"{name}.jsonl")


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("mode", list(MODES))
def test_a_row_whose_head_is_over_is_decided_first(mode, shape, srv, tmp_path, bpe_tokenizer):
    write_jsonl(tmp_path / "in.jsonl", [swe_row(0), short_row(), swe_row(1)])
    decided = {}
    for cannot_fit, summarizers in (("keep", ("openai", "extractive")), ("reject", ("openai",))):
        for summarizer in summarizers:  # (the extractive summarizer's decision is compared under keep: runs are slow)
            srv.reset()
            r = run(tmp_path, srv, bpe_tokenizer, mode, shape, cannot_fit, summarizer, f"{cannot_fit}-{summarizer}")
            assert r.code == 0 and srv.stats.requests == 0, (r.code, srv.stats.requests, r.stderr)
            statuses = [(x.get("id"), x["compression_metrics"]["status"]) for x in r.rows]
            rejects = [(x["line"], x["reason"]) for x in r.rejects]
            decided[cannot_fit, summarizer] = statuses, rejects
            if cannot_fit == "keep":  # written as they were, one row each, never cut, with the reason
                assert statuses == [("swe-0", "cannot_fit"), ("short", "under_target"), ("swe-1", "cannot_fit")]
                for out, row in zip(r.rows[::2], (swe_row(0), swe_row(1))):
                    m = out["compression_metrics"]
                    assert out["conversations"] == row["conversations"] and m["passes"] == 0
                    assert m["cannot_fit_reason"]["over_by"] > 0 and m["cannot_fit_reason"]["turns"][0][0] == 0
                    assert out.get("segment", {"count": 1})["count"] == 1
            else:
                assert statuses == [("short", "under_target")]
                assert [reason for _, reason in rejects] == ["cannot_fit", "cannot_fit"]
                assert all("over the target" in x["detail"] for x in r.rejects)
            assert r.report["summarization"]["api_calls"] == 0
            assert r.report["summarization"]["bought_for_rows_over"] == NONE_BOUGHT
    assert decided["keep", "openai"] == decided["keep", "extractive"]  # the same decision either way
    # without the decision (shorten: summarized anyway), the same rows do reach the endpoint
    srv.reset()
    shortened = run(tmp_path, srv, bpe_tokenizer, mode, shape, "shorten", "openai", "shorten")
    assert srv.stats.requests > 0
    over = shortened.report["summarization"]["bought_for_rows_over"]  # and the report counts what they bought
    assert over["summaries"] >= 2 and over["prompt_tokens"] > 0 and over["completion_tokens"] > 0


EIGHT = {"messages": [
    {"role": "system", "content": "You are a coding agent."},
    {"role": "user", "content": "Why does the build fail?"},
    {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function", "function": {
        "name": "terminal", "arguments": "{\"command\": \"make\"}"}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "error: missing header foo.h in src/main.c line 3"},
    {"role": "assistant", "content": "foo.h is missing."},
    {"role": "user", "content": "Add it and rebuild."},
    {"role": "assistant", "content": "", "tool_calls": [{"id": "c2", "type": "function", "function": {
        "name": "terminal", "arguments": "{\"command\": \"touch src/foo.h && make\"}"}}]},
    {"role": "tool", "tool_call_id": "c2", "content": "build ok"}]}


@pytest.mark.parametrize("mode, summarizer", [("turns", "extractive"), ("chat_template", "extractive"),
                                              ("turns", "openai")])
def test_the_eight_message_row_saves_nothing_and_is_no_failure(mode, summarizer, srv, tmp_path, bpe_tokenizer):
    write_jsonl(tmp_path / "in.jsonl", [EIGHT])
    for shape in ("plain", "segments"):
        extra = [*MODES[mode], *SHAPES[shape], "--target-max-tokens", "100", "--summary-target-tokens", "20",
                 "--summarizer", summarizer, "--tokenizer", str(qwen3_folder())]
        r = compress(tmp_path, srv.base_url, bpe_tokenizer, *extra, out_name=f"{shape}.jsonl")
        (row,) = r.rows
        m = row["compression_metrics"]
        assert r.code == 0 and (m["status"] == "cannot_fit" or m["outcome"] == "no_net_savings"), m
        assert m["status"] != "failed" and "run the same command again" not in r.stderr


@pytest.mark.parametrize("kind", ["refusal", "refusal_paragraph"])
def test_no_refusal_enters_a_row_or_the_cache_whatever_the_status(kind, srv, tmp_path, bpe_tokenizer):
    """Every answer a refusal: rows that cannot fit (shortened anyway, or kept) and rows that can, plain and
    in segments; neither the output nor the cache holds one. (The guards held in this reproduction before
    the decision too: this pins them on the cannot-fit path.)"""
    write_jsonl(tmp_path / "in.jsonl", [swe_row(0), short_row(), swe_row(1, 12)])
    srv.set_faults(bad_answer=kind)
    for shape in ("plain", "segments"):
        for cannot_fit in ("shorten", "keep"):
            cache = tmp_path / f"cache-{shape}-{cannot_fit}"
            r = compress(tmp_path, srv.base_url, bpe_tokenizer, *SHAPES[shape], "--target-max-tokens", str(TARGET),
                         "--cannot-fit", cannot_fit, "--max-retries", "1", "--cache-dir", str(cache),
                         out_name=f"{shape}-{cannot_fit}.jsonl")
            refusals = {BAD_ANSWERS[kind]([{"role": "user", "content": "x" * n}]).strip() for n in range(3)}
            written = r.out.read_text(encoding="utf-8") + "".join(
                p.read_text(encoding="utf-8", errors="replace") for p in cache.rglob("*") if p.is_file())
            assert not any(text[:60] in written for text in refusals), (shape, cannot_fit)
            assert "sorry" not in written.lower()
            assert {x["compression_metrics"]["status"] for x in r.rows} <= {"failed", "under_target", "cannot_fit"}


def mixed_row(shape: str = "calls") -> dict:
    """A row whose segments fit but one: a tool output alone longer than the target, amid short ones. Its
    group opens with the call (`calls`; `replies`: after the agent's first answer), with a user turn (`asks`:
    after the head's user turn, only a summary or a join keeps the roles alternating), or in LLaMA-Factory's
    alternation (`llamafactory`: it opens with the observation, which joins the head's user turn)."""
    lf = shape == "llamafactory"
    conv = [] if lf else [{"from": "system", "value": "You are a coding agent."}]
    conv.append({"from": "human", "value": "Task: fix the parser."})
    if shape == "replies":  # the agent answers before its first call: a head of its first turns ends on it
        conv.append({"from": "gpt", "value": "I will run the cases one by one."})
    for s in range(8):
        if shape == "asks" and s == 4:
            conv.append({"from": "human", "value": "Now run the whole suite and read its log."})
        call = {"name": "terminal", "arguments": {"command": f"pytest -k case{s}"}}
        content = prose(1200 if s == 4 else 40, s)
        if lf:
            conv += [{"from": "function_call", "value": json.dumps(call)}, {"from": "observation", "value": content}]
            continue
        conv.append({"from": "gpt", "value": f"<tool_call>\n{json.dumps(call)}\n</tool_call>"})
        conv.append({"from": "tool", "value": "<tool_response>\n" + json.dumps(
            {"tool_call_id": f"c{s}", "name": "terminal", "content": content}) + "\n</tool_response>"})
    conv.append({"from": "gpt", "value": "Fixed."})
    return {"id": "mixed", "conversations": conv}


# the head (system, task) ends on the user's turn: the segment opening with the next user turn joins it
HEAD_ENDS_ON_USER = "protected_turns:\n  first_gpt: false\n  first_tool: false\n"
# the head (system, task, the agent's first answer) ends on an assistant turn, the group opens with its call
HEAD_ENDS_ON_AGENT = "protected_turns:\n  first_tool: false\n"


@pytest.mark.parametrize("shape, head", [("calls", ""), ("asks", ""), ("asks", HEAD_ENDS_ON_USER),
                                         ("replies", HEAD_ENDS_ON_AGENT), ("llamafactory", "")])
@pytest.mark.parametrize("mode", list(MODES))
def test_no_summary_is_bought_for_the_one_segment_that_cannot_fit(mode, shape, head, srv, tmp_path, bpe_tokenizer):
    """--segments: the segments that fit are compacted with summaries as always; the one over the target
    whatever it holds is written without one, flagged, under keep and reject. The report's
    bought_for_rows_over counts each output row's own summary (before: the input row's, 4 for 1 row over).
    (shorten runs with the extractive summarizer: the test server's answers on these rows fail its checks.)"""
    write_jsonl(tmp_path / "in.jsonl", [mixed_row(shape)])
    (tmp_path / "head.yaml").write_text(head)
    bought, requests = {}, {}
    for cannot_fit, summarizer in (("keep", "openai"), ("reject", "openai"), ("shorten", "extractive")):
        srv.reset()
        r = run(tmp_path, srv, bpe_tokenizer, mode, "segments", cannot_fit, summarizer, cannot_fit,
                "--config", str(tmp_path / "head.yaml"))
        assert r.code == 0 and not r.rejects, r.stderr
        over = [x for x in r.rows if x["compression_metrics"]["still_over_limit"]]
        fitting = [x for x in r.rows if not x["compression_metrics"]["still_over_limit"]]
        assert len(over) == 1 and any(summary_turns(x) for x in fitting)  # the case holds: some fit, one cannot
        assert over[0]["compression_metrics"]["status"] == "cannot_fit"
        bought[cannot_fit] = r.report["summarization"]["bought_for_rows_over"]
        assert bought[cannot_fit]["summaries"] == len(summary_turns(over[0])), cannot_fit
        requests[cannot_fit] = srv.stats.requests
        assert_trainable(mixed_row(shape), r.rows)
    assert bought["keep"] == bought["reject"] == NONE_BOUGHT and requests["keep"] == requests["reject"] > 0
    assert bought["shorten"]["summaries"] == 1  # shorten buys the one summary the row over opens with

