#!/usr/bin/env python3
"""Print per-row token lengths of ShareGPT JSONL files, measured with a tokenizer.

For each row: total tokens, turns, the four protected head turns (first system,
human, gpt and tool), the last N turns, and whether summarizing the middle can
bring the row under the target (same head/tail rules as the trajcomp planner).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

DEFAULT_FILES = ("data_samples/hermes_coding_runs.jsonl", "data_samples/hermes_research_runs.jsonl")


def load_counter(path: str):
    """A function mapping a list of texts to their token counts (no special tokens)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path)
    return lambda texts: [len(ids) for ids in tok(list(texts), add_special_tokens=False)["input_ids"]]


def head_turns(roles: list[str]) -> list[int]:
    """Indices of the first system, human, gpt and tool turns."""
    seen: dict[str, int] = {}
    for i, role in enumerate(roles):
        seen.setdefault(role, i)
    return [seen[r] for r in ("system", "human", "gpt", "tool") if r in seen]


def best_case(roles: list[str], counts: list[int], target: int, summary: int, last_n: int) -> tuple[str, int]:
    """Outcome and smallest reachable size when the whole compressible middle becomes one summary."""
    total, n = sum(counts), len(roles)
    if total <= target:
        return "fits", total
    tail_start = max(0, n - last_n)
    wanted, start = ["system", "human", "gpt", "tool"], 0
    for i, role in enumerate(roles[:tail_start]):
        if role in wanted:
            wanted.remove(role)
            start = i + 1
    while start < tail_start and (roles[start] == "tool" or (start > 0 and roles[start - 1] == "human")):
        start += 1
    end = tail_start
    while end > start and end < n and roles[end] == "tool":
        end -= 1
    if start >= end:
        return "no-middle", total
    reachable = total - sum(counts[start:end]) + summary
    head, tail = sum(counts[:start]), sum(counts[end:])
    if reachable <= target:
        need = total - target + summary
        taken, cut = 0, end
        for i in range(start, end):
            taken += counts[i]
            if taken >= need and (i + 1 == n or roles[i + 1] != "tool"):
                cut = i + 1
                break
        return ("ok+human-next" if cut < n and roles[cut] == "human" else "ok"), reachable
    return ("head-too-big" if head >= tail else "tail-too-big"), reachable


def percentile(values: list[int], q: float) -> int:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def report(files: list[str], tokenizer: str, target: int = 4000, summary: int = 300, last_n: int = 4) -> list[dict]:
    """Print the table and summary; return the per-row measurements."""
    count = load_counter(tokenizer)
    rows = []
    for path in files:
        for line in Path(path).read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            turns = row["conversations"]
            roles = [t["from"] for t in turns]
            counts = count([t["value"] for t in turns])
            outcome, reachable = best_case(roles, counts, target, summary, last_n)
            first_tool = roles.index("tool") if "tool" in roles else -1
            rows.append(
                {
                    "id": row["id"],
                    "file": Path(path).name,
                    "total": sum(counts),
                    "turns": len(turns),
                    "head": sum(counts[i] for i in head_turns(roles)),
                    "last": sum(counts[-last_n:]),
                    "first_tool": first_tool,
                    "reachable": reachable,
                    "outcome": outcome,
                    "edge": (row.get("metadata") or {}).get("edge_case") or "",
                    "lang": row.get("language", ""),
                }
            )
    print(
        f"{'id':<36} {'total':>7} {'turns':>5} {'head4':>6} {'last4':>6} {'1st tool':>8} {'best':>6}  outcome / edge case"
    )
    for r in rows:
        print(
            f"{r['id']:<36} {r['total']:>7} {r['turns']:>5} {r['head']:>6} {r['last']:>6} {r['first_tool']:>8} "
            f"{r['reachable']:>6}  {r['outcome']} {r['edge']} {r['lang'] if r['lang'] != 'en' else ''}"
        )
    totals = [r["total"] for r in rows]
    print(
        f"\nrows={len(rows)} min={min(totals)} p50={percentile(totals, 0.5)} p90={percentile(totals, 0.9)} "
        f"max={max(totals)} mean={statistics.mean(totals):.0f}"
    )
    under = sum(t <= target for t in totals)
    print(f"<= {target}: {under} ({100 * under / len(rows):.1f}%); 5k-25k: {sum(5000 <= t <= 25000 for t in totals)}")
    stuck = [r for r in rows if r["outcome"] not in ("fits", "ok", "ok+human-next")]
    print(f"cannot reach {target} by summarizing the middle: {len(stuck)}")
    for r in stuck:
        print(f"  {r['id']}: {r['outcome']} (head4={r['head']}, last{last_n}={r['last']}, best={r['reachable']})")
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", default=list(DEFAULT_FILES))
    parser.add_argument("--tokenizer", default="data_samples/demo_tokenizer")
    parser.add_argument("--target", type=int, default=4000)
    parser.add_argument("--summary", type=int, default=300)
    parser.add_argument("--last", type=int, default=4)
    args = parser.parse_args(argv)
    report(args.files, args.tokenizer, args.target, args.summary, args.last)
    return 0


if __name__ == "__main__":
    sys.exit(main())
