"""The command line: a thin layer that turns flags into a config and a run spec."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Optional

import typer
from typer.exceptions import TyperException

from ..core.config import ConfigError
from ..core.counting.tokenizer_loading import TokenizerLoadError
from ..core.counting.tokens import TokenCounter
from ..version import __version__
from . import options as opt
from .errors import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_ROWS_FAILED, EXIT_TERMINATED, EXIT_USAGE, fail
from .flags import config_from_flags

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Compress datasets of agent trajectories so they fit a training context window.",
)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"trajcomp {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                 help="Print the version and exit."),
) -> None:
    """Compress datasets of agent trajectories so they fit a training context window."""


@app.command()
def compress(
    inputs: opt.Inputs,
    output: opt.Output = None,
    config: opt.Config = None,
    target_max_tokens: opt.TargetMaxTokens = None,
    summary_target_tokens: opt.SummaryTargetTokens = None,
    protect_last_n: opt.ProtectLastN = None,
    tokenizer: opt.Tokenizer = None,
    count_mode: opt.CountMode = None,
    chat_template: opt.ChatTemplate = None,
    max_passes: opt.MaxPasses = None,
    prune: opt.Prune = False,
    segments: opt.Segments = False,
    token_rows: opt.TokenRows = False,
    summarizer: opt.Summarizer = None,
    summary_style: opt.SummaryStyle = None,
    summary_tokenizer: opt.SummaryTokenizer = None,
    summary_prefix: opt.SummaryPrefix = None,
    concurrency: opt.Concurrency = None,
    workers: opt.Workers = None,
    max_rows_in_memory: opt.MaxRowsInMemory = None,
    base_url: opt.BaseUrl = None,
    model: opt.Model = None,
    api_key_env: opt.ApiKeyEnv = None,
    request_timeout: opt.RequestTimeout = None,
    trajectory_timeout: opt.TrajectoryTimeout = None,
    max_retries: opt.MaxRetries = None,
    retry_delay: opt.RetryDelay = None,
    on_failure: opt.OnFailure = None,
    cannot_fit: opt.CannotFit = None,
    summary_checks: opt.SummaryChecks = None,
    no_cache: opt.NoCache = False,
    cache_dir: opt.CacheDir = None,
    batch: opt.Batch = False,
    input_format: opt.InputFormat = None,
    observations: opt.Observations = None,
    output_format: opt.OutputFormat = None,
    summary_examples: opt.SummaryExamples = None,
    sample_percent: opt.SamplePercent = 100.0,
    seed: opt.Seed = 0,
    num_shards: opt.NumShards = 1,
    shard_index: opt.ShardIndex = 0,
    limit: opt.Limit = None,
    restart: opt.Restart = False,
    checkpoint_rows: opt.CheckpointRows = 1000,
    dry_run: opt.DryRun = False,
    quiet: opt.Quiet = False,
    as_json: opt.AsJson = False,
    html: opt.Html = False,
    engine: opt.Engine = "local",
    ray_address: opt.RayAddress = None,
    ray_concurrency: opt.RayConcurrency = 2,
) -> None:
    """Compress every row over the token budget; write rows, a metrics report and any rejects.

    An interrupted run (Ctrl-C, kill -9, a crash) resumes when the same command is run again.
    """
    _compress_command(SimpleNamespace(**locals()))


def _compress_command(flags) -> None:
    from ..engines.flow.paths import resolve, with_examples
    from ..engines.flow.selection import Selection
    from ..engines.runners.pipeline import RunOptions
    from ..engines.runners.fork_server import preload_for, start_forking, stop_forking
    from ..engines.runners.workers import worker_count
    from ..engines.storage.remote import is_uri, stage
    from .batch import check_batchable

    try:
        cfg = config_from_flags(flags)
        if flags.shard_index >= flags.num_shards:
            raise ConfigError(f"--shard-index must be below --num-shards ({flags.shard_index} >= {flags.num_shards})")
        shard = (flags.shard_index, flags.num_shards) if flags.num_shards > 1 else None
        selection = Selection(flags.sample_percent, flags.seed, flags.num_shards, flags.shard_index, flags.limit)
        ray = _ray_options(flags.engine, flags.dry_run, flags.ray_address, flags.ray_concurrency)
        if ray is not None and flags.workers is not None:  # not silently ignored
            raise ConfigError("--workers is the local engine's; with --engine ray, --ray-concurrency sets the actors")
        if cfg.batch and not cfg.cache:  # the cache carries the batches' answers to every process
            raise ConfigError("--batch needs the summary cache (not --no-cache)")
        if cfg.batch:
            check_batchable(cfg, "--batch")
        # Inputs in object storage fetched (for Ray actors that may take whole parts through the store,
        # only listed: they fetch them; not with --batch, whose rounds this process plans), an output
        # there given a local place.
        lazy = ray is not None and is_uri(flags.output) and flags.limit is None and not cfg.batch
        staged = stage(flags.inputs, flags.output, lazy)
        layout = staged.localize(resolve(staged.inputs, staged.output, cfg, _dotted(flags.output_format), shard,
                                         staged.listed))
        layout = with_examples(layout, cfg.summary_examples_file)
        options = RunOptions(selection, flags.quiet or flags.as_json, flags.checkpoint_rows, flags.restart)
        if ray is None and not flags.dry_run and worker_count(cfg) > 1:
            start_forking(preload_for(cfg))  # the workers' server imports their row core meanwhile, on another core
        counter = TokenCounter.for_config(cfg)
    except (ConfigError, TokenizerLoadError) as exc:
        fail(str(exc))
    if flags.dry_run:
        _dry_run(layout, options, counter, cfg, flags.quiet, flags.as_json)
        return
    try:
        _compress(layout, options, counter, cfg, flags.quiet, flags.as_json, flags.html, ray, staged)
    finally:
        stop_forking()


def _ray_options(engine: str, dry_run: bool, address: str | None, actors: int):
    """The Ray engine's options, or None for the local engine (a dry run never summarizes: it stays local)."""
    from ..engines.runners.pipeline import RayOptions

    if engine not in ("local", "ray"):
        raise ConfigError(f"--engine must be local or ray, got {engine!r}")
    if engine == "local" or dry_run:
        return None
    try:
        import ray  # noqa: F401
    except ImportError as exc:
        raise ConfigError(f"--engine ray needs Ray: pip install 'trajcomp[ray]' ({exc})") from None
    return RayOptions(address, actors)


