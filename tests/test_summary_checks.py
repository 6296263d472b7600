"""The summary checks (trajcomp/summarizers/checks.py): each check on its own, properties of the
measures, the false positives over good summaries (0), and runs against the test server answering
with each kind of bad answer."""

from __future__ import annotations

import json
import sys
from dataclasses import replace

import pytest
from conftest import DEMO_TOKENIZER, ROOT, read_jsonl, run_cli, write_jsonl
from hypothesis import given, settings
from hypothesis import strategies as st
from openai_server import BAD_ANSWERS
from test_openai_summarizer import (MODEL, N_OVER, answer_of, compress, hermes_rows,  # noqa: F401 (fixtures)
                                    server_thread, srv, summary_turns)

from trajcomp.core.config import CHECK_NAMES, ConfigError, enabled_checks, load_config
from trajcomp.core.metrics import Outcome, RowMetrics
from trajcomp.core.summary.summarizer import Summary
from trajcomp.core.counting.tokens import TokenCounter
from trajcomp.engines.summaries.cache import Hit, _decoded, _encoded, _parsed
from trajcomp.reports.comparison import comparison
from trajcomp.reports.html.page import report_page
from trajcomp.reports.reading import read_report
from trajcomp.reports.text import render_report
from trajcomp.summarizers import checks as ck
from trajcomp.summarizers import language
from trajcomp.summarizers.openai import SYSTEM_PROMPT, turn_header

sys.path.insert(0, str(ROOT / "scripts"))
import measure_checks  # noqa: E402

COUNTER = TokenCounter(str(DEMO_TOKENIZER))
ALL = ck.Checks.from_config(load_config())
# Which check each of the test server's bad answers must fail.
CHECK_OF = {"refusal": "refusal", "refusal_paragraph": "refusal", "loop": "repetition", "language": "language", "empty": "too_little", "echo": "echo"}

EN_TURNS = [("gpt", "<think>\nThe failure is probably in the tokenizer; running the tests should show the failing "
                    "assertion, and then I will read the parser and fix the boundary of the loop.\n</think>\n"
                    "Let me run the tests first, then look at the parser."),
            ("tool", "exit code 1\nFAILED tests/test_parser.py::test_last_field - AssertionError: expected 3, got 2")]
ZH_TURNS = [("gpt", "<think>\n第一步是复现问题：单独运行测试文件，看看是哪个断言导致失败。然后阅读解析器的实现，找到循环边界的错误。\n</think>\n"
                    "我先运行测试，再查看解析器的代码。"),
            ("tool", "exit code 1\nFAILED tests/test_parser.py::test_last_field - AssertionError: expected 3, got 2")]
ES_TURNS = [("gpt", "<think>\nConviene comprobar si el mismo patrón aparece en otros servicios. Después, los logs recientes "
                    "del servicio deberían mostrar la firma del error, y con eso decido si hay que cambiar el manifiesto "
                    "o reiniciar los pods de la aplicación.\n</think>\nLo ejecuto ahora y reviso la salida con cuidado.")]
EN_SUMMARY = ("The assistant ran the test suite, which failed in tests/test_parser.py::test_last_field with "
              "`AssertionError: expected 3, got 2`. It read the parser, found that the loop stopped one field early, "
              "fixed the boundary and ran the tests again: all of them passed.")
ZH_SUMMARY = "助手运行了测试，发现 tests/test_parser.py::test_last_field 断言失败（期望 3，实际 2）。它阅读了解析器的实现，发现循环提前一个字段结束，修正了边界后重新运行测试，全部通过。"
ES_SUMMARY = ("El asistente revisó los pods del servicio y los logs recientes, donde domina un error de conexión con el "
              "backend de precios. Cambió la variable PRICING_URL en el manifiesto, aplicó el cambio y comprobó que "
              "las peticiones volvieron a responder con 200.")


