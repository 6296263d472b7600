"""An edited rendering measured from its pieces counts exactly what encoding it whole counts.

chat_template mode measures each summarized row from the pieces of its rendering that the edit
changed (`tokens.SplitTokens`). The promise is exactness on any tokenizer: checked here on real
tokenizers (Qwen3's, the byte-level BPE test tokenizer, and a SentencePiece-style one whose
pre-tokenizer treats a text's opening specially, with added tokens that strip spaces or contain
one another, which must not be used as split points), on random texts and random edits.
A row over its target is split into per-turn costs from the same pieces: those costs must be the
ones every token's offsets give (the end of this file).
"""

from __future__ import annotations

import json
import random
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from tokenizers import AddedToken, Tokenizer, models, normalizers, pre_tokenizers, trainers

from conftest import CORPUS
from test_fits import CHAT_ROLES, TEMPLATES, qwen3_folder, sample_rows, templated  # noqa: F401 (a fixture)

from trajcomp.core.dialects.rows import SHAREGPT
from trajcomp.core.counting.split_tokens import SplitTokens
from trajcomp.core.counting.tokens import Measured, TemplateLengths, TokenCounter

# Added tokens of the SentencePiece-style tokenizer: two clean ones, one inside a longer one, one
# overlapping itself, one stripping the spaces before it, one matched after normalization.
TANGLED = ["<|im_end|>!", "<|im_end|>", "%%", "[T]", "<n>"]


def sentencepiece_style(*special: AddedToken) -> Tokenizer:
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.normalizer = normalizers.NFKC()
    tok.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="first")
    tok.train_from_iterator(CORPUS, trainers.BpeTrainer(vocab_size=500, special_tokens=["<unk>"]))
    tok.add_special_tokens([
        AddedToken("<s>"), AddedToken("<|im_start|>"), AddedToken("<|im_end|>"), AddedToken("<|im_end|>!"),
        AddedToken("%%"), AddedToken("[T]", lstrip=True), *special,
    ])
    tok.add_tokens([AddedToken("<n>", normalized=True)])
    return tok


def tokenizers_under_test(bpe_folder: Path) -> dict[str, Tokenizer]:
    return {
        "qwen3": Tokenizer.from_file(str(qwen3_folder() / "tokenizer.json")),
        "bpe": Tokenizer.from_file(str(bpe_folder / "tokenizer.json")),
        "sentencepiece": sentencepiece_style(),
    }


@pytest.fixture(scope="module")
def tokenizers_(bpe_tokenizer) -> dict[str, Tokenizer]:
    return tokenizers_under_test(Path(bpe_tokenizer))


FRAGMENTS = [
    "<|im_start|>", "<|im_end|>", "<|im_end|>!", "<s>", "%%", "%", "[T]", "<n>", "<think>", "</think>",
    "<tool_call>", "<|endoftext|>", " ", "  ", "\n", "▁", "a", "hello", " world", "ﬁ", "café", "e\u0301",
    "我们", "＜s＞", "{\"k\": 1}", "!", "<|im", "_end|>",
]
texts = st.lists(st.sampled_from(FRAGMENTS), max_size=40).map("".join)


def full(tok: Tokenizer, text: str) -> int:
    return len(tok.encode(text, add_special_tokens=False))


def by_pieces(tok: Tokenizer, base: str, edited: str) -> int | None:
    split = SplitTokens(tok.get_added_tokens_decoder(), tok.encode_special_tokens)
    pieces = split.pieces(base, tok.encode(base, add_special_tokens=False).ids)
    if pieces is None:
        return None
    return split.count(edited, pieces, lambda ts: [len(e) for e in tok.encode_batch(ts, add_special_tokens=False)])


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.sampled_from(["qwen3", "bpe", "sentencepiece"]), base=texts, cut=st.tuples(st.integers(0, 400), st.integers(0, 400)),
       insert=texts)
