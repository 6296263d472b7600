"""Output bytes against outputs written before: any change to what `compress` writes fails here.

The goldens are tests/golden/expected/, written by `python scripts/make_golden.py` from
tests/golden/input.jsonl with configs/demo.yaml. Speed work must leave them unchanged. When a
change of output is intended (a new metric, a new rule), regenerate them with that one command
and review the diff of tests/golden/expected/ in the same commit.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import make_golden  # noqa: E402

NAMES = sorted(p.name for p in make_golden.EXPECTED.iterdir())


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> dict[str, bytes]:
    return make_golden.run(tmp_path_factory.mktemp("golden"))


def test_the_goldens_cover_rows_rejects_and_report():
    assert NAMES == ["out.jsonl", "out_rejects.jsonl", "report.json"]


@pytest.mark.parametrize("name", NAMES)
def test_output_bytes_unchanged(written, name):
    expected = (make_golden.EXPECTED / name).read_bytes()
    assert written[name] == expected, (
        f"{name} differs from tests/golden/expected/{name}; if the change is intended, "
        "run `python scripts/make_golden.py` and commit the new goldens"
    )
