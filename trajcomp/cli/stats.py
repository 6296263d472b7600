"""`trajcomp stats`: what a dataset looks like against the token budget, read and planned but never summarized."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer

from ..core.config import ConfigError, load_config
from ..core.counting.tokenizer_loading import TokenizerLoadError
from ..core.counting.tokens import TokenCounter
from ..formats.base import InputError
from . import options as opt
from .errors import EXIT_FAILED, fail

if TYPE_CHECKING:
    from ..engines.flow.paths import FileJob
    from ..reports.schema import DatasetStats, TokenizerInfo

# Heavier modules (estimate -> compressor, summarizers) are imported inside the command, as in commands.py:
# this module is imported on every `trajcomp` invocation.


def stats(
    inputs: list[str] = typer.Argument(
        ..., help="Input files, directories (searched recursively) or quoted globs, as for compress.",
        show_default=False, metavar="INPUT...",
    ),
    config: opt.Config = None,
    tokenizer: opt.Tokenizer = None,
    target_max_tokens: opt.TargetMaxTokens = None,
    summary_target_tokens: opt.SummaryTargetTokens = None,
    protect_last_n: opt.ProtectLastN = None,
    count_mode: Optional[str] = typer.Option(None, help="How a row's length is counted: turns or chat_template (as for compress)."),
    chat_template: opt.ChatTemplate = None,
    prune: opt.Prune = False,
    segments: opt.Segments = False,
    as_json: bool = typer.Option(False, "--json", help="Print the figures as JSON on stdout."),
) -> None:
    """Token lengths of a dataset and what compress would do to it: no summarizer calls, nothing written.

    "After" figures are planned: each region compress would summarize is
    replaced by a summary of exactly --summary-target-tokens tokens.

    JSON keys (--json):
      schema_version, inputs (the files read), tokenizer {name, class_name, vocab_size},
      target_max_tokens, summary_target_tokens, protect_last_n_turns,
      rows (valid rows), rows_rejected, reject_reasons {reason: rows},
      over_target, would_fit_after_compression, would_stay_over_target,
      decisions {skipped_under_target, nothing_to_compress, no_net_savings, compress, cannot_fit},
      summarizer_calls_needed, summary_tokens_needed,
      tokens_before, tokens_after_estimate {min, p50, p90, p99, max},
      lengths {edges, before, after}: rows per token-length bin, now and
        as planned (fixed bins, the same as a compress report's),
      files (one {path, rows, rejected} per input file),
      pruning {rows_pruned, rows_fit_without_summary, outputs_pruned, outputs_deduplicated, tokens_saved,
               summaries_avoided} (--prune: rows are planned after their stubs, as compress does),
      rows_out, summaries (--segments: the rows the run would write and the summaries they would use, cut by
        the run's own row core with extractive summaries, no request made; the after figures and the
        summarizer calls are then those of the output rows).
    """
    try:
        cfg = load_config(
            config, target_max_tokens=target_max_tokens, summary_target_tokens=summary_target_tokens,
            protect_last_n_turns=protect_last_n, tokenizer_name=tokenizer, count_mode=count_mode,
            prune=True if prune else None, segments=True if segments else None,
            chat_template=str(chat_template) if chat_template is not None else None,
        )
        jobs = input_jobs(inputs)
        counter = TokenCounter.for_config(cfg)
    except (ConfigError, TokenizerLoadError) as exc:
        fail(str(exc))
    _print(jobs, counter, cfg, as_json)


def _print(jobs: list[FileJob], counter: TokenCounter, cfg, as_json: bool) -> None:
    """The dataset's figures, as JSON or text; a file that cannot be read fails the command."""
    try:
        result = dataset_stats(jobs, counter, cfg)
    except OSError as exc:
        fail(f"cannot read {exc.filename}: {exc.strerror or exc}")
    except InputError as exc:
        fail(str(exc), EXIT_FAILED)
    if as_json:
        typer.echo(json.dumps(result.to_dict(), indent=2, ensure_ascii=False))
    else:
        from ..reports.text import render_stats

        typer.echo(render_stats(result))


def input_jobs(inputs: list[str]) -> list[FileJob]:
    """The input files, found as `compress` finds them, each once; ConfigError when there are none."""
    from ..engines.flow.paths import FileJob, expand_inputs
    from ..formats import INPUT_SUFFIXES, is_dataset_folder, split_suffix

    jobs, seen = [], set()
    for file, root in expand_inputs(inputs).pairs:
        suffix = split_suffix(file)[1]
        if suffix not in INPUT_SUFFIXES and not is_dataset_folder(file):  # expand_inputs takes a named file whatever its type
            raise ConfigError(f"unsupported input file type '{suffix}' ({file}); supported: {', '.join(INPUT_SUFFIXES)}")
        if file.resolve() not in seen:  # a file named twice (or by a file and its folder) counts once
            seen.add(file.resolve())
            jobs.append(FileJob(file, Path(os.devnull), str(file.relative_to(root))))  # stats writes nothing
    if not jobs:
        raise ConfigError(f"no input files ({', '.join(INPUT_SUFFIXES)}) in {' '.join(inputs)}")
    return jobs


def dataset_stats(jobs: list[FileJob], counter: TokenCounter, cfg) -> DatasetStats:
    """The figures of `trajcomp stats --json` (keys in the command's help)."""
    from ..engines.flow.selection import Selection
    from ..engines.runners.estimate import estimate

    planned = estimate(jobs, Selection(), counter, cfg)
    return planned.to_stats([str(job.input) for job in jobs], tokenizer_info(counter))


def tokenizer_info(counter: TokenCounter) -> TokenizerInfo:
    from ..reports.schema import TokenizerInfo

    return TokenizerInfo(**vars(counter.info))
