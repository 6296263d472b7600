"""TRL's SFTTrainer on trajcomp's output, as its users feed it: the batches its own dataloader gives the model
(dataset preparation, truncation to max_length = the target, the collator), from token rows (a processed
dataset) and from text rows (`messages`, assistant_only_loss with a {% generation %} template). A one-layer
model of random weights stands in for the model: only the data path runs. Usage: check_trl.py DATA_DIR"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import datasets
from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM
from trl import SFTConfig, SFTTrainer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from figures import figures, read_jsonl, token_rows  # noqa: E402


def loaded(trainer) -> list[tuple]:
    """(row id, input_ids, labels) of every row, as the trainer's dataloader hands them to the model."""
    keys = list(trainer.train_dataset["id"]) if "id" in trainer.train_dataset.column_names else None
    out = []
    for k, batch in enumerate(trainer.get_train_dataloader()):
        mask = batch["attention_mask"][0].bool()
        out.append((None if keys is None else keys[k], batch["input_ids"][0][mask].tolist(),
                    batch["labels"][0][mask].tolist()))
    return out


def trainer_for(dataset, tokenizer, target: int, **config) -> SFTTrainer:
    model = LlamaForCausalLM(LlamaConfig(vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32,
                                         num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2))
    args = SFTConfig(output_dir=tempfile.mkdtemp(), max_length=target, per_device_train_batch_size=1,
                     report_to=[], use_cpu=True, dataloader_drop_last=False, seed=0,
                     remove_unused_columns=False, **config)
    trainer = SFTTrainer(model=model, args=args, train_dataset=dataset, processing_class=tokenizer)
    trainer._get_train_sampler = lambda *a, **k: None  # rows in order, so each batch names its row
    return trainer


def main(data: Path) -> int:
    meta = json.loads((data / "meta.json").read_text())
    target = meta["target"]
    tokenizer = AutoTokenizer.from_pretrained(meta["tokenizer"])
    tokenizer.pad_token = tokenizer.pad_token or "<|im_end|>"
    inputs = {r["id"]: r for r in read_jsonl(data / "llamafactory_in.jsonl")}
    bad = 0
    for kind in ("segments", "plain"):
        ds = token_rows(data, kind, "TRL")
        if ds is None:
            bad += kind == "segments"  # with --segments every row fits: no token rows is a wrong figure
            continue
        keep = ["input_ids", "attention_mask", "labels", "id"]
        trainer = trainer_for(ds.remove_columns([c for c in ds.column_names if c not in keep]), tokenizer, target)
        rows = loaded(trainer)
        cut = sum(len(ids) != len(ds[k]["input_ids"]) for k, (_, ids, _) in enumerate(rows))
        fig = figures(inputs, rows, tokenizer, len(ds), cut)
        print(fig.line(f"TRL token rows ({kind})"))
        bad += kind == "segments" and (fig.tokens_trained_twice or fig.labelled_unmatched_tokens or fig.rows_cut
                                       or fig.rows_dropped or fig.assistant_tokens_untrained)
    template = Path(meta["generation_template"]).read_text()
    hermes_inputs = {r["id"]: r for r in read_jsonl(data / "hermes_in.jsonl")}
    roles = {"system": "system", "human": "user", "gpt": "assistant", "tool": "tool"}
    for kind in ("plain", "segments"):
        rows = read_jsonl(data / f"hermes_{kind}.jsonl")  # as messages: role and content (TRL reads no mark)
        ds = datasets.Dataset.from_list([{"messages": [{"role": roles[t["from"]], "content": t["value"]}
                                                       for t in r["conversations"]], "id": r["id"]} for r in rows])
        tokenizer.chat_template = template
        trainer = trainer_for(ds, tokenizer, target, assistant_only_loss=True)
        got = loaded(trainer)
        fig = figures(hermes_inputs, got, tokenizer, len(rows), sum(len(ids) >= target for _, ids, _ in got))
        print(fig.line(f"TRL text rows, messages ({kind})"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
