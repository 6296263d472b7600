"""The rows `make trainers` feeds the trainers: SWE-like rows (scripts/swe_rows.py) compressed by trajcomp's CLI
at a quarter of their length, text rows and token rows, plain and --segments, with the demo tokenizer (chatml,
as LLaMA-Factory's `chatml` template renders it). Run with trajcomp's venv: make_data.py OUT_DIR."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import swe_rows  # noqa: E402

TOKENIZER = ROOT / "data_samples" / "demo_tokenizer"
ROWS = [(seed, 24 + 2 * seed) for seed in range(4)]
TARGET = 3000  # about a quarter of the rows' rendered length (11-15k tokens)
GENERATION = ROOT / "tests" / "fixtures" / "chatml_generation.jinja"  # for TRL's assistant_only_loss
# Text rows in LLaMA-Factory's dialect are counted as its chatml template renders them (function_call as "Action: ...").
LLAMAFACTORY = ROOT / "configs" / "templates" / "llamafactory_chatml.jinja"


# LLaMA-Factory's rows carry the system prompt and the tools as columns (its sharegpt `system` and `tools`): its
# template describes the tools in the system turn, so the count check covers that text too.
BASH = {"type": "function", "function": {"name": "bash", "description": "Run a shell command in the repository.",
        "parameters": {"type": "object", "properties": {"command": {"type": "string", "description": "The command."}},
                       "required": ["command"]}}}
FRAME = {"llamafactory": {"system": swe_rows.SYSTEM, "tools": json.dumps([BASH])}, "hermes": {}}


def compress(src: Path, out: Path, *flags: str) -> None:
    args = [sys.executable, "-m", "trajcomp.cli", "compress", str(src), "-o", str(out), "--tokenizer", str(TOKENIZER),
            "--count-mode", "chat_template", "--target-max-tokens", str(TARGET), "-q", *flags]
    done = subprocess.run(args, cwd=ROOT)
    if done.returncode not in (0, 1):  # 1: every row rejected (plain token rows over the target): no output
        raise SystemExit(f"trajcomp compress failed ({done.returncode}): {' '.join(args)}")
    if done.returncode == 1:
        print(f"make_data: trajcomp wrote no row to {out.name}, all rejected (the checks report it)")


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for dialect in ("llamafactory", "hermes"):
        with open(out / f"{dialect}_in.jsonl", "w", encoding="utf-8") as f:
            for seed, steps in ROWS:
                row = {**swe_rows.row(dialect, seed, steps), **FRAME[dialect], "id": f"{dialect}-{seed}"}
                f.write(json.dumps(row) + "\n")
    for segments in ("segments", "plain"):
        flags = ("--segments",) if segments == "segments" else ()
        compress(out / "llamafactory_in.jsonl", out / f"llamafactory_{segments}.jsonl", *flags,
                 "--chat-template", str(LLAMAFACTORY))
        compress(out / "hermes_in.jsonl", out / f"hermes_{segments}.jsonl", *flags)
        compress(out / "llamafactory_in.jsonl", out / f"tokens_{segments}", "--token-rows", "--output-format", "hf",
                 *flags)
    (out / "meta.json").write_text(json.dumps({"target": TARGET, "tokenizer": str(TOKENIZER),
                                               "generation_template": str(GENERATION)}))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
