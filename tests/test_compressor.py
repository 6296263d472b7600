"""`TrajectoryCompressor` end to end on real tokenizers (byte-level BPE and WordPiece)."""

from __future__ import annotations

import asyncio
import copy
import json
import re
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trajcomp.core.compressor import TrajectoryCompressor
from trajcomp.core.config import CompressionConfig
from trajcomp.core.summary.identifiers import INDEX_HEAD
from trajcomp.core.metrics import Outcome, RowMetrics
from trajcomp.summarizers.base import SUMMARY_PREFIX, Summarizer, Summary, SummaryError, SummaryRequest
from trajcomp.summarizers.extractive import ExtractiveSummarizer
from trajcomp.core.dialects.summary_turn import USERS_HEAD
from trajcomp.core.counting.tokens import TokenCounter

_COUNTERS: dict[str, TokenCounter] = {}


@pytest.fixture(params=["bpe", "wordpiece"], scope="module")
def tok(request) -> tuple[str, TokenCounter]:
    """(tokenizer folder, its TokenCounter), once per tokenizer kind."""
    path = str(request.getfixturevalue(f"{request.param}_tokenizer"))
    if path not in _COUNTERS:
        _COUNTERS[path] = TokenCounter(path)
    return path, _COUNTERS[path]


def make(tok, summarizer: Summarizer | None = None, **overrides) -> TrajectoryCompressor:
    path, counter = tok
    # shorten: these tests are about how rows are shortened, many of them rows no rule can make fit
    cfg = CompressionConfig(tokenizer_name=path, **{"target_max_tokens": 2000, "summary_target_tokens": 200,
                                                    "cannot_fit": "shorten", **overrides})
    return TrajectoryCompressor(cfg, counter=counter, summarizer=summarizer)


def run(compressor: TrajectoryCompressor, turns):
    return asyncio.run(compressor.compress_trajectory(turns))


# --------------------------------------------------------------------------- Hermes trajectories

