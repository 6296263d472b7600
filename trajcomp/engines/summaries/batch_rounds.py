"""Summaries bought in rounds of batches (`summarization.batch`), before a run writes its rows.

A round plans every selected row with the summaries the cache already has (batch_answers.py): the
requests still unanswered come back as SummaryPending. They are written into batch files within the
provider's limits, uploaded and submitted (summarizers/batch_api.py), waited for, and their answers
stored in the summary cache under the keys online runs use (batch_results.py). Rounds repeat while
rows need another pass or a failed request another try; then the run writes its rows as any run
does, every summary from the cache, so its bytes are those of an online run given the same answers.

Every batch is recorded in the work folder (`batches/state.json`) before it is uploaded, as soon as
the file has an id and as soon as the batch has one: a run killed at any point waits on the batches
it submitted, never submits their requests again, and finds a batch created just before the kill
among the endpoint's batches by its input file.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections import Counter
from contextlib import aclosing
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, AsyncIterator, Callable

from ...core import json_codec
from ...core.compressor import RowResult
from ...core.summary.summarizer import SummaryPending
from ...formats import format_for
from ...formats.base import AtomicFile, read_checked, write_json
from ...reports.schema import Batches
from ...summarizers import make_summarizer
from ...summarizers.batch_api import BatchAPI, BatchStatus, request_line
from ...summarizers.http import RetryPolicy
from ..flow.ordered import ordered_map
from ..flow.paths import Layout
from ..flow.selection import Selection, Taker
from .batch_results import ResultsReader, Taken
from .cache import REFRESH_SECONDS, open_cache

FOLDER = "batches"
STOP_HINT = "Ctrl-C stops; the same command resumes and submits nothing again"
SHOW_SECONDS = 600  # an unchanged status line is printed again after this long (a log shows the run is alive)


def _took(figures: Batches, taken: Taken, unanswered: Counter) -> None:
    """A finished batch's answers and failures added to the run's figures."""
    reasons = Counter(figures.failed_by_reason) + taken.failed + unanswered
    figures.answered += taken.answered
    figures.failed = sum(reasons.values())
    figures.failed_by_reason = dict(sorted(reasons.items()))
    figures.prompt_tokens += taken.prompt_tokens
    figures.completion_tokens += taken.completion_tokens


@dataclass
class Filling:
    """The batch file being written, cut at the provider's limits (its requests, its bytes)."""

    file: AtomicFile
    entry: dict[str, Any]
    size: int = 0

    def fits(self, line: bytes, max_requests: int, max_bytes: int) -> bool:
        return self.entry["requests"] < max_requests and self.size + len(line) <= max_bytes

    def add(self, line: bytes) -> None:
        self.file.handle.write(line)
        self.entry["requests"] += 1
        self.size += len(line)


