"""A text row as a trainer's token row (`output.rows: tokens`): `input_ids`, `attention_mask`, `labels` and the
masks TRL's collator reads, rendered by the training tokenizer's chat template exactly as `chat_template` mode
counts it (TokenCounter.render, then its tokenizer without special tokens: apply_chat_template's own ids).

`labels` is IGNORE everywhere but on the tokens of the assistant turns the row trains: the unmarked ones (a
segment's context turns carry `train: false` / `weight: 0`, segment_rows.py). A turn is labelled as the
template's `{% generation %}` block marks it (its text and closing token); a template without one, or whose
mask does not line up with the row's assistant turns, has each turn's span found in the rendering instead:
from its text (template_spans.py finds it; a turn opening on its reasoning or, with no text, on its calls, as
the format shows them: `Turn.text`) through the token the template closes an assistant turn with
(`closing_token`), so the calls a template renders after the text (Qwen3's `<tool_call>` blocks) are
labelled with it. A template with no such token has the added token right after the text, where one follows.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any, Sequence

from ..dialects.frame import parts
from ..dialects.openai_rows import content_text
from .template_spans import EDGE_CHARS, turn_starts

IGNORE = -100  # the label PyTorch's cross entropy skips
GENERATION = re.compile(r"{%-?\s*generation\s*-?%}")
THINK_END = "</think>"
PROBE = ({"role": "user", "content": "Hello."}, {"role": "assistant", "content": "Hi."})


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


def tokenized(counter, messages: Sequence[dict[str, Any]], trained: Sequence[bool],
              shown: Sequence[str] = ()) -> Tokens:
    """`messages` rendered and tokenized, `trained[i]` saying whether message i is an assistant turn to label;
    `shown[i]`, its text as the row's format shows it (`Turn.text`: with its reasoning and calls)."""
    text = counter.render(messages)
    encoding = counter.encode([text])[0]
    ids = list(encoding.ids)
    wanted = [i for i, m in enumerate(messages) if m.get("role") == "assistant"]
    runs = _generation_runs(counter.tokenizer, messages, ids, len(wanted))
    if runs is None:
        starts = turn_starts(messages, text, counter.render)
        found = Rendering(text, encoding, counter.added_tokens(), closing_token(counter))
        runs = [found.turn_span(messages[i], shown[i] if i < len(shown) else "", starts, i) for i in wanted]
    spans = [run for run, i in zip(runs, wanted) if trained[i] and run[1] > run[0]]
    labels = [IGNORE] * len(ids)
    for start, end in spans:
        labels[start:end] = ids[start:end]
    return Tokens(ids, labels, spans)


@functools.lru_cache(maxsize=16)
def closing_token(counter) -> int | None:
    """The added token the chat template closes an assistant turn with (chatml's `<|im_end|>`, Llama 3's
    `<|eot_id|>`): the one right after a probe turn's text, with only whitespace before it. None when no
    added token follows it there, or the template refuses the probe."""
    try:
        text = counter.render(list(PROBE))
    except Exception:  # a template that insists on other roles: the turns' spans fall back on what follows them
        return None
    at = text.rfind(PROBE[-1]["content"]) + len(PROBE[-1]["content"])
    encoding = counter.encode([text])[0]
    k = next((k for k, (begin, _) in enumerate(encoding.offsets) if begin >= at), None)
    if k is None or encoding.ids[k] not in counter.added_tokens() or text[at:encoding.offsets[k][0]].strip():
        return None
    return encoding.ids[k]