TOOLS = [
    {"type": "function", "function": {"name": "terminal", "description": "Run a shell command.",
                                      "parameters": {"type": "object", "properties": {"command": {"type": "string"}},
                                                     "required": ["command"]}}},
    {"type": "function", "function": {"name": "read_file", "description": "Read a file.",
                                      "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                                                     "required": ["path"]}}},
    {"type": "function", "function": {"name": "web_search", "description": "Search the web.",
                                      "parameters": {"type": "object", "properties": {"query": {"type": "string"}},
                                                     "required": ["query"]}}},
]
SYSTEM = (
    "You are a function calling AI model. You are provided with function signatures within <tools></tools> "
    "XML tags. You may call one or more functions to assist with the user query.\n<tools>\n"
    + json.dumps(TOOLS)
    + "\n</tools>\nFor each function call return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags."
)
STEPS = [
    ("terminal", {"command": "pytest -x tests/test_parser.py"}, "The parser tests fail; run them to see how."),
    ("read_file", {"path": "src/parser/core.py"}, "The failure is in field splitting, read the parser source."),
    ("terminal", {"command": "git log -3 --oneline"}, "Check which commit introduced the slicing bug."),
    ("web_search", {"query": "python str.split drop last field"}, "Look up whether split drops empty fields."),
    ("terminal", {"command": "make build"}, "Rebuild the package after the fix to src/parser/core.py."),
]
STEPS_ZH = [
    ("terminal", {"command": "pytest -x"}, "我们需要先运行测试，看看哪里失败了。"),
    ("read_file", {"path": "src/parser/core.py"}, "问题出在字段切分上，需要阅读解析器源代码。"),
]


def log(k: int, lines: int) -> str:
    body = [f"[{k:03d}:{i:03d}] compiling module_{i}.py in src/pkg{k} ... ok (v1.{k}.{i})" for i in range(lines)]
    if k % 2 == 1:
        body.insert(lines // 2, f"ERROR: test_fields failed in tests/test_parser.py (commit 3f9a2b{k}c)")
    return "\n".join(body) + f"\nProcess exited with code {k % 2}"


def gpt_call(k: int, steps=STEPS) -> dict:
    name, args, think = steps[k % len(steps)]
    call = json.dumps({"name": name, "arguments": args}, ensure_ascii=False)
    return {"from": "gpt", "value": f"<think>\n{think}\n</think>\n<tool_call>\n{call}\n</tool_call>"}


def tool_turn(k: int, lines: int, steps=STEPS) -> dict:
    name = steps[k % len(steps)][0]
    body = {"tool_call_id": f"call_{k}", "name": name, "content": log(k, lines)}
    return {"from": "tool", "value": f"<tool_response>\n{json.dumps(body, ensure_ascii=False)}\n</tool_response>"}


def hermes(steps: int = 8, lines: int = 20, *, followups: tuple[int, ...] = (), zh: bool = False,
           final: str = "The tests pass now; the fix drops the extra slice in src/parser/core.py.") -> list[dict]:
    """system (with <tools>), human task, then `steps` gpt/tool pairs; a human follow-up after each step in
    `followups`; a final gpt answer."""
    table = STEPS_ZH if zh else STEPS
    task = "请修复解析器，让测试通过。" if zh else "The parser drops the last field of every line. Fix it and make the tests pass."
    turns = [{"from": "system", "value": SYSTEM}, {"from": "human", "value": task}]
    for k in range(steps):
        turns += [gpt_call(k, table), tool_turn(k, lines, table)]
        if k in followups:
            turns.append({"from": "human", "value": f"Follow-up {k}: also keep the CLI in src/cli.py working."})
    turns.append({"from": "gpt", "value": final})
    return turns


# --------------------------------------------------------------------------- the checks


def values(turns) -> list[str]:
    return [t["value"] for t in turns]


def check(compressor: TrajectoryCompressor, turns: list[dict], out: list[dict], m: RowMetrics) -> None:
    """Every property a compressed (or untouched) row must have."""
    cfg, counter = compressor.config, compressor.counter
    n = len(turns)
    original = sum(counter.count(values(turns)))
    assert m.original_tokens == original
    assert m.original_turns == n and m.compressed_turns == len(out)
    assert m.target_max_tokens == cfg.target_max_tokens
    recount = sum(counter.count(values(out)))
    assert m.compressed_tokens == recount, "compressed_tokens must be the real recount of the returned turns"
    assert m.compressed_tokens <= m.original_tokens
    d = m.to_dict()
    assert d["tokens_saved"] == original - recount
    assert d["compression_ratio"] == (round(recount / original, 4) if original else 1.0)
    assert d["turns_removed"] == n - len(out)
    assert d["still_over_limit"] == (recount > cfg.target_max_tokens)
    assert d["was_compressed"] == (m.outcome is Outcome.COMPRESSED)
    assert d["skipped_under_target"] == (m.outcome is Outcome.SKIPPED_UNDER_TARGET)
    assert d["outcome"] == m.outcome.value
    assert (original <= cfg.target_max_tokens) == (m.outcome is Outcome.SKIPPED_UNDER_TARGET)

    if m.outcome is not Outcome.COMPRESSED:
        assert out == turns
        assert m.compressed_tokens == m.original_tokens and d["tokens_saved"] == 0
        assert not any(SUMMARY_PREFIX in v for v in values(out))
        if m.outcome is Outcome.SKIPPED_UNDER_TARGET:
            assert d["compression_region"] is None
        return

    assert recount < original
    start, end = m.region
    assert d["compression_region"] == {"start_idx": start, "end_idx": end, "turns_count": end - start}
    assert 0 <= start < end <= n
    with_prefix = [i for i, t in enumerate(out) if SUMMARY_PREFIX in t["value"]]
    assert with_prefix == [start], "exactly one turn carries the summary, where the region was"
    summary_turn = out[start]
    assert summary_turn["from"] == "human"
    assert summary_turn["value"].startswith(SUMMARY_PREFIX + " ")
    assert summary_turn["value"].count(SUMMARY_PREFIX) == 1

    merged = end < n and turns[end]["from"] == "human"
    if merged:
        assert summary_turn["value"].endswith("\n\n" + turns[end]["value"])
        summary_text = summary_turn["value"][: -len("\n\n" + turns[end]["value"])]
        assert out[start + 1:] == turns[end + 1:]
        assert len(out) == n - (end - start)
    else:
        summary_text = summary_turn["value"]
        assert out[start + 1:] == turns[end:]
        assert len(out) == n - (end - start) + 1
    # The user's words in the region are carried verbatim (a long one cut at the start of a token),
    # latest first; the rest of the turn keeps to the budget.
    humans = [t["value"] for t in reversed(turns[start:end]) if t["from"] == "human"]
    carried = ""
    if humans:
        carried = USERS_HEAD + summary_text.split(USERS_HEAD, 1)[1].split("\n" + INDEX_HEAD, 1)[0]
        cuts = [(c.start(1), c[1]) for c in re.finditer(r"\d+\. (.*?) \[\.\.\. \d+ tokens cut\]", carried, re.S)]
        places = [carried.find(h) if h in carried else next((at for at, c in cuts if h.startswith(c)), -1)
                  for h in humans]
        assert -1 not in places and places == sorted(places), (humans, carried)
        assert sum(h not in carried for h in humans) == m.human_turns_cut
    assert counter.count([summary_text.replace(carried, "")])[0] <= cfg.summary_target_tokens

    # The head is verbatim, but for the notice appended to its first system turn.
    first_system = next((i for i in range(start) if turns[i]["from"] == "system"), None)
    for i in range(start):
        if i == first_system and cfg.add_summary_notice:
            assert out[i] == {**turns[i], "value": turns[i]["value"] + cfg.summary_notice_text}
        else:
            assert out[i] == turns[i]
    assert not any(t is u for t in out for u in turns), "returned turns must be copies"


def compress_and_check(compressor, turns):
    before = copy.deepcopy(turns)
    out, m = run(compressor, turns)
    assert turns == before, "the input was mutated"
    check(compressor, turns, out, m)
    return out, m


# --------------------------------------------------------------------------- end to end


def total_tokens(tok, turns) -> int:
    return sum(tok[1].count(values(turns)))


def test_compresses_a_long_trajectory(tok):
    turns = hermes(10, 25)
    target = int(total_tokens(tok, turns) * 0.6)
    c = make(tok, target_max_tokens=target, summary_target_tokens=300)
    out, m = compress_and_check(c, turns)
    assert m.outcome is Outcome.COMPRESSED and m.summary_source == "extractive"
    assert m.region[0] == 4  # system, task, first call and its response stay
    assert m.compressed_tokens <= target and not m.to_dict()["still_over_limit"]
    assert out[-4:] == turns[-4:]
    assert out[0]["value"].endswith(c.config.summary_notice_text)
    summary = out[m.region[0]]["value"]
    assert "terminal(command=" in summary or "read_file(path=" in summary


def test_without_summary_notice_the_system_turn_is_verbatim(tok):
    c = make(tok, target_max_tokens=3000, summary_target_tokens=300, add_summary_notice=False)
    turns = hermes(10, 25)
    out, m = compress_and_check(c, turns)
    assert m.outcome is Outcome.COMPRESSED
    assert out[0] == turns[0]


def test_summary_merges_into_a_following_human_turn(tok):
    # Steps 0..6; a follow-up after step 6 opens the protected tail [human, gpt, tool, gpt].
    turns = hermes(8, 20, followups=(6,))
    assert [t["from"] for t in turns[-4:]] == ["human", "gpt", "tool", "gpt"]
    c = make(tok, target_max_tokens=400, summary_target_tokens=200)
    out, m = compress_and_check(c, turns)
    assert m.outcome is Outcome.COMPRESSED
    start, end = m.region
    assert turns[end]["from"] == "human"
    assert out[start]["value"].endswith(turns[end]["value"])
    assert m.original_turns - m.compressed_turns == end - start
    roles = [t["from"] for t in out]
    assert ("human", "human") not in zip(roles, roles[1:])


def test_long_protected_tail_is_still_over_limit(tok):
    turns = hermes(6, 10) + [{"from": "human", "value": "Now print the whole log. " + log(99, 80)},
                             {"from": "gpt", "value": "Here it is: " + log(98, 80)}]
    c = make(tok, target_max_tokens=1500, summary_target_tokens=150)
    out, m = compress_and_check(c, turns)
    assert m.outcome is Outcome.COMPRESSED
    assert m.still_over_limit and m.compressed_tokens > 1500
    assert m.compressed_tokens < m.original_tokens


def test_under_target_is_returned_unchanged(tok):
    turns = hermes(2, 2)
    c = make(tok, target_max_tokens=100_000, summary_target_tokens=300)
    out, m = compress_and_check(c, turns)
    assert out == turns
    d = m.to_dict()
    assert d["skipped_under_target"] and not d["was_compressed"] and d["compression_region"] is None
    assert (d["tokens_saved"], d["compression_ratio"], d["turns_removed"]) == (0, 1.0, 0)


def test_nothing_to_compress_and_no_net_savings(tok):
    c = make(tok, target_max_tokens=100, summary_target_tokens=60)
    out, m = compress_and_check(c, hermes(1, 30))  # head + tail cover everything
    assert m.outcome is Outcome.NOTHING_TO_COMPRESS
    tiny = hermes(1, 30) + [{"from": "gpt", "value": "ok"}, {"from": "tool", "value": "ok"}] + hermes(2, 30)[2:]
    c = make(tok, target_max_tokens=100, summary_target_tokens=99)
    out, m = compress_and_check(c, tiny)
    assert m.outcome is Outcome.NO_NET_SAVINGS and m.region is not None


def test_empty_and_single_turn_rows(tok):
    c = make(tok, target_max_tokens=50, summary_target_tokens=20)
    assert compress_and_check(c, [])[1].outcome is Outcome.SKIPPED_UNDER_TARGET
    single = [{"from": "human", "value": log(1, 30)}]
    assert compress_and_check(c, single)[1].outcome is Outcome.NOTHING_TO_COMPRESS


def test_chinese_trajectory(tok):
    turns = hermes(10, 15, zh=True)
    # A budget with room for the reasoning items besides the identifier index (extractive.INDEX_SHARE).
    c = make(tok, target_max_tokens=int(total_tokens(tok, turns) * 0.6), summary_target_tokens=900)
    out, m = compress_and_check(c, turns)
    assert m.outcome is Outcome.COMPRESSED
    summary = out[m.region[0]]["value"]
    assert any(phrase in summary for phrase in ("我们需要先运行测试", "问题出在字段切分上"))


def test_extra_keys_on_turns_are_kept(tok):
    turns = hermes(10, 25)
    for i, t in enumerate(turns):
        t["weight"] = i
    c = make(tok, target_max_tokens=3000, summary_target_tokens=300)
    out, m = compress_and_check(c, turns)
    assert m.outcome is Outcome.COMPRESSED
    assert out[0]["weight"] == 0 and out[-1]["weight"] == len(turns) - 1


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    steps=st.integers(0, 12),
    lines=st.integers(1, 30),
    followups=st.sets(st.integers(0, 11), max_size=3),
    zh=st.booleans(),
    target_frac=st.floats(0.05, 1.2),
    summary=st.integers(60, 600),
    last_n=st.integers(0, 6),
    notice=st.booleans(),
    flags=st.tuples(st.booleans(), st.booleans(), st.booleans(), st.booleans()),
)
def test_properties_on_random_trajectories(tok, steps, lines, followups, zh, target_frac, summary, last_n, notice,
                                           flags):
    turns = hermes(steps, lines, followups=tuple(followups), zh=zh)
    total = sum(tok[1].count(values(turns)))
    target = max(summary + 1, int(total * target_frac))
    c = make(tok, target_max_tokens=target, summary_target_tokens=summary, protect_last_n_turns=last_n,
             add_summary_notice=notice, protect_first_system=flags[0], protect_first_human=flags[1],
             protect_first_gpt=flags[2], protect_first_tool=flags[3])
    compress_and_check(c, turns)


def test_small_summary_target_is_respected(tok):
    path, counter = tok
    prefix = counter.count([SUMMARY_PREFIX + " "])[0]
    summary_target = prefix + 21  # body budget 21 < the note (22-26 tokens with these tokenizers)
    cfg = CompressionConfig(tokenizer_name=path, target_max_tokens=summary_target + 1,
                            summary_target_tokens=summary_target, cannot_fit="shorten")
    # The extractive summarizer on the real counter, behind a guard that turns a runaway fit() into an error
    # (fit() can loop forever at such budgets, see test_extractive.py).
    summarizer = ExtractiveSummarizer(cfg, _CallLimited(counter))
    c = TrajectoryCompressor(cfg, counter=counter, summarizer=summarizer)
    turns = hermes(8, 20)
    out, m = run(c, turns)
    assert m.outcome is Outcome.COMPRESSED
    text = out[m.region[0]]["value"]
    assert counter.count([text])[0] <= summary_target, text


def test_small_summary_target_with_a_short_follow_up_terminates(bpe_tokenizer):
    path = str(bpe_tokenizer)
    counter = _COUNTERS.get(path) or TokenCounter(path)
    prefix = counter.count([SUMMARY_PREFIX + " "])[0]
    cfg = CompressionConfig(tokenizer_name=path, target_max_tokens=prefix + 21,
                            summary_target_tokens=prefix + 20, cannot_fit="shorten")
    c = TrajectoryCompressor(cfg, counter=counter, summarizer=ExtractiveSummarizer(cfg, _CallLimited(counter)))
    reasoning = "The build fails because the configuration file is missing from the repository root. " * 3
    turns = hermes(1, 3)[:4] + [
        {"from": "gpt", "value": f"<think>{reasoning}</think>"},
        {"from": "human", "value": "continue"},
        {"from": "gpt", "value": f"<think>{reasoning}</think>"},
    ] + hermes(2, 3)[-4:]
    out, m = run(c, turns)  # the guard raises RuntimeError("runaway fit()") instead of hanging
    assert m.outcome is Outcome.COMPRESSED


class _CallLimited:
    """The real counter, refusing more than 500 calls (a non-terminating fit() fails instead of hanging)."""

    def __init__(self, counter: TokenCounter):
        self.counter, self.calls = counter, 0

    def count(self, texts):
        self.calls += 1
        if self.calls > 500:
            raise RuntimeError("runaway fit()")
        return self.counter.count(texts)


# --------------------------------------------------------------------------- summarizer plugins


class Failing(Summarizer):
    name = "failing"

    async def summarize(self, request: SummaryRequest) -> Summary:
        raise SummaryError("backend returned 503 three times", api_calls=3, errors=3)


class Huge(Summarizer):
    name = "huge"

    async def summarize(self, request: SummaryRequest) -> Summary:
        text = " ".join(t.text for t in request.turns) * 3
        return Summary(text, api_calls=1)


class AlreadyPrefixed(Summarizer):
    name = "prefixed"

    async def summarize(self, request: SummaryRequest) -> Summary:
        return Summary(f"{SUMMARY_PREFIX}  {SUMMARY_PREFIX} Ran the parser tests; fixed src/parser/core.py.",
                       api_calls=1)


class Sleepy(Summarizer):
    """Would take a minute; enforces request.timeout itself, as the interface asks of summarizers."""

    name = "sleepy"

    async def summarize(self, request: SummaryRequest) -> Summary:
        try:
            await asyncio.wait_for(asyncio.sleep(60), request.timeout)
        except asyncio.TimeoutError:
            raise SummaryError(f"summary timed out after {request.timeout:g}s", api_calls=1, errors=1) from None
        return Summary("too late")


class Counting(Summarizer):
    """A short fixed summary; records how many turns it was asked about and its budget."""

    name = "counting"

    def __init__(self):
        self.requests: list[SummaryRequest] = []

    async def summarize(self, request: SummaryRequest) -> Summary:
        self.requests.append(request)
        await asyncio.sleep(0)
        return Summary(f"{len(request.turns)} turns summarized", api_calls=1)


def test_failing_summarizer_leaves_the_row_unchanged(tok):
    c = make(tok, Failing(), target_max_tokens=3000, summary_target_tokens=300)
    turns = hermes(10, 25)
    out, m = compress_and_check(c, turns)
    assert out == turns
    assert m.outcome is Outcome.FAILED and not m.was_compressed
    assert m.error == "backend returned 503 three times"
    assert (m.summarization_api_calls, m.summarization_errors) == (3, 3)
    assert m.region is not None and m.summary_source is None


def test_failing_summarizer_with_extractive_fallback(tok):
    c = make(tok, Failing(), target_max_tokens=3000, summary_target_tokens=300, on_failure="extractive")
    turns = hermes(10, 25)
    out, m = compress_and_check(c, turns)
    assert m.outcome is Outcome.COMPRESSED
    assert m.summary_source == "extractive"
    assert m.error == "failing failed: backend returned 503 three times"
    assert (m.summarization_api_calls, m.summarization_errors) == (3, 3)
    # The fallback wrote the same summary the extractive summarizer writes on its own.
    plain_out, _ = run(make(tok, target_max_tokens=3000, summary_target_tokens=300), turns)
    assert out == plain_out


def test_huge_summary_is_summary_too_long(tok):
    c = make(tok, Huge(), target_max_tokens=3000, summary_target_tokens=300)
    turns = hermes(10, 25)
    out, m = compress_and_check(c, turns)
    assert out == turns
    assert m.outcome is Outcome.SUMMARY_TOO_LONG and not m.was_compressed
    # Each overshooting answer is asked again with a firmer length, until max_passes.
    assert m.summarization_api_calls == m.passes == c.config.max_passes == 3


def test_summary_that_already_has_the_prefix_gets_it_once(tok):
    c = make(tok, AlreadyPrefixed(), target_max_tokens=3000, summary_target_tokens=300)
    out, m = compress_and_check(c, hermes(10, 25))
    assert m.outcome is Outcome.COMPRESSED and m.summary_source == "prefixed"
    summary = out[m.region[0]]["value"]
    assert summary.startswith(f"{SUMMARY_PREFIX} Ran the parser tests; fixed src/parser/core.py.\nIdentifiers: ")
    assert summary.count(SUMMARY_PREFIX) == 1


def test_summarizer_receives_the_region_and_the_body_budget(tok):
    summarizer = Counting()
    c = make(tok, summarizer, target_max_tokens=3000, summary_target_tokens=300, per_trajectory_timeout=42.0)
    turns = hermes(10, 25)
    out, m = compress_and_check(c, turns)
    (request,) = summarizer.requests
    start, end = m.region
    assert [(t.role, t.text) for t in request.turns] == [(t["from"], t["value"]) for t in turns[start:end]]
    budget = 300 - c.counter.count([SUMMARY_PREFIX + " "])[0]
    # No user words in this region: the summarizer is asked for the body's budget less the index's
    # room, the index of every identifier or half the budget, whichever is less.
    index = c.counter.count([INDEX_HEAD + ", ".join(request.identifiers)])[0]
    assert len(request.identifiers) > 10
    assert request.target_tokens == budget - min(index, int(budget * 0.5)) < budget
    assert request.timeout == 42.0


def test_slow_summarizer_times_out(bpe_tokenizer):
    """Without and with the extractive fallback, both rows at once (the tokenizer plays no part here)."""
    tok = (str(bpe_tokenizer), _COUNTERS.get(str(bpe_tokenizer)) or TokenCounter(str(bpe_tokenizer)))
    common = dict(target_max_tokens=3000, summary_target_tokens=300, per_trajectory_timeout=0.2)
    plain = make(tok, Sleepy(), **common)
    fallback = make(tok, Sleepy(), on_failure="extractive", **common)
    turns = hermes(10, 25)
    before = copy.deepcopy(turns)

    async def timed(c):
        t0 = time.monotonic()
        result = await c.compress_trajectory(turns)
        return result, time.monotonic() - t0

    ((out, m), elapsed), ((fb_out, fb_m), fb_elapsed) = asyncio.run(
        _gather(timed(plain), timed(fallback)))
    assert turns == before
    check(plain, turns, out, m)
    check(fallback, turns, fb_out, fb_m)
    assert out == turns
    assert m.outcome is Outcome.FAILED and not m.was_compressed
    assert m.error == "summary timed out after 0.2s"
    assert fb_m.outcome is Outcome.COMPRESSED and fb_m.summary_source == "extractive"
    assert fb_m.error == "sleepy failed: summary timed out after 0.2s"
    assert (m.summarization_api_calls, m.summarization_errors) == (fb_m.summarization_api_calls, fb_m.summarization_errors) == (1, 1)
    for seconds in (elapsed, fb_elapsed):
        assert 0.2 <= seconds < 30  # not the minute Sleepy would take; loose, for a busy machine


async def _gather(*coros):
    return await asyncio.gather(*coros)


def _shapes() -> list[list[dict]]:
    return [hermes(s, l, followups=f, zh=zh) for s, l, f, zh in [
        (10, 25, (), False), (8, 20, (6,), False), (3, 5, (), False), (12, 10, (2, 7), True),
        (1, 40, (), False), (9, 30, (4,), False), (6, 12, (), True), (0, 0, (), False),
    ]]


@pytest.mark.parametrize("summarizer", [None, Counting], ids=["extractive", "plugin"])
def test_concurrent_rows_match_sequential_rows(tok, summarizer):
    rows = _shapes() * 3
    snapshot = copy.deepcopy(rows)

    def compressor():
        return make(tok, summarizer() if summarizer else None, target_max_tokens=1200, summary_target_tokens=200)

    seq_c = compressor()
    sequential = [run(seq_c, row) for row in rows]
    conc_c = compressor()

    async def all_at_once():
        return await asyncio.gather(*(conc_c.compress_trajectory(row) for row in rows))

    concurrent = asyncio.run(all_at_once())
    assert rows == snapshot
    assert [o for o, _ in concurrent] == [o for o, _ in sequential]
    assert [m.to_dict() for _, m in concurrent] == [m.to_dict() for _, m in sequential]
    assert {m.outcome for _, m in sequential} >= {Outcome.COMPRESSED, Outcome.SKIPPED_UNDER_TARGET}
    for row, (out, m) in zip(rows, concurrent):
        check(conc_c, row, out, m)


def test_async_context_manager_and_compressor_from_config_alone(bpe_tokenizer):
    cfg = CompressionConfig(tokenizer_name=str(bpe_tokenizer), target_max_tokens=3000, summary_target_tokens=300, cannot_fit="shorten")

    async def go():
        async with TrajectoryCompressor(cfg) as c:
            return c, await c.compress_trajectory(hermes(10, 25))

    c, (out, m) = asyncio.run(go())
    assert m.outcome is Outcome.COMPRESSED
    check(c, hermes(10, 25), out, m)
