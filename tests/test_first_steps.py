"""The README's first screen, run as a newcomer would: `make demo`, then the blocks after it, word for word
(only `my_data.jsonl` and `./my_tokenizer` are the newcomer's own: a sample file and the demo tokenizer)."""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

import processes
from conftest import DEMO_TOKENIZER, ROOT, SAMPLES

README = (ROOT / "README.md").read_text()


def block_after(lead: str) -> str:
    """The first ```sh block after the paragraph that opens with `lead`."""
    at = README.index(lead)
    return re.search(r"```sh\n(.*?)```", README[at:], re.S).group(1)


def demo_command() -> str:
    """`make demo`'s command, as the Makefile runs it."""
    line = re.search(r"^demo:.*\n\t(.*)$", (ROOT / "Makefile").read_text(), re.M).group(1)
    return line.replace("$(BIN)/", ".venv/bin/")


def bash(script: str, cwd: Path) -> processes.subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    return processes.run(["bash", "-euo", "pipefail", "-c", script], cwd=cwd, env=env, text=True)


def test_from_make_demo_to_your_own_data(tmp_path: Path):
    # a clone's layout, with the venv this suite runs in
    (tmp_path / ".venv").symlink_to(Path(sys.executable).parent.parent)
    shutil.copytree(SAMPLES, tmp_path / "data_samples")
    shutil.copytree(ROOT / "configs", tmp_path / "configs")
    demo = bash(demo_command(), tmp_path)
    assert demo.returncode == 0, demo.stderr[-3000:]

    first = bash(block_after("**After `make demo`**"), tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    assert "[CONTEXT SUMMARY]" in first.stdout  # --limit 1 shows a row compression changed

    shutil.copy(SAMPLES / "hermes_coding_runs.jsonl", tmp_path / "my_data.jsonl")
    shutil.copytree(DEMO_TOKENIZER, tmp_path / "my_tokenizer")
    own = bash("source .venv/bin/activate\n" + block_after("**Now your own data**"), tmp_path)
    assert own.returncode == 0, own.stderr[-3000:]
    assert (tmp_path / "my_data_compressed.jsonl").read_text().count("\n") == \
        (tmp_path / "my_data.jsonl").read_text().count("\n")
    assert "Traceback" not in own.stderr
