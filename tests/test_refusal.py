"""Refusals (trajcomp/summarizers/refusal.py): the shapes a refusing model writes, in every language
the refusal check knows, fail it; summaries that report or quote a refusal pass; and through the
CLI against the test server answering refusal paragraphs, none reaches a row or the cache."""

from __future__ import annotations

import json
import sys

import pytest
from conftest import ROOT, read_jsonl, run_cli, write_jsonl
from hypothesis import given, settings
from hypothesis import strategies as st
from openai_server import REFUSAL_PARAGRAPHS, REFUSALS, ServerThread
from test_openai_summarizer import MODEL, N_OVER, NO_KEY_ENV, hermes_rows
from test_summary_checks import ALL, EN_SUMMARY, ES_SUMMARY, ZH_SUMMARY, failed

from trajcomp.summarizers import checks as ck
from trajcomp.summarizers import refusal
from trajcomp.summarizers.language import words

REFUSAL_ONLY = ck.Checks(("refusal",), ALL.limits)

# Three shapes in each language (tests/fixtures/refusals.json, the ones scripts/measure_checks.py
# measures): an apology and a refusal, why, an offer of other help and "let me know"; "unfortunately"
# and a refusal, why, an offer; one line, with typographic apostrophes where the language writes them.
SHAPES = REFUSALS
ALL_SHAPES = [(lang, i, text) for lang, texts in SHAPES.items() for i, text in enumerate(texts)]


@pytest.mark.parametrize("lang, shape, text", ALL_SHAPES)
def test_each_shape_of_refusal_fails_in_each_language(lang, shape, text):
    assert failed(text) == "refusal"
    assert words(text) <= refusal.PARAGRAPH_WORDS / 2  # the longest is well within a paragraph's length


def test_every_language_of_the_refusal_check_has_each_shape():
    assert set(SHAPES) == {"en", "es", "pt", "fr", "de", "it", "ru", "zh", "ja", "ko"}
    assert all(len(texts) == 3 for texts in SHAPES.values())


def test_an_answer_that_opens_refusing_is_a_paragraph_only_while_short():
    opener = "I can't write to /etc/hosts without root, so the assistant used config/hosts.local instead. "
    read = [f"It then read src/module_{i}.py ({40 + i} lines) and found no use of the old flag." for i in range(12)]
    assert refusal.is_refusal(opener + " ".join(read[:5]), 0.5)
    assert words(opener + " ".join(read)) > refusal.PARAGRAPH_WORDS
    assert not refusal.is_refusal(opener + " ".join(read), 0.5)


def test_the_issues_paragraphs_fail_though_most_of_their_sentences_do_not_refuse():
    for text in REFUSAL_PARAGRAPHS[:2]:
        assert refusal.refusal_share(text) < ALL.limits.refusal_max_share and failed(text) == "refusal"
    assert refusal.refusal_share(REFUSAL_PARAGRAPHS[2]) == 1.0  # "I’m" reads as "I'm"


@pytest.mark.parametrize("text", [
    "Summary:\nI\u2019m sorry, but I can\u2019t help with that. I can summarize another part of the session instead.",
    "\u201cI\u2019m sorry, but I can\u2019t assist with that.\u201d",  # the whole answer in quotes
    "**I'm sorry, but I can't summarize this.** The conversation covers exploiting a service. Let me know if "
    "you need anything else.",
])
def test_a_label_quotes_or_markup_around_a_refusal_do_not_hide_it(text):
    assert failed(text) == "refusal"


# Good summaries that report or quote a refusal: the turns had one (a chatbot under test, a user
# asking for a secret), the summary says so in the third person or quotes it after its opening.
QUOTING = [
    EN_SUMMARY + " When the user asked for the production database password, the assistant said it cannot share "
    "credentials and used the staging ones instead.",
    EN_SUMMARY + " The support bot under test answered \u201cI\u2019m sorry, but I can\u2019t assist with that.\u201d "
    "to every prompt about refunds.",
    "\"I'm sorry, but I can't help with that\" was the support bot's answer to all 14 prompts of "
    "tests/test_guardrails.py; the assistant ran `pytest -x tests/test_guardrails.py` (exit 0, 14 passed).",
    "## Goal\nMake the guardrail tests pass.\n## Completed Actions\n1. ran pytest tests/test_guardrails.py — 3 failed "
    "[tool: terminal]\n## Critical Context\nI\u2019m sorry, but I can\u2019t assist with that.\n- the bot's refusal "
    "text above must stay byte-identical: tests compare it with ==",
    ES_SUMMARY + " El asistente indicó que no puede compartir las credenciales de producción.",
    ZH_SUMMARY + " 用户索要生产环境的密码时，助手表示无法提供凭据，改用了测试环境的账号。",
    "助手は本番環境の認証情報の提供には対応できませんでした。代わりにステージング環境のアカウントを使い、"
    "tests/test_api.py の 12 件のテストがすべて通りました。",  # a past "could not", not a refusal
    "어시스턴트는 운영 환경 비밀번호를 제공할 수 없다고 답했습니다. 대신 스테이징 계정으로 tests/test_api.py 를 "
    "실행했고 12개 테스트가 모두 통과했습니다.",
]