def body(turns=EN_TURNS, target: int = 300, repeat: int = 1, system: str = SYSTEM_PROMPT) -> dict:
    """A request body as OpenAISummarizer.payload writes it; `repeat` copies of the turns make a large region."""
    user = "\n\n".join(turn_header(i, role) + text for i, (role, text) in enumerate(list(turns) * repeat, 1))
    return {"model": MODEL, "messages": [{"role": "system", "content": system.replace("{target_tokens}", str(target))},
                                         {"role": "user", "content": user}], "max_tokens": 2 * target}


def failed(text: str, b: dict | None = None, checks: ck.Checks = ALL) -> str | None:
    return ck.failed_check(text, b or body(), checks, COUNTER)


# ---- each check -------------------------------------------------------------------------------


@pytest.mark.parametrize("text", [
    "I'm sorry, but I can't help with that.",
    "I cannot help with summarizing this content. Sorry.",
    "As an AI language model, I am unable to assist with exploiting systems.",
    "Lo siento, no puedo ayudar con esta solicitud.",
    "Je suis désolé, je ne peux pas aider avec cette demande.",
    "Es tut mir leid, ich kann dabei nicht helfen.",
    "抱歉，我无法提供这个总结。",
    "申し訳ありませんが、お手伝いできません。",
])
def test_refusals_fail(text):
    assert failed(text) == "refusal"


def test_a_summary_that_mentions_a_refusal_passes():
    text = (EN_SUMMARY + " The login page answered 'Sorry, access denied' for the guest account. "
            "The user said the assistant cannot help with production credentials, so it used the staging ones.")
    assert failed(text) is None
    assert ck.refusal_share(text) < 0.5 < ck.refusal_share("I'm sorry. " + "I can't do that. " * 3 + "Fine.")


@pytest.mark.parametrize("text", [
    "The assistant ran the tests again. " * 12,
    "\n".join(["- ran pytest -x, 3 failed"] * 8),
    "助手再次运行了测试，测试仍然失败。" * 8,  # no spaces: every character is a unit
    EN_SUMMARY + " " + "It ran the tests again and they failed again. " * 6,
])
def test_loops_fail(text):
    assert failed(text) == "repetition"


def test_a_command_quoted_twice_is_no_loop():
    cmd = "`kubectl -n platform logs deploy/northwind-ui --since=2h | grep ERROR | tail -60`"
    assert failed(f"The assistant ran {cmd}, then {cmd} again after the rollout; both showed pool timeouts.") is None


@pytest.mark.parametrize("turns, text, passes", [
    (EN_TURNS, EN_SUMMARY, True),
    (EN_TURNS, ZH_SUMMARY, False),  # English turns summarized in Chinese
    (ZH_TURNS, ZH_SUMMARY, True),
    (ZH_TURNS, EN_SUMMARY, False),  # Chinese turns summarized in English prose
    (ES_TURNS, ES_SUMMARY, True),
    (ES_TURNS, EN_SUMMARY, False),  # same script, another language: its function words tell
    (ZH_TURNS, "terminal(command=pytest -x) -> exit 1; error: AssertionError: expected 3, got 2", True),
    (EN_TURNS, "Привет! Ассистент запустил тесты, и они упали, затем исправил парсер и всё прошло.", False),
])
def test_language(turns, text, passes):
    assert (failed(text, body(turns)) is None) is passes


@pytest.mark.parametrize("turns, text, passes", [
    (EN_TURNS, EN_SUMMARY, True), (EN_TURNS, ZH_SUMMARY, False), (ZH_TURNS, ZH_SUMMARY, True),
    (ZH_TURNS, EN_SUMMARY, False), (ES_TURNS, ES_SUMMARY, True), (ES_TURNS, EN_SUMMARY, False),
])
def test_the_language_of_a_large_region_is_judged_from_a_sample_of_its_prose(turns, text, passes):
    mixed = [*turns, ("human", "Continue, please."), ("tool", "x = 1\n" * 500)]
    b = body(mixed, repeat=400)  # ~1 MB of region, ~200 KB of its people's turns
    user = b["messages"][1]["content"]
    assert len(language.region_prose(user)) <= language.PROSE_SAMPLE < len(user) // 100
    assert (failed(text, b) is None) is passes


