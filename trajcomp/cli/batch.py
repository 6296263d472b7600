"""`trajcomp batch export` and `trajcomp batch import`: batch files for any runner (vLLM's run_batch on a
GPU node, a provider's console), with the summary cache between them and `compress --batch`."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace

import typer

from ..core.config import ConfigError
from ..core.summary.summarizer import summarizer_class
from ..core.counting.tokenizer_loading import TokenizerLoadError
from ..core.counting.tokens import TokenCounter
from ..reports.numbers import counted
from . import options as opt
from .errors import EXIT_FAILED, fail
from .flags import config_from_flags

batch_app = typer.Typer(
    no_args_is_help=True,
    help="Batch files for any runner: export the requests a run needs, import the runner's results into the cache.",
)

NEEDS_CACHE = ("needs --cache-dir (or summarization.cache_dir): the cache that batch import fills "
               "and compress --batch reads")


@batch_app.command("export")
def export(
    inputs: opt.Inputs,
    requests: Path = typer.Option(..., "-o", "--output", help="The batch input file to write (JSON Lines).",
                                  show_default=False),
    config: opt.Config = None,
    cache_dir: opt.BatchCacheDir = None,
    target_max_tokens: opt.TargetMaxTokens = None,
    summary_target_tokens: opt.SummaryTargetTokens = None,
    protect_last_n: opt.ProtectLastN = None,
    tokenizer: opt.Tokenizer = None,
    count_mode: opt.CountMode = None,
    chat_template: opt.ChatTemplate = None,
    max_passes: opt.MaxPasses = None,
    summarizer: opt.Summarizer = None,
    summary_style: opt.SummaryStyle = None,
    summary_tokenizer: opt.SummaryTokenizer = None,
    summary_prefix: opt.SummaryPrefix = None,
    model: opt.Model = None,
    max_retries: opt.MaxRetries = None,
    on_failure: opt.OnFailure = None,
    workers: opt.Workers = None,
    input_format: opt.InputFormat = None,
    observations: opt.Observations = None,
    sample_percent: opt.SamplePercent = 100.0,
    seed: opt.Seed = 0,
    num_shards: opt.NumShards = 1,
    shard_index: opt.ShardIndex = 0,
    limit: opt.Limit = None,
) -> None:
    """Write the summary requests a compress run with these options still needs, as a batch input file.

    One line a request in the OpenAI batch input format (custom_id, method, url, body), which vLLM's
    run-batch reads too. Nothing is written, and it says so, when the cache answers every request.
    The API key is never written.
    """
    from ..engines.flow.paths import resolve
    from ..engines.flow.selection import Selection
    from ..engines.runners.pipeline import build_rows
    from ..engines.summaries.batch_files import export_requests
    from ..formats.base import InputError

    flags = SimpleNamespace(**locals())
    cfg, counter = _setup(flags)
    shard = (shard_index, num_shards) if num_shards > 1 else None
    try:
        layout = resolve(inputs, None, cfg, None, shard)
    except ConfigError as exc:
        fail(str(exc))
    selection = Selection(sample_percent, seed, num_shards, shard_index, limit)
    try:
        rows = build_rows(cfg.replace(batch=True), counter, layout)
        done = asyncio.run(export_requests(rows, cfg, layout, selection, requests))
    except InputError as exc:
        fail(str(exc), EXIT_FAILED)
    if done.requests:
        typer.echo(f"{counted(done.requests, 'request')} written to {done.path}; run them, then: "
                   f"trajcomp batch import RESULTS --cache-dir {cfg.cache_dir}")
    else:
        typer.echo(f"nothing to export: the cache {cfg.cache_dir} answers every request; compress --batch writes the rows")


@batch_app.command("import")
def import_(
    results: list[Path] = typer.Argument(..., help="Batch output files (OpenAI's or vLLM run_batch's JSON Lines).",
                                         show_default=False, metavar="RESULTS..."),
    config: opt.Config = None,
    cache_dir: opt.BatchCacheDir = None,
    summarizer: opt.Summarizer = None,
    summary_prefix: opt.SummaryPrefix = None,
    tokenizer: opt.Tokenizer = None,
) -> None:
    """Take a batch runner's results into the summary cache.

    Usable answers are kept under their request's key (a row's summary checks judge each when a run
    first asks for it); failed ones are recorded, so the next export asks again (and, past
    max_retries, the row gets on_failure). It says how many it took, how many failed and why.
    """
    from ..engines.summaries.batch_files import import_results
    from ..formats.base import InputError

    cfg, counter = _setup(SimpleNamespace(**locals()), needs_tokenizer=False)
    try:
        taken = import_results(cfg, counter, cfg.cache_dir, results)
    except InputError as exc:
        fail(str(exc), EXIT_FAILED)
    line = f"took {counted(taken.answered, 'answer')} into {cfg.cache_dir}"
    if taken.already:
        line += f"; {taken.already} {'was' if taken.already == 1 else 'were'} there already"
    if taken.failed:
        reasons = ", ".join(f"{why} ({n})" for why, n in taken.failed.most_common())
        line += f"; {sum(taken.failed.values())} failed: {reasons}"
    if taken.foreign:
        line += f"; {counted(taken.foreign, 'line')} {'was' if taken.foreign == 1 else 'were'} not trajcomp's results"
    typer.echo(line)


def check_batchable(cfg, what: str) -> None:
    """ConfigError unless the run's summarizer makes requests a batch can carry (a model's, not extractive's)."""
    if not summarizer_class(cfg.summarizer).cacheable:
        raise ConfigError(f"{what}: the {cfg.summarizer} summarizer makes no requests to batch; set --summarizer "
                          "(or summarization.summarizer) to the one the run uses, e.g. openai")


def _setup(flags, needs_tokenizer: bool = True):
    """The config (with its cache folder) and the training tokenizer, or one line and exit 2. Storing
    answers counts nothing: without `needs_tokenizer` the tokenizer is loaded only when one is given."""
    try:
        cfg = config_from_flags(flags)
        if not cfg.cache_dir:
            raise ConfigError(f"batch {NEEDS_CACHE}")
        check_batchable(cfg, "batch")
        return cfg, TokenCounter.for_config(cfg) if needs_tokenizer or cfg.tokenizer_name else None
    except (ConfigError, TokenizerLoadError) as exc:
        fail(str(exc))
