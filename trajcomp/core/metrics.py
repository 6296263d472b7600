"""Per-row metrics and their aggregate; the aggregate is always the sum of the rows written: of the
output rows for their lengths, statuses and what they train, of their input rows for what was read and bought."""

from __future__ import annotations

import math
from array import array
from bisect import bisect_right
from collections import Counter
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Sequence


class Outcome(str, Enum):
    COMPRESSED = "compressed"
    SKIPPED_UNDER_TARGET = "skipped_under_target"
    NOTHING_TO_COMPRESS = "nothing_to_compress"  # head and tail leave no middle to summarize
    NO_NET_SAVINGS = "no_net_savings"  # the middle is no bigger than a summary would be
    SUMMARY_TOO_LONG = "summary_too_long"  # the summary would not have made the row shorter
    FAILED = "failed"  # no summary could be had; the row is as it was
    CANNOT_FIT = "cannot_fit"  # no rule could make it fit (core/planning/fit.py): as it was, no summary asked for


@dataclass(frozen=True)
class RowMetrics:
    """What happened to one row; written into the row as `compression_metrics`."""

    outcome: Outcome
    original_tokens: int
    compressed_tokens: int
    original_turns: int
    compressed_turns: int
    target_max_tokens: int
    region: tuple[int, int] | None = None  # [start, end) of the summarized turns
    summarization_api_calls: int = 0
    summarization_errors: int = 0
    summary_source: str | None = None  # the summarizer that wrote the summary
    error: str | None = None
    passes: int = 0  # summaries made for this row (a second pass re-asks or extends the region)
    cannot_fit: bool = False  # over the limit even with all between the protected head and tail summarized
    identifier_retention: float | None = None  # share of the summarized turns' identifiers the summary keeps
    human_turns_cut: int = 0  # the summarized turns' human texts not carried whole into the summary turn
    # The share of the input's assistant (gpt) tokens still in the output as assistant turns,
    # unchanged: what the row still teaches the model to write (None: no assistant tokens).
    assistant_tokens_kept: float | None = None
    # The check each answer turned away failed (summarizers/checks.py), over all the row's passes.
    summary_checks_failed: tuple[str, ...] = ()
    # With compression.prune (None without it): the tool outputs the row holds as stubs, those of them
    # that were older copies of a later output, and the tokens the stubs saved.
    pruned_outputs: int | None = None
    deduplicated_outputs: int = 0
    pruned_tokens: int = 0
    summary_avoided: bool = False  # fit by stubs, summarized without them (the report's count; not in the row)
    # The output rows this input row became (compression.segments; one without), the summaries they
    # used, and the input's assistant tokens: all of them, and those trained (new and unmarked in a row).
    segments: int = 1
    summaries: int = 0
    assistant_tokens: int = 0
    assistant_tokens_trained: int = 0
    # Why no rule could make the row fit (core/planning/fit.py Floor.to_dict: the turns, their tokens, how many
    # over); None when some rule could, or the row fits.
    cannot_fit_reason: dict | None = None
    # The summaries bought for the row (its passes that got one) and the prompt and completion tokens
    # their calls were billed: the report's count of those bought for rows that stayed over.
    bought: tuple[int, int, int] = (0, 0, 0)
    # With segments, each output row's own metrics, in order (its length against the target, its
    # status); () when the input row is written as one row, which these metrics then describe.
    written: tuple["RowMetrics", ...] = ()

    @property
    def output_rows(self) -> tuple["RowMetrics", ...]:
        """The metrics of each row written for this input row: its segments', or its own."""
        return self.written or (self,)

    @property
    def fell_back_on_checks(self) -> bool:
        """Answers failed checks and none was used: the row got summarization.on_failure."""
        return bool(self.summary_checks_failed) and (self.outcome is Outcome.FAILED or self.error is not None)

    @property
    def was_compressed(self) -> bool:
        return self.outcome is Outcome.COMPRESSED

    @property
    def still_over_limit(self) -> bool:
        return self.compressed_tokens > self.target_max_tokens

    @property
    def status(self) -> str:
        """The one status of a written row (a report counts each row in exactly one; see STATUSES)."""
        if self.outcome is Outcome.FAILED:
            return "failed"
        if not self.still_over_limit:
            return "under_target" if self.outcome is Outcome.SKIPPED_UNDER_TARGET else "compressed"
        return "cannot_fit" if self.cannot_fit else "still_over"

    @property
    def tokens_saved(self) -> int:
        return self.original_tokens - self.compressed_tokens

    @property
    def compression_ratio(self) -> float:
        return round(self.compressed_tokens / self.original_tokens, 4) if self.original_tokens else 1.0

    def to_dict(self) -> dict[str, Any]:
        region = None
        if self.region is not None:
            start, end = self.region
            region = {"start_idx": start, "end_idx": end, "turns_count": end - start}
        out = {
            "original_tokens": self.original_tokens,
            "compressed_tokens": self.compressed_tokens,
            "tokens_saved": self.tokens_saved,
            "compression_ratio": self.compression_ratio,
            "original_turns": self.original_turns,
            "compressed_turns": self.compressed_turns,
            "turns_removed": self.original_turns - self.compressed_turns,
            "compression_region": region,
            "was_compressed": self.was_compressed,
            "still_over_limit": self.still_over_limit,
            "skipped_under_target": self.outcome is Outcome.SKIPPED_UNDER_TARGET,
            "outcome": self.outcome.value,
            "summarization_api_calls": self.summarization_api_calls,
            "summarization_errors": self.summarization_errors,
            "summary_source": self.summary_source,
            "error": self.error,
            "passes": self.passes,
            "cannot_fit": self.cannot_fit,
            "identifier_retention": self.identifier_retention,
            "human_turns_cut": self.human_turns_cut,
            "assistant_tokens_kept": self.assistant_tokens_kept,
            "status": self.status,
            # None when the row can fit: a key of every row, as one Arrow type (Parquet, datasets) holds it.
            "cannot_fit_reason": self.cannot_fit_reason,
        }
        if self.summary_checks_failed:  # only then: rows of runs with no failed check keep their bytes
            out["summary_checks_failed"] = list(self.summary_checks_failed)
        if self.pruned_outputs is not None:  # only with compression.prune: rows without it keep their bytes
            out.update(pruned_outputs=self.pruned_outputs, deduplicated_outputs=self.deduplicated_outputs,
                       pruned_tokens=self.pruned_tokens)
        return out


