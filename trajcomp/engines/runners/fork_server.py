"""Where worker processes come from: a fork server that imported what they need once.

Each spawned worker would import the row core and its summarizer itself (and, where it loads a
tokenizer, transformers: ~1-2 s); the server pays that once, and can start before the run needs it
(`start_forking`, called as soon as the run knows it will have workers). Its workers are forked from
a process without threads or event loop, unlike the main process. The server outlives a run in a
long-lived process, with the environment it started in: each worker takes the run's (workers.py).
Windows has no fork server: each worker imports its own.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.forkserver
import signal
from contextlib import contextmanager

from ...core.config import CompressionConfig
from ...core.summary.summarizer import summarizer_module
from ...core.counting.tokenizer_loading import quiet_transformers

# What the fork server imports once for every worker (forking()): the row core and the run's summarizer;
# transformers' tokenizer loader (its import scans the whole library, ~1-2 s) only for workers that load
# a tokenizer themselves (preload_for): the others count with this process's, sent to them.
ROW_CORE = "trajcomp.engines.runners.workers"
TOKENIZER_LOADER = "transformers.models.auto.tokenization_auto"
PRELOAD = [ROW_CORE, TOKENIZER_LOADER]  # when the run is not known


def preload_for(config: CompressionConfig) -> list[str]:
    """The modules a worker of this run needs, for its fork server to import once: the row core, the
    summarizer's module, and transformers only when a worker loads a tokenizer itself: a chat template
    to render, or a summary tokenizer for the input guard."""
    summarizer = summarizer_module(config.summarizer)
    loads = not sends_tokenizer(config) or config.summary_tokenizer
    return [ROW_CORE, *([summarizer] if summarizer else []), *([TOKENIZER_LOADER] if loads else [])]


def sends_tokenizer(config: CompressionConfig) -> bool:
    """Whether workers count with this process's tokenizer, sent (TokenCounter.portable: exact, and no
    transformers to import, ~1 s of each run's start), rather than loading it: in `turns` mode, which only counts."""
    return config.count_mode == "turns"


def forking(preload: list[str] = PRELOAD) -> multiprocessing.context.BaseContext:
    """The context to start workers from: the fork server, importing `preload` if it starts now."""
    return multiprocessing.get_context("forkserver" if start_forking(preload) else "spawn")


def start_forking(preload: list[str] = PRELOAD) -> bool:
    """Start the fork server now (it imports in the background, on another core): a run that will
    start workers calls it before loading its own tokenizer. False where there is none."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return False
    multiprocessing.forkserver.set_forkserver_preload(preload)  # the process's one server: read when it starts
    quiet_transformers()  # the server inherits this environment
    with _signals_ignored():
        multiprocessing.forkserver.ensure_running()
    return True


def stop_forking() -> None:
    """Stop this process's fork server and reap it (a CLI run's last step): its workers' CPU then counts
    as this process's children's (`time trajcomp ...`), and nothing of the run outlives it. The
    standard library stops it only from its own tests, hence the private call, guarded."""
    server = getattr(multiprocessing.forkserver, "_forkserver", None)
    stop = getattr(server, "_stop", None)
    if stop is not None:
        stop()


@contextmanager
def _signals_ignored():
    """SIGINT and SIGTERM ignored while the fork server starts: it and every worker forked from it ignore
    them from their first instruction (stopping is the main process's); the window lasts the server's exec."""
    try:
        previous = [(sig, signal.signal(sig, signal.SIG_IGN)) for sig in (signal.SIGINT, signal.SIGTERM)]
    except ValueError:  # not the main thread: each worker ignores them as its first step instead
        yield
        return
    try:
        yield
    finally:
        for sig, handler in previous:
            signal.signal(sig, handler)