def test_a_sampled_turn_cut_inside_a_code_block_leaves_the_code_out():
    code = "```python\n" + "def parse(fields):\n    return fields[:-1]\n" * 400 + "```"
    user = turn_header(1, "human") + "第一步是复现问题，然后阅读解析器。" * 200 + "\n" + code + "\n修正了边界。"
    prose = language.region_prose(user)
    assert "parse" not in prose and "第一步" in prose


def test_too_little_for_a_large_region_only():
    short = "The assistant fixed the parser."
    large, small = body(repeat=40), body(repeat=1)
    assert COUNTER.count([large["messages"][1]["content"]])[0] >= 2000
    assert failed(short, large) == "too_little" and failed(short, small) is None
    assert failed(EN_SUMMARY, large) is None


@pytest.mark.parametrize("text", ["Summary:", "## Goal", "**Summary**", "Resumen:", "总结：", "## Goal\n## Completed Actions"])
def test_a_heading_or_a_label_alone_fails(text):
    assert failed(text, body(ZH_TURNS if text == "总结：" else EN_TURNS)) == "too_little"


def test_the_instructions_echoed_fail_and_their_headings_do_not():
    assert failed(body()["messages"][0]["content"]) == "echo"
    note = "## Goal\nFix the parser.\n## Completed Actions\n1. ran pytest — 3 failed [tool: terminal]"
    assert failed(note) is None


def test_the_stated_budget_is_read_from_the_prompt_else_from_max_tokens():
    assert ck.stated_budget(body(target=321)["messages"][0]["content"], "", {}) == 321
    assert ck.stated_budget("Summarize.", "", {"max_tokens": 600}) == 300


def test_checks_none_or_some_from_the_config():
    assert enabled_checks("all") == CHECK_NAMES and enabled_checks("none") == ()
    assert enabled_checks("echo, refusal") == ("refusal", "echo")  # always in running order
    some = ck.Checks.from_config(load_config(summary_checks="echo"))
    assert failed("I'm sorry, I can't help with that.", checks=some) is None
    for bad in ("nope", "all,refusal"):
        with pytest.raises(ConfigError, match="summarization.checks"):
            load_config(summary_checks=bad)
    with pytest.raises(ConfigError, match="check_thresholds"):
        load_config(check_thresholds={"loudness": 1})


def test_yaml_names_checks_as_a_list_and_only_the_thresholds_it_changes(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("summarization:\n  checks: [refusal, echo]\n  check_thresholds:\n    echo_max_share: 0.7\n")
    cfg = load_config(path)
    assert enabled_checks(cfg.summary_checks) == ("refusal", "echo")
    assert ck.Checks.from_config(cfg).limits.echo_max_share == 0.7 and cfg.check_thresholds["refusal_max_share"] == 0.5


# ---- properties -------------------------------------------------------------------------------

WORDS = st.lists(st.sampled_from("the parser test failed ran fixed file loop value 3 42 src 解析 测试 失败".split()),
                 min_size=10, max_size=40)


@settings(max_examples=60, deadline=None)
@given(WORDS, st.integers(3, 8), st.sampled_from([" ", "\n", ""]))
def test_any_text_repeated_three_times_or_more_fails_repetition(words, k, sep):
    text = sep.join([" ".join(words) + "."] * k)  # the period: with no separator, no two words fuse into one
    assert ck.measures(text)["duplicate_ngram"] > ALL.limits.duplicate_ngram_max_share
    assert failed(text, checks=ck.Checks(("repetition",), ALL.limits)) == "repetition"


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=300), st.text(max_size=300))
def test_checks_judge_any_text_without_raising(answer, turns):
    m = ck.measures(answer)
    assert all(0.0 <= v <= 1.0 for v in m.values()) and 0.0 <= ck.refusal_share(answer) <= 1.0
    assert failed(answer, body([("gpt", turns)])) in (None, *CHECK_NAMES)


