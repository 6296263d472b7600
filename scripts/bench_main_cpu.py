"""The main thread's CPU a row in a JSON Lines pass-through (every row under the target: read, parsed,
measured, written; no summary), for trees of trajcomp side by side (A/B on the same rows).

The main thread's own CPU (time.thread_time(), inside the run's process, from the first row read to
the exit) of a run of N rows minus that of a run of n rows, over N - n: start-up and the run's end
taken out. The
counting threads are not in it: they are the tokenizer's work, which this figure is measured against.
Runs of the trees are interleaved, the median of --repeats kept; the machine's load is printed, since
other processes' CPU slows a thread's own too.
Usage: python scripts/bench_main_cpu.py [--rows 300] [--few 30] [--repeats 5] [--tree DIR ...] [--mode turns]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import bench_data  # noqa: E402

DEMO_TOKENIZER = ROOT / "data_samples" / "demo_tokenizer"
# The run in this process, its main thread's CPU from the first row read to the exit printed at exit
# (atexit runs on the main thread): start-up (imports, the tokenizer's load) is left out at once, where it
# varies by far more than the rows cost on a busy machine.
RUN = ("import atexit, sys, time\n"
       "import trajcomp.formats.jsonl as jsonl\n"
       "first = []\n"
       "read = jsonl.read_lines\n"
       "def timed(*args, **kwargs):\n"
       "    first.append(time.thread_time())\n"
       "    yield from read(*args, **kwargs)\n"
       "jsonl.read_lines = timed\n"
       "atexit.register(lambda: print('MAIN_CPU', time.thread_time() - first[0], file=sys.stderr))\n"
       "from trajcomp.cli.commands import main\n"
       "main(sys.argv[1:])\n")


def main_cpu(tree: Path, src: Path, tokenizer: Path, mode: str) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        args = [sys.executable, "-c", RUN, "compress", str(src), "-o", str(Path(tmp) / "out.jsonl"),
                "--tokenizer", str(tokenizer), "--target-max-tokens", str(10**9), "--count-mode", mode, "-q"]
        env = {**os.environ, "PYTHONPATH": str(tree), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error"}
        # cwd: `-c` puts the current folder first on sys.path, which would shadow PYTHONPATH's tree
        done = subprocess.run(args, env=env, capture_output=True, text=True, check=True, cwd=tmp)
    return float(next(line.split()[1] for line in done.stderr.splitlines() if line.startswith("MAIN_CPU")))


def per_row_ms(tree: Path, many: tuple[Path, int], few: tuple[Path, int], tokenizer: Path, mode: str) -> float:
    """The main thread's CPU a row: a run of `many` (a file, its rows) less a run of `few`, over the rows between."""
    spent = main_cpu(tree, many[0], tokenizer, mode) - main_cpu(tree, few[0], tokenizer, mode)
    return spent / (many[1] - few[1]) * 1e3


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=300)
    p.add_argument("--few", type=int, default=30)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--tokenizer", type=Path, default=DEMO_TOKENIZER)
    p.add_argument("--mode", default="turns", choices=("turns", "chat_template"))
    p.add_argument("--tree", type=Path, action="append", help="a folder holding trajcomp/ (repeatable; default this one)")
    p.add_argument("--work", type=Path, default=ROOT / ".cache" / "bench" / "data")
    args = p.parse_args(argv)
    trees = args.tree or [ROOT]
    many, few = ((bench_data.jsonl(args.work, n, args.seed), n) for n in (args.rows, args.few))
    per_row: dict[Path, list[float]] = {t: [] for t in trees}
    for _ in range(args.repeats):
        for tree in trees:
            per_row[tree].append(per_row_ms(tree, many, few, args.tokenizer, args.mode))
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; {args.rows} - {args.few} rows, {args.mode}")
    for tree, values in per_row.items():
        print(f"{tree}: main thread {statistics.median(values):.3f} ms a row (runs: {', '.join(f'{v:.3f}' for v in values)})")


if __name__ == "__main__":
    main()
