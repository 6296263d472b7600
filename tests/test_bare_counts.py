"""A chat_template row under its target has its `assistant_tokens` read from its rendering's pieces
(core/counting/bare_texts.py), not from a second encoding of its assistant texts: the figure must be
the tokenizer's own count of each text, exactly. Checked on real tokenizers (Qwen3's with its template,
the byte-level BPE test tokenizer with the tests' templates, the demo tokenizer with its own), on the
sample agent rows, as OpenAI messages too; and the texts' characters are not all encoded again."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from tokenizers import Tokenizer

from conftest import DEMO_TOKENIZER
from test_fits import TEMPLATES, as_openai, compress_rows, qwen3_folder, sample_rows, templated  # noqa: F401 (a fixture)

from trajcomp.core.config import CompressionConfig
from trajcomp.core.counting.bare_texts import bare_counts
from trajcomp.core.counting.split_tokens import SplitTokens
from trajcomp.core.counting.tokens import TemplateLengths, TokenCounter
from trajcomp.core.dialects.rows import RowSchema

FOLDERS = ["qwen3", "demo", *TEMPLATES]


def folder_of(templated, name: str) -> Path:
    return DEMO_TOKENIZER if name == "demo" else Path(templated[name])


def own_counts(folder: Path, texts: list[str]) -> list[int]:
    """The tokenizer's own count of each text alone, no special tokens."""
    tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    return [len(e) for e in tok.encode_batch(texts, add_special_tokens=False)]


def gpt_texts(row: dict) -> list[str]:
    """The row's assistant turns' texts, as its dialect reads them (an OpenAI turn's calls as text)."""
    fmt = RowSchema.from_config(CompressionConfig()).adapter(row)
    return [t.text for t in fmt.turns(fmt.native_turns(row)) if t.role == "gpt"]


@pytest.mark.parametrize("name", FOLDERS)
@pytest.mark.parametrize("dialect", ["sharegpt", "openai"])
def test_assistant_tokens_under_the_target_are_each_texts_own_count(templated, name, dialect):
    folder = folder_of(templated, name)
    rows = sample_rows(8)
    rows = [as_openai(r) for r in rows] if dialect == "openai" else rows
    cfg = CompressionConfig(tokenizer_name=str(folder), count_mode="chat_template", target_max_tokens=10**9)
    results = compress_rows(cfg, rows)
    for row, result in zip(rows, results):
        assert result.metrics.outcome.value == "skipped_under_target"
        assert result.metrics.assistant_tokens == sum(own_counts(folder, gpt_texts(row)))


@pytest.mark.parametrize("name", FOLDERS)
def test_each_text_from_the_pieces_is_its_own_count_and_less_is_encoded(templated, name):
    folder = folder_of(templated, name)
    counter = TokenCounter(str(folder))
    lengths = TemplateLengths(counter)
    cfg = CompressionConfig(tokenizer_name=str(folder), count_mode="chat_template")
    schema = RowSchema.from_config(cfg)
    saved, chars = [], 0
    for row in sample_rows(8):
        fmt = schema.adapter(row)
        native = fmt.native_turns(row)
        messages = fmt.chat_messages(native, cfg.chat_roles)
        texts = [t.text for t in fmt.turns(native) if t.role == "gpt"]
        measured = asyncio.run(lengths.ameasure([], messages, 10**9))
        before = counter.chars
        counts = asyncio.run(bare_counts(counter.acount, lengths.split, texts, measured.pieces))
        assert counts == own_counts(folder, texts)
        saved.append(sum(map(len, texts)) - (counter.chars - before))
        chars += sum(map(len, texts))
    if name == "qwen3":  # the tool calls' JSON between <tool_call> and </tool_call> is read from the rendering
        assert sum(saved) > 0.5 * chars, (sum(saved), chars)


@pytest.mark.parametrize("name", FOLDERS)
def test_split_tokens_found_in_order_are_where_a_scan_of_every_id_finds_them(templated, name):
    """Qwen3's model gives none of its added tokens itself: `pieces` finds them in order; the same pieces."""
    folder = folder_of(templated, name)
    counter = TokenCounter(str(folder))
    scan = SplitTokens(counter.added_tokens(), counter.specials_as_text)
    ordered = SplitTokens(counter.added_tokens(), counter.specials_as_text, counter.in_model)
    assert ordered._in_order == (name == "qwen3")
    for row in sample_rows(6):
        messages = [{"role": "user" if t["from"] == "human" else "assistant" if t["from"] == "gpt" else t["from"],
                     "content": t["value"]} for t in row["conversations"]]
        try:
            text = counter.render(messages)
        except Exception:  # a template that insists on a role order
            continue
        ids = counter.encode_fast([text])[0].ids
        assert ordered.pieces(text, ids) == scan.pieces(text, ids)
