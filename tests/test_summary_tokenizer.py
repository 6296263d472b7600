"""A summary model with a tokenizer of its own: its context is respected, and a refusal is fitted and asked again.

The training tokenizer is the demo one; the test server's model counts with the small BPE tokenizer
built by conftest, which takes about 2.4 times as many tokens for the same text.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from conftest import DEMO_TOKENIZER, SAMPLES, run_cli
from openai_server import ServerThread

from trajcomp.core.compressor import TrajectoryCompressor
from trajcomp.core.config import CompressionConfig
from trajcomp.summarizers.http import ContextRefusal, context_refusal
from trajcomp.core.counting.tokens import TokenCounter

MODEL = "test-model"
LIMIT = 8192


@pytest.mark.parametrize("text, expected", [
    ('{"error": {"message": "This model\'s maximum context length is 8192 tokens. However, your messages resulted '
     'in 9354 tokens. Please reduce the length of the messages.", "code": "context_length_exceeded"}}', (8192, 9354)),
    ('{"object": "error", "message": "This model\'s maximum context length is 8192 tokens. However, you requested '
     '9954 tokens (9354 in the messages, 600 in the completion). Please reduce the length of the messages or '
     'completion.", "type": "BadRequestError", "code": 400}', (8192, 9354)),
    ('{"error": {"message": "\'max_tokens\' is too large: 600. This model\'s maximum context length is 8192 tokens '
     'and your request has 9354 input tokens (600 > 8192 - 9354)."}}', (8192, 9354)),
    ('{"error": {"code": 400, "message": "the request exceeds the available context size, try increasing it", '
     '"type": "exceed_context_size_error", "n_prompt_tokens": 9354, "n_ctx": 8192}}', (8192, 9354)),
    ('{"error": {"message": "request (9354 tokens) exceeds the available context size (8192 tokens), try '
     'increasing it"}}', (8192, 9354)),
    ('{"error": {"message": "Requested tokens (9354) exceed context window of 8192"}}', (8192, 9354)),
    ('{"error": {"message": "Invalid value for temperature"}}', None),
    ("<html>Bad Request</html>", None),
])
def test_context_refusals_as_each_server_words_them(text, expected):
    assert context_refusal(text) == (ContextRefusal(*expected) if expected else None)


def sample_rows(n: int) -> list[dict]:
    return [json.loads(line) for line in (SAMPLES / "hermes_coding_runs.jsonl").read_text().splitlines()[:n]]


def run(server, bpe_tokenizer, rows, **extra):
    cfg = CompressionConfig(tokenizer_name=str(DEMO_TOKENIZER), target_max_tokens=4000, summary_target_tokens=300,
                            summarizer="openai", base_url=server.base_url, summarization_model=MODEL,
                            api_key_env="TRAJCOMP_TEST_NO_KEY", cache=False, max_retries=0,
                            cannot_fit="shorten", **extra)  # some demo rows cannot fit in 4000: shortened, they buy summaries

    async def go():
        async with TrajectoryCompressor(cfg, counter=TokenCounter(str(DEMO_TOKENIZER))) as compressor:
            return await compressor.compress_rows(rows)

    return asyncio.run(go())


def serving(bpe_tokenizer, wording: str = "vllm") -> ServerThread:
    return ServerThread(models=[MODEL], context_limit=LIMIT, context_tokenizer=str(bpe_tokenizer / "tokenizer.json"),
                        context_wording=wording)


def test_with_the_summary_tokenizer_no_request_is_refused(bpe_tokenizer):
    rows = sample_rows(6)
    with serving(bpe_tokenizer) as server:
        results = run(server, bpe_tokenizer, rows, summary_tokenizer=str(bpe_tokenizer))
        stats = server.stats
    assert stats.context_refusals == 0 and stats.requests == len(stats.bodies) > 0
    summarized = [r for r in results if r.metrics.outcome.value != "skipped_under_target"]
    assert len(summarized) >= 4
    assert all(r.metrics.was_compressed and r.metrics.summarization_api_calls == 1 for r in summarized)
    # the server's context is used, not wasted: the longest request comes near it
    from openai_server import prompt_tokens
    longest = max(prompt_tokens(b["messages"], str(bpe_tokenizer / "tokenizer.json")) for b in stats.bodies)
    assert LIMIT * 0.8 < longest + 600 <= LIMIT


@pytest.mark.parametrize("wording", ["openai", "vllm", "llamacpp", "llama-cpp-python"])
def test_without_it_a_refused_request_is_fitted_to_the_stated_limit_and_asked_once_more(bpe_tokenizer, wording):
    rows = sample_rows(3)
    with serving(bpe_tokenizer, wording) as server:
        results = run(server, bpe_tokenizer, rows)
        stats = server.stats
    refused = [r for r in results if r.metrics.summarization_errors]
    assert refused and stats.context_refusals == len(refused)  # each refused once, never twice
    assert all(r.metrics.was_compressed for r in results if r.metrics.passes), [r.metrics.error for r in results]
    assert all(r.metrics.summarization_api_calls == 2 for r in refused)
    assert stats.requests == sum(r.metrics.summarization_api_calls for r in results)


def test_the_cli_takes_the_summary_tokenizer(tmp_path, bpe_tokenizer):
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(json.dumps(r) for r in sample_rows(2)) + "\n", encoding="utf-8")
    with serving(bpe_tokenizer) as server:
        result = run_cli("compress", str(src), "-o", str(tmp_path / "out.jsonl"), "-q", "--tokenizer",
                         str(DEMO_TOKENIZER), "--target-max-tokens", "4000", "--summary-target-tokens", "300",
                         "--summarizer", "openai", "--base-url", server.base_url, "--model", MODEL,
                         "--api-key-env", "TRAJCOMP_TEST_NO_KEY", "--summary-tokenizer", str(bpe_tokenizer))
        refusals = server.stats.context_refusals
    assert result.code == 0, result.stderr
    assert refusals == 0
    report = json.loads((tmp_path / "out_metrics.json").read_text(encoding="utf-8"))
    assert report["config"]["summarization"]["tokenizer"] == str(bpe_tokenizer)
    bad = run_cli("compress", str(src), "-o", str(tmp_path / "bad.jsonl"), "--tokenizer", str(DEMO_TOKENIZER),
                  "--summarizer", "openai", "--base-url", server.base_url, "--summary-tokenizer", str(tmp_path / "nope"))
    assert bad.code == 2 and "tokenizer folder not found" in bad.stderr and bad.stderr.count("\n") == 1
