"""data_samples/ is what scripts/make_samples.py writes at its default seed, byte for byte (its canned
text lives as JSON beside the generator: a change there shows here)."""

from __future__ import annotations

import sys

from conftest import ROOT, SAMPLES
import processes


def test_make_samples_writes_the_committed_samples(tmp_path):
    done = processes.run([sys.executable, str(ROOT / "scripts" / "make_samples.py"), "--out-dir", str(tmp_path)],
                         text=True)
    assert done.returncode == 0, done.stderr
    written = sorted(p.name for p in tmp_path.glob("*.jsonl"))
    assert written == ["hermes_coding_runs.jsonl", "hermes_research_runs.jsonl"]
    for name in written:
        assert (tmp_path / name).read_bytes() == (SAMPLES / name).read_bytes(), name