@example(name="sentencepiece", base="a<|im_end|>!b", cut=(12, 13), insert="c")  # a token inside a longer one
@example(name="sentencepiece", base="a%%%b<s>c", cut=(1, 2), insert="x")  # a token overlapping itself
@example(name="sentencepiece", base="a<s>b  [T]c", cut=(5, 6), insert="d ")  # a token taking the spaces before it
@example(name="sentencepiece", base="<s>a<s>b", cut=(5, 6), insert="c")  # a piece tokenized after a split, not opening
def test_an_edit_counted_by_pieces_equals_the_whole_encoding(tokenizers_, name, base, cut, insert):
    tok = tokenizers_[name]
    start, end = sorted(min(c, len(base)) for c in cut)
    edited = base[:start] + insert + base[end:]
    counted = by_pieces(tok, base, edited)
    assert counted is None or counted == full(tok, edited)


def test_only_clean_added_tokens_split():
    added = sentencepiece_style().get_added_tokens_decoder()
    split = SplitTokens(added)
    # <|im_end|> is inside <|im_end|>!, %% overlaps itself, [T] strips spaces, <n> is matched normalized
    assert {added[i].content for i in split.ids} == {"<unk>", "<s>", "<|im_start|>", "<|im_end|>!"}


def test_a_token_another_can_swallow_never_splits():
    """"z<" (which takes the spaces after it, so is no split token) swallows the start of "<s>" after a z."""
    tok = sentencepiece_style(AddedToken("z<", rstrip=True))
    counted = by_pieces(tok, "<s>b<s>c", "<s>z<s>c")  # None: no split token left, counted whole
    assert counted is None or counted == full(tok, "<s>z<s>c")


@pytest.mark.parametrize("template", ["qwen3", *TEMPLATES])
def test_summarized_rows_measured_by_pieces_equal_their_rendering(templated, template):
    """Rows edited as the passes edit them (a span of turns replaced by one user turn, a notice after
    the system prompt): the pieces' count is the trainer's length."""
    counter = TokenCounter(str(templated[template]))
    lengths = TemplateLengths(counter)
    rnd = random.Random(7)
    used_pieces = 0
    for row in sample_rows(10):
        messages = SHAREGPT.chat_messages(SHAREGPT.native_turns(row), CHAT_ROLES)
        base = lengths.measure([], messages, costs_above=0)
        used_pieces += base.pieces is not None and len(base.pieces.counts) > 0
        for _ in range(4):
            start = rnd.randrange(1, len(messages) - 1)
            end = rnd.randrange(start, len(messages))
            summary = {"role": "user", "content": f"[CONTEXT SUMMARY]: turns {start}-{end} <tool_call> {rnd.random()}"}
            edited = [dict(m) for m in messages[:start]] + [summary] + [dict(m) for m in messages[end:]]
            if rnd.random() < 0.5:
                edited[0]["content"] += "\n\nNote: part of the conversation was condensed."
            whole = len(counter.encode([counter.render(edited)])[0])
            assert lengths.measure_edit(base, edited) == whole
    if template in ("qwen3",):
        assert used_pieces == 10  # the test would notice if pieces stopped being used


def test_a_single_word_token_matched_raw_leaves_no_split_token():
    """Whether "foo" (single_word) matches depends on the characters around it, across any split."""
    tok = Tokenizer(models.WordLevel({c: i for i, c in enumerate("<s>ENDXafo[]")}, unk_token="["))
    tok.pre_tokenizer = pre_tokenizers.Split("", behavior="isolated")
    tok.add_special_tokens([AddedToken("<s>"), AddedToken("ENDX")])
    tok.add_tokens([AddedToken("foo", single_word=True, normalized=False)])
    assert SplitTokens(tok.get_added_tokens_decoder()).ids == frozenset()
    counted = by_pieces(tok, "<s>a", "<s>aENDXfoo")
    assert counted is None or counted == full(tok, "<s>aENDXfoo")


