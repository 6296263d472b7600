"""The summary cache's folder of segments: many writers at once, a torn line, other processes' entries."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import time
from pathlib import Path

from processes import HANG_SECONDS
from trajcomp.engines.summaries import cache as cache_module
from trajcomp.engines.summaries.cache import ObjectCache, SummaryCache
from trajcomp.summarizers.base import Summary, request_key


def key(n: int) -> str:
    return request_key({"n": n})


def summary(n: int) -> Summary:
    return Summary(text=f"summary {n} é\n{'x' * (n % 50)}", api_calls=1 + n % 3, errors=[f"e{n}"] if n % 7 == 0 else [])


def _writer(folder: str, first: int, count: int) -> None:
    cache = SummaryCache(folder)
    cache.open()
    for n in range(first, first + count):
        cache.put(key(n), summary(n))
    cache.close()


def test_concurrent_writers_lose_and_corrupt_nothing(tmp_path: Path):
    folder = tmp_path / "cache"
    context = multiprocessing.get_context("spawn")
    procs = [context.Process(target=_writer, args=(str(folder), 1000 * i, 300)) for i in range(4)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(60)
        assert proc.exitcode == 0
    assert len(list(folder.glob("*.jsonl"))) == 4  # a segment per process
    cache = SummaryCache(folder)
    cache.open()
    assert len(cache) == 1200
    for i in range(4):
        for n in range(1000 * i, 1000 * i + 300):
            assert cache.get(key(n)) == summary(n)
    assert cache.get(key(999)) is None


def test_a_torn_line_is_skipped_and_the_rest_found(tmp_path: Path):
    folder = tmp_path / "cache"
    _writer(str(folder), 0, 5)
    segment = next(folder.glob("*.jsonl"))
    with open(segment, "ab") as f:  # as a process killed in the middle of its write leaves it
        f.write(b'{"key": "' + key(5).encode() + b'", "summ')
    cache = SummaryCache(folder)
    cache.open()
    assert [cache.get(key(n)) for n in range(6)] == [summary(n) for n in range(5)] + [None]
    cache.put(key(5), summary(5))  # paid again: into this process's own segment, whole
    cache.close()
    again = SummaryCache(folder)
    again.open()
    assert again.get(key(5)) == summary(5)


def test_a_summary_another_process_writes_later_is_found(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(cache_module, "REFRESH_SECONDS", 0.0)
    folder = tmp_path / "cache"
    reader = SummaryCache(folder)
    reader.open()
    assert reader.get(key(1)) is None
    _writer(str(folder), 1, 1)  # another process's segment, made after the reader opened
    assert reader.get(key(1)) == summary(1)


def _slow_writer(folder: str) -> None:
    cache = SummaryCache(folder)
    cache.open()
    n = 0
    while True:
        cache.put(key(n), summary(n))
        n += 1


def test_a_writer_killed_mid_run_leaves_a_readable_cache(tmp_path: Path):
    folder = tmp_path / "cache"
    proc = multiprocessing.get_context("spawn").Process(target=_slow_writer, args=(str(folder),))
    proc.start()
    deadline = time.monotonic() + HANG_SECONDS
    while not list(folder.glob("*.jsonl")) or next(folder.glob("*.jsonl")).stat().st_size < 200_000:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.join()
    cache = SummaryCache(folder)
    cache.open()
    assert len(cache) > 100
    assert all(cache.get(key(n)) == summary(n) for n in range(len(cache)))


def _altered(data: bytes, n: int) -> bytes:
    """`data` with one letter of summary n's text changed: still valid JSON, another summary."""
    return data.replace(f"summary {n} é".encode(), f"summarY {n} é".encode(), 1)


def test_an_altered_entry_is_never_served_and_is_bought_again(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(cache_module, "REFRESH_SECONDS", 0.0)
    folder = tmp_path / "cache"
    _writer(str(folder), 0, 3)
    segment = next(folder.glob("*.jsonl"))
    segment.write_bytes(_altered(segment.read_bytes(), 1))
    cache = SummaryCache(folder)
    cache.open()
    assert [cache.get(key(n)) for n in range(3)] == [summary(0), None, summary(2)]
    cache.put(key(1), summary(1))  # bought again
    assert cache.get(key(1)) == summary(1)
    # Altered after it was indexed: refused too, and the one bought again then found.
    cache.close()
    segment.write_bytes(_altered(segment.read_bytes(), 2))
    assert cache.get(key(2)) is None
    cache.put(key(2), summary(2))
    assert cache.get(key(2)) == summary(2)


def test_an_entry_of_an_older_cache_without_a_checksum_is_served(tmp_path: Path):
    folder = tmp_path / "cache"
    folder.mkdir()
    value = {"text": "old summary", "api_calls": 1, "errors": []}
    (folder / "old.jsonl").write_text(json.dumps({"key": key(7), "summary": value}) + "\n")
    cache = SummaryCache(folder)
    cache.open()
    assert cache.get(key(7)) == Summary(**value)


def test_an_altered_object_is_never_served(tmp_path: Path):
    """The object-storage cache reads entries the same way: one altered is refused (here on a local
    file system, as pyarrow opens any other)."""
    (tmp_path / "objects" / key(3)[:2]).mkdir(parents=True)  # a bucket has no folders to make; a disk has
    cache = ObjectCache(f"file://{tmp_path}/objects")
    cache.open()
    cache.put(key(3), summary(3))
    stored = next((tmp_path / "objects").rglob("*.json"))
    stored.write_bytes(_altered(stored.read_bytes(), 3))
    assert cache.get(key(3)) is None
    cache.put(key(3), summary(3))
    assert cache.get(key(3)) == summary(3)


def test_batch_attempts_are_recorded_merged_and_never_served(tmp_path):
    """A batch's answer and, once a row judged it, why it failed: one attempt, in both caches; an
    attempt is never a summary, and an altered attempt line is not read."""
    folder = SummaryCache(tmp_path / "c")
    (tmp_path / "o" / "attempts" / key(1)).mkdir(parents=True)  # a disk needs the folders a bucket has not
    for cache in (folder, ObjectCache(f"file://{tmp_path}/o")):
        cache.open()
        cache.put_attempt(key(1), "batch_a", answer="an answer")
        cache.put_attempt(key(1), "batch_b", why="HTTP 500: down")
        cache.put_attempt(key(1), "batch_a", why="check failed: refusal")
        if isinstance(cache, SummaryCache):
            cache._refresh()
        tried = cache.attempts(key(1))
        assert set(tried) == {"batch_a", "batch_b"}
        assert (tried["batch_a"].why, tried["batch_a"].answer) == ("check failed: refusal", "an answer")
        assert (tried["batch_b"].why, tried["batch_b"].answer) == ("HTTP 500: down", None)
        assert cache.get(key(1)) is None and cache.attempts(key(2)) == {}
        cache.close()
    segment = next((tmp_path / "c").glob("*.jsonl"))
    segment.write_bytes(segment.read_bytes().replace(b"an answer", b"an ANSWER"))
    fresh = SummaryCache(tmp_path / "c")
    fresh.open()
    assert fresh.attempts(key(1))["batch_a"].answer is None  # the altered line is skipped; the judgment stands
