#!/usr/bin/env python3
"""Generate seeded, synthetic Hermes-style agent trajectories as ShareGPT JSONL.

Writes ``hermes_coding_runs.jsonl`` and ``hermes_research_runs.jsonl`` into
``--out-dir``. Every random choice flows from ``--seed`` so reruns are
byte-identical. ``--report`` prints per-row token lengths measured with the
demo tokenizer (see ``scripts/sample_lengths.py``).

The generator itself is the ``samples`` package beside this script; its canned
text is in ``scripts/samples/data/*.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from samples.rows import CODING_FILE, RESEARCH_FILE, generate  # noqa: E402

DEFAULT_SEED = 20240611
DEFAULT_OUT_DIR = "data_samples"

__all__ = ["CODING_FILE", "DEFAULT_OUT_DIR", "DEFAULT_SEED", "RESEARCH_FILE", "generate", "main", "write_jsonl"]


def write_jsonl(path: Path, rows: list[dict]) -> None:
    """One JSON object per line, UTF-8, non-ASCII kept as is."""
    with path.open("w", encoding="utf-8", newline="\n") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="RNG seed (default %(default)s)")
    parser.add_argument("--out-dir", default=DEFAULT_OUT_DIR, help="output folder (default %(default)s)")
    parser.add_argument("--report", action="store_true", help="print per-row token lengths with the demo tokenizer")
    parser.add_argument(
        "--tokenizer", default=None, help="tokenizer folder for --report (default OUT_DIR/demo_tokenizer)"
    )
    args = parser.parse_args(argv)
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, rows in generate(args.seed).items():
        path = out / name
        write_jsonl(path, rows)
        paths.append(path)
        print(f"wrote {len(rows)} rows to {path} ({path.stat().st_size / 1e6:.2f} MB)")
    if args.report:
        tokenizer = Path(args.tokenizer or out / "demo_tokenizer")
        if not (tokenizer / "tokenizer.json").exists():
            print(f"no tokenizer at {tokenizer}: run scripts/make_demo_tokenizer.py first", file=sys.stderr)
            return 1
        from sample_lengths import report

        report([str(p) for p in paths], str(tokenizer))
    return 0


if __name__ == "__main__":
    sys.exit(main())