def test_special_tokens_split_as_text_never_split():
    """With split_special_tokens a special token is plain text: only the others split."""
    tok = sentencepiece_style()
    tok.add_tokens([AddedToken("<t>", normalized=False)])
    tok.encode_special_tokens = True
    added = tok.get_added_tokens_decoder()
    assert {added[i].content for i in SplitTokens(added, True).ids} == {"<t>"}
    assert by_pieces(tok, "a<t>b", "a<t>cc") == full(tok, "a<t>cc")


# Phi-4's layout: a turn's text right after a split token, where a prefix space goes
PHI4 = "{% for m in messages %}<|im_start|>{{ m['role'] }}<|im_sep|>{{ m['content'] }}<|im_end|>{% endfor %}"


@pytest.fixture(scope="module")
def costed(templated, tmp_path_factory) -> dict[str, TemplateLengths]:
    """Chat-template measures whose renderings have split tokens: Qwen3's, and the BPE test tokenizer
    with Phi-4's template and added tokens, a prefix space and a post-processor that trims offsets
    (a token's offsets may then begin after a space the text does not hold: at a piece's end)."""
    from tokenizers import processors

    folder = tmp_path_factory.mktemp("trimmed")
    for f in Path(templated["default_system"]).iterdir():
        shutil.copy(f, folder / f.name)
    tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tok.add_special_tokens([AddedToken(t) for t in ("<|im_start|>", "<|im_end|>", "<|im_sep|>")])
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    tok.post_processor = processors.ByteLevel(trim_offsets=True)
    tok.save(str(folder / "tokenizer.json"))
    config = json.loads((folder / "tokenizer_config.json").read_text())
    (folder / "tokenizer_config.json").write_text(json.dumps({**config, "chat_template": PHI4}))
    lengths = {name: TemplateLengths(TokenCounter(str(path))) for name, path in (("qwen3", templated["qwen3"]),
                                                                               ("trimmed", folder))}
    assert lengths["trimmed"].counter.trims_offsets and not lengths["qwen3"].counter.trims_offsets
    return lengths


def by_offsets(lengths: TemplateLengths, messages: list[dict]) -> Measured:
    """Each turn's cost as every token's offsets give it: the measure the pieces must equal."""
    text = lengths.counter.render(messages)
    encoding = lengths.counter.encode([text])[0]
    return replace(lengths.costs(messages, text, encoding), pieces=lengths.split.pieces(text, encoding.ids))


conversations = st.lists(st.tuples(st.sampled_from(["user", "assistant", "tool"]), texts), min_size=1, max_size=6)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.sampled_from(["qwen3", "trimmed"]), turns=conversations)
@example(name="trimmed", turns=[("user", "X"), ("assistant", "X")])  # " X" trimmed to begin at the next span
@example(name="qwen3", turns=[("user", "a<|im_end|>b"), ("assistant", "c")])  # a split token inside a turn
def test_costs_from_pieces_equal_costs_from_offsets(costed, name, turns):
    lengths = costed[name]
    messages = [{"role": role, "content": content} for role, content in turns]
    text = lengths.counter.render(messages)
    assert lengths._measured(text, messages, costs_above=0) == by_offsets(lengths, messages)


def test_sample_rows_are_costed_from_their_pieces(costed, monkeypatch):
    """Real rows over their target: the same costs, and no encoding with offsets of the whole rendering."""
    lengths = costed["qwen3"]
    offsets_of = []
    encode = lengths.counter.encode
    monkeypatch.setattr(lengths.counter, "encode", lambda texts: offsets_of.extend(map(len, texts)) or encode(texts))
    for row in sample_rows(6):
        messages = SHAREGPT.chat_messages(SHAREGPT.native_turns(row), CHAT_ROLES)
        text = lengths.counter.render(messages)
        offsets_of.clear()
        measured = lengths._measured(text, messages, costs_above=0)
        assert sum(offsets_of) < len(text) / 4  # only the parts that cross a turn's start, if any
        assert measured == by_offsets(lengths, messages)