def _dotted(suffix: str | None) -> str | None:
    if suffix is None or suffix.startswith("."):
        return suffix
    return "." + suffix


def _dry_run(layout, options, counter, cfg, quiet: bool, as_json: bool) -> None:
    from ..engines.runners.estimate import estimate
    from ..formats.base import InputError
    from ..reports.text import render_estimate
    from .stats import tokenizer_info

    try:
        planned = estimate(layout.files, options.selection, counter, cfg)
    except InputError as exc:
        fail(str(exc), EXIT_FAILED)
    result = planned.to_stats([str(job.input) for job in layout.files], tokenizer_info(counter), with_not_taken=True)
    if as_json:
        typer.echo(json.dumps(result.to_dict(), indent=2))
    elif not quiet:
        typer.echo(render_estimate(result))


def _compress(layout, options, counter, cfg, quiet: bool, as_json: bool, html: bool, ray, staged) -> None:
    from ..core.summary.summarizer import SummaryPending
    from ..engines.parts.failures import SummarizerDown
    from ..engines.parts.manifest import DamagedPart
    from ..engines.runners.pipeline import Runner, build_rows
    from ..engines.runners.workers import WorkerDied
    from ..formats.base import InputError
    from ..summarizers.http import APIError, PreflightError

    try:
        rows = build_rows(cfg, counter, layout, ray, options.quiet)
        result = asyncio.run(_run_until_stopped(Runner(cfg, rows, layout, options)))
    except (ConfigError, TokenizerLoadError) as exc:  # a bad summarization.tokenizer among them
        fail(str(exc))
    except PreflightError as exc:  # checked by the first request the cache could not answer
        fail(staged.named(str(exc)) + _resume_hint(layout), EXIT_FAILED)
    except (InputError, SummarizerDown) as exc:
        fail(staged.named(str(exc)), EXIT_FAILED)
    except APIError as exc:  # the batch endpoint: the batches submitted are recorded, a rerun waits on them
        fail(f"{exc}{_resume_hint(layout)}", EXIT_FAILED)
    except SummaryPending:  # the batches' answers not yet seen by every process: another round will see them
        fail(f"a summary was still to be bought after the batches{_resume_hint(layout)}", EXIT_FAILED)
    except WorkerDied as exc:
        fail(f"{exc}{_resume_hint(layout)}", EXIT_FAILED)
    except DamagedPart as exc:  # a part that fails its check again and again: the work folder's storage
        fail(f"{exc}{_resume_hint(layout)}", EXIT_FAILED)
    except OSError as exc:  # writing: a full disk, a folder that vanished; inputs raise InputError
        where = f" {exc.filename}" if exc.filename else ""
        fail(f"cannot write{where}: {exc.strerror or exc}{_resume_hint(layout)}", EXIT_FAILED)
    except (KeyboardInterrupt, _Terminated) as exc:
        typer.echo(
            f"trajcomp: interrupted; finished parts are kept in {layout.work}. "
            "Run the same command again to resume.", err=True,
        )
        raise typer.Exit(EXIT_TERMINATED if isinstance(exc, _Terminated) else EXIT_INTERRUPTED)
    cached = ": summaries already made come from the cache" if cfg.cache else ""
    rows = (counter, cfg) if html else None
    _finish(result.report, layout, quiet, as_json, rows, f"run the same command again to retry them{cached}", staged)


