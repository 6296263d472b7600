"""A text row as a trainer's token row (`output.rows: tokens`): `input_ids`, `attention_mask`, `labels` and the
masks TRL's collator reads, rendered by the training tokenizer's chat template exactly as `chat_template` mode
counts it (TokenCounter.render, then its tokenizer without special tokens: apply_chat_template's own ids).

`labels` is IGNORE everywhere but on the tokens of the assistant turns the row trains: the unmarked ones (a
segment's context turns carry `train: false` / `weight: 0`, segment_rows.py). A turn is labelled as the
template's `{% generation %}` block marks it (its text and closing token); a template without one, or whose
mask does not line up with the row's assistant turns, has each turn's span found in the rendering instead:
the tokens over its text (template_spans.py finds it) and the added token that closes it, where one follows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Sequence

from .template_spans import turn_starts
from .openai_rows import content_text

IGNORE = -100  # the label PyTorch's cross entropy skips
GENERATION = re.compile(r"{%-?\s*generation\s*-?%}")


@dataclass(frozen=True)
class Tokens:
    """One row's token columns; `spans`: each labelled run as (first token, one past its last)."""

    input_ids: list[int]
    labels: list[int]
    spans: list[tuple[int, int]]

    @property
    def mask(self) -> list[int]:
        return [int(label != IGNORE) for label in self.labels]

    def columns(self) -> dict[str, list[int]]:
        """The columns trainers read: LLaMA-Factory and transformers `labels`; TRL's collator `assistant_masks`
        (assistant_only_loss) or `completion_mask` (completion_only_loss), the same mask under both names."""
        mask = self.mask
        return {"input_ids": self.input_ids, "attention_mask": [1] * len(self.input_ids), "labels": self.labels,
                "assistant_masks": mask, "completion_mask": mask}


def tokenized(counter, messages: Sequence[dict[str, Any]], trained: Sequence[bool]) -> Tokens:
    """`messages` rendered and tokenized, `trained[i]` saying whether message i is an assistant turn to label."""
    text = counter.render(messages)
    encoding = counter.encode([text])[0]
    ids = list(encoding.ids)
    wanted = [i for i, m in enumerate(messages) if m.get("role") == "assistant"]
    runs = _generation_runs(counter.tokenizer, messages, ids, len(wanted))
    if runs is None:
        starts = turn_starts(messages, text, counter.render)
        runs = [_turn_span(counter, messages, text, encoding, starts[i], i) for i in wanted]
    spans = [run for run, i in zip(runs, wanted) if trained[i] and run[1] > run[0]]
    labels = [IGNORE] * len(ids)
    for start, end in spans:
        labels[start:end] = ids[start:end]
    return Tokens(ids, labels, spans)


def _generation_runs(tokenizer, messages, ids: list[int], turns: int) -> list[tuple[int, int]] | None:
    """The template's own mask of its generation blocks, as one run per assistant turn; None without such a
    block, or when its tokens or its runs do not line up with the rendering's (then spans are found instead)."""
    template = getattr(tokenizer, "chat_template", None) if tokenizer is not None else None
    if not isinstance(template, str) or not GENERATION.search(template):
        return None
    out = tokenizer.apply_chat_template(list(messages), tokenize=True, return_dict=True,
                                        return_assistant_tokens_mask=True, add_generation_prompt=False)
    if list(out["input_ids"]) != ids:
        return None
    mask = list(out["assistant_masks"])
    runs = [(i, j) for i, j in _runs(mask)]
    return runs if len(runs) == turns else None


def _runs(mask: Sequence[int]):
    start = None
    for i, m in enumerate([*mask, 0]):
        if m and start is None:
            start = i
        elif not m and start is not None:
            yield start, i
            start = None


def _turn_span(counter, messages, text: str, encoding, start: int, i: int) -> tuple[int, int]:
    """Message i's tokens: those over its text in the rendering, and the added token that closes it, if the
    next token is one with only whitespace before it. (0, 0) where its text is not found (an empty turn)."""
    body = content_text(messages[i].get("content"))
    begin = text.find(body.lstrip()[:64], start) if body.strip() else -1
    if begin < 0:
        return 0, 0
    tail = body.rstrip()[-64:]
    finish = text.find(tail, begin)
    finish = begin + len(body.strip()) if finish < 0 else finish + len(tail)
    offsets = encoding.offsets
    first = next((k for k, (a, b) in enumerate(offsets) if b > begin), len(offsets))
    last = next((k for k in range(first, len(offsets)) if offsets[k][0] >= finish), len(offsets))
    added = counter.added_tokens()
    if last < len(offsets) and encoding.ids[last] in added and not text[finish:offsets[last][0]].strip():
        last += 1
    return first, last


def marked(turn: dict[str, Any], train_field: str) -> bool:
    """Whether a turn says it is not trained: OpenAI's `"weight": 0`, a ShareGPT turn's `train_field: false`."""
    return turn.get("weight") == 0 or turn.get(train_field) is False


def token_row(row: dict[str, Any], fmt, counter, chat_roles: dict[str, str], train_field: str) -> dict[str, Any]:
    """`row` (an output row) as a token row: its other fields (`id`, the segment, `compression_metrics`) kept as
    columns, its turns replaced by the token columns."""
    native = fmt.native_turns(row)
    views = fmt.turns(native)
    trained = [v.role == "gpt" and not marked(t, train_field) for t, v in zip(native, views)]
    tokens = tokenized(counter, fmt.chat_messages(native, chat_roles), trained)
    return {**{k: v for k, v in row.items() if k != fmt.key}, **tokens.columns()}
