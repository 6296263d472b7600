"""The figures `compare` puts side by side, read from reports, and their differences to the first."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from .schema import Number, Report


@dataclass(frozen=True)
class Figure:
    key: str  # its name in --json
    label: str  # its name in the text table
    path: tuple[str, ...]  # where it sits in a Report (attributes, then dict keys)
    decimals: int | None = None  # None: a count, shown as an integer
    better: str = ""  # "lower" or "higher" when a change is good or bad; "" when neither


FIGURES = (
    Figure("target_max_tokens", "target max tokens", ("config", "compression", "target_max_tokens")),
    Figure("summary_target_tokens", "summary target tokens", ("config", "compression", "summary_target_tokens")),
    Figure("rows_read", "rows read", ("rows", "read")),
    Figure("rows_in", "rows in (written)", ("rows", "inputs_written")),
    Figure("rows_written", "rows written (out)", ("rows", "written")),
    Figure("rows_rejected", "rows rejected", ("rows", "rejected"), better="lower"),
    Figure("compressed", "compressed (now fit)", ("statuses", "compressed")),
    Figure("skipped_under_target", "skipped under target", ("summary", "trajectories_skipped_under_target")),
    Figure("still_over_limit", "still over limit", ("summary", "trajectories_still_over_limit"), better="lower"),
    Figure("cannot_fit", "cannot fit", ("statuses", "cannot_fit"), better="lower"),
    Figure("failed", "failed", ("summary", "trajectories_failed"), better="lower"),
    Figure("tokens_before", "tokens in", ("tokens", "total_original")),
    Figure("tokens_after", "tokens written", ("tokens", "total_compressed")),
    Figure("tokens_saved", "tokens saved", ("tokens", "total_saved"), better="higher"),
    Figure("compression_ratio", "ratio written / in", ("tokens", "overall_compression_ratio"), 4),
    Figure("assistant_tokens", "assistant tokens", ("tokens", "assistant")),
    Figure("assistant_tokens_trained", "assistant tokens trained", ("tokens", "trained"), better="higher"),
    Figure("trained_share", "assistant tokens trained (share)", ("tokens", "trained_share"), 4, "higher"),
    Figure("p50_tokens_after", "p50 tokens after", ("distribution", "after", "p50")),
    Figure("p99_tokens_after", "p99 tokens after", ("distribution", "after", "p99")),
    Figure("identifier_retention", "identifier retention (mean)", ("identifier_retention", "mean"), 4, "higher"),
    Figure("assistant_tokens_kept", "assistant tokens kept (mean)", ("assistant_tokens_kept", "mean"), 4, "higher"),
    Figure("human_turns_cut", "user turns cut", ("human_turns_cut", "turns"), better="lower"),
    Figure("rows_pruned", "rows pruned", ("pruning", "rows_pruned")),
    Figure("outputs_pruned", "tool outputs pruned", ("pruning", "outputs_pruned")),
    Figure("outputs_deduplicated", "tool outputs deduplicated", ("pruning", "outputs_deduplicated")),
    Figure("pruned_tokens_saved", "tokens saved by pruning", ("pruning", "tokens_saved"), better="higher"),
    Figure("summaries_avoided", "summaries avoided (pruning)", ("pruning", "summaries_avoided"), better="higher"),
    Figure("rows_out", "rows out (segments)", ("segments", "rows_out")),
    Figure("segment_summaries", "summaries used (segments)", ("segments", "summaries")),
    Figure("summary_passes", "summary passes", ("summary_passes",)),
    Figure("api_calls", "summarizer api calls", ("summarization", "api_calls"), better="lower"),
    Figure("http_requests", "http requests", ("summarization", "http_requests")),
    Figure("retries", "retries", ("summarization", "retries"), better="lower"),
    Figure("cache_hits", "cache hits", ("summarization", "cache_hits")),
    Figure("answers_failed_checks", "answers failed checks", ("answers_failed_checks",), better="lower"),
    Figure("rows_fallen_back_on_checks", "rows fallen back (checks)", ("summarization", "rows_fallen_back_on_checks"),
           better="lower"),
    Figure("prompt_tokens", "prompt tokens", ("summarization", "usage", "prompt_tokens")),
    Figure("completion_tokens", "completion tokens", ("summarization", "usage", "completion_tokens")),
    Figure("batches", "batches", ("summarization", "batch", "batches")),
    Figure("batch_rounds", "batch rounds", ("summarization", "batch", "rounds")),
    Figure("batch_requests", "batch requests", ("summarization", "batch", "requests")),
    Figure("batch_failed", "batch requests failed", ("summarization", "batch", "failed"), better="lower"),
    Figure("batch_wait_seconds", "batch wait (s)", ("summarization", "batch", "wait_seconds"), 1),
    Figure("latency_p95_ms", "latency p95 (ms)", ("summarization", "latency_ms", "p95")),
    Figure("duration_seconds", "duration (s)", ("processing", "duration_seconds"), 2),
    Figure("rows_per_second", "throughput (rows/s)", ("processing", "rows_per_second"), 2),
)


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


def comparison(reports: list[Report], names: list[str], paths: list[str]) -> Comparison:
    return Comparison(names, paths, {f.key: [figure_value(r, f.path) for r in reports] for f in FIGURES})


def figure_value(report: Report, path: tuple[str, ...]) -> Number | None:
    """The number at `path`, or None when the report lacks it."""
    value: Any = report
    for key in path:
        value = value.get(key) if isinstance(value, dict) else getattr(value, key, None)
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