# Every row of a run is in exactly one: the written rows by RowMetrics.status, and the rejected ones.
STATUSES = ("under_target", "compressed", "still_over", "cannot_fit", "failed", "rejected")


def nearest_rank(ordered, p: float):
    """The p-th percentile of sorted values by the nearest-rank method (0 when empty)."""
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)] if len(ordered) else 0


def distribution(values: array) -> dict[str, int]:
    """min, p50, p90, p99, max by the nearest-rank method (zeros when empty)."""
    ordered = sorted(values)
    return {
        "min": ordered[0] if ordered else 0,
        "p50": nearest_rank(ordered, 50),
        "p90": nearest_rank(ordered, 90),
        "p99": nearest_rank(ordered, 99),
        "max": ordered[-1] if ordered else 0,
    }


# Fixed bin edges, the same for every run whatever its target, so that the histograms of two runs overlay.
# Token lengths: 0, then the R10 series (ten geometric steps per decade) from 100 up to 10 million.
_R10 = (100, 125, 160, 200, 250, 315, 400, 500, 630, 800)
LENGTH_EDGES: tuple[int, ...] = (0, *(m * 10**k for k in range(5) for m in _R10), 10**7)
RATIO_EDGES: tuple[float, ...] = tuple(round(i * 0.05, 2) for i in range(21))  # compressed / original tokens
RETENTION_EDGES: tuple[float, ...] = tuple(round(i * 0.1, 1) for i in range(11))  # shares kept (identifiers, assistant tokens)
WORST_ROWS = 20  # the rows most over the limit that a report names


def assistant_share(roles: Sequence[str], costs: Sequence[int], region: tuple[int, int] | None) -> float | None:
    """The share of the gpt turns' tokens outside `region` (kept as they were); None: no gpt tokens."""
    start, end = region or (0, 0)
    total = sum(c for role, c in zip(roles, costs) if role == "gpt")
    kept = total - sum(c for role, c in zip(roles[start:end], costs[start:end]) if role == "gpt")
    return round(kept / total, 4) if total else None


def bin_index(value: float, edges: Sequence[float]) -> int:
    """The bin [edges[i], edges[i+1]) holding value; the last bin also holds everything above it."""
    return min(max(bisect_right(edges, value) - 1, 0), len(edges) - 2)


def bin_counts(values, edges: tuple[float, ...]) -> list[int]:
    counts = [0] * (len(edges) - 1)
    for value in values:
        counts[bin_index(value, edges)] += 1
    return counts


