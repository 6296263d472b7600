"""configs/templates/llamafactory_chatml.jinja renders a row in LLaMA-Factory's sharegpt dialect as its loader
does, so chat_template counts are its loader's lengths. The expected text was made by LLaMA-Factory 0.9.5 itself
(its chatml template's `_encode`, formatters joined before tokenizing) on tests/fixtures/llamafactory_row.json:
a system column, tools (one with every kind of argument note, one bare), a call, parallel calls in one turn,
observations and non-ASCII text. `make trainers` checks the same on every row it writes (rows_miscounted=0)."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import DEMO_TOKENIZER, ROOT, run_cli

from trajcomp.core.config import CompressionConfig
from trajcomp.core.counting.tokens import TokenCounter
from trajcomp.core.dialects.rows import RowSchema

FIXTURES = Path(__file__).parent / "fixtures"
TEMPLATE = ROOT / "configs" / "templates" / "llamafactory_chatml.jinja"
ROW = json.loads((FIXTURES / "llamafactory_row.json").read_text(encoding="utf-8"))
EXPECTED = (FIXTURES / "llamafactory_chatml_rendering.txt").read_text(encoding="utf-8")


def messages(row: dict):
    cfg = CompressionConfig()
    adapter = RowSchema.from_config(cfg).adapter(row)
    return adapter.chat_messages(adapter.native_turns(row), cfg.chat_roles)


def test_a_function_call_turn_hands_its_parsed_call_to_the_template():
    chat = messages(ROW)
    calls = [m.get("function_call") for m in chat.messages]
    assert calls[1] == {"name": "bash", "arguments": {"command": "pytest -x", "paths": ["a.py"]}}
    assert [c["name"] for c in calls[3]] == ["bash", "finish"]
    assert [m["content"] for m in chat.messages] == [t["value"] for t in ROW["conversations"]]  # the text as it is
    assert sum(c is not None for c in calls) == 2  # only function_call turns
    broken = {**ROW, "conversations": [ROW["conversations"][0], {"from": "function_call", "value": "not json"},
                                       *ROW["conversations"][2:]]}
    assert "function_call" not in messages(broken).messages[1]


def test_the_template_renders_the_row_as_llamafactory_does():
    counter = TokenCounter(str(DEMO_TOKENIZER), chat_template=str(TEMPLATE))
    assert counter.render(messages(ROW)) == EXPECTED
    # The tokenizer's own chatml writes the call's JSON instead: the counts a LLaMA-Factory user would get wrong.
    assert TokenCounter(str(DEMO_TOKENIZER)).render(messages(ROW)) != EXPECTED


def test_the_cli_counts_the_row_as_llamafactory_renders_it(tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps(ROW, ensure_ascii=False) + "\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    result = run_cli("compress", str(src), "-o", str(out), "--tokenizer", str(DEMO_TOKENIZER), "-q",
                     "--count-mode", "chat_template", "--chat-template", str(TEMPLATE), "--target-max-tokens", "4000")
    assert result.code == 0, result.stderr
    written = json.loads(out.read_text(encoding="utf-8"))
    counted = written["compression_metrics"]["compressed_tokens"]
    # LLaMA-Factory tokenizes each message's text apart; with chatml's special tokens between them that is
    # the same ids as the whole rendering's.
    tokenizer = TokenCounter(str(DEMO_TOKENIZER))
    assert counted == len(tokenizer.encode([EXPECTED])[0])
