"""Batch files for any runner: the requests a run still needs, written out, and a runner's results read in.

`export_requests` plans the run as `compress --batch` would and writes what its next round would
submit (OpenAI's batch input format, which vLLM's run_batch reads too); `import_results` takes
output files into the summary cache. Export, run, import, again until export finds nothing: then
`compress --batch` with the same options writes every row from the cache without an endpoint.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ...core.config import CompressionConfig
from ...formats.base import AtomicFile, InputError
from ...summarizers import make_summarizer
from ...summarizers.batch_api import request_line
from ..flow.paths import Layout
from ..flow.selection import Selection
from .batch_results import ResultsReader, Taken, is_result, parsed
from .batch_rounds import pending_requests
from .cache import open_cache

ROWS_RUNNING = 64  # rows planned at once: a round makes no call, so a few keep the tokenizer busy


@dataclass(frozen=True)
class Exported:
    requests: int
    path: Path


async def export_requests(rows, config: CompressionConfig, layout: Layout, selection: Selection,
                          path: Path) -> Exported:
    """The requests the run still waits for, one line each, written to `path` (whole, or nothing).
    `rows` is what compresses the run's rows with `batch` on (the runners' `build_rows`), so the
    export plans every row as `compress --batch` would."""
    await rows.start()
    written, file = 0, AtomicFile(path)
    try:
        async for key, body in pending_requests(layout, selection, rows, ROWS_RUNNING, config.max_rows_in_memory):
            file.handle.write(request_line(key, body))
            written += 1
    except BaseException:
        file.abort()
        raise
    finally:
        await rows.close()
    file.commit() if written else file.abort()  # nothing to ask: no file
    return Exported(written, path)


def import_results(config: CompressionConfig, counter, cache_location, files: list[Path]) -> Taken:
    """Every results file's answers into the cache at `cache_location`; failures recorded for the next round.
    Every file is checked first: one that holds no result line records nothing of any."""
    for file in files:
        check_results(file)
    summarizer = make_summarizer(config.summarizer, config, counter)
    cache = open_cache(cache_location)
    cache.open()
    taken = Taken()
    try:
        reader = ResultsReader(cache, summarizer.accept, summarizer.secrets())
        for file in files:
            try:
                text = file.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise _unreadable(file, exc) from None
            got, _ = reader.take_text(text)
            taken.add(got)
    finally:
        cache.close()
    return taken


def check_results(file: Path) -> None:
    """InputError naming `file` unless it holds a result line (read up to the first): the requests file,
    the dataset or anything else imported by mistake has none."""
    first = None
    try:
        with open(file, encoding="utf-8") as lines:
            for number, raw in enumerate(lines, 1):
                if not raw.strip():
                    continue
                line = parsed(raw)
                if is_result(line):
                    return
                first = first or (number, line)
    except (OSError, UnicodeDecodeError) as exc:
        raise _unreadable(file, exc) from None
    raise InputError(f"{file}: not a batch results file, nothing imported: {_why_not(first)}")


def _unreadable(file: Path, exc: OSError | UnicodeDecodeError) -> InputError:
    return InputError(f"{file}: cannot read it: {getattr(exc, 'strerror', None) or exc}")


def _why_not(first: tuple[int, object] | None) -> str:
    """What the first line of a file with no result line is instead."""
    if first is None:
        return "it is empty"
    number, line = first
    if line is None:
        return f"line {number} is not JSON"
    if isinstance(line, dict) and "custom_id" in line and "body" in line:
        return "it holds the batch requests (what batch export wrote); import the file the runner wrote"
    return f"line {number} has no custom_id with a response or an error (OpenAI's and vLLM run_batch's output lines have them)"
