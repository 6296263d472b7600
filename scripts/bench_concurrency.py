"""Summaries per second against an OpenAI-compatible server of fixed latency: the ideal is C / latency.

Starts the test suite's fake server (tests/openai_server.py) on 127.0.0.1, runs `trajcomp compress`
with the openai summarizer at each --concurrency, and prints calls in flight and throughput.
With --stall S the run's first call hangs until its S-second request timeout (then is retried):
how much that one slow row holds the others back depends on --max-rows-in-memory.
Usage: python scripts/bench_concurrency.py [--rows 200] [--latency 0.2] [--concurrency 8 32]
       [--stall 10] [--max-rows-in-memory 1000]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "scripts"))

from bench_memory import write_input  # noqa: E402
from openai_server import ServerThread  # noqa: E402


def run(src: Path, out: Path, url: str, concurrency: int, tokenizer: str, *extra: str) -> dict:
    args = [
        sys.executable, "-m", "trajcomp.cli", "compress", str(src), "-o", str(out), "--tokenizer", tokenizer,
        "--target-max-tokens", "1500", "--summary-target-tokens", "150", "--summarizer", "openai",
        "--base-url", url, "--model", "test-model", "--concurrency", str(concurrency), "--no-cache", "--json",
        "--cannot-fit", "shorten", *extra,  # every row over the target makes its request, as it did before keep
    ]
    return json.loads(subprocess.run(args, check=True, capture_output=True, text=True, cwd=ROOT).stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[8, 32])
    parser.add_argument("--tokenizer", default=str(ROOT / "data_samples" / "demo_tokenizer"))
    parser.add_argument("--stall", type=float, help="the first call hangs until this request timeout")
    parser.add_argument("--max-rows-in-memory", type=int)
    args = parser.parse_args()
    extra = []
    if args.stall:
        extra += ["--request-timeout", str(args.stall)]
    if args.max_rows_in_memory:
        extra += ["--max-rows-in-memory", str(args.max_rows_in_memory)]
    with tempfile.TemporaryDirectory() as tmp, ServerThread(latency=args.latency) as server:
        src = write_input(Path(tmp) / "in.jsonl", args.rows, tool_chars=1500)
        for c in args.concurrency:
            server.reset()
            if args.stall:
                server.set_faults(hang_first_n=1, hang_seconds=3600)
            report = run(src, Path(tmp) / f"out_{c}.jsonl", server.base_url, c, args.tokenizer, *extra)
            stats = server.stats
            span = max(stats.request_ends) - min(stats.request_starts)
            measured = (sum(stats.request_ends) - sum(stats.request_starts)) / stats.requests
            rate = stats.requests / span
            print(json.dumps({
                "concurrency": c, "summaries": stats.requests, "max_in_flight": stats.max_in_flight,
                "per_second": round(rate, 1), "ideal_per_second": round(c / args.latency, 1),
                "share_of_ideal": round(rate / (c / args.latency), 3), "mean_latency_s": round(measured, 3),
                "run_seconds": report["processing"]["duration_seconds"],
            }))


if __name__ == "__main__":
    main()
