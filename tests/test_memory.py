"""Streaming: peak memory must not follow the size of the input (a bound, measured, not a timing)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))

from bench_memory import peak_rss_mb, write_input  # noqa: E402


def test_ten_times_the_rows_raises_peak_rss_by_less_than_20_percent(tmp_path, bpe_tokenizer):
    peaks = []
    for rows in (600, 6000):
        src = write_input(tmp_path / f"in_{rows}.jsonl", rows, tool_chars=500)
        rss, _ = peak_rss_mb([
            "compress", str(src), "-o", str(tmp_path / f"out_{rows}.jsonl"), "--tokenizer", str(bpe_tokenizer),
            "--target-max-tokens", "1500", "--summary-target-tokens", "150", "--checkpoint-rows", "200", "-q",
        ])
        peaks.append(rss)
    small, large = peaks
    assert large <= small * 1.2, f"peak RSS {small:.0f} MB for 600 rows, {large:.0f} MB for 6000 rows"