class Ledger:
    """The batches a run submitted and its figures, in the work folder; saved after every step."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.path = folder / "state.json"
        saved = _read_json(self.path) or {}
        self.entries: list[dict[str, Any]] = saved.get("batches", [])
        self.figures = Batches(**saved.get("figures", {}))

    def save(self) -> None:
        write_json(self.path, {"batches": self.entries, "figures": asdict(self.figures)}, indent=1)

    def unfinished(self) -> list[dict[str, Any]]:
        return [e for e in self.entries if not e.get("done")]

    def input_file(self, entry: dict[str, Any]) -> Path:
        return self.folder / entry["name"]


async def pending_requests(layout: Layout, selection: Selection, rows, max_running: int, max_held: int,
                           answered: Callable[[RowResult], None] | None = None) -> AsyncIterator[tuple[str, dict]]:
    """A round: every selected row planned with the summaries known; each request still waited for,
    once, with its key, in the rows' order (streamed: a round over millions of rows holds only keys).
    `answered` is given each row the cache answered whole."""
    seen: set[str] = set()
    taker = Taker(selection)

    async def plan(item) -> tuple[str, dict] | None:
        record, verdict = item
        if verdict is not None or record.error is not None:
            return None
        try:
            result = await rows.compress_row(record.row)
        except SummaryPending as waiting:
            return waiting.key, waiting.body
        if answered is not None:
            answered(result)
        return None

    for job in layout.files:
        records = taker.select(job.key, read_checked(format_for(job.input), job.input))
        async with aclosing(ordered_map(records, plan, max_running, max_held)) as planned:
            async for found in planned:
                if found is not None and found[0] not in seen:
                    seen.add(found[0])
                    yield found


class BatchBuyer:
    """Buys a run's summaries in rounds of batches, through `rows` (the run's compressor or its workers)."""

    def __init__(self, config, layout: Layout, selection: Selection, rows, work: Path, quiet: bool,
                 max_running: int, max_held: int):
        self.config, self.layout, self.selection, self.rows = config, layout, selection, rows
        self.quiet, self.max_running, self.max_held = quiet, max_running, max_held
        self.ledger = Ledger(work / FOLDER)
        self.cache = open_cache(layout.cache)
        summarizer = make_summarizer(config.summarizer, config, rows.counter)  # reads answers; never calls
        self.reader = ResultsReader(self.cache, summarizer.accept, summarizer.secrets())
        self._api: BatchAPI | None = None
        self._shown = ("", 0.0)  # the last status line and when it was printed
        self._first = True  # the first round counts the summaries the cache had before this run bought any

    async def buy(self) -> Batches:
        self.ledger.folder.mkdir(parents=True, exist_ok=True)
        self.cache.open()
        try:
            await self._settle()  # a resumed run's batches first: their answers are paid for
            while await self._round():
                self.ledger.figures.rounds += 1
                await self._settle()
        finally:
            self.cache.close()
            if self._api is not None:
                await self._api.close()
        return self.ledger.figures

    async def _round(self) -> int:
        """Plan every row; submit each batch file as soon as it is full (the provider starts on it while
        the round goes on). Returns the requests submitted."""
        c, submitted, filling = self.config, 0, None
        try:
            tally = None
            if self._first:  # counted by each run, a resumed one too
                self.ledger.figures.from_cache, tally, self._first = 0, self._from_cache, False
            async for key, body in pending_requests(self.layout, self.selection, self.rows, self.max_running,
                                                    self.max_held, tally):
                if self.cache.get(key) is not None:  # bought since the row was planned: never bought twice
                    continue
                line = request_line(key, body)
                if filling is not None and not filling.fits(line, c.batch_max_requests, c.batch_max_bytes):
                    await self._submit(filling)
                    filling = None
                if filling is None:
                    entry = {"name": f"{len(self.ledger.entries) + 1:05d}.jsonl", "requests": 0}
                    filling = Filling(AtomicFile(self.ledger.input_file(entry)), entry)
                filling.add(line)
                submitted += 1
        except BaseException:
            if filling is not None:  # the file being filled was never recorded: nothing of it is left
                filling.file.abort()
            raise
        if filling is not None:
            await self._submit(filling)
        return submitted

    def _from_cache(self, result: RowResult) -> None:
        metrics = result.metrics
        if metrics is not None and metrics.summary_source == self.config.summarizer:
            self.ledger.figures.from_cache += metrics.passes

    async def api(self) -> BatchAPI:
        """The endpoint, opened at its first use: a run whose summaries are all bought never contacts it."""
        if self._api is None:
            c = self.config
            self._api = BatchAPI(c.base_url, c.api_key_env, c.request_timeout, RetryPolicy(c.max_retries, c.retry_delay))
            await self._api.open()
        return self._api

    async def _submit(self, filling: Filling) -> None:
        """A batch file put in place whole, recorded, then uploaded and submitted."""
        filling.file.commit()
        self.ledger.entries.append(filling.entry)
        self.ledger.figures.requests += filling.entry["requests"]
        self.ledger.save()
        await self._create(filling.entry)

    async def _create(self, entry: dict[str, Any], resumed: bool = False) -> None:
        """Upload the entry's file and create its batch, each step recorded as soon as it is done;
        `resumed`: a kill may have come after the batch was created, before it was recorded."""
        api = await self.api()
        if entry.get("file_id") is None:
            entry["file_id"] = await api.upload(self.ledger.input_file(entry).read_bytes(), entry["name"])
            self.ledger.save()
        found = await api.find(entry["file_id"]) if resumed else None
        batch = found or await api.create(entry["file_id"])
        entry["batch_id"] = batch.id
        self.ledger.figures.batches += 1
        self.ledger.save()

    async def _settle(self) -> None:
        """Wait until every unfinished batch has ended, then take its answers into the cache."""
        waiting = self.ledger.unfinished()
        if not waiting:
            return
        api = await self.api()
        for entry in waiting:
            if entry.get("batch_id") is None:  # killed before its batch was recorded
                await self._create(entry, resumed=True)
        started = time.monotonic()
        while True:
            statuses = [await api.status(entry["batch_id"]) for entry in waiting]
            self._show(statuses)
            if all(s.ended for s in statuses):
                break
            await asyncio.sleep(self.config.batch_poll_seconds)
        self.ledger.figures.wait_seconds = round(self.ledger.figures.wait_seconds + time.monotonic() - started, 3)
        for entry, status in zip(waiting, statuses):
            await self._take(entry, status)
        await asyncio.sleep(REFRESH_SECONDS)  # every process's cache then reads the new answers at its next miss

    async def _take(self, entry: dict[str, Any], status: BatchStatus) -> None:
        """A finished batch's answers and failures into the cache; its requests without a result failed."""
        api, taken, seen = await self.api(), Taken(), set()
        for file_id in (status.output_file_id, status.error_file_id):
            if file_id:
                got, keys = self.reader.take_text(await api.content(file_id), attempt=status.id)
                taken.add(got)
                seen |= keys
        unanswered: Counter = Counter()
        why = "no result for the request" if status.status == "completed" else f"batch {status.status}"
        with open(self.ledger.input_file(entry), encoding="utf-8") as lines:
            keys = [json_codec.loads(line)["custom_id"] for line in lines]
        for key in keys:
            if key not in seen and self.cache.get(key) is None:
                self.cache.put_attempt(key, status.id, why=why)
                unanswered[why] += 1
        _took(self.ledger.figures, taken, unanswered)
        entry.update(done=True, status=status.status)
        self.ledger.save()

    def _show(self, statuses: list[BatchStatus]) -> None:
        """A line on stderr when a batch's status or counts moved, and at least every SHOW_SECONDS."""
        shown = "; ".join(f"{s.id} {s.status} {s.completed}/{s.total}" + (f" ({s.failed} failed)" if s.failed else "")
                          for s in statuses)
        if self.quiet or (shown == self._shown[0] and time.monotonic() - self._shown[1] < SHOW_SECONDS):
            return
        self._shown = (shown, time.monotonic())
        print(f"trajcomp: batches: {shown}. {STOP_HINT}", file=sys.stderr, flush=True)


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
