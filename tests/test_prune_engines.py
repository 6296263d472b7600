"""compress --prune writes the same bytes whatever moves the rows: one process, --workers 2, --batch (a
row fit by pruning asks for nothing), a resume after SIGKILL and `datasets` (Ray: tests/test_ray.py).

SWE-like rows, some fit by stubs alone and some stubbed then summarized, with the openai summarizer
against the real test server."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from conftest import DEMO_TOKENIZER, ROOT, read_jsonl, run_cli, write_jsonl
from openai_server import ServerThread
from test_hf import hf_offline  # noqa: F401 (a fixture: datasets offline)
from test_resume import cached_summaries, killed_midway, thaw

sys.path.insert(0, str(ROOT / "scripts"))
import swe_rows  # noqa: E402


def engine_config(path: Path, url: str, compression: str) -> Path:
    """A config for the engine tests: target 6000, the openai summarizer at `url`, `compression`'s keys."""
    path.write_text(
        f"tokenizer:\n  name: {DEMO_TOKENIZER}\n"
        f"compression:\n  target_max_tokens: 6000\n  {compression}\n"
        f"summarization:\n  summarizer: openai\n  base_url: {url}\n  model: test-model\n"
        "  api_key_env: TRAJCOMP_TEST_NO_KEY\n  retry_delay: 0.01\n  batch_poll_seconds: 0.05\n"
        "processing:\n  max_concurrent_requests: 2\n", encoding="utf-8")
    return path


def config(folder: Path, url: str) -> Path:
    return engine_config(folder / "prune.yaml", url, "summary_target_tokens: 300\n  prune: true")


def compress_args(src: Path, out: Path, url: str, *extra: str) -> list[str]:
    return ["compress", str(src), "-o", str(out), "-c", str(config(out.parent, url)), "--checkpoint-rows", "3",
            "-q", *extra]


def run(src: Path, out: Path, *extra: str, **server_args):
    out.parent.mkdir(parents=True, exist_ok=True)
    with ServerThread(**server_args) as server:
        result = run_cli(*compress_args(src, out, server.base_url, *extra))
        assert result.code == 0, result.stderr
        return server.stats


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The rows as one process writes them, and how many summaries they took."""
    folder = tmp_path_factory.mktemp("prune_engines")
    src = write_jsonl(folder / "in.jsonl", [*swe_rows.rows("hermes", 14)[:7], "not JSON", *swe_rows.rows("hermes", 14)[7:]])
    out = folder / "one" / "out.jsonl"
    stats = run(src, out, "--no-cache")
    metrics = [r["compression_metrics"] for r in read_jsonl(out)]
    needed = sum(m["passes"] for m in metrics)
    fit = sum(m["passes"] == 0 and m["pruned_outputs"] > 0 and not m["still_over_limit"] for m in metrics)
    assert stats.requests == needed > 0 and fit >= 4  # both kinds of rows
    return src, out, needed


def same_bytes(out: Path, ref: Path) -> bool:
    rejects = [o.with_name("out_rejects.jsonl") for o in (out, ref)]
    return out.read_bytes() == ref.read_bytes() and rejects[0].read_bytes() == rejects[1].read_bytes()


def test_two_workers_write_one_process_bytes(reference, tmp_path):
    src, ref, needed = reference
    stats = run(src, tmp_path / "out.jsonl", "--workers", "2", "--no-cache")
    assert same_bytes(tmp_path / "out.jsonl", ref) and stats.requests == needed


def test_batch_buys_only_the_summaries_of_rows_pruning_did_not_fit(reference, tmp_path):
    src, ref, needed = reference
    stats = run(src, tmp_path / "out.jsonl", "--batch")
    assert same_bytes(tmp_path / "out.jsonl", ref)
    submitted = [key for batch in stats.batch_custom_ids for key in batch]
    assert len(submitted) == needed and stats.requests == 0


def test_kill_9_then_rerun_gives_the_same_bytes(reference, tmp_path):
    src, ref, needed = reference
    out = tmp_path / "run" / "out.jsonl"
    out.parent.mkdir()
    with ServerThread(latency=0.15) as server:
        killed_midway(server, compress_args(src, out, server.base_url), out)
        assert not out.exists()
        paid = cached_summaries(out.parent / "out_summary_cache")
        thaw(server)
        before = server.stats.requests
        result = run_cli(*compress_args(src, out, server.base_url))
        assert result.code == 0, result.stderr
        assert server.stats.requests - before == needed - paid  # the summaries paid before the kill: from the cache
    assert same_bytes(out, ref)


def test_datasets_writes_the_clis_rows(reference, tmp_path, hf_offline):  # noqa: F811 (the fixture)
    import datasets
    from trajcomp.hf import compress_dataset

    src, ref, _ = reference
    rows = swe_rows.rows("hermes", 14)
    expected = read_jsonl(ref)
    with ServerThread() as server:
        got = compress_dataset(datasets.Dataset.from_list(rows), str(config(tmp_path, server.base_url)),
                               num_proc=2, batch_size=3).to_list()
    for row, want in zip(got, expected, strict=True):
        metrics, want_metrics = row.pop("compression"), want.pop("compression_metrics")
        assert row == want and metrics["status"] == want_metrics["status"]
        assert "pruned_outputs" in want_metrics and "pruned_outputs" not in metrics  # docs/compression.md: fixed type
        assert "pruned_outputs" not in (row.get("compression_metrics") or {})
