#!/usr/bin/env python3
"""Train the small byte-level BPE demo tokenizer on the generated sample trajectories.

The result is a Hugging Face fast tokenizer with a ChatML chat template, loadable
offline with ``AutoTokenizer.from_pretrained("data_samples/demo_tokenizer")``.
Training runs single-threaded so the saved tokenizer.json is byte-identical
across runs.
"""

from __future__ import annotations

import os

# Must be set before tokenizers starts its thread pool: one thread gives a deterministic merge order.
os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import argparse  # noqa: E402
import hashlib  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Iterator  # noqa: E402

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers  # noqa: E402

SAMPLE_FILES = ("hermes_coding_runs.jsonl", "hermes_research_runs.jsonl")
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def sample_texts(sample_dir: Path) -> Iterator[str]:
    """Every turn value of every row, in file order."""
    for name in SAMPLE_FILES:
        with (sample_dir / name).open(encoding="utf-8") as fh:
            for line in fh:
                for turn in json.loads(line)["conversations"]:
                    yield turn["value"]


def train(sample_dir: Path, vocab_size: int) -> Tokenizer:
    """A byte-level BPE tokenizer trained on the samples."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(sample_texts(sample_dir), trainer=trainer)
    return tok


def save(tok: Tokenizer, out_dir: Path) -> None:
    """Wrap as a transformers fast tokenizer with a ChatML template and save it."""
    from transformers import PreTrainedTokenizerFast

    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<|endoftext|>",
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token="<|endoftext|>",
        model_max_length=131072,
    )
    fast.chat_template = CHAT_TEMPLATE
    out_dir.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(str(out_dir))
    portable_config(out_dir)


def portable_config(out_dir: Path) -> None:
    """Make tokenizer_config.json loadable by transformers 4.x as well as 5.x.

    transformers 5 records its own class name and keeps the template in chat_template.jinja;
    older releases need the generic fast-tokenizer class and the template inside the config.
    """
    path = out_dir / "tokenizer_config.json"
    config = json.loads(path.read_text(encoding="utf-8"))
    config["tokenizer_class"] = "PreTrainedTokenizerFast"
    config["chat_template"] = CHAT_TEMPLATE
    path.write_text(json.dumps(config, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")


def verify(out_dir: Path) -> None:
    """Reload offline and check the fast tokenizer, its chat template and a round trip."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(out_dir))
    assert tok.is_fast, "expected a fast tokenizer"
    messages = [
        {"role": "system", "content": "You are a function calling AI model."},
        {"role": "user", "content": "Run pytest tests/test_parser.py -x 并解释失败原因。"},
    ]
    text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert text.startswith("<|im_start|>system\n") and text.endswith("<|im_start|>assistant\n"), text
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert tok.decode(ids) == text, "round trip failed"
    assert tok.convert_tokens_to_ids("<|im_start|>") in ids
    digest = hashlib.sha256((out_dir / "tokenizer.json").read_bytes()).hexdigest()[:16]
    size = sum(p.stat().st_size for p in out_dir.iterdir())
    print(
        f"verified {out_dir}: {type(tok).__name__}, vocab {len(tok)}, chat prompt {len(ids)} tokens, "
        f"tokenizer.json sha256 {digest}, folder {size / 1e6:.2f} MB"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples-dir", default="data_samples", help="folder with the sample JSONL files")
    parser.add_argument("--out", default=None, help="output folder (default SAMPLES_DIR/demo_tokenizer)")
    parser.add_argument("--vocab-size", type=int, default=8000)
    parser.add_argument("--generate", action="store_true", help="(re)generate the samples first with make_samples.py")
    parser.add_argument("--seed", type=int, default=None, help="seed passed to make_samples.py with --generate")
    args = parser.parse_args(argv)
    sample_dir = Path(args.samples_dir)
    missing = [n for n in SAMPLE_FILES if not (sample_dir / n).exists()]
    if args.generate or missing:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import make_samples

        make_samples.main(
            ["--out-dir", str(sample_dir)] + (["--seed", str(args.seed)] if args.seed is not None else [])
        )
    out_dir = Path(args.out) if args.out else sample_dir / "demo_tokenizer"
    save(train(sample_dir, args.vocab_size), out_dir)
    verify(out_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
