"""A small batch runner: each line of a batch input file sent to a live OpenAI-compatible server, the answers
written as a batch output file in the shape vLLM's run_batch writes (custom_id, response, error).

It stands in for `python -m vllm.entrypoints.openai.run_batch -i requests.jsonl -o results.jsonl --model M`
where vLLM cannot run (no GPU): tests answer `trajcomp batch export` files with it, against the test
server or `make e2e`'s llama.cpp server.

    python scripts/run_batch.py -i requests.jsonl -o results.jsonl --base-url http://127.0.0.1:8000/v1
"""

from __future__ import annotations

import argparse
import asyncio
import json
import uuid

import aiohttp


async def answer(session: aiohttp.ClientSession, base_url: str, line: dict) -> dict:
    """One request line's result line: the server's status and body, or the error that stopped it."""
    result = {"id": f"vllm-{uuid.uuid4().hex}", "custom_id": line["custom_id"], "response": None, "error": None}
    try:
        async with session.post(base_url.rstrip("/") + "/chat/completions", json=line["body"]) as resp:
            text = await resp.text()
            try:
                body = json.loads(text)
            except ValueError:
                body = text
            result["response"] = {"status_code": resp.status, "request_id": uuid.uuid4().hex, "body": body}
    except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
        result["error"] = {"code": type(exc).__name__, "message": str(exc)}
    return result


async def run(requests: str, results: str, base_url: str, in_flight: int) -> int:
    with open(requests, encoding="utf-8") as f:
        lines = [json.loads(text) for text in f if text.strip()]
    slots = asyncio.Semaphore(in_flight)
    timeout = aiohttp.ClientTimeout(total=600)

    async with aiohttp.ClientSession(timeout=timeout) as session:
        async def one(line: dict) -> dict:
            async with slots:
                return await answer(session, base_url, line)

        answered = await asyncio.gather(*(one(line) for line in lines))
    with open(results, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(result, ensure_ascii=False) + "\n" for result in answered)
    return len(answered)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-i", "--input", required=True, help="batch input file (JSON Lines)")
    parser.add_argument("-o", "--output", required=True, help="batch output file to write")
    parser.add_argument("--base-url", required=True, help="the server, e.g. http://127.0.0.1:8000/v1")
    parser.add_argument("--in-flight", type=int, default=8, help="requests sent at once")
    args = parser.parse_args()
    count = asyncio.run(run(args.input, args.output, args.base_url, args.in_flight))
    print(f"{count} requests answered into {args.output}")


if __name__ == "__main__":
    main()
