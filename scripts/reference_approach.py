"""How the reference design processes a file, re-implemented for benchmarks (not trajcomp's code).

Written from the published description of Hermes Agent's trajectory_compressor.py: every row is
loaded into memory first; each turn is counted with its own `tokenizer.encode` call on the event
loop; one asyncio task per row, all gathered at once, summary calls limited by a semaphore of
`--concurrency`; a new HTTP client (aiohttp session) for every summary call; the whole output is
written at the end. The region rule is the reference's greedy one (protected head, last N turns,
accumulate from the start of the middle until enough is covered). Only speed and memory are
compared with trajcomp, never the rows it writes.
Usage: python scripts/reference_approach.py IN.jsonl OUT.jsonl --tokenizer DIR --base-url URL
       [--target 15250 --summary-target 750 --last-n 4 --concurrency 50 --model test-model]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os

import aiohttp

os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


class ReferenceCompressor:
    def __init__(self, args: argparse.Namespace):
        from transformers import AutoTokenizer

        self.args = args
        self.tokenizer = AutoTokenizer.from_pretrained(args.tokenizer)
        self.semaphore = asyncio.Semaphore(args.concurrency)

    def count_turn_tokens(self, turns: list[dict]) -> list[int]:
        return [len(self.tokenizer.encode(t.get("value", ""))) for t in turns]

    def protected_region(self, turns: list[dict]) -> tuple[int, int]:
        """(start, end) of the compressible middle: after the first system/human/gpt/tool turns, before the last N."""
        firsts = {}
        for i, turn in enumerate(turns):
            firsts.setdefault(turn["from"], i)
        head = max(firsts.get(role, -1) for role in ("system", "human", "gpt", "tool"))
        return head + 1, max(head + 1, len(turns) - self.args.last_n)

    async def summarize(self, turns: list[dict]) -> str:
        text = "\n\n".join(f"[{t['from'].upper()}]: {t['value'][:3000]}" for t in turns)
        body = {
            "model": self.args.model,
            "messages": [{"role": "user", "content": f"Summarize this agent conversation:\n\n{text}"}],
            "temperature": 0.3,
            "max_tokens": self.args.summary_target * 2,
        }
        async with self.semaphore:
            for attempt in range(3):
                try:  # a new client for every call
                    async with aiohttp.ClientSession() as session:
                        async with session.post(f"{self.args.base_url}/chat/completions", json=body) as r:
                            r.raise_for_status()
                            answer = await r.json()
                    return "[CONTEXT SUMMARY]: " + answer["choices"][0]["message"]["content"].strip()
                except (aiohttp.ClientError, KeyError, asyncio.TimeoutError):
                    await asyncio.sleep(2**attempt)
        return "[CONTEXT SUMMARY]: Summary generation failed."

    async def compress(self, row: dict) -> dict:
        turns = row["conversations"]
        counts = self.count_turn_tokens(turns)
        total = sum(counts)
        if total <= self.args.target:
            return {**row, "compression_metrics": {"original_tokens": total, "skipped_under_target": True}}
        start, end = self.protected_region(turns)
        need = total - self.args.target + self.args.summary_target
        covered, until = 0, start
        for i in range(start, end):
            covered += counts[i]
            until = i + 1
            if covered >= need:
                break
        if until == start:
            return {**row, "compression_metrics": {"original_tokens": total, "was_compressed": False}}
        summary = await self.summarize(turns[start:until])
        out = [dict(t) for t in turns[:start]] + [{"from": "human", "value": summary}]
        out += [dict(t) for t in turns[until:]]
        compressed = sum(self.count_turn_tokens(out))
        metrics = {"original_tokens": total, "compressed_tokens": compressed, "was_compressed": True}
        return {**row, "conversations": out, "compression_metrics": metrics}


async def run(args: argparse.Namespace) -> None:
    with open(args.input, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]  # everything in memory first
    compressor = ReferenceCompressor(args)
    results = await asyncio.gather(*(compressor.compress(row) for row in rows))  # one task per row
    with open(args.output, "w", encoding="utf-8") as f:
        for row in results:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("input")
    parser.add_argument("output")
    parser.add_argument("--tokenizer", required=True)
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--model", default="test-model")
    parser.add_argument("--target", type=int, default=15250)
    parser.add_argument("--summary-target", type=int, default=750)
    parser.add_argument("--last-n", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=50)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
