"""`trajcomp show`: what compression did to some rows of an output, before and after."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Optional

import typer

from ..core.counting.tokenizer_loading import TokenizerLoadError
from ..core.counting.tokens import TokenCounter
from ..formats.base import InputError
from .errors import EXIT_FAILED, fail


def show(
    output: Path = typer.Argument(..., help="A compressed output written by compress (any of its formats), or "
                                  "a folder run's output folder: rows of every output file in it.",
                                  show_default=False, metavar="OUTPUT"),
    inputs: Optional[list[Path]] = typer.Option(
        None, "--input", help="The input file(s) OUTPUT was compressed from, in the order compress read them "
        "(repeat for several): shows the turns each summary replaced. An input that does not match is refused."),
    ids: Optional[list[str]] = typer.Option(None, "--id", help="Rows whose own `id` field is this (repeatable)."),
    rows: Optional[list[int]] = typer.Option(None, "--row", min=1, help="Rows at this 1-based position in OUTPUT (repeatable)."),
    status: Optional[str] = typer.Option(
        None, help="Rows of this status: compressed, still_over_limit (every row over the limit, the worst "
        "first), cannot_fit, failed or under_target. Without --id, --row or --status: any row, those compression "
        "changed first."),
    limit: int = typer.Option(5, min=1, help="At most this many rows by --status or of any status: a sample "
                              "(the worst first for still_over_limit)."),
    seed: int = typer.Option(0, help="Seed of that sample."),
    full: bool = typer.Option(False, "--full", help="Every turn's whole text, not its first lines."),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON list, one object per row (keys below)."),
    html: Optional[Path] = typer.Option(None, "--html", metavar="PAGE",
                                        help="Write the rows as one self-contained HTML page, before and after side by side."),
    tokenizer: Optional[str] = typer.Option(
        None, help="Tokenizer to count with. Default: the run's, named in its report (beside OUTPUT, or a folder "
        "run's compression_metrics.json in a folder above it)."),
) -> None:
    """Show rows of a compressed output: metrics, turns with their tokens, the summary turn, the turns it replaced.

    Colours and a pager on a terminal, plain text otherwise. Output rows are paired with --input rows
    by content, in order (see docs/reports.md), whatever was rejected, sampled or sharded. Without --id,
    --row or --status, the rows compression changed come first (--limit 1: a changed row, when any is).

    JSON keys (--json), one object per row:
      row (1-based position in its file), output (that file: its name, or its path below the
      folder OUTPUT), id (when the rows have one), status,
      tokens_before, tokens_after, summary (the summary turn's text, or null),
      kept [{role, tokens, summary}] (OUTPUT's turns),
      replaced [{role, tokens, value}], stubbed [{turn, tokens, value}] (outputs --prune made stubs) and input (file:line) with --input,
      why (a row still over the limit: {text, target, head_turns, head_tokens,
      tail_turns, tail_tokens, between_tokens, error}; else null).
    """
    from ..reports.show.pairing import PairingError
    from ..reports.show.rows import STATUS_CHOICES, Choice, NotFound, folder_views, views
    from ..reports.show.runs import run_of

    if status is not None and status not in (*STATUS_CHOICES, "still_over"):
        fail(f"--status must be one of {', '.join(STATUS_CHOICES)}, got {status!r}")
    if not output.exists():
        fail(f"no output at {output}")
    outputs = _folder_outputs(output, bool(inputs), bool(rows))
    run = run_of(outputs[0] if outputs else output)
    counter = _counter(tokenizer, run, output)
    choice = Choice(tuple(ids or ()), tuple(rows or ()), "still_over_limit" if status == "still_over" else status,
                    limit, seed)
    try:
        shown = (folder_views(output, outputs, choice, counter, run) if outputs
                 else views(output, list(inputs or []), choice, counter, run))
    except (NotFound, PairingError) as exc:
        fail(str(exc))
    except InputError as exc:
        fail(str(exc), EXIT_FAILED)
    _print(shown, full, as_json, html, output)


def _folder_outputs(output: Path, inputs: bool, rows: bool) -> list[Path]:
    """The output files of a folder run under `output` when it is a folder (not a dataset folder, which
    is one output); [] for a file. A run's report, a folder that holds no output, or a flag that needs
    one file with a folder, fails with what to give."""
    from ..formats import is_dataset_folder
    from ..reports.show.runs import FOLDER_REPORT, folder_outputs, outputs_named

    named = outputs_named(output)
    if named:
        fail(f"{output} is the report of a run, not an output: give one of the {len(named)} outputs it names, "
             f"such as {named[0]}")
    if not output.is_dir() or is_dataset_folder(output):
        return []
    outputs = folder_outputs(output)
    if not outputs:
        fail(f"{output} is a folder, and no {FOLDER_REPORT} of a folder run in it or above it names a file in it: "
             "give an output file")
    needs_one = "--input" if inputs else "--row" if rows else None
    if needs_one:
        fail(f"{needs_one} is for one output file, not a folder: give one of the {len(outputs)} in {output}, "
             f"such as {outputs[0]}")
    return outputs


def _counter(tokenizer: str | None, run, output: Path) -> TokenCounter:
    from ..reports.show.runs import FOLDER_REPORT

    name = tokenizer or (run.config.tokenizer_name if run.report is not None else None)
    if name is None:
        fail(f"no report of the run that wrote {output} was found (beside it, or a folder run's {FOLDER_REPORT} "
             "in a folder above it): give its tokenizer with --tokenizer")
    try:
        return TokenCounter(name, run.config.trust_remote_code)
    except TokenizerLoadError as exc:
        fail(f"{exc} (the tokenizer the run used; another with --tokenizer)")


def _print(shown, full: bool, as_json: bool, html: Path | None, output: Path) -> None:
    if html is not None:
        from ..reports.html.markup import write_page
        from ..reports.show.rows_page import rows_page

        try:
            write_page(html, rows_page(shown, f"rows of {output.name}"))
        except OSError as exc:
            fail(f"cannot write {html}: {exc.strerror or exc}")
        typer.echo(str(html))
    elif as_json:
        typer.echo(json.dumps([v.to_dict() for v in shown], indent=2, ensure_ascii=False))
    else:
        from ..reports.show.row_text import render_rows

        if not sys.stdout.isatty():
            typer.echo(render_rows(shown, full).plain, nl=False)
            return
        from rich.console import Console

        os.environ.setdefault("LESS", "-FRX")  # the pager shows colours, and quits at once when one screen holds all
        console = Console()
        text = render_rows(shown, full, max(40, console.width - 24))  # 24: the turn's number, role and tokens
        with console.pager(styles=True):
            console.print(text)