def _generation_runs(tokenizer, messages, ids: list[int], turns: int) -> list[tuple[int, int]] | None:
    """The template's own mask of its generation blocks, as one run per assistant turn; None without such a
    block, or when its tokens or its runs do not line up with the rendering's (then spans are found instead)."""
    template = getattr(tokenizer, "chat_template", None) if tokenizer is not None else None
    if not isinstance(template, str) or not GENERATION.search(template):
        return None
    every, tools = parts(messages)  # as TokenCounter.render renders them: the frame's system first, its tools
    out = tokenizer.apply_chat_template(every, tools=tools, tokenize=True, return_dict=True,
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


@dataclass(frozen=True)
class Rendering:
    """A row's rendering, its encoding (ids and offsets), the tokenizer's added tokens and the template's
    closing token (None: none), to find each assistant turn's tokens in."""

    text: str
    encoding: Any
    added: dict[int, Any]
    close: int | None

    def turn_span(self, message: dict[str, Any], shown: str, starts: list[int], i: int) -> tuple[int, int]:
        """Message i's tokens: from its text's first (where its reasoning, as `shown` opens, is rendered before
        it: the reasoning's; with no text, its calls'), through the closing token, the first after its text
        and before the next turn's text ends; without one, the added token right after its text, if only
        whitespace comes before it. (0, 0) where neither its text nor `shown` is found (an empty turn)."""
        text, offsets, ids = self.text, self.encoding.offsets, self.encoding.ids
        limit = next((start for start in starts[i + 2:] if start > starts[i + 1]), len(text)) \
            if i + 1 < len(starts) else len(text)
        found = _found(text, content_text(message.get("content")), starts[i], limit)
        opening = _found(text, shown, starts[i], limit)
        if opening is not None and (found is None or opening[0] < found[0]):
            found = (opening[0], found[1] if found is not None else opening[1])
        if found is None:  # a template that drops the turn's reasoning (Qwen3's, before the last user turn)
            found = _found(text, _after_reasoning(content_text(message.get("content"))), starts[i], limit)
        if found is None:
            return 0, 0
        begin, finish = found
        first = next((k for k, (a, b) in enumerate(offsets) if b > begin), len(offsets))
        last = next((k for k in range(first, len(offsets)) if offsets[k][0] >= finish), len(offsets))
        if self.close is not None:
            within = range(last, next((k for k in range(last, len(ids)) if offsets[k][0] >= limit), len(ids)))
            close = next((k for k in within if ids[k] == self.close), None)
            if close is not None:
                return first, close + 1
        if last < len(offsets) and ids[last] in self.added and not text[finish:offsets[last][0]].strip():
            last += 1
        return first, last


def _found(text: str, body: str, start: int, limit: int) -> tuple[int, int] | None:
    """Where `body` is in `text` between `start` and `limit`: from its first characters to its last (its
    stripped length on from its first, where its last are not found); None where its first are not."""
    if not body.strip():
        return None
    begin = text.find(body.lstrip()[:EDGE_CHARS], start, limit)
    if begin < 0:
        return None
    tail = body.rstrip()[-EDGE_CHARS:]
    finish = text.find(tail, begin, limit)
    return begin, begin + len(body.strip()) if finish < 0 else finish + len(tail)


def _after_reasoning(content: str) -> str:
    """A turn's text after its `<think>` block, as templates that drop reasoning render it ("" without one)."""
    return content.split(THINK_END)[-1].lstrip("\n") if THINK_END in content else ""


def marked(turn: dict[str, Any], train_field: str) -> bool:
    """Whether a turn says it is not trained: OpenAI's `"weight": 0`, a ShareGPT turn's `train_field: false`."""
    return turn.get("weight") == 0 or turn.get(train_field) is False


def token_row(row: dict[str, Any], fmt, counter, chat_roles: dict[str, str], train_field: str) -> dict[str, Any]:
    """`row` (an output row) as a token row: its other fields (`id`, the segment, `compression_metrics`) kept as
    columns, its turns replaced by the token columns."""
    native = fmt.native_turns(row)
    views = fmt.turns(native)
    trained = [v.role == "gpt" and not marked(t, train_field) for t, v in zip(native, views)]
    tokens = tokenized(counter, fmt.chat_messages(native, chat_roles), trained, [v.text for v in views])
    return {**{k: v for k, v in row.items() if k != fmt.key}, **tokens.columns()}
