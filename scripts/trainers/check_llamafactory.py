"""LLaMA-Factory 0.9.5's own data loading (`get_dataset`, stage sft, template chatml, cutoff_len = the target) on
trajcomp's output: text rows in its sharegpt dialect (function_call / observation), plain and --segments, and
token rows by `tokenized_path`. Its rows carry no id, so the figures pool the input rows' assistant turns; for text
rows, each function_call turn as its template renders it ("Action: ..."), by its own formatter. Text rows are also
loaded with no cutoff: a row is cut when the two differ, and trajcomp's count of each row (made with
configs/templates/llamafactory_chatml.jinja) must equal the uncut length.
Usage: check_llamafactory.py DATA_DIR"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from llamafactory.data import get_dataset, get_template_and_fix_tokenizer
from llamafactory.hparams import get_train_args
from llamafactory.model import load_tokenizer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from figures import figures, read_jsonl, token_rows  # noqa: E402

TAGS = {"role_tag": "from", "content_tag": "value", "user_tag": "human", "assistant_tag": "gpt",
        "observation_tag": "observation", "function_tag": "function_call", "system_tag": "system"}


def load(data: Path, meta: dict, cutoff: int | None = None, **extra) -> tuple[list, object, object]:
    args = dict(model_name_or_path=meta["tokenizer"], stage="sft", do_train=True, finetuning_type="full",
                template="chatml", cutoff_len=cutoff or meta["target"], output_dir=tempfile.mkdtemp(),
                overwrite_cache=True, report_to="none", dataset_dir=str(data), **extra)
    model_args, data_args, training_args, _, _ = get_train_args(args)
    module = load_tokenizer(model_args)
    template = get_template_and_fix_tokenizer(module["tokenizer"], data_args)
    ds = get_dataset(template, model_args, data_args, training_args, stage="sft", **module)["train_dataset"]
    return [(None, list(r["input_ids"]), list(r["labels"])) for r in ds], module["tokenizer"], template


def as_rendered(row: dict, template, tokenizer) -> dict:
    """`row` with each function_call turn's text as LLaMA-Factory's template renders it, special tokens dropped."""
    def text(turn: dict) -> str:
        if turn["from"] != "function_call":
            return turn["value"]
        rendered = "".join(s for s in template.format_function.apply(content=turn["value"]) if isinstance(s, str))
        return tokenizer.decode(tokenizer(rendered, add_special_tokens=False)["input_ids"], skip_special_tokens=True)
    return {**row, "conversations": [{**t, "value": text(t)} for t in row["conversations"]]}


def main(data: Path) -> int:
    meta = json.loads((data / "meta.json").read_text())
    rows_in = read_jsonl(data / "llamafactory_in.jsonl")
    pooled = {None: {"conversations": [t for r in rows_in for t in r["conversations"]]}}
    columns = {"messages": "conversations", "system": "system", "tools": "tools"}
    info = {kind: {"file_name": f"llamafactory_{kind}.jsonl", "formatting": "sharegpt", "columns": columns,
                   "tags": TAGS} for kind in ("plain", "segments")}
    (data / "dataset_info.json").write_text(json.dumps(info))
    bad = 0
    for kind in ("plain", "segments"):
        out = read_jsonl(data / f"llamafactory_{kind}.jsonl")
        rows, tokenizer, template = load(data, meta, dataset=kind)
        uncut, _, _ = load(data, meta, cutoff=10**9, dataset=kind)
        rendered = {None: as_rendered(pooled[None], template, tokenizer)}
        fig = figures(rendered, rows, tokenizer, len(out), sum(a[1] != b[1] for a, b in zip(rows, uncut)))
        # Rows in the order written when none was dropped: each one's count, trajcomp's against the loader's.
        counted = [r["compression_metrics"]["compressed_tokens"] for r in out]
        miscounted = sum(n != len(ids) for n, (_, ids, _) in zip(counted, uncut)) if len(uncut) == len(out) else None
        print(fig.line(f"LLaMA-Factory text rows ({kind})") + f" rows_miscounted={miscounted}")
        bad += kind == "segments" and bool(fig.tokens_trained_twice or fig.rows_dropped or fig.rows_cut
                                           or fig.labelled_unmatched_tokens or miscounted)
    for kind in ("segments", "plain"):
        saved = token_rows(data, kind, "LLaMA-Factory")
        if saved is None:
            bad += kind == "segments"  # with --segments every row fits: no token rows is a wrong figure
            continue
        folder = Path(tempfile.mkdtemp()) / "tokenized"  # the three columns it trains on
        saved.select_columns(["input_ids", "attention_mask", "labels"]).save_to_disk(str(folder))
        rows, tokenizer, _ = load(data, meta, tokenized_path=str(folder), dataset=kind)  # ignored with tokenized_path
        whole = {tuple(s) for s in saved["input_ids"]}  # order-free: a loader may reorder rows
        cut = sum(tuple(ids) not in whole for _, ids, _ in rows)
        fig = figures(pooled, rows, tokenizer, len(saved), cut)
        print(fig.line(f"LLaMA-Factory token rows, tokenized_path ({kind})"))
        bad += kind == "segments" and bool(fig.tokens_trained_twice or fig.labelled_unmatched_tokens or fig.rows_cut
                                           or fig.rows_dropped or fig.assistant_tokens_untrained)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
