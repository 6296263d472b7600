"""Peak memory of `trajcomp compress` as the input grows: streaming means it should not grow.

Usage: python scripts/bench_memory.py [--rows 2000] [--factor 10] [--tokenizer data_samples/demo_tokenizer]
Prints one line per run (rows, input MB, seconds, peak RSS MB) and the ratio large/small.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORDS = "the parser config test build file error value return import module function class".split()


def synthetic_row(rng: random.Random, index: int, tool_chars: int) -> dict:
    """A Hermes-shaped row with a few long tool outputs; every row differs."""
    turns = [
        {"from": "system", "value": "You are a function calling AI model. <tools>[]</tools>"},
        {"from": "human", "value": f"Task {index}: fix the failing test in module_{index % 97}.py"},
    ]
    for step in range(rng.randint(3, 8)):
        call = {"name": "terminal", "arguments": {"command": f"pytest tests/test_{index}_{step}.py"}}
        turns.append({"from": "gpt", "value": f"<think>\nStep {step}.\n</think>\n<tool_call>\n{json.dumps(call)}\n</tool_call>"})
        body = " ".join(rng.choice(WORDS) for _ in range(tool_chars // 6))
        response = {"tool_call_id": f"call_{index}_{step}", "name": "terminal", "content": body}
        turns.append({"from": "tool", "value": f"<tool_response>\n{json.dumps(response)}\n</tool_response>"})
    turns.append({"from": "gpt", "value": "Done."})
    return {"id": index, "conversations": turns}


def write_input(path: Path, rows: int, seed: int = 0, tool_chars: int = 3000) -> Path:
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as f:
        for i in range(rows):
            f.write(json.dumps(synthetic_row(rng, i, tool_chars)) + "\n")
    return path


def peak_rss_mb(args: list[str]) -> tuple[float, float]:
    """(peak RSS in MB, seconds) of `trajcomp ARGS` run in a fresh process."""
    code = (
        "import resource, subprocess, sys\n"
        "subprocess.run(sys.argv[1:], check=True)\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
    )
    started = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-c", code, sys.executable, "-m", "trajcomp.cli", *args],
        check=True, capture_output=True, text=True,
    )
    return int(out.stdout.split()[-1]) / 1024, time.monotonic() - started


def measure(rows: int, factor: int, tokenizer: str, target: int, work: Path) -> list[dict]:
    results = []
    for n in (rows, rows * factor):
        src = write_input(work / f"in_{n}.jsonl", n)
        rss, seconds = peak_rss_mb(
            ["compress", str(src), "-o", str(work / f"out_{n}.jsonl"), "--tokenizer", tokenizer,
             "--target-max-tokens", str(target), "--summary-target-tokens", "200", "-q"]
        )
        results.append({"rows": n, "input_mb": round(src.stat().st_size / 2**20, 1),
                        "seconds": round(seconds, 1), "peak_rss_mb": round(rss, 1)})
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--factor", type=int, default=10)
    parser.add_argument("--tokenizer", default=str(ROOT / "data_samples" / "demo_tokenizer"))
    parser.add_argument("--target", type=int, default=4000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        results = measure(args.rows, args.factor, args.tokenizer, args.target, Path(tmp))
    for r in results:
        print(json.dumps(r))
    print(f"peak RSS ratio {args.factor}x input: {results[1]['peak_rss_mb'] / results[0]['peak_rss_mb']:.3f}")


if __name__ == "__main__":
    main()
