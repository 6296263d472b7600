"""`trajcomp compare`: the key figures of several reports side by side, each against the first."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from ..reports.comparison import FIGURES, Comparison, comparison, difference  # noqa: F401 (difference: API)
from ..reports.reading import load
from ..reports.schema import NotAReport, Report
from .errors import fail


def compare(
    reports: list[Path] = typer.Argument(
        ..., help="Two or more metrics reports written by compress (*_metrics.json).", show_default=False,
        metavar="REPORT...",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the comparison as JSON on stdout."),
    html: Optional[Path] = typer.Option(
        None, "--html", help="Also write the comparison as one self-contained HTML page (charts overlaid).",
    ),
) -> None:
    """Key figures of several compress reports side by side, with each later one's difference to the first.

    A figure a report lacks (an older report; http_requests with the
    extractive summarizer) shows as "-" in the table and null in JSON.

    JSON (--json):
      {"reports": short names, "paths": the files as given,
       "figures": {figure: one value per report},
       "differences": {figure: one {"absolute", "percent"}
                       per report after the first}}
    percent is null when the first report's value is 0 or missing.
    Figures: target_max_tokens, summary_target_tokens, rows_read, rows_in (input rows written), rows_written
      (output rows), rows_rejected, compressed (rows that now fit), skipped_under_target, still_over_limit,
      cannot_fit, failed, tokens_before (in), tokens_after (written: the sum over the output rows), tokens_saved,
      compression_ratio (written / in), assistant_tokens, assistant_tokens_trained, trained_share (unmarked
      assistant turns of rows at or under the target), p50_tokens_after, p99_tokens_after,
      identifier_retention, assistant_tokens_kept, human_turns_cut, rows_pruned, outputs_pruned,
      outputs_deduplicated, pruned_tokens_saved, summaries_avoided (with --prune), rows_out, segment_summaries
      (with --segments), summary_passes, api_calls, http_requests, retries, cache_hits,
      answers_failed_checks, rows_fallen_back_on_checks,
      prompt_tokens, completion_tokens, latency_p95_ms, duration_seconds, rows_per_second.
    """
    if len(reports) < 2:
        fail("compare needs at least two reports")
    try:
        loaded, result = compare_reports(reports)
    except NotAReport as exc:
        fail(str(exc))
    if html is not None:
        from ..reports.html.markup import write_page
        from ..reports.html.page import comparison_page

        try:
            write_page(html, comparison_page(loaded, result))
        except OSError as exc:
            fail(f"cannot write {html}: {exc.strerror or exc}")
    if as_json:
        typer.echo(json.dumps(result.to_dict(), indent=2, ensure_ascii=False))
    else:
        from ..reports.text import render_comparison

        typer.echo(render_comparison(result, FIGURES))


def compare_reports(paths: list[Path]) -> tuple[list[Report], Comparison]:
    """Read the reports and pick their figures; NotAReport for a file that is not one."""
    reports = [load(path) for path in paths]
    return reports, comparison(reports, short_names(paths), [str(p) for p in paths])


def short_names(paths: list[Path]) -> list[str]:
    """Each path's fewest trailing parts that no other path ends with: 'metrics.json' or 'run1/metrics.json'."""
    parts = [p.resolve().parts for p in paths]
    names = []
    for i, mine in enumerate(parts):
        others = parts[:i] + parts[i + 1:]
        depth = next((d for d in range(1, len(mine) + 1) if all(o[-d:] != mine[-d:] for o in others)), None)
        names.append("/".join(mine[-depth:]) if depth else f"{paths[i].name} ({i + 1})")  # None: the same file twice
    return names
