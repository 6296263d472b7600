"""The figures a trainer's own data loading gives on trajcomp's output, from what the trainer made of it (each
row's input_ids and labels, as its loader or collator hands them to the model), checked against the input rows.

Imported by the per-trainer checks in this folder, inside each trainer's own venv (no trajcomp import): a
labelled run is one stretch of labels != -100; its text, special tokens dropped and spaces squeezed, is looked
up among the input row's assistant turns. A run found more often than the input holds it is trained twice; a
run that is no assistant turn of the input is unmatched (tool or user text, or a turn the trainer's template
rewrote); labelled special tokens (each turn's closing token) are counted apart from the text's tokens, so
tokens_trained compares with assistant_tokens; an assistant turn no run holds is untrained. Rows written but
not loaded are dropped; rows the loader shortened are cut.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass

IGNORE = -100
ASSISTANT = ("gpt", "function_call", "assistant")


@dataclass
class Figures:
    rows_written: int = 0
    rows_loaded: int = 0
    rows_dropped: int = 0
    rows_cut: int = 0
    assistant_tokens: int = 0  # the input's, as the loader's tokenizer counts their text
    tokens_trained: int = 0  # labelled tokens but the special ones: the same count as assistant_tokens
    closing_tokens_trained: int = 0  # labelled special tokens: each assistant turn's closing token (<|im_end|>)
    tokens_trained_twice: int = 0
    # labelled text that is no assistant turn's text of the input: tool or user text, or an assistant turn the
    # trainer's own template rewrote (LLaMA-Factory's chatml renders a function_call as "Action: ..."), which
    # this matching cannot tell apart; 0 for token rows, where trajcomp's rendering is what is loaded
    labelled_unmatched_tokens: int = 0
    assistant_tokens_untrained: int = 0

    def line(self, name: str) -> str:
        return f"{name:48s} " + " ".join(f"{k}={v}" for k, v in asdict(self).items())


def squeeze(text: str) -> str:
    return " ".join(text.split())


def assistant_texts(row: dict) -> list[str]:
    """The row's assistant texts as written (whitespace as it is: their tokens are the ones a trainer labels)."""
    turns = row.get("conversations") or row.get("messages") or []
    out = []
    for t in turns:
        role = t.get("from", t.get("role"))
        if role in ASSISTANT:
            text = t.get("value", t.get("content")) or ""
            if t.get("tool_calls"):  # an OpenAI call: the template renders its arguments
                text += json.dumps(t["tool_calls"])
            out.append(text)
    return out


def runs(labels) -> list[tuple[int, int]]:
    out, start = [], None
    for i, label in enumerate([*labels, IGNORE]):
        if label != IGNORE and start is None:
            start = i
        elif label == IGNORE and start is not None:
            out.append((start, i))
            start = None
    return out


def figures(inputs: dict, loaded: list[tuple], tokenizer, written: int, cut: int) -> Figures:
    """`inputs`: id -> input row; `loaded`: (id, input_ids, labels) of each row the trainer kept."""
    fig = Figures(rows_written=written, rows_loaded=len(loaded), rows_dropped=written - len(loaded), rows_cut=cut)
    # Matched by the squeezed text (a decoded run's spacing may differ), sized by the text as written.
    wanted, size = defaultdict(Counter), {}
    for key, row in inputs.items():
        for text in assistant_texts(row):
            matched = squeeze(text)
            wanted[key][matched] += 1
            size[(key, matched)] = n = len(tokenizer(text, add_special_tokens=False)["input_ids"])
            fig.assistant_tokens += n
    got: dict = defaultdict(Counter)
    for key, ids, labels in loaded:
        for start, end in runs(labels):
            text = squeeze(tokenizer.decode(ids[start:end], skip_special_tokens=True))
            n = sum(1 for i in range(start, end) if ids[i] not in tokenizer.all_special_ids)
            fig.tokens_trained += n
            fig.closing_tokens_trained += end - start - n
            if not text:
                continue  # only the closing token
            if text in wanted.get(key, {}):
                got[key][text] += 1
            else:
                fig.labelled_unmatched_tokens += n
    for key, texts in wanted.items():
        for text, count in texts.items():
            seen = got[key][text]
            fig.tokens_trained_twice += max(0, seen - count) * size[(key, text)]
            fig.assistant_tokens_untrained += max(0, count - seen) * size[(key, text)]
    return fig


def token_rows(data, kind: str, trainer: str):
    """The token rows trajcomp saved for one output (a datasets folder), or None, said, when it wrote none."""
    import datasets

    folder = data / f"tokens_{kind}"
    saved = datasets.load_from_disk(str(folder)) if folder.exists() else None
    if saved is None or not len(saved):
        print(f"{trainer} token rows ({kind}): none written, every row over the target (in the rejects file)")
        return None
    return saved


def read_jsonl(path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]