@settings(max_examples=30, deadline=None)
@given(st.permutations(EN_SUMMARY.split(". ")))
def test_good_sentences_in_any_order_pass(sentences):
    assert failed(". ".join(sentences)) is None


# ---- measured: good summaries pass, bad answers fail ------------------------------------------


@pytest.fixture(scope="module")
def measured():
    return measure_checks.measure()


def test_no_false_positives_on_good_summaries(measured):
    for name, m in measured.items():
        assert m.answers >= (10 if name == "handwritten" else 100), name
        assert m.failures == [], (name, m.failures)


def test_every_bad_answer_fails_its_check_on_real_requests():
    config, counter, seen = measure_checks.requests("prose", limit=12)
    payload = measure_checks.OpenAISummarizer(config, counter).payload
    for _, request, _ in seen:
        b = payload(request)
        for kind, check in CHECK_OF.items():
            assert ck.failed_check(BAD_ANSWERS[kind](b["messages"]), b, ALL, counter) == check, kind


# ---- rows, the cache and the report ---------------------------------------------------------


def test_checks_failed_in_rows_only_when_some_failed_and_through_the_cache():
    plain = RowMetrics(Outcome.COMPRESSED, 10, 5, 4, 3, 8)
    assert "summary_checks_failed" not in plain.to_dict()
    flagged = RowMetrics(Outcome.COMPRESSED, 10, 5, 4, 3, 8, summary_checks_failed=("refusal",))
    assert flagged.to_dict()["summary_checks_failed"] == ["refusal"]
    for summary in (Summary("text", 2, 1, ("loop",)), Summary("text", 1, 0)):
        line = json.loads(_encoded("k", summary))
        assert ("checks_failed" in line["summary"]) is bool(summary.checks_failed)
        assert _decoded(line, "k") == Hit(summary)
        recorded = json.loads(_encoded("k", summary, "the checks' name"))
        assert _decoded(recorded, "k") == Hit(summary, "the checks' name")
        recorded["summary"]["checked"] = "other checks"  # the record is under the checksum: altered, never served
        assert _parsed(json.dumps(recorded).encode()) is None
    old = {"key": "k", "summary": {"text": "t", "api_calls": 1, "errors": 0}}  # a cache from before the checks
    assert _decoded(old, "k") == Hit(Summary("t", 1, 0), None)


def test_the_checks_name_changes_with_what_decides_a_verdict():
    names = {ALL.identity("tok"), ALL.identity("other tok"), ck.Checks(ALL.names[1:], ALL.limits).identity("tok"),
             ck.Checks(ALL.names, replace(ALL.limits, echo_max_share=0.7)).identity("tok")}
    assert len(names) == 4 and ALL.identity("tok") == ALL.identity("tok")
    assert ck.Checks((), ALL.limits).identity("tok") is None  # no checks: nothing to record


@pytest.fixture
def data(tmp_path):
    rows = hermes_rows(N_OVER)
    write_jsonl(tmp_path / "in.jsonl", rows)
    return rows


