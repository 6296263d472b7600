"""The summary cache that every process of every engine shares: a folder of append-only segments,
or one object a summary in object storage.

Each process appends to a segment of its own (`<host>-<pid>-<random>.jsonl`, one line a summary,
written with one `write` call), so concurrent writers never touch the same file and a killed
process leaves at worst a torn last line, which readers skip. A reader indexes every segment when
it opens and reads what others appended since whenever it misses, so a summary another process
paid for is found too. The folder may be local or on a shared file system (NFS) seen by every node.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import secrets
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...core import json_codec
from ...core.summary.summarizer import Summarizer, Summary, SummaryRequest
from ...summarizers.checks import CHECK_FAILED
from ..storage.remote import is_uri, open_uri

SUFFIX = ".jsonl"
REFRESH_SECONDS = 1.0  # a miss looks for other processes' new lines at most this often


def _short(key: str) -> int:
    """The index's key: 64 bits of the request hash (the full hash is checked on every hit)."""
    return int(key[:16], 16)


class SummaryCache:
    """Summaries by request hash, each appended as soon as it is paid, so a killed run keeps them."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._index: dict[int, int] = {}  # short key -> segment number << 40 | offset of its line
        # Batch mode's attempts at each key: attempt id -> (why it failed, where its answer's line is)
        self._attempts: dict[str, dict[str, tuple[str | None, int | None]]] = {}
        self._segments: list[Path] = []
        self._read_to: list[int] = []  # bytes of each segment already indexed
        self._own: int | None = None  # our segment's file descriptor, opened at the first put
        self._refreshed = 0.0

    def open(self) -> None:
        self._refresh()  # the folder is made by the first summary stored: a run that stores none leaves none

    def get(self, key: str) -> Summary | None:
        return _summary(self.lookup(key))

    def lookup(self, key: str) -> Hit | None:
        found = self._lookup(key)
        if found is None and time.monotonic() - self._refreshed >= REFRESH_SECONDS:
            self._refresh()
            found = self._lookup(key)
        return found

    def put(self, key: str, summary: Summary, checked: str | None = None) -> None:
        self._append(_encoded(key, summary, checked))

    def attempts(self, key: str) -> dict[str, Attempt]:
        """The batch attempts recorded at `key`'s summary, by attempt id, in the order they came."""
        if time.monotonic() - self._refreshed >= REFRESH_SECONDS:
            self._refresh()
        found = {}
        for attempt, (why, where) in self._attempts.get(key, {}).items():
            line = None if where is None else self._read_line(self._segments[where >> 40], where & ((1 << 40) - 1))
            found[attempt] = Attempt(why, line.get("answer") if line else None)
        return found

    def put_attempt(self, key: str, attempt: str, why: str | None = None, answer: str | None = None) -> None:
        """Record an attempt's answer (not a summary yet: it is checked when a row looks it up) or why it
        failed; readers count attempts, never serve them."""
        self._append(_attempt_line(key, attempt, why, answer))

    def _append(self, entry: bytes) -> None:
        if self._own is None:
            self.path.mkdir(parents=True, exist_ok=True)
            name = f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(4)}{SUFFIX}"
            self._own = os.open(self.path / name, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.write(self._own, entry + b"\n")  # one call: a kill leaves the line whole or torn, never mixed

    def close(self) -> None:
        if self._own is not None:
            os.close(self._own)
            self._own = None

    def __len__(self) -> int:
        return len(self._index)

    def _lookup(self, key: str) -> Hit | None:
        where = self._index.get(_short(key))
        if where is None:
            return None
        entry = self._read_line(self._segments[where >> 40], where & ((1 << 40) - 1))
        if entry is None:  # altered since it was indexed: forgotten, so the one bought again is indexed
            del self._index[_short(key)]
        return _decoded(entry, key)

    @staticmethod
    def _read_line(segment: Path, offset: int) -> dict[str, Any] | None:
        with open(segment, "rb") as f:
            f.seek(offset)
            return _parsed(f.readline())

    def _refresh(self) -> None:
        """Index every segment's lines added since the last refresh (new segments included)."""
        known = {p.name for p in self._segments}
        for segment in sorted(self.path.glob("*" + SUFFIX)):
            if segment.name not in known:
                self._segments.append(segment)
                self._read_to.append(0)
        for number, segment in enumerate(self._segments):
            self._read_to[number] = self._index_segment(number, segment, self._read_to[number])
        self._refreshed = time.monotonic()

    def _index_segment(self, number: int, segment: Path, start: int) -> int:
        """Index whole lines from `start`; returns where the next refresh begins (before a torn line)."""
        with open(segment, "rb") as f:
            f.seek(start)
            offset = start
            for line in f:
                if not line.endswith(b"\n"):  # being written, or torn by a kill: read again next time
                    break
                entry = _parsed(line)
                if entry is not None and "attempt" in entry:
                    self._index_attempt(entry, number << 40 | offset)
                elif entry is not None:
                    self._index.setdefault(_short(entry["key"]), number << 40 | offset)
                offset += len(line)
        return offset


    def _index_attempt(self, entry: dict[str, Any], where: int) -> None:
        """An attempt's line: a later line of the same attempt (its answer judged) adds why it failed."""
        attempts = self._attempts.setdefault(entry["key"], {})
        why, answer = attempts.get(str(entry["attempt"]), (None, None))
        if "failed" in entry:
            why = str(entry["failed"])
        if "answer" in entry:
            answer = where
        attempts[str(entry["attempt"])] = (why, answer)


@dataclass(frozen=True)
class Attempt:
    """One batch attempt at a summary: why it failed (None: it did not, or is not judged yet) and its answer."""

    why: str | None = None
    answer: str | None = None


def _attempt_line(key: str, attempt: str, why: str | None, answer: str | None) -> bytes:
    said = {**({"failed": why} if why is not None else {}), **({"answer": answer} if answer is not None else {})}
    return json_codec.dumps({"key": key, "attempt": attempt, **said, "sha256": _checksum(said)})


def _said(entry: dict[str, Any]) -> Any:
    """What an entry's checksum covers: a summary, or what an attempt says (why it failed, its answer)."""
    if "attempt" not in entry:
        return entry.get("summary")
    return {k: entry[k] for k in ("failed", "answer") if k in entry}


def _encoded(key: str, summary: Summary, checked: str | None = None) -> bytes:
    """A cache entry: the request's key, the summary with its provenance (the calls it took), the checks
    it passed (`Summarizer.checks_id`) and the summary's checksum, so one altered on disk is bought
    again, never served."""
    value: dict[str, Any] = {"text": summary.text, "api_calls": summary.api_calls, "errors": summary.errors}
    if summary.checks_failed:  # left out when empty: entries written before checks read the same
        value["checks_failed"] = list(summary.checks_failed)
    for name in ("prompt_tokens", "completion_tokens"):  # likewise, left out when nothing was billed
        if getattr(summary, name):
            value[name] = getattr(summary, name)
    if checked is not None:
        value["checked"] = checked
    return json_codec.dumps({"key": key, "summary": value, "sha256": _checksum(value)})


def _checksum(value: Any) -> str:
    """128 bits of the sha256 of the summary as canonical JSON (whatever fields it has)."""
    return hashlib.sha256(json_codec.canonical(value)).hexdigest()[:32]


@dataclass(frozen=True)
class Hit:
    """A stored summary and the checks it passed when stored (None: not recorded, as in older entries)."""

    summary: Summary
    checked: str | None = None


def _decoded(entry: dict[str, Any] | None, key: str) -> Hit | None:
    """The summary of an entry read back, if it is whole and is `key`'s (64-bit index keys may collide)."""
    if entry is None or entry["key"] != key:
        return None
    value = dict(entry["summary"])
    checked = value.pop("checked", None)
    return Hit(Summary(**{**value, "checks_failed": tuple(value.get("checks_failed", ()))}), checked)


def _summary(hit: Hit | None) -> Summary | None:
    return None if hit is None else hit.summary


def _parsed(line: bytes) -> dict[str, Any] | None:
    """An entry, or None when it is torn or altered. An entry without a checksum (an older cache's) is
    taken when it parses; one whose checksum is present and wrong never is."""
    try:
        entry = json_codec.loads(line)
    except ValueError:
        return None
    if not isinstance(entry, dict) or not isinstance(entry.get("key"), str):
        return None
    if "sha256" in entry and entry["sha256"] != _checksum(_said(entry)):
        return None
    return entry


class ObjectCache:
    """Summaries in object storage, one object each (`<prefix>/<key[:2]>/<key>.json`): a lookup is
    one GET, a store one PUT, which the store makes whole or not at all (a killed upload never lands)."""

    def __init__(self, uri: str):
        self.path = uri
        self._fs, self._root = None, ""

    def open(self) -> None:
        self._fs, self._root = open_uri(self.path)
        self._root = self._root.rstrip("/")

    def _key(self, key: str) -> str:
        return f"{self._root}/{key[:2]}/{key}.json"

    def get(self, key: str) -> Summary | None:
        return _summary(self.lookup(key))

    def lookup(self, key: str) -> Hit | None:
        try:
            with self._fs.open_input_stream(self._key(key)) as f:
                entry = _parsed(f.read())
        except FileNotFoundError:
            return None
        return _decoded(entry, key)

    def put(self, key: str, summary: Summary, checked: str | None = None) -> None:
        with self._fs.open_output_stream(self._key(key)) as f:
            f.write(_encoded(key, summary, checked))

    def attempts(self, key: str) -> dict[str, Attempt]:
        from pyarrow.fs import FileSelector  # as remote.py: pyarrow only for object storage

        try:
            listed = self._fs.get_file_info(FileSelector(f"{self._root}/attempts/{key}"))
        except FileNotFoundError:
            return {}
        found = {}
        for info in sorted(listed, key=lambda i: (i.mtime_ns or 0, i.path)):
            entry = self._read_attempt(info.path)
            found[info.base_name.removesuffix(".json")] = Attempt(entry.get("failed"), entry.get("answer"))
        return found

    def put_attempt(self, key: str, attempt: str, why: str | None = None, answer: str | None = None) -> None:
        # one object an attempt: a later write (its answer judged) keeps what the first one said
        path = f"{self._root}/attempts/{key}/{attempt}.json"
        said = {**self._read_attempt(path), **({"failed": why} if why is not None else {}),
                **({"answer": answer} if answer is not None else {})}
        with self._fs.open_output_stream(path) as f:
            f.write(_attempt_line(key, attempt, said.get("failed"), said.get("answer")))

    def _read_attempt(self, path: str) -> dict[str, Any]:
        """What an attempt's object says ({} when there is none, or it is damaged)."""
        try:
            with self._fs.open_input_stream(path) as f:
                entry = _parsed(f.read())
        except FileNotFoundError:
            return {}
        return _said(entry) if entry is not None and "attempt" in entry else {}

    def close(self) -> None:
        self._fs = None


def open_cache(location: str | Path) -> SummaryCache | ObjectCache:
    """The cache at `location`: an object-storage URI, or a folder (local or on a shared file system)."""
    return ObjectCache(location) if is_uri(location) else SummaryCache(location)


def answered(cache: SummaryCache | ObjectCache, inner: Summarizer, request: SummaryRequest,
             key: str) -> tuple[str, Summary | None, dict[str, str]]:
    """`request`'s summary from the cache: a stored one this run's checks accept, or else the first
    batch answer they pass (stored as the key's summary, with what the attempts before it cost); when
    there is none, why each attempt at it failed. Answers arrive from batches without their requests,
    so they are judged here, by the first row that asks (inner.unusable: the summary checks); a stored
    summary that records passing this run's checks is not judged again."""
    hit, checks = cache.lookup(key), inner.checks_id()
    if hit is not None and ((checks is not None and hit.checked == checks) or inner.unusable(request, hit.summary) is None):
        return key, hit.summary, {}
    attempts = cache.attempts(key)
    for attempt, tried in attempts.items():
        if tried.why is not None or tried.answer is None:
            continue
        why = inner.unusable(request, Summary(tried.answer))
        if why is None:
            summary = _provenance(tried.answer, attempts)
            if hit is None:  # a stored summary the checks turn away would hide a new one: not stored
                cache.put(key, summary, checks)
            return key, summary, {}
        cache.put_attempt(key, attempt, why=why)
        attempts[attempt] = Attempt(why, tried.answer)
    return key, None, {attempt: tried.why for attempt, tried in attempts.items() if tried.why is not None}


def _provenance(answer: str, attempts: dict[str, Attempt]) -> Summary:
    """A batch answer as a summary with what it took: the failed attempts before it, as an online run counts calls."""
    failed = [tried.why for tried in attempts.values() if tried.why is not None]
    return Summary(answer, len(failed) + 1, len(failed), checks_of(failed))


def checks_of(reasons) -> tuple[str, ...]:
    """The checks among the reasons attempts failed (one name an answer turned away)."""
    return tuple(why[len(CHECK_FAILED):] for why in reasons if why.startswith(CHECK_FAILED))


class CachedSummarizer(Summarizer):
    """Any summarizer that can name its requests (`cache_key`), answered from the cache when it can be."""

    def __init__(self, inner: Summarizer, cache: SummaryCache | ObjectCache):
        self.inner = inner
        self.name = inner.name
        self.cache = cache
        self.hits = 0

    async def start(self) -> None:
        await self.inner.open()  # its endpoint checked before its first request: the cache may answer every one
        self.cache.open()

    async def summarize(self, request: SummaryRequest) -> Summary:
        key, hit = await asyncio.to_thread(self._lookup, request)  # counts, elides, reads: not on the loop
        if hit is not None:
            self.hits += 1
            return hit
        summary = await self.inner.summarize(request)
        if key is not None:
            # an online answer passed this run's checks before it was returned
            await asyncio.to_thread(self.cache.put, key, summary, self.inner.checks_id())
        return summary

    def _lookup(self, request: SummaryRequest) -> tuple[str | None, Summary | None]:
        key = self.inner.cache_key(request)
        return (None, None) if key is None else answered(self.cache, self.inner, request, key)[:2]

    async def close(self) -> None:
        try:
            await self.inner.close()
        finally:
            self.cache.close()

    def run_stats(self) -> dict[str, Any]:
        return {**self.inner.run_stats(), "cache_hits": self.hits, "cache_file": str(self.cache.path)}

    def live(self) -> dict[str, int]:
        return self.inner.live()

    def secrets(self) -> tuple[str, ...]:
        return self.inner.secrets()

    def request_body(self, request: SummaryRequest) -> dict[str, Any] | None:
        return self.inner.request_body(request)  # a summary example's request is the inner summarizer's
