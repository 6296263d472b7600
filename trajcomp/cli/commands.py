"""The command line: a thin layer that turns flags into a config and a run spec."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from pathlib import Path
from typing import Optional

import typer
from typer.exceptions import TyperException

from ..version import __version__
from ..core.config import ConfigError, load_config
from .errors import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_ROWS_FAILED, EXIT_TERMINATED, EXIT_USAGE, fail
from ..core.tokens import TokenCounter, TokenizerLoadError

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
    inputs: list[str] = typer.Argument(
        ..., help="Input files (.jsonl, .jsonl.gz, .jsonl.zst, .json, .parquet), directories (searched "
        "recursively) or quoted globs.", show_default=False, metavar="INPUT...",
    ),
    output: Optional[str] = typer.Option(
        None, "-o", "--output",
        help="Output file (one input file) or directory (a directory or several inputs; mirrors the input tree), "
        "or an object-storage URI (s3://bucket/out.jsonl). "
        "Default: <stem>_compressed.<ext> beside the file, <dir>_compressed/ beside the directory.",
    ),
    config: Optional[Path] = typer.Option(None, "-c", "--config", help="YAML config (see configs/default.yaml)."),
    target_max_tokens: Optional[int] = typer.Option(None, help="Token budget per row.", min=1),
    summary_target_tokens: Optional[int] = typer.Option(None, help="Token budget of the summary turn.", min=1),
    protect_last_n: Optional[int] = typer.Option(None, help="Last turns always kept verbatim.", min=0),
    tokenizer: Optional[str] = typer.Option(None, help="Training tokenizer: Hugging Face name or local folder."),
    count_mode: Optional[str] = typer.Option(
        None, help="How a row's length is counted: turns (sum of turn values) or chat_template (the tokenizer's "
        "chat template rendering, as a trainer sees it)."
    ),
    chat_template: Optional[Path] = typer.Option(None, help="A chat template file to use instead of the tokenizer's."),
    max_passes: Optional[int] = typer.Option(None, help="Summaries per row at most, while it is still over (default 3).", min=1),
    summarizer: Optional[str] = typer.Option(None, help="Summarizer: extractive (offline default) or openai."),
    summary_style: Optional[str] = typer.Option(
        None, help="Summary shape: prose (default) or handoff (Active Task, Goal, Completed Actions, Active State, "
                   "Relevant Files, Critical Context)."),
    summary_tokenizer: Optional[Path] = typer.Option(
        None, help="The summary model's tokenizer folder, if not the training one: the summarizer's input is "
                   "fitted to its context with it."),
    summary_prefix: Optional[str] = typer.Option(
        None, help="Text that opens the summary turn (default '[CONTEXT SUMMARY]:'), e.g. your agent's own."),
    concurrency: Optional[int] = typer.Option(None, help="Summarizer calls in flight at once (default 50).", min=1),
    workers: Optional[int] = typer.Option(
        None, help="Processes compressing rows, each with its own tokenizer and a share of --concurrency; "
                   "0: one per usable core (default 1: this process).", min=0),
    max_rows_in_memory: Optional[int] = typer.Option(
        None, help="Rows held at once, running or done and waiting behind a slower row (default 1000).", min=1
    ),
    base_url: Optional[str] = typer.Option(None, help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1."),
    model: Optional[str] = typer.Option(None, help="Model name the endpoint serves."),
    api_key_env: Optional[str] = typer.Option(
        None, help="Name of the environment variable holding the API key (the key itself is never a flag)."
    ),
    request_timeout: Optional[float] = typer.Option(None, help="Seconds for one HTTP call.", min=0.001),
    trajectory_timeout: Optional[float] = typer.Option(None, help="Seconds for one row's summary, retries included.", min=0.001),
    max_retries: Optional[int] = typer.Option(None, help="Retries after a failed call.", min=0),
    retry_delay: Optional[float] = typer.Option(None, help="Base of the exponential backoff, seconds.", min=0),
    on_failure: Optional[str] = typer.Option(
        None, help="When no summary can be had: keep (row unchanged, flagged), extractive (offline fallback) or reject."
    ),
    no_cache: bool = typer.Option(False, "--no-cache", help="Do not read or write the summary cache."),
    cache_dir: Optional[str] = typer.Option(
        None, help="The summary cache's folder, shared by every process and engine (default: beside the output)."
    ),
    input_format: Optional[str] = typer.Option(None, help="Row schema: auto, sharegpt (conversations) or openai (messages)."),
    output_format: Optional[str] = typer.Option(
        None, help="Output type (.jsonl, .jsonl.gz, .jsonl.zst, .json, .parquet, or hf: a save_to_disk folder); "
        "default: the output's suffix (a dataset folder input: hf)."
    ),
    sample_percent: float = typer.Option(100.0, help="Take a deterministic sample of this percent of rows.", min=0, max=100),
    seed: int = typer.Option(0, help="Seed of the sample."),
    num_shards: int = typer.Option(1, help="Split the rows into this many disjoint shards...", min=1),
    shard_index: int = typer.Option(0, help="...and process this one (0-based).", min=0),
    limit: Optional[int] = typer.Option(None, help="Stop after this many rows taken.", min=0),
    restart: bool = typer.Option(False, "--restart", help="Discard an interrupted run's progress and start over."),
    checkpoint_rows: int = typer.Option(1000, help="Input rows per checkpointed part.", min=1),
    dry_run: bool = typer.Option(False, "--dry-run", help="Read, count and plan only: no summaries, nothing written."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar and no text report."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON on stdout."),
    html: bool = typer.Option(False, "--html", help="Also write the report as an HTML page beside it (<report>.html)."),
    engine: str = typer.Option(
        "local", help="local (this machine) or ray (rows compressed by Ray actors across a cluster; needs trajcomp[ray]); both resume."
    ),
    ray_address: Optional[str] = typer.Option(
        None, help="With --engine ray: the cluster to join (HEAD:6379, or auto); default: a Ray instance of this machine."
    ),
    ray_concurrency: int = typer.Option(2, help="With --engine ray: actors compressing rows, each with its own tokenizer "
                                                "and summarizer session.", min=1),
) -> None:
    """Compress every row over the token budget; write rows, a metrics report and any rejects.

    An interrupted run (Ctrl-C, kill -9, a crash) resumes when the same command is run again.
    """
    from ..engines.paths import resolve
    from ..engines.pipeline import RunOptions
    from ..engines.remote import stage
    from ..engines.selection import Selection

    try:
        cfg = load_config(
            config,
            target_max_tokens=target_max_tokens,
            summary_target_tokens=summary_target_tokens,
            protect_last_n_turns=protect_last_n,
            tokenizer_name=tokenizer,
            count_mode=count_mode,
            chat_template=str(chat_template) if chat_template else None,
            max_passes=max_passes,
            summarizer=summarizer,
            summary_style=summary_style,
            summary_prefix=summary_prefix,
            summary_tokenizer=str(summary_tokenizer) if summary_tokenizer else None,
            max_concurrent_requests=concurrency,
            num_workers=workers,
            max_rows_in_memory=max_rows_in_memory,
            base_url=base_url,
            summarization_model=model,
            api_key_env=api_key_env,
            request_timeout=request_timeout,
            per_trajectory_timeout=trajectory_timeout,
            max_retries=max_retries,
            retry_delay=retry_delay,
            on_failure=on_failure,
            cache=False if no_cache else None,
            cache_dir=cache_dir,
            input_format=input_format,
        )
        if shard_index >= num_shards:
            raise ConfigError(f"--shard-index must be below --num-shards ({shard_index} >= {num_shards})")
        shard = (shard_index, num_shards) if num_shards > 1 else None
        selection = Selection(sample_percent, seed, num_shards, shard_index, limit)
        ray = _ray_options(engine, dry_run, ray_address, ray_concurrency)
        staged = stage(inputs, output)  # inputs in object storage fetched, an output there given a local place
        layout = staged.localize(resolve(staged.inputs, staged.output, cfg, _dotted(output_format), shard))
        options = RunOptions(selection, quiet or as_json, checkpoint_rows, restart)
        counter = TokenCounter.for_config(cfg)
    except (ConfigError, TokenizerLoadError) as exc:
        fail(str(exc))
    if dry_run:
        _dry_run(layout, options, counter, cfg, quiet, as_json)
        return
    _compress(layout, options, counter, cfg, quiet, as_json, html, ray, staged)


def _ray_options(engine: str, dry_run: bool, address: str | None, actors: int):
    """The Ray engine's options, or None for the local engine (a dry run never summarizes: it stays local)."""
    from ..engines.pipeline import RayOptions

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
    from ..engines.estimate import estimate
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
    from ..engines.failures import SummarizerDown
    from ..engines.pipeline import Runner, build_rows
    from ..formats.base import InputError
    from ..summarizers.http import PreflightError
    from ..engines.workers import WorkerDied

    try:
        rows = build_rows(cfg, counter, layout, ray, options.quiet)
        result = asyncio.run(_run_until_stopped(Runner(cfg, rows, layout, options)))
    except (ConfigError, TokenizerLoadError) as exc:  # a bad summarization.tokenizer among them
        fail(str(exc))
    except (PreflightError, InputError, SummarizerDown) as exc:
        fail(staged.named(str(exc)), EXIT_FAILED)
    except WorkerDied as exc:
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
    _finish(result.report, layout, quiet, as_json, html, f"run the same command again to retry them{cached}", staged)