def _resume_hint(layout) -> str:
    if not layout.work.exists():
        return ""
    return f"; finished parts are kept in {layout.work}: run the same command again to resume"


def _finish(report, layout, quiet: bool, as_json: bool, html, retry: str, staged) -> None:
    """Write the pages if asked (`html`: the run's counter and config), upload what a run into object
    storage wrote, print the report; exit 1 when a whole file was rejected, 3 when some rows' summaries
    could not be had."""
    from ..formats.base import write_json
    from ..reports.text import render_report

    page = layout.report.with_suffix(".html") if html else None
    if staged.output_uri is not None:
        staged.rename(report.processing)
        write_json(layout.report, report.to_dict(), indent=2)
    pages = [page, *_pages(report, layout, page, *html)] if page is not None else []
    try:
        staged.upload([*(job.output for job in layout.files), layout.rejects, layout.report, *pages],
                      stale=(layout.rejects,))
    except OSError as exc:
        fail(f"cannot upload to {staged.output_uri}: {exc}; the run's files are in {layout.report.parent}", EXIT_FAILED)
    if as_json:
        typer.echo(json.dumps(report.to_dict(), indent=2, ensure_ascii=False))
    elif not quiet:
        typer.echo(render_report(report, staged.named(str(layout.report)), page and staged.named(str(page))))
    if report.processing.files_all_rejected:
        fail(f"every row of {', '.join(report.processing.files_all_rejected)} was rejected (is it the right "
             f"file?); the reasons are in {report.processing.rejects_file}", EXIT_FAILED)
    failed = report.summary.trajectories_failed + report.rows.reject_reasons.get("summary_failed", 0)
    if failed:
        fail(f"{failed} rows could not be summarized (see the report); {retry}", EXIT_ROWS_FAILED)


