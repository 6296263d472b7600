"""`trajcomp compare`: the key figures of several metrics reports side by side, each against the first."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Union

import typer

from .errors import fail

Number = Union[int, float]


@dataclass(frozen=True)
class Figure:
    key: str  # its name in --json
    label: str  # its name in the text table
    path: tuple[str, ...]  # where it sits in a report
    decimals: int | None = None  # None: a count, shown as an integer


FIGURES = (
    Figure("target_max_tokens", "target max tokens", ("config", "compression", "target_max_tokens")),
    Figure("summary_target_tokens", "summary target tokens", ("config", "compression", "summary_target_tokens")),
    Figure("rows_read", "rows read", ("rows", "read")),
    Figure("rows_written", "rows written", ("rows", "written")),
    Figure("rows_rejected", "rows rejected", ("rows", "rejected")),
    Figure("compressed", "compressed", ("summary", "trajectories_compressed")),
    Figure("skipped_under_target", "skipped under target", ("summary", "trajectories_skipped_under_target")),
    Figure("still_over_limit", "still over limit", ("summary", "trajectories_still_over_limit")),
    Figure("failed", "failed", ("summary", "trajectories_failed")),
    Figure("tokens_before", "tokens before", ("tokens", "total_original")),
    Figure("tokens_after", "tokens after", ("tokens", "total_compressed")),
    Figure("compression_ratio", "overall ratio", ("tokens", "overall_compression_ratio"), 4),
    Figure("p50_tokens_after", "p50 tokens after", ("distribution", "after", "p50")),
    Figure("p99_tokens_after", "p99 tokens after", ("distribution", "after", "p99")),
    Figure("api_calls", "summarizer api calls", ("summarization", "api_calls")),
    Figure("http_requests", "http requests", ("summarization", "http_requests")),
    Figure("cache_hits", "cache hits", ("summarization", "cache_hits")),
    Figure("duration_seconds", "duration (s)", ("processing", "duration_seconds"), 2),
    Figure("rows_per_second", "throughput (rows/s)", ("processing", "rows_per_second"), 2),
)

# Sections every trajcomp report has had since the first version: how a report is told from other JSON.
REQUIRED_SECTIONS = ("summary", "tokens")


class NotAReport(ValueError):
    """The file cannot be read as a trajcomp metrics report; the message names it and says why."""


@dataclass
class Comparison:
    names: list[str]  # short, distinct names of the reports
    paths: list[str]
    values: dict[str, list[Number | None]]  # figure key -> one value per report (None: not in it)

    def differences(self, key: str) -> list[dict[str, Number | None]]:
        """Each later report's value of `key` against the first's: absolute and percent."""
        base, *later = self.values[key]
        return [difference(base, value) for value in later]

    def to_dict(self) -> dict[str, Any]:
        return {
            "reports": self.names,
            "paths": self.paths,
            "figures": self.values,
            "differences": {key: self.differences(key) for key in self.values},
        }


def compare(
    reports: list[Path] = typer.Argument(
        ..., help="Two or more metrics reports written by compress (*_metrics.json).", show_default=False,
        metavar="REPORT...",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the comparison as JSON on stdout."),
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
    Figures: target_max_tokens, summary_target_tokens, rows_read, rows_written, rows_rejected, compressed,
      skipped_under_target, still_over_limit, failed, tokens_before,
      tokens_after, compression_ratio, p50_tokens_after, p99_tokens_after,
      api_calls, http_requests, cache_hits, duration_seconds,
      rows_per_second.
    """
    if len(reports) < 2:
        fail("compare needs at least two reports")
    try:
        comparison = compare_reports(reports)
    except NotAReport as exc:
        fail(str(exc))
    if as_json:
        typer.echo(json.dumps(comparison.to_dict(), indent=2, ensure_ascii=False))
    else:
        from .render import render_comparison

        typer.echo(render_comparison(comparison, FIGURES))


def compare_reports(paths: list[Path]) -> Comparison:
    """Read the reports and pick their figures; NotAReport for a file that is not one."""
    reports = [load_report(path) for path in paths]
    values = {f.key: [figure_value(report, f.path) for report in reports] for f in FIGURES}
    return Comparison(short_names(paths), [str(p) for p in paths], values)


def load_report(path: Path) -> dict[str, Any]:
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as exc:
        raise NotAReport(f"{path}: cannot read it ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise NotAReport(f"{path}: not a trajcomp report (not UTF-8 text)") from None
    try:
        report = json.loads(text)
    except ValueError as exc:
        raise NotAReport(f"{path}: not a trajcomp report (not valid JSON: {exc})") from None
    if not isinstance(report, dict):
        raise NotAReport(f"{path}: not a trajcomp report (a JSON {type(report).__name__}, not an object)")
    if not all(isinstance(report.get(s), dict) for s in REQUIRED_SECTIONS):
        sections = " and ".join(f"'{s}'" for s in REQUIRED_SECTIONS)
        raise NotAReport(f"{path}: not a trajcomp report (no {sections} sections)")
    return report


def figure_value(report: dict[str, Any], path: tuple[str, ...]) -> Number | None:
    """The number at `path`, or None when it is missing or not a finite number."""
    value: Any = report
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value if math.isfinite(value) else None  # NaN would make the --json output invalid JSON


def difference(base: Number | None, value: Number | None) -> dict[str, Number | None]:
    """value - base, and that as a percent of base (None when either is missing or base is 0)."""
    if base is None or value is None:
        return {"absolute": None, "percent": None}
    absolute = value - base
    if isinstance(absolute, float):
        absolute = round(absolute, 4)  # 0.3 - 0.1 should not print as 0.19999999999999998
    if base == 0:
        percent = 0.0 if value == 0 else None
    else:
        percent = round((value - base) / abs(base) * 100, 2)
    return {"absolute": absolute, "percent": percent}


def short_names(paths: list[Path]) -> list[str]:
    """Each path's fewest trailing parts that no other path ends with: 'metrics.json' or 'run1/metrics.json'."""
    parts = [p.resolve().parts for p in paths]
    names = []
    for i, mine in enumerate(parts):
        others = parts[:i] + parts[i + 1:]
        depth = next((d for d in range(1, len(mine) + 1) if all(o[-d:] != mine[-d:] for o in others)), None)
        names.append("/".join(mine[-depth:]) if depth else f"{paths[i].name} ({i + 1})")  # None: the same file twice
    return names
