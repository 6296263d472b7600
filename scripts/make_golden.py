"""Golden outputs: what `trajcomp compress -c configs/demo.yaml` writes for tests/golden/input.jsonl.

tests/test_golden.py runs the same command and fails if any byte differs, so speed work can be
shown not to change output. When a change of output is intended, regenerate with one command:
    python scripts/make_golden.py            (rewrites tests/golden/expected/, keeps the input)
    python scripts/make_golden.py --input    (also re-picks the input rows from data_samples/)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden"
INPUT = GOLDEN / "input.jsonl"
EXPECTED = GOLDEN / "expected"

# Rows of data_samples/ with one outcome each under configs/demo.yaml: (file, line index, why).
PICKS = (
    ("hermes_research_runs.jsonl", 5, "under target"),
    ("hermes_coding_runs.jsonl", 28, "short middle: nothing to compress, still over"),
    ("hermes_research_runs.jsonl", 3, "compressed"),
    ("hermes_research_runs.jsonl", 0, "compressed, Spanish"),
    ("hermes_coding_runs.jsonl", 17, "compressed, Chinese"),
    ("hermes_research_runs.jsonl", 18, "late first tool turn"),
    ("hermes_research_runs.jsonl", 15, "huge head: still over after compression"),
    ("hermes_coding_runs.jsonl", 33, "the summary opens the human turn after the region"),
)
# Two lines that become rejects: not JSON, and a turn with an unknown role.
BAD_LINES = (
    '{"id": "broken", "conversations": [',
    json.dumps({"id": "bad-role", "conversations": [{"from": "narrator", "value": "Once upon a time"}]}),
)


def write_input() -> None:
    lines = []
    for name, index, _why in PICKS:
        with open(ROOT / "data_samples" / name, encoding="utf-8") as f:
            lines.append(f.read().splitlines()[index])
    lines[2:2] = BAD_LINES
    GOLDEN.mkdir(parents=True, exist_ok=True)
    INPUT.write_text("\n".join(lines) + "\n", encoding="utf-8")


def run(out_dir: Path) -> dict[str, bytes]:
    """The files a run writes (the report reduced to its run-independent figures), by name."""
    out = out_dir / "out.jsonl"
    subprocess.run(
        [sys.executable, "-m", "trajcomp.cli", "compress", str(INPUT.relative_to(ROOT)), "-c", "configs/demo.yaml",
         "-o", str(out), "-q"],
        check=True, cwd=ROOT, env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    report = json.loads((out_dir / "out_metrics.json").read_text(encoding="utf-8"))
    return {
        "out.jsonl": out.read_bytes(),
        "out_rejects.jsonl": (out_dir / "out_rejects.jsonl").read_bytes(),
        "report.json": (json.dumps(run_independent(report), indent=2, ensure_ascii=False) + "\n").encode(),
    }


def run_independent(report: dict) -> dict:
    """The report without what depends on the run or the machine: timings, paths, versions."""
    kept = {k: v for k, v in report.items() if k not in ("processing", "tokenizer")}
    config = json.loads(json.dumps(kept["config"]))
    config["tokenizer"].pop("name", None)  # a path, resolved from where the config is
    kept["config"] = config
    return kept


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--input", action="store_true", help="re-pick the input rows from data_samples/")
    args = parser.parse_args()
    if args.input or not INPUT.exists():
        write_input()
    with tempfile.TemporaryDirectory() as tmp:
        files = run(Path(tmp))
    EXPECTED.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (EXPECTED / name).write_bytes(data)
        print(f"wrote {(EXPECTED / name).relative_to(ROOT)} ({len(data)} bytes)")


if __name__ == "__main__":
    main()
