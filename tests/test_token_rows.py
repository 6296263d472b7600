"""output.rows: tokens. Over SWE-like rows in every dialect, with and without --segments, each token row is
apply_chat_template(tokenize=True) of the text row the same run writes; its labels are -100 but on exactly the
unmarked assistant turns (each its text and the closing token), found by a template's {% generation %} block
or, without one, in the rendering; no token row is over the target, and a row that cannot fit is rejected."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest
from conftest import DEMO_TOKENIZER
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st
from test_fits import qwen3_folder
from test_segments import swe_rows

from trajcomp.core.compressor import TrajectoryCompressor
from trajcomp.core.config import CompressionConfig, ConfigError, load_config
from trajcomp.core.dialects.openai_rows import content_text
from trajcomp.core.dialects.rows import RowSchema
from trajcomp.core.counting.token_rows import IGNORE, marked
from trajcomp.core.counting.tokens import TokenCounter

# make trainers' own reading of labels (stdlib only, run in each trainer's venv), used here as the trainers use it
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts" / "trainers"))
from figures import runs  # noqa: E402

# chatml whose assistant turns are generation blocks (their text and <|im_end|>), as TRL's patched templates are
TEMPLATE = Path(__file__).resolve().parent / "fixtures" / "chatml_generation.jinja"
COUNTERS = {"demo": TokenCounter(str(DEMO_TOKENIZER)), "qwen3": TokenCounter(str(qwen3_folder())),
            "generation": TokenCounter(str(DEMO_TOKENIZER), chat_template=str(TEMPLATE))}


def rendered(counter: TokenCounter, row) -> list[int]:
    fmt = RowSchema().adapter(row)
    messages = fmt.chat_messages(fmt.native_turns(row), CompressionConfig().chat_roles)
    return list(counter.tokenizer.apply_chat_template(messages, tokenize=True, return_dict=False))


def compressed(row, counter: TokenCounter, rows: str, segments: bool, target: int):
    cfg = CompressionConfig(tokenizer_name=counter.name, count_mode="chat_template", target_max_tokens=target,
                            summary_target_tokens=target // 6, segments=segments, output_rows=rows,
                            cannot_fit="shorten")
    return asyncio.run(TrajectoryCompressor(cfg, counter=counter).compress_row(row))


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow],
          phases=(Phase.explicit, Phase.reuse, Phase.generate))  # no shrinking: a failure names its rows
@given(dialect=st.sampled_from(("hermes", "openai", "llamafactory")), tokenizer=st.sampled_from(tuple(COUNTERS)),
       seed=st.integers(0, 1000), steps=st.integers(8, 16), segments=st.booleans())
# A summary turn is a user turn: Qwen3 drops the reasoning of the turn before it, once left unlabelled.
@example(dialect="hermes", tokenizer="qwen3", seed=856, steps=15, segments=False)
def test_token_rows_are_the_templates_rendering_labelled_on_the_unmarked_assistant_turns(dialect, tokenizer, seed,
                                                                                        steps, segments):
    counter = COUNTERS[tokenizer]
    row = swe_rows.row(dialect, seed, steps)
    target = max(len(rendered(counter, row)) // 4, 1500)
    text, tokens = (compressed(row, counter, rows, segments, target) for rows in ("text", "tokens"))
    assert not text.rejected, text.detail
    if tokens.rejected:  # only a row whose text rows are over the target
        assert tokens.reason == "token_row_over_target" and text.metrics.cannot_fit or text.metrics.still_over_limit
        return
    assert len(tokens.rows) == len(text.rows)
    end = counter.tokenizer.convert_tokens_to_ids("<|im_end|>")
    for out, made in zip(text.rows, tokens.rows):
        fmt = RowSchema().adapter(out)
        assert {k: v for k, v in made.items() if k not in ("input_ids", "attention_mask", "labels",
                                                             "assistant_masks", "completion_mask")} == \
            {k: v for k, v in out.items() if k != fmt.key}  # lineage and metrics ride along
        ids = made["input_ids"]
        assert ids == rendered(counter, out) and len(ids) <= target
        assert made["attention_mask"] == [1] * len(ids)
        assert made["assistant_masks"] == made["completion_mask"] == [int(x != IGNORE) for x in made["labels"]]
        native = fmt.native_turns(out)
        # the turn's text as the template renders it: an OpenAI message's calls only where it renders tool_calls
        # (Qwen3's, as <tool_call> blocks after the text; the demo's chatml shows the content alone)
        calls = fmt.key != "messages" or "tool_calls" in counter.tokenizer.chat_template
        wanted = [v.text if calls else content_text(t.get("content"))
                  for t, v in zip(native, fmt.turns(native)) if v.role == "gpt" and not marked(t, "train")]
        found = runs(made["labels"])
        assert len(found) == len(wanted)
        for (start, stop), content in zip(found, wanted):
            assert made["labels"][start:stop] == ids[start:stop]
            assert ids[stop - 1] == end  # each turn labelled with its closing token
            # the turn's text as the template renders it (Qwen3 respaces a <think> block, and drops it from the
            # turns before the last user turn: a summary turn is one)
            got = counter.tokenizer.decode(ids[start:stop - 1]).split()
            assert got == content.split() or got == content.split("</think>")[-1].split() != []


def test_a_row_that_cannot_fit_is_rejected_never_written_as_tokens():
    counter = COUNTERS["demo"]
    row = swe_rows.row("hermes", 3, 12)
    result = compressed(row, counter, "tokens", True, 300)  # the head alone is over it
    assert result.rejected and result.reason == "token_row_over_target" and result.rows == ()
    assert "over the target of 300" in result.detail


def test_token_rows_need_chat_template_counting():
    with pytest.raises(ConfigError, match="count_mode: chat_template"):
        load_config(None, output_rows="tokens", count_mode="turns")
    with pytest.raises(ConfigError, match="output.rows must be one of"):
        load_config(None, output_rows="ids")


def test_the_cli_writes_token_rows_as_a_dataset_folder_and_rejects_what_cannot_fit(tmp_path):
    """One subprocess: the flag, the folder save_to_disk writes (load_from_disk reads it), the rejects file."""
    import datasets
    from conftest import read_jsonl, run_cli, write_jsonl

    rows = [swe_rows.row("llamafactory", 1, 12), {**swe_rows.row("hermes", 2, 2), "id": "short"}]
    src = write_jsonl(tmp_path / "in.jsonl", rows)
    target = max(len(rendered(COUNTERS["demo"], rows[0])) // 3, 1500)
    args = ["compress", str(src), "-o", str(tmp_path / "out"), "--output-format", "hf", "--tokenizer",
            str(DEMO_TOKENIZER), "--count-mode", "chat_template", "--segments", "--token-rows", "-q"]
    done = run_cli(*args, "--target-max-tokens", str(target))
    assert done.code == 0, done.stderr
    ds = datasets.load_from_disk(str(tmp_path / "out"))
    assert {"input_ids", "attention_mask", "labels", "assistant_masks", "id", "segment"} <= set(ds.column_names)
    assert len(ds) >= 3 and max(map(len, ds["input_ids"])) <= target
    refused = run_cli(*args[:-1], "--count-mode", "turns", "--target-max-tokens", "3000")
    assert refused.code == 2 and "chat_template" in refused.stderr
    plain = [a for a in args[:-1] if a not in ("--output-format", "hf")]
    tight = run_cli(*[a if a != str(tmp_path / "out") else str(tmp_path / "t.jsonl") for a in plain],
                    "--target-max-tokens", "250", "--summary-target-tokens", "50", "-q")
    assert tight.code == 1 and "every row" in tight.stderr  # all rejected: nothing written as tokens over the target
    assert not (tmp_path / "t.jsonl").exists() or not read_jsonl(tmp_path / "t.jsonl")
    assert {r["reason"] for r in read_jsonl(tmp_path / "t_rejects.jsonl")} == {"token_row_over_target"}
