"""axolotl 0.19.0's own data loading (`load_cfg`, `load_datasets`, sequence_len = the target) on trajcomp's output:
token rows as a pre-tokenized dataset (no `type:`, exactly input_ids/attention_mask/labels) and Hermes text rows
with `type: chat_template`, `message_field_training: train`. A one-layer config beside the demo tokenizer stands
in for the model (only the data path runs). The figures pool the input rows. Usage: check_axolotl.py DATA_DIR"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

import yaml
from transformers import LlamaConfig

from axolotl.cli.config import load_cfg
from axolotl.common.datasets import load_datasets

sys.path.insert(0, str(Path(__file__).resolve().parent))
from figures import figures, read_jsonl, token_rows  # noqa: E402


def model_dir(tokenizer: str) -> str:
    folder = Path(tempfile.mkdtemp()) / "model"
    shutil.copytree(tokenizer, folder)
    LlamaConfig(vocab_size=4096, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                num_key_value_heads=2).save_pretrained(folder)
    return str(folder)


def load(meta: dict, dataset: dict) -> list:
    work = Path(tempfile.mkdtemp())
    cfg = {"base_model": meta["model"], "sequence_len": meta["target"], "micro_batch_size": 1, "num_epochs": 1,
           "gradient_accumulation_steps": 1, "learning_rate": 1e-5, "output_dir": str(work / "out"),
           "dataset_prepared_path": str(work / "prepared"), "datasets": [dataset], "special_tokens":
           {"pad_token": "<|im_end|>"}, "val_set_size": 0, "sample_packing": False}
    (work / "cfg.yaml").write_text(yaml.safe_dump(cfg))
    ds = load_datasets(cfg=load_cfg(str(work / "cfg.yaml"))).train_dataset
    return [(None, list(r["input_ids"]), list(r["labels"])) for r in ds]


def main(data: Path) -> int:
    meta = json.loads((data / "meta.json").read_text())
    meta["model"] = model_dir(meta["tokenizer"])
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(meta["tokenizer"])
    bad = 0
    lf = read_jsonl(data / "llamafactory_in.jsonl")
    for kind in ("segments", "plain"):
        saved = token_rows(data, kind, "axolotl")
        if saved is None:
            bad += kind == "segments"  # with --segments every row fits: no token rows is a wrong figure
            continue
        folder = Path(tempfile.mkdtemp()) / "tokenized"
        saved.select_columns(["input_ids", "attention_mask", "labels"]).save_to_disk(str(folder))
        rows = load(meta, {"path": str(folder)})
        whole = {tuple(s) for s in saved["input_ids"]}  # order-free: a loader may reorder rows
        cut = sum(tuple(ids) not in whole for _, ids, _ in rows)
        fig = figures({None: {"conversations": [t for r in lf for t in r["conversations"]]}}, rows, tokenizer,
                      len(saved), cut)
        print(fig.line(f"axolotl token rows, pre-tokenized ({kind})"))
        bad += kind == "segments" and bool(fig.tokens_trained_twice or fig.labelled_unmatched_tokens or fig.rows_cut
                                           or fig.rows_dropped or fig.assistant_tokens_untrained)
    hermes = read_jsonl(data / "hermes_in.jsonl")
    for kind in ("segments", "plain"):
        path = data / f"hermes_{kind}.jsonl"
        rows = load(meta, {"path": str(path), "ds_type": "json", "type": "chat_template", "field_messages":
                           "conversations", "message_property_mappings": {"role": "from", "content": "value"},
                           "message_field_training": "train", "roles_to_train": ["assistant"],
                           "chat_template": "tokenizer_default"})
        fig = figures({None: {"conversations": [t for r in hermes for t in r["conversations"]]}}, rows, tokenizer,
                      len(read_jsonl(path)), sum(len(ids) >= meta["target"] for _, ids, _ in rows))
        print(fig.line(f"axolotl text rows, chat_template + train ({kind})"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