def _resume_hint(layout) -> str:
    if not layout.work.exists():
        return ""
    return f"; finished parts are kept in {layout.work}: run the same command again to resume"


def _finish(report, layout, quiet: bool, as_json: bool, html: bool, retry: str, staged) -> None:
    """Write the page if asked, upload what a run into object storage wrote, print the report; exit 1
    when a whole file was rejected, 3 when some rows' summaries could not be had."""
    from ..formats.base import write_json
    from ..reports.text import render_report

    page = layout.report.with_suffix(".html") if html else None
    if staged.output_uri is not None:
        staged.rename(report.processing)
        write_json(layout.report, report.to_dict(), indent=2)
    if page is not None:
        from ..reports.html import write_page
        from ..reports.page import report_page

        write_page(page, report_page(report))
    try:
        staged.upload([*(job.output for job in layout.files), layout.rejects, layout.report, *([page] if page else [])])
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
    from ..reports.html import write_page
    from ..reports.page import report_page
    from ..reports.reading import load
    from ..reports.schema import NotAReport

    try:
        loaded = load(report)
    except NotAReport as exc:
        fail(str(exc))
    page = output or report.with_suffix(".html")
    try:
        write_page(page, report_page(loaded))
    except OSError as exc:
        fail(f"cannot write {page}: {exc.strerror or exc}")
    typer.echo(str(page))


# Commands kept in their own modules; registered here so `python -m trajcomp.cli` has them too.
from .compare import compare as _compare  # noqa: E402
from .stats import stats as _stats  # noqa: E402

app.command("stats")(_stats)
app.command("compare")(_compare)

