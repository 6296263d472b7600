"""Benchmark data: realistic agent trajectories from scripts/make_samples.py, as many as asked.

make_samples.py writes 62 Hermes-style rows per seed (tens of turns, tool outputs of several KB,
about 43 KB a row); seeds base, base+1, ... give as many distinct rows as needed (distinct text
matters: the tokenizer caches words it has seen). Files are kept in a cache folder by (rows, seed).
"""

from __future__ import annotations

import json
import sys
from itertools import count
from pathlib import Path
from typing import Iterator

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_samples  # noqa: E402


def rows(n: int, seed: int) -> Iterator[dict]:
    """The first n rows of seeds seed, seed+1, ...; ids made unique across seeds."""
    made = 0
    for s in count(seed):
        for file_rows in make_samples.generate(s).values():
            for row in file_rows:
                if made == n:
                    return
                yield {**row, "id": f"{row['id']}-s{s}"}
                made += 1


def jsonl(folder: Path, n: int, seed: int) -> Path:
    """A JSONL file of n rows (made once, then reused)."""
    path = folder / f"rows_{n}_seed{seed}.jsonl"
    if not path.exists():
        folder.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            for row in rows(n, seed):
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
        tmp.replace(path)
    return path


# Issue 37's typical row of a framework's dataset: 826 of its 3,344 tokens the system prompt and
# tool schemas every row opens with (make_samples' prompt is ~3,340 characters, ~830 tokens).
TYPICAL_ROW_CHARS = 13_400


def shared_prompt(folder: Path, n: int, seed: int) -> Path:
    """A JSONL file of n rows that all open with the first row's system prompt and tool schemas, as the
    rows of one agent framework do; each cut to its turns that fit in TYPICAL_ROW_CHARS (one at least).
    Nothing else is shared: the other turns are the rows' own."""
    path = folder / f"shared_prompt_{n}_seed{seed}.jsonl"
    if not path.exists():
        folder.mkdir(parents=True, exist_ok=True)
        made = list(rows(n, seed))
        system = made[0]["conversations"][0]
        with open(path.with_suffix(".tmp"), "w", encoding="utf-8") as f:
            for row in made:
                turns, size = [system], len(system["value"])
                for turn in row["conversations"][1:]:
                    if len(turns) > 1 and size + len(turn["value"]) > TYPICAL_ROW_CHARS:
                        break
                    turns.append(turn)
                    size += len(turn["value"])
                f.write(json.dumps({**row, "conversations": turns}, ensure_ascii=False) + "\n")
        path.with_suffix(".tmp").replace(path)
    return path


def parquet(source: Path) -> Path:
    """The same rows as Parquet, beside the JSONL file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = source.with_suffix(".parquet")
    if not path.exists():
        table = pa.Table.from_pylist(load(source))
        pq.write_table(table, path.with_suffix(".tmp"), row_group_size=256)
        path.with_suffix(".tmp").replace(path)
    return path


def load(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def turn_texts(row: dict) -> list[str]:
    return [turn["value"] for turn in row["conversations"]]
