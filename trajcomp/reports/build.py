"""A report built from a run's aggregate: the same for every engine, whatever moved the rows."""

from __future__ import annotations

from typing import Any

from ..core.metrics import (
    LENGTH_EDGES,
    RATIO_EDGES,
    RETENTION_EDGES,
    STATUSES,
    Aggregate,
    Outcome,
    bin_counts,
    distribution,
)
from .reading import checked
from .schema import (
    Averages,
    Distribution,
    Histogram,
    HumanTurnsCut,
    Lengths,
    Percentiles,
    Processing,
    Pruning,
    Report,
    Retention,
    Rows,
    Segments,
    Summarization,
    Summary,
    TokenizerInfo,
    Tokens,
    Turns,
    WorstRow,
)


def from_aggregate(
    agg: Aggregate,
    *,
    summarizer: str,
    summarizer_stats: dict[str, Any],
    processing: Processing,
    tokenizer: TokenizerInfo,
    config: dict[str, dict[str, Any]],
) -> Report:
    """The report of a run whose rows were fed to `agg`; the rest is what the engine knows."""
    n, out = agg.rows_written, agg.rows_out  # input rows written, and the output rows they became
    compressed = agg.outcomes[Outcome.COMPRESSED.value]
    rejected = sum(agg.reject_reasons.values())
    return Report(
        summary=Summary(
            total_trajectories=out,
            trajectories_compressed=compressed,
            trajectories_skipped_under_target=agg.outcomes[Outcome.SKIPPED_UNDER_TARGET.value],
            trajectories_still_over_limit=agg.still_over_limit,
            trajectories_failed=agg.outcomes[Outcome.FAILED.value],
            compression_rate=_avg(compressed, out),
            outcomes={o.value: agg.outcomes[o.value] for o in Outcome},
            summaries_by_source=dict(sorted(agg.summary_sources.items())),
        ),
        tokens=tokens(agg),
        turns=Turns(agg.original_turns, agg.compressed_turns, agg.original_turns - agg.compressed_turns),
        averages=Averages(
            _avg(agg.original_tokens, n), _avg(agg.compressed_tokens, out),
            _avg(agg.original_tokens - agg.compressed_tokens, n),
            _avg(agg.original_turns - agg.compressed_turns, compressed),
        ),
        statuses={s: rejected if s == "rejected" else agg.statuses[s] for s in STATUSES},
        summarization=summarization(summarizer, agg.api_calls, agg.errors,
                                    {**summarizer_stats, **checks(agg, summarizer_stats), **bought_over(agg)}),
        processing=processing,
        rows=Rows(agg.rows_read, out, rejected, dict(sorted(agg.reject_reasons.items())), agg.not_sampled,
                  agg.other_shards, n),
        distribution=Distribution(Percentiles(**distribution(agg.before)), Percentiles(**distribution(agg.after))),
        lengths=lengths(agg.before, agg.after),
        compression_ratios=Histogram(list(RATIO_EDGES), list(agg.ratio_counts)),
        identifier_retention=Retention(
            agg.retention_rows,
            round(agg.retention_sum / agg.retention_rows, 4) if agg.retention_rows else None,
            Histogram(list(RETENTION_EDGES), list(agg.retention_counts)),
        ),
        assistant_tokens_kept=Retention(
            agg.assistant_rows,
            round(agg.assistant_sum / agg.assistant_rows, 4) if agg.assistant_rows else None,
            Histogram(list(RETENTION_EDGES), list(agg.assistant_counts)),
        ),
        human_turns_cut=HumanTurnsCut(agg.human_turns_cut, agg.rows_with_human_turns_cut),
        passes=dict(sorted(agg.passes.items(), key=lambda kv: int(kv[0]))),
        pruning=pruning(agg) if (config.get("compression") or {}).get("prune") else None,
        segments=segments(agg) if (config.get("compression") or {}).get("segments") else None,
        worst_rows=[WorstRow(**row) for row in agg.worst_rows()],
        tokenizer=tokenizer,
        config=config,
    )


def tokens(agg: Aggregate) -> Tokens:
    """Tokens in, tokens written (the sum over the output rows), their ratio, and the assistant tokens trained."""
    return Tokens(
        agg.original_tokens, agg.compressed_tokens, agg.original_tokens - agg.compressed_tokens,
        round(agg.compressed_tokens / agg.original_tokens, 4) if agg.original_tokens else 1.0,
        agg.assistant_tokens, agg.assistant_tokens_trained, trained_share(agg),
    )


def summarization(summarizer: str, api_calls: int, errors: int, stats: dict[str, Any]) -> Summarization:
    """The summarization section from the row sums and a summarizer's run_stats()."""
    return checked(Summarization, {"summarizer": summarizer, "api_calls": api_calls, "errors": errors, **stats},
                 "summarization")


def bought_over(agg: Aggregate) -> dict[str, Any]:
    """The summaries bought for rows that stayed over, and their tokens."""
    return {"bought_for_rows_over": {"summaries": agg.over_summaries, "prompt_tokens": agg.over_prompt_tokens,
                                     "completion_tokens": agg.over_completion_tokens}}


def checks(agg: Aggregate, stats: dict[str, Any]) -> dict[str, Any]:
    """The answers failed by check and the rows fallen back, when the summarizer checks answers."""
    if "checks" not in stats and not agg.checks_failed:
        return {}
    return {"answers_failed_checks": dict(sorted(agg.checks_failed.items())),
            "rows_fallen_back_on_checks": agg.rows_fallen_back_on_checks}


def pruning(agg: Aggregate) -> Pruning:
    """The pruning section (summaries_avoided: prune_fit.summary_avoided, row by row)."""
    return Pruning(agg.pruned_rows, agg.pruned_fit_rows, agg.pruned_outputs, agg.deduplicated_outputs,
                   agg.pruned_tokens, agg.summaries_avoided)


def segments(agg: Aggregate) -> Segments:
    """The segments section: rows in and out, input rows by their output rows, summaries, assistant tokens trained."""
    counts = dict(sorted(agg.segment_counts.items(), key=lambda kv: int(kv[0])))
    return Segments(agg.rows_written, agg.rows_out, counts, agg.summaries, agg.assistant_tokens,
                    agg.assistant_tokens_trained, trained_share(agg))


def trained_share(agg: Aggregate) -> float | None:
    """The input's assistant tokens trained: in unmarked assistant turns of rows at or under the target."""
    return round(agg.assistant_tokens_trained / agg.assistant_tokens, 4) if agg.assistant_tokens else None


def lengths(before, after) -> Lengths:
    return Lengths(list(LENGTH_EDGES), bin_counts(before, LENGTH_EDGES), bin_counts(after, LENGTH_EDGES))


def _avg(total: float, count: int) -> float:
    return round(total / count, 2) if count else 0.0


