"""A rendering that fails is the row's `template_error` only when the row is what failed (as a trainer's own
rendering of it would fail); any other fault is raised on, so the run names it an internal error."""

from __future__ import annotations

import pytest

from trajcomp.core.counting.tokens import TokenCounter
from trajcomp.core.dialects.frame import Chat, Frame
from trajcomp.core.dialects.turn import RowError
from test_fits import qwen3_folder

RAISING = "{% if messages | length > 1 %}{{ raise_exception('roles must alternate') }}{% endif %}" \
          "{% for m in messages %}{{ m['content'] }}{% endfor %}"


@pytest.fixture(scope="module")
def qwen3() -> TokenCounter:
    return TokenCounter(str(qwen3_folder()))


def test_what_the_row_makes_the_template_fail_on_is_the_rows_reason(qwen3, bpe_tokenizer, tmp_path):
    (tmp_path / "raising.jinja").write_text(RAISING, encoding="utf-8")
    raising = TokenCounter(str(bpe_tokenizer), chat_template=str(tmp_path / "raising.jinja"))
    parts = [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]  # Qwen3 adds content to a string
    two = [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]
    named = Chat([{"role": "user", "content": "hi"}], Frame(None, ("a tool that is only a name",)))
    cases = [(qwen3, parts, "UndefinedError"), (raising, two, "roles must alternate"),
             (qwen3, named, "JSON schema")]  # the last: transformers' own check of the row's tools
    for counter, messages, words in cases:
        with pytest.raises(RowError) as caught:
            counter.render(messages)
        assert caught.value.reason == "template_error" and words in str(caught.value), words


def test_a_fault_that_is_not_the_rows_is_raised_on(qwen3, monkeypatch):
    """Fault injection: the tokenizer's call itself fails (as memory running out would), not the template."""
    def out_of_memory(*args, **kwargs):
        raise MemoryError("no memory left")

    monkeypatch.setattr(qwen3._tokenizer, "apply_chat_template", out_of_memory)
    with pytest.raises(MemoryError):
        qwen3.render([{"role": "user", "content": "hi"}])