@pytest.mark.parametrize("text", QUOTING)
def test_a_summary_that_reports_or_quotes_a_refusal_passes(text):
    assert failed(text, checks=REFUSAL_ONLY) is None


OPENERS = [texts[2] for texts in SHAPES.values()] + [REFUSAL_PARAGRAPHS[0].split(". ")[0] + "."]
REASONS = ["It describes steps for gaining access to a machine without permission.",
           "The session involves bypassing a license check.",
           "Condensing it would make the steps easier to repeat."]
OFFERS = ["I can explain how licensing systems work in general.", "Let me know how you would like to proceed.",
          "If you are writing an incident report, I would be glad to help.", "Is there anything else I can help with?"]


@settings(max_examples=80, deadline=None)
@given(st.sampled_from(OPENERS), st.lists(st.sampled_from(REASONS + OFFERS), max_size=6),
       st.sampled_from(["\u2019", "'"]), st.sampled_from([" ", "\n", "\n\n"]))
def test_any_refusal_then_reasons_and_offers_fails(opener, rest, apostrophe, sep):
    text = sep.join([opener, *rest]).replace("'", apostrophe)
    assert failed(text, checks=REFUSAL_ONLY) == "refusal"


@settings(max_examples=80, deadline=None)
@given(st.sampled_from([EN_SUMMARY, ES_SUMMARY]), st.sampled_from(OPENERS), st.integers(1, 3))
def test_a_refusal_quoted_after_a_summarys_opening_passes(summary, quoted, after):
    sentences = summary.split(". ")
    text = ". ".join(sentences[:after]) + ". " + quoted + " " + ". ".join(sentences[after:])
    assert failed(text, checks=REFUSAL_ONLY) is None


@settings(max_examples=80, deadline=None)
@given(st.lists(st.sampled_from(OPENERS + REASONS + OFFERS + QUOTING + ["I'm sorry, but I can't assist with that."]),
                min_size=1, max_size=4))
def test_typographic_apostrophes_and_quotes_never_change_the_verdict(parts):
    text = " ".join(parts).replace("\u2019", "'").replace("\u201c", '"').replace("\u201d", '"')
    typographic = text.replace("'", "\u2019").replace('"', "\u201c")
    assert refusal.is_refusal(text, 0.5) == refusal.is_refusal(typographic, 0.5)


# ---- through the CLI, against the test server ---------------------------------------------------


@pytest.fixture(scope="module")
def server():
    with ServerThread(models=[MODEL]) as srv:
        yield srv


def cli_compress(tmp_path, base_url: str, tokenizer, *extra: str):
    return run_cli("compress", str(tmp_path / "in.jsonl"), "-o", str(tmp_path / "out.jsonl"), "--tokenizer",
                   str(tokenizer), "--target-max-tokens", "2000", "--summary-target-tokens", "200", "--cannot-fit", "shorten",
                   "--summarizer", "openai", "--base-url", base_url, "--model", MODEL, "--api-key-env", NO_KEY_ENV,
                   "--max-retries", "1", "--retry-delay", "0.01", "-q", *extra)


def cached_summaries(tmp_path) -> list[str]:
    lines = [json.loads(line) for path in (tmp_path / "out_summary_cache").rglob("*.jsonl")
             for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [line["summary"]["text"] for line in lines if "summary" in line]


def test_refusal_paragraphs_reach_neither_the_rows_nor_the_cache(server, tmp_path, bpe_tokenizer):
    server.reset()
    write_jsonl(tmp_path / "in.jsonl", hermes_rows(N_OVER))
    server.set_faults(bad_answer="refusal_paragraph")
    try:
        run = cli_compress(tmp_path, server.base_url, bpe_tokenizer, "--on-failure", "extractive")
        asked = {b["messages"][-1]["content"] for b in server.stats.bodies}
    finally:
        server.reset()
    assert run.code == 0, run.stderr
    out = (tmp_path / "out.jsonl").read_text(encoding="utf-8")
    assert len({REFUSAL_PARAGRAPHS[len(a) % 3] for a in asked}) >= 2  # more than one shape was answered
    for text in REFUSAL_PARAGRAPHS:
        assert text not in out and json.dumps(text)[1:-1] not in out
    assert "sorry" not in out.lower() and "unfortunately" not in out.lower()
    rows = read_jsonl(tmp_path / "out.jsonl")
    assert [r["compression_metrics"]["summary_source"] for r in rows] == ["extractive"] * N_OVER
    assert all(set(r["compression_metrics"]["summary_checks_failed"]) == {"refusal"} for r in rows)
    assert cached_summaries(tmp_path) == []  # nothing cached: a good server is asked again for each row
    again = cli_compress(tmp_path, server.base_url, bpe_tokenizer)
    assert again.code == 0 and server.stats.requests == N_OVER, again.stderr
    assert len(cached_summaries(tmp_path)) == N_OVER


def test_the_measuring_script_finds_every_refusal_caught():
    sys.path.insert(0, str(ROOT / "scripts"))
    import measure_checks

    measured = measure_checks.refusals()
    assert sum(m.answers for m in measured.values()) == 30
    assert all([check for check, _, _ in m.failures] == ["refusal"] * m.answers for m in measured.values())