def _worst_key(row: dict[str, Any]) -> tuple:
    return (-row["over_by"], row["source"] or "", row["line"] or 0)


@dataclass
class Aggregate:
    """Running sums over the rows written, plus counts of the rows that were not.

    Any engine builds a report from one (reports/build.py): feed it `add` per written row and
    `add_reject` per rejected row; parts' aggregates combine with `to_state` / `merge`.
    """

    outcomes: Counter = field(default_factory=Counter)
    summary_sources: Counter = field(default_factory=Counter)  # which summarizer wrote the summaries
    statuses: Counter = field(default_factory=Counter)  # of the rows written (RowMetrics.status)
    passes: Counter = field(default_factory=Counter)  # str(passes) -> rows written
    still_over_limit: int = 0
    original_tokens: int = 0
    compressed_tokens: int = 0
    original_turns: int = 0
    compressed_turns: int = 0
    api_calls: int = 0
    errors: int = 0
    retention_rows: int = 0
    retention_sum: float = 0.0
    before: array = field(default_factory=lambda: array("q"))
    after: array = field(default_factory=lambda: array("q"))
    ratio_counts: list = field(default_factory=lambda: [0] * (len(RATIO_EDGES) - 1))  # compressed rows
    retention_counts: list = field(default_factory=lambda: [0] * (len(RETENTION_EDGES) - 1))
    assistant_rows: int = 0  # rows with assistant tokens, and their assistant_tokens_kept
    assistant_sum: float = 0.0
    assistant_counts: list = field(default_factory=lambda: [0] * (len(RETENTION_EDGES) - 1))
    human_turns_cut: int = 0
    rows_with_human_turns_cut: int = 0
    checks_failed: Counter = field(default_factory=Counter)  # check -> answers it turned away
    rows_fallen_back_on_checks: int = 0
    # compression.prune: rows holding stubs, those of them fit with no summary, their stubs, the stubs
    # that were older copies of a later output, and the tokens the stubs saved
    pruned_rows: int = 0
    pruned_fit_rows: int = 0
    summaries_avoided: int = 0
    pruned_outputs: int = 0
    deduplicated_outputs: int = 0
    pruned_tokens: int = 0
    # Rows out (an input row with segments gives several), input rows by their number of output rows
    # (str(n) -> rows), the summaries the output used, and the input's assistant tokens, all and trained.
    rows_out: int = 0
    segment_counts: Counter = field(default_factory=Counter)
    summaries: int = 0
    assistant_tokens: int = 0
    assistant_tokens_trained: int = 0
    # Summaries bought for rows that stayed over the target (written or rejected), and their tokens.
    over_summaries: int = 0
    over_prompt_tokens: int = 0
    over_completion_tokens: int = 0
    worst: list = field(default_factory=list)  # at most WORST_ROWS rows most over the limit, worst first
    reject_reasons: Counter = field(default_factory=Counter)
    not_sampled: int = 0
    other_shards: int = 0

    def add(self, m: RowMetrics, source: str | None = None, line: int | None = None) -> None:
        """An input row written; `source` and `line` (its input file and line) name it among the worst rows.
        What is of the input (its tokens, the summaries bought) counts once; what is of the rows written
        (their lengths, statuses, what they train) counts for each of its output rows (m.output_rows)."""
        self.passes[str(m.passes)] += 1
        if m.summary_source is not None:
            self.summary_sources[m.summary_source] += 1
        self.original_tokens += m.original_tokens
        self.original_turns += m.original_turns
        self.api_calls += m.summarization_api_calls
        self.errors += m.summarization_errors
        self.before.append(m.original_tokens)
        if m.identifier_retention is not None:
            self.retention_rows += 1
            self.retention_sum += m.identifier_retention
            self.retention_counts[bin_index(m.identifier_retention, RETENTION_EDGES)] += 1
        self.human_turns_cut += m.human_turns_cut
        self.rows_with_human_turns_cut += m.human_turns_cut > 0
        for out in m.output_rows:
            self._add_written(out, source, line)
        self._add_segments(m)
        self._add_checks(m)
        self._add_pruning(m)
        self._add_over(m.output_rows)

    def _add_written(self, m: RowMetrics, source: str | None, line: int | None) -> None:
        """One output row, by its own length against the target."""
        self.outcomes[m.outcome.value] += 1
        self.statuses[m.status] += 1
        self.still_over_limit += m.still_over_limit
        self.compressed_tokens += m.compressed_tokens
        self.compressed_turns += m.compressed_turns
        self.after.append(m.compressed_tokens)
        if m.was_compressed:
            self.ratio_counts[bin_index(m.compression_ratio, RATIO_EDGES)] += 1
        if m.assistant_tokens_kept is not None:
            self.assistant_rows += 1
            self.assistant_sum += m.assistant_tokens_kept
            self.assistant_counts[bin_index(m.assistant_tokens_kept, RETENTION_EDGES)] += 1
        self._note_worst(m, m.status, source, line)

    def _add_over(self, rows: Sequence[RowMetrics]) -> None:
        """The summaries bought for those of `rows` still over the target: with segments, each row's own (the one
        it opens with), not its input row's, whose other rows fit."""
        for m in rows:
            if m.still_over_limit:
                self.over_summaries += m.bought[0]
                self.over_prompt_tokens += m.bought[1]
                self.over_completion_tokens += m.bought[2]

    def _add_segments(self, m: RowMetrics) -> None:
        self.rows_out += m.segments
        self.segment_counts[str(m.segments)] += 1
        self.summaries += m.summaries
        self.assistant_tokens += m.assistant_tokens
        self.assistant_tokens_trained += m.assistant_tokens_trained

    def _add_pruning(self, m: RowMetrics) -> None:
        if not m.pruned_outputs:
            return
        self.pruned_rows += 1
        self.pruned_fit_rows += m.passes == 0 and not m.still_over_limit
        self.summaries_avoided += m.summary_avoided
        self.pruned_outputs += m.pruned_outputs
        self.deduplicated_outputs += m.deduplicated_outputs
        self.pruned_tokens += m.pruned_tokens

    def _add_checks(self, m: RowMetrics) -> None:
        self.checks_failed.update(m.summary_checks_failed)
        self.rows_fallen_back_on_checks += m.fell_back_on_checks

    def add_reject(self, reason: str, metrics: RowMetrics | None = None, source: str | None = None,
                   line: int | None = None) -> None:
        """A row sent to the rejects file; summary calls it cost still count."""
        self.reject_reasons[reason] += 1
        if metrics is not None:
            self.api_calls += metrics.summarization_api_calls
            self.errors += metrics.summarization_errors
            self._add_checks(metrics)
            self._add_over((metrics,))
            self._note_worst(metrics, "rejected", source, line)

    def _note_worst(self, m: RowMetrics, status: str, source: str | None, line: int | None) -> None:
        if not m.still_over_limit:
            return
        self.worst.append({
            "source": source, "line": line, "original_tokens": m.original_tokens,
            "compressed_tokens": m.compressed_tokens, "over_by": m.compressed_tokens - m.target_max_tokens,
            "status": status,
        })
        if len(self.worst) >= 2 * WORST_ROWS:  # trimmed in batches: sorting at every row would be slow
            self._trim_worst()

    def _trim_worst(self) -> None:
        self.worst = sorted(self.worst, key=_worst_key)[:WORST_ROWS]

    def to_state(self) -> dict[str, Any]:
        """Everything, as JSON-able data: a part's checkpoint keeps its rows' share of the report."""
        self._trim_worst()
        state = {k: v for k, v in vars(self).items() if not isinstance(v, (array, Counter))}
        state.update({k: dict(v) for k, v in vars(self).items() if isinstance(v, Counter)})
        return {**state, "before": self.before.tolist(), "after": self.after.tolist()}

    def merge(self, state: dict[str, Any]) -> None:
        """Add a state from `to_state` (of another part) into this aggregate."""
        for key, value in state.items():
            current = getattr(self, key)
            if isinstance(current, array):
                current.extend(value)
            elif isinstance(current, Counter):
                current.update(value)
            elif key == "worst":
                self.worst = current + value
                self._trim_worst()
            elif isinstance(current, list):  # bin counts
                self.__dict__[key] = [a + b for a, b in zip(current, value)]
            else:
                setattr(self, key, current + value)

    @property
    def rows_written(self) -> int:
        """Input rows written (as one output row, or with segments as several: rows_out)."""
        return len(self.before)

    @property
    def rows_read(self) -> int:
        return self.rows_written + sum(self.reject_reasons.values()) + self.not_sampled + self.other_shards

    def worst_rows(self) -> list[dict[str, Any]]:
        self._trim_worst()
        return list(self.worst)