@pytest.mark.parametrize("kind", list(BAD_ANSWERS))
def test_a_bad_first_answer_is_asked_again(kind, srv, data, tmp_path, bpe_tokenizer):
    srv.set_faults(bad_answer=kind, bad_answer_first_per_prompt=True)
    run = compress(tmp_path, srv.base_url, bpe_tokenizer)
    bad = {BAD_ANSWERS[kind](b["messages"]).strip() for b in srv.stats.bodies}
    for row in run.rows:
        m = row["compression_metrics"]
        assert m["outcome"] == "compressed" and m["summary_source"] == "openai"
        assert m["summary_checks_failed"] == [CHECK_OF[kind]] * m["passes"]
        (turn,) = summary_turns(row)
        assert answer_of(turn) not in bad and not any(b in turn for b in bad if len(b) > 20)
    s = run.report["summarization"]
    assert s["answers_failed_checks"] == {CHECK_OF[kind]: s["errors"]} and s["errors"] == srv.stats.requests // 2
    assert s["rows_fallen_back_on_checks"] == 0 and s["checks"] == list(CHECK_NAMES) and s["checks_seconds"] > 0
    if kind == "refusal":  # the cache gives the same rows, and their checks, back
        first = run.out.read_bytes()
        srv.reset()
        again = compress(tmp_path, srv.base_url, bpe_tokenizer)
        assert srv.stats.requests == 0 and again.out.read_bytes() == first
        assert again.report["summarization"]["answers_failed_checks"] == s["answers_failed_checks"]


@pytest.mark.parametrize("on_failure", ["keep", "extractive", "reject"])
def test_always_bad_answers_get_on_failure_and_nothing_is_cached(on_failure, srv, tmp_path, bpe_tokenizer):
    write_jsonl(tmp_path / "in.jsonl", hermes_rows(N_OVER, 1))  # one row under the target: not all rejected
    srv.set_faults(bad_answer="refusal")
    run = compress(tmp_path, srv.base_url, bpe_tokenizer, "--on-failure", on_failure, "--max-retries", "1")
    assert len(run.rows) + len(run.rejects) == N_OVER + 1  # none lost
    assert "sorry" not in run.out.read_text(encoding="utf-8").lower()
    s = run.report["summarization"]
    assert s["rows_fallen_back_on_checks"] == N_OVER and s["answers_failed_checks"] == {"refusal": 2 * N_OVER}
    if on_failure == "reject":
        assert [r["reason"] for r in run.rejects] == ["summary_failed"] * N_OVER
    else:
        summarized = [r["compression_metrics"] for r in run.rows if r["compression_metrics"]["passes"]]
        assert {m["summary_source"] for m in summarized} == ({None} if on_failure == "keep" else {"extractive"})
        assert [m["summary_checks_failed"] for m in summarized] == [["refusal"] * 2] * N_OVER
    assert f"{2 * N_OVER} answers turned away (refusal: {2 * N_OVER})" in render_report(run.report, "r.json")
    if on_failure == "keep":  # the page and compare show them too
        report = read_report(run.report)
        assert "answers failed: refusal" in report_page(report) and "rows fallen back (checks)" in report_page(report)
        figures = comparison([report, report], ["a", "b"], ["a", "b"]).values
        assert figures["answers_failed_checks"] == [2 * N_OVER] * 2
        assert figures["rows_fallen_back_on_checks"] == [N_OVER] * 2
    srv.reset()
    healed = compress(tmp_path, srv.base_url, bpe_tokenizer, "--on-failure", on_failure)
    assert healed.report["summarization"].get("cache_hits") == 0 and srv.stats.requests == N_OVER


def test_a_cached_answer_that_fails_the_checks_is_asked_again(srv, data, tmp_path, bpe_tokenizer):
    srv.set_faults(bad_answer="refusal")
    unchecked = compress(tmp_path, srv.base_url, bpe_tokenizer, "--summary-checks", "none")
    assert "sorry" in unchecked.out.read_text(encoding="utf-8").lower()  # with the checks off, it is used
    srv.reset()
    checked = compress(tmp_path, srv.base_url, bpe_tokenizer)
    assert "sorry" not in checked.out.read_text(encoding="utf-8").lower() and srv.stats.requests == N_OVER


