"""`scripts/bench.py --quick` runs end to end and writes its table. Timings are never asserted."""

from __future__ import annotations

import sys
from pathlib import Path

import processes

from trajcomp.core.counting.batching import usable_cores

ROOT = Path(__file__).resolve().parent.parent

FIGURES = ("Counting", "Pass-through, JSONL", "Pass-through, Parquet", "Main thread's CPU a row", "Summarizer-bound beside the tree at", "Summarizer-bound", "Pass-through, chat_template",
           "Summarizer-bound, chat_template", "Tokenizer input", "Pruning: summary requests", "Pruning: assistant tokens kept",
           "Pruning: speed", "Workers", "Memory")


def test_quick_bench_writes_its_table(tmp_path):
    out = tmp_path / "BENCHMARKS.md"
    # its own fake endpoint and runs end with it, whether it passes, fails or hangs
    result = processes.run([sys.executable, "scripts/bench.py", "--quick", "--work", str(tmp_path / "work"),
                            "--out", str(out)], cwd=ROOT, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    doc = out.read_text()
    assert "| figure | trajcomp | bound | ratio |" in doc
    assert "python scripts/bench.py --quick" in doc
    for figure in FIGURES:
        assert f"| {figure}" in doc, figure
        assert f"| {figure}" in result.stdout, figure  # the table is printed too
    assert "Python: " in doc and "cores" in doc
    assert "| Ray driver" not in doc  # --quick leaves the Ray cluster out (~20 s to start) unless --only asks for it
    for latency in ("0.05", "0.1"):  # both summarizer-bound figures, by name (--quick's latencies)
        assert f"| Summarizer-bound: openai, L={latency} s, C=8 |" in doc
    cores = f"1 and 2 worker processes ({usable_cores()} usable cores) |"
    for run in ("openai, L=0.05 s, C=8", "pass-through (JSONL)"):  # --workers 1 and 2, with this machine's cores
        assert f"| Workers: {run}, {cores} 1: " in result.stdout
