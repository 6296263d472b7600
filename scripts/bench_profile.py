"""Where a `trajcomp compress` run spends its time: py-spy samples of every thread, summed by kind of work.

py-spy (a dev tool, `pip install py-spy`) samples the process from outside, so the run is the
one a user starts; only samples where a thread was running (not idle) are kept.
"""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

# Kinds of work, by a frame found in the sampled stack (the one nearest the leaf wins).
KINDS = (
    ("waiting (idle worker threads, the event loop's select)", ("Condition.wait", "EpollSelector.select")),
    ("tokenizer (Rust encode_batch)", ("TokenCounter._count", "TokenCounter.count", "TokenCounter.encode",
                                       "count_cache.py")),
    ("JSON parsing", ("parse_line", "JSONDecoder", "json/decoder.py")),
    ("JSON serialising", ("json_text", "JSONEncoder", "json/encoder.py", "orjson")),
    ("Parquet read/write", ("formats/parquet.py", "formats/arrow_rows.py")),
    ("summary checks (refusal, language, loops)", ("summarizers/checks.py", "summarizers/refusal.py",
                                                   "summarizers/language.py")),
    ("summarizer (prompt, HTTP client)", ("summarizers/", "aiohttp/")),
    ("summary cache", ("engines/summaries/",)),
    ("identifiers (extraction, index) and redaction", ("identifiers.py", "identifier_kinds.py", "redact.py")),
    ("compressor, planner, rows, metrics", ("compressor.py", "passes.py", "assembly.py", "sourcing.py", "planner.py",
                                            "core/dialects/rows.py", "openai_rows.py", "metrics.py", "segments.py",
                                            "pruning.py", "prune_fit.py")),
    ("writing parts, checkpoints", ("formats/base.py", "engines/parts/", "fsync")),
    ("pipeline and event loop", ("engines/runners/", "engines/flow/", "asyncio/", "selectors.py",
                                 "concurrent/futures")),
    ("start-up (imports, tokenizer load)", ("importlib", "from_pretrained", "tokenizer_loading.py")),
)


@dataclass
class Profile:
    samples: int
    kinds: list[tuple[str, float]]  # (kind, share of busy samples)
    functions: list[tuple[str, float]]  # (leaf function, share of busy samples)
    main_thread_share: float  # share of busy samples taken on the main thread (the event loop)
    gil: bool = False  # only the thread holding the GIL was sampled: the Python work, not the Rust


def available() -> bool:
    return shutil.which("py-spy", path=str(Path(sys.executable).parent)) is not None or shutil.which("py-spy") is not None


def record(args: list[str], out: Path, rate: int = 100, gil: bool = False) -> Profile:
    """Run `args` under py-spy and summarise its samples (with `gil`, only the thread holding the GIL)."""
    spy = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or "py-spy"
    subprocess.run(
        [spy, "record", "--rate", str(rate), "--format", "raw", "--threads", *(["--gil"] if gil else []),
         "--output", str(out), "--", *args],
        check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    return dataclasses.replace(summarise(out.read_text().splitlines()), gil=gil)


def summarise(lines: list[str], top: int = 8) -> Profile:
    kinds: Counter[str] = Counter()
    leaves: Counter[str] = Counter()
    main = total = 0
    for line in lines:
        stack, _, n = line.rpartition(" ")
        if not stack:
            continue
        frames = stack.split(";")
        samples = int(n)
        total += samples
        main += samples if "MainThread" in frames[0] else 0
        kinds[_kind(frames)] += samples
        leaves[_short(frames[-1])] += samples
    share = (lambda c: c / total) if total else (lambda c: 0.0)
    return Profile(
        total,
        [(k, share(c)) for k, c in kinds.most_common()],
        [(f, share(c)) for f, c in leaves.most_common(top)],
        share(main),
    )


def _kind(frames: list[str]) -> str:
    if len(frames) == 1:
        return "native code outside any Python frame"
    if frames[-1].startswith("_worker (") and "concurrent/futures/thread.py" in frames[-1]:  # a pool thread, idle
        return KINDS[0][0]
    for frame in reversed(frames[1:]):
        for kind, marks in KINDS:
            if any(mark in frame for mark in marks):
                return kind
    return "other"


def _short(frame: str) -> str:
    """'count (trajcomp/core/counting/tokens.py:39)' from py-spy's frame, without the site-packages prefix."""
    name, _, where = frame.partition(" (")
    where = where.rstrip(")").split("site-packages/")[-1].split("/lib/python3")[-1]
    return f"{name} ({where})" if where else name