def test_a_cached_summary_recorded_as_passing_this_runs_checks_is_not_judged_again(srv, data, tmp_path, bpe_tokenizer):
    first = compress(tmp_path, srv.base_url, bpe_tokenizer)
    refusal = BAD_ANSWERS["refusal"]([])
    # Each stored summary made a refusal, its record of the checks it passed kept: a hit judged again
    # would be turned away and bought again; one taken on its record is served.
    for segment in first.cache.glob("*.jsonl"):
        entries = [json.loads(line) for line in segment.read_text(encoding="utf-8").splitlines()]
        assert all(e["summary"]["checked"] for e in entries)  # an online answer records this run's checks
        segment.write_bytes(b"".join(
            _encoded(e["key"], Summary(refusal, e["summary"]["api_calls"], 0), e["summary"]["checked"]) + b"\n"
            for e in entries))
    srv.reset()
    trusted = compress(tmp_path, srv.base_url, bpe_tokenizer)
    assert srv.stats.requests == 0 and trusted.out.read_text(encoding="utf-8").count(refusal) == N_OVER
    assert trusted.report["summarization"]["checks_seconds"] == 0  # nothing judged: no CPU spent on it
    config = tmp_path / "thresholds.yaml"  # other checks (one threshold moved): the record does not hold
    config.write_text("summarization:\n  check_thresholds:\n    echo_max_share: 0.7\n")
    srv.reset()
    judged = compress(tmp_path, srv.base_url, bpe_tokenizer, "--config", str(config))
    assert srv.stats.requests == N_OVER and refusal not in judged.out.read_text(encoding="utf-8")


def test_cli_checks_none_is_reported_and_a_bad_value_exits_2(srv, data, tmp_path, bpe_tokenizer):
    srv.set_faults(bad_answer="loop")
    out = tmp_path / "out.jsonl"
    result = run_cli("compress", str(tmp_path / "in.jsonl"), "-o", str(out), "--tokenizer", str(bpe_tokenizer),
                     "--target-max-tokens", "2000", "--summary-target-tokens", "200", "--summarizer", "openai",
                     "--base-url", srv.base_url, "--model", MODEL, "--summary-checks", "none", "--no-cache")
    assert result.code == 0, result.stderr
    assert "summary checks      off" in result.stdout
    report = json.loads((tmp_path / "out_metrics.json").read_text(encoding="utf-8"))
    assert report["summarization"]["checks"] == [] and report["config"]["summarization"]["checks"] == "none"
    assert "ran the tests again" in out.read_text(encoding="utf-8")
    assert "summary_checks_failed" not in read_jsonl(out)[0]["compression_metrics"]
    assert read_report(report).summarization.answers_failed_checks == {}
    bad = run_cli("compress", str(tmp_path / "in.jsonl"), "-o", str(tmp_path / "b.jsonl"),
                  "--tokenizer", str(bpe_tokenizer), "--summary-checks", "refusals")
    assert bad.code == 2 and len(bad.stderr.strip().splitlines()) == 1 and "refusals" in bad.stderr


def test_one_long_line_that_opens_as_a_heading_is_not_a_label():
    from trajcomp.summarizers.checks import is_label

    assert is_label("## Goal\n## Completed Actions") and is_label("Summary:")
    assert not is_label("## Turn 1 the assistant ran pytest -x tests/ and 3 tests failed in src/parser.py, then fixed it")


def test_a_short_list_of_calls_to_one_file_is_no_loop_and_a_short_loop_still_is():
    listed = "\n".join(f"read_file(path=src/retry.js) -> {n} lines, {n * 44} chars" for n in (54, 89, 75, 105))
    listed += "\n(33 less important items omitted)"
    assert len(ck.units(listed)) < ck.MIN_NGRAM_UNITS and failed(listed, checks=ck.Checks(("repetition",), ALL.limits)) is None
    looped = "The tests failed again. " * 8  # 32 units: its 10-grams recur, whatever the n-gram minimum
    assert failed(looped, checks=ck.Checks(("repetition",), ALL.limits)) == "repetition"
