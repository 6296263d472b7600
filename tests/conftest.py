"""Shared fixtures: real tokenizers built with `tokenizers`, and the CLI run as a real subprocess."""

from __future__ import annotations

import json
import os
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DEMO_TOKENIZER = ROOT / "data_samples" / "demo_tokenizer"
SAMPLES = ROOT / "data_samples"

sys.path.insert(0, str(Path(__file__).resolve().parent))  # so tests can `import openai_server`
from ray_cluster import machine_lock  # noqa: E402,F401 (tests import it from here)
import processes  # noqa: E402

CORPUS = [
    "def main(argv):\n    return run(argv[1:])\n",
    "Traceback (most recent call last):\n  File \"src/app.py\", line 12, in <module>\nAssertionError: expected 3\n",
    '<tool_call>\n{"name": "terminal", "arguments": {"command": "pytest -x"}}\n</tool_call>',
    '<tool_response>\n{"tool_call_id": "call_1", "name": "terminal", "content": "exit code 1"}\n</tool_response>',
    "<think>\nThe test fails because the parser drops the last field.\n</think>\n",
    "我们需要修复解析器中的错误，然后重新运行测试。",
    "Le test échoue parce que le fichier de configuration est absent.",
] * 20


def build_tokenizer(path: Path, kind: str) -> Path:
    """A real fast tokenizer of `kind` ('bpe' byte-level, or 'wordpiece'), saved as a HF folder."""
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    if kind == "bpe":
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=600, special_tokens=["<|endoftext|>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
        )
    else:
        tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
        tok.normalizer = normalizers.BertNormalizer(lowercase=True)
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        trainer = trainers.WordPieceTrainer(vocab_size=400, special_tokens=["[UNK]", "[CLS]", "[SEP]"])
    tok.train_from_iterator(CORPUS, trainer)
    PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]" if kind != "bpe" else None).save_pretrained(path)
    return path


def pytest_configure(config) -> None:
    # Set before pytest-xdist starts its workers, so that they and everything they start inherit it.
    os.environ.setdefault(processes.SESSION_MARK, uuid.uuid4().hex)


def pytest_unconfigure(config) -> None:
    """In the process that ran the session (not in an xdist worker): end whatever the tests left running."""
    if hasattr(config, "workerinput"):
        return
    left = processes.end_marked(os.environ[processes.SESSION_MARK])
    if left:
        print(f"\nended {len(left)} process(es) the tests left running:", *left, sep="\n  ", file=sys.stderr)


@pytest.fixture(scope="session")
def bpe_tokenizer(tmp_path_factory) -> Path:
    return build_tokenizer(tmp_path_factory.mktemp("bpe_tok"), "bpe")


@pytest.fixture(scope="session")
def wordpiece_tokenizer(tmp_path_factory) -> Path:
    return build_tokenizer(tmp_path_factory.mktemp("wp_tok"), "wordpiece")


@dataclass
class CliResult:
    code: int
    stdout: str
    stderr: str


def run_cli(*args: str, env: dict | None = None, cwd: Path | None = None,
            timeout: float = processes.HANG_SECONDS) -> CliResult:
    """`trajcomp ARGS...` as a real subprocess of this venv's Python (its worker processes end with it)."""
    full_env = {**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})}
    proc = processes.run([sys.executable, "-m", "trajcomp.cli", *args], text=True, env=full_env, cwd=cwd or ROOT,
                         timeout=timeout)
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


def read_jsonl(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def write_jsonl(path: Path, rows: list) -> Path:
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write((row if isinstance(row, str) else json.dumps(row, ensure_ascii=False)) + "\n")
    return path