def _pages(report, layout, page: Path, counter, cfg) -> list[Path]:
    """The report's page and, beside it, the page of some of its rows (linked from it); the rows' page
    is left out, with a warning, when its rows cannot be read or paired: the run itself is done."""
    from ..engines.storage.remote import fetched, fetched_output
    from ..formats.base import InputError
    from ..reports.html.markup import write_page
    from ..reports.html.page import report_page
    from ..reports.show.pairing import PairingError
    from ..reports.show.rows import rows_page_path, run_views
    from ..reports.show.rows_page import rows_page
    from ..reports.show.runs import Run

    rows = rows_page_path(layout.report)
    try:  # inputs only listed, outputs Ray actors put straight into object storage: fetched for the page
        with tempfile.TemporaryDirectory(dir=layout.report.parent) as fetched_here:
            files = [([fetched(job).input], fetched_output(job, Path(fetched_here) / str(i)))
                     for i, job in enumerate(layout.files)]
            files = [(inputs, output) for inputs, output in files if output.exists()]
            shown = run_views(files, counter, Run(cfg, report, layout.report))
            write_page(rows, rows_page(shown, f"rows of {', '.join(o.name for _, o in files)}", ROWS_NOTE))
    except (InputError, PairingError, OSError) as exc:
        typer.echo(f"trajcomp: warning: no page of rows: {exc}", err=True)
        rows = None
    write_page(page, report_page(report, rows.name if rows else None))
    return [rows] if rows else []


ROWS_NOTE = ("Up to 20 rows of the run: every failed one, the worst still over the limit and a sample of the "
             "compressed ones. trajcomp show picks others.")


class _Terminated(Exception):
    """SIGTERM arrived (a scheduler, a preempted machine): stop like Ctrl-C."""


async def _run_until_stopped(runner):
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    terminated = []
    loop.add_signal_handler(signal.SIGTERM, lambda: (terminated.append(True), task.cancel()))
    try:
        return await runner.run()
    except asyncio.CancelledError:
        if terminated:
            raise _Terminated() from None
        raise
    finally:
        loop.remove_signal_handler(signal.SIGTERM)


def main(argv: list[str] | None = None) -> None:
    """Console entry point: usage errors become one line on stderr and exit 2."""
    command = typer.main.get_command(app)
    try:
        code = command.main(args=argv, prog_name="trajcomp", standalone_mode=False)
    except TyperException as exc:  # bad flags and arguments (click-style usage errors)
        if exc.format_message():  # empty when `trajcomp` alone printed the help
            typer.echo(f"trajcomp: error: {exc.format_message()}", err=True)
        sys.exit(getattr(exc, "exit_code", EXIT_USAGE))
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        typer.echo("trajcomp: interrupted", err=True)
        sys.exit(EXIT_INTERRUPTED)
    sys.exit(code if isinstance(code, int) else 0)


@app.command("report")
def report_command(
    report: Path = typer.Argument(..., help="A metrics report written by compress (*_metrics.json).",
                                  show_default=False, metavar="REPORT"),
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="The page to write. Default: REPORT with .html."),
) -> None:
    """Write a report as one self-contained HTML page: charts, statuses, summarizer, worst rows, config.

    The page is inline SVG and CSS only (no script, nothing fetched): it opens from disk, offline,
    in light or dark mode. Reports of earlier trajcomp versions load too.
    """
    from ..reports.html.markup import write_page
    from ..reports.html.page import report_page
    from ..reports.reading import load
    from ..reports.show.rows import rows_page_path
    from ..reports.schema import NotAReport

    try:
        loaded = load(report)
    except NotAReport as exc:
        fail(str(exc))
    page = output or report.with_suffix(".html")
    rows = rows_page_path(report)  # compress --html's page of rows: linked when it is there
    link = os.path.relpath(rows, page.resolve().parent) if rows.exists() else None
    try:
        write_page(page, report_page(loaded, link))
    except OSError as exc:
        fail(f"cannot write {page}: {exc.strerror or exc}")
    typer.echo(str(page))


# Commands kept in their own modules; registered here so `python -m trajcomp.cli` has them too.
from .batch import batch_app as _batch_app  # noqa: E402
from .compare import compare as _compare  # noqa: E402
from .show import show as _show  # noqa: E402
from .stats import stats as _stats  # noqa: E402

app.command("stats")(_stats)
app.command("compare")(_compare)
app.add_typer(_batch_app, name="batch")
app.command("show")(_show)

