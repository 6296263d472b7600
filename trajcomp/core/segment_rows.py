"""A replayed row's output rows (core/segments.py): each with its turns marked, its place among the
input row's segments, and what its compaction did; and the input row's metrics over them all."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Sequence

from .config import CompressionConfig
from .metrics import Outcome, RowMetrics
from .segments import Replay, Row, Segment


def trained(seg: Segment, roles: Sequence[str], summaries: set[int]) -> list[int]:
    """The input's assistant turns new in `seg`: the ones it trains (a live summary is no agent's turn)."""
    return [i for i in seg.origins if i >= seg.new_from and roles[i] == "gpt" and i not in summaries]


def marked(seg: Segment, fmt, roles: Sequence[str], summaries: set[int], train_field: str) -> list[dict[str, Any]]:
    """`seg`'s turns, every assistant turn it does not train marked so: OpenAI's `"weight": 0`, a ShareGPT
    turn's `train_field: false`; trained turns carry no mark."""
    new = set(trained(seg, roles, summaries))
    out = []
    for turn, i in zip(seg.native, seg.origins):
        if i >= 0 and roles[i] == "gpt" and i not in new:
            turn = {**turn, "weight": 0} if fmt.name == "openai" else {**turn, train_field: False}
        out.append(turn)
    return out


def with_lineage(row: dict[str, Any], field: str, index: int, count: int) -> dict[str, Any]:
    return {**row, field: {"index": index, "count": count}}


def segment_rows(row: dict[str, Any], fmt, roles: Sequence[str], summaries: set[int], replay: Replay,
                 metrics: RowMetrics, config: CompressionConfig) -> tuple[dict[str, Any], ...]:
    """The output rows, in order: the input's other fields kept, lineage added, and (metrics.per_trajectory)
    the row's metrics with what this segment's compaction did."""
    n = len(replay.segments)
    out = []
    for k, seg in enumerate(replay.segments):
        made = with_lineage(fmt.with_turns(row, marked(seg, fmt, roles, summaries, config.train_field)),
                            config.segment_field, k, n)
        if config.metrics_per_trajectory:
            made["compression_metrics"] = {
                **metrics.to_dict(), "segments": n, "segment_tokens": seg.tokens, "turns_summarized": seg.summarized,
                "turns_carried": seg.carried, "turns_new": sum(i >= seg.new_from for i in seg.origins),
                "segment_cannot_fit": seg.cannot_fit,
            }
        out.append(made)
    return tuple(out)


def replay_metrics(replay: Replay, roles: Sequence[str], costs: Sequence[int], summaries: set[int],
                   total: int, target: int) -> RowMetrics:
    """The input row's metrics: its longest segment's length, the passes' costs summed, the assistant
    tokens trained (those of segments that fit)."""
    segs, runs = replay.segments, replay.passes
    longest = max(segs, key=lambda s: s.tokens)
    gpt = sum(c for i, c in enumerate(costs) if roles[i] == "gpt" and i not in summaries)
    fit = sum(costs[i] for s in segs if not s.cannot_fit for i in trained(s, roles, summaries))
    checks = tuple(name for m in runs for name in m.summary_checks_failed)
    return RowMetrics(
        Outcome.COMPRESSED if runs else Outcome.NOTHING_TO_COMPRESS, total, longest.tokens, len(roles),
        len(longest.native), target, None, sum(m.summarization_api_calls for m in runs),
        sum(m.summarization_errors for m in runs), runs[-1].summary_source if runs else None,
        next((m.error for m in runs if m.error), None), passes=sum(m.passes for m in runs),
        cannot_fit=any(s.cannot_fit for s in segs), human_turns_cut=sum(m.human_turns_cut for m in runs),
        assistant_tokens_kept=round(fit / gpt, 4) if gpt else None, summary_checks_failed=checks,
        segments=len(segs), summaries=len(runs), assistant_tokens=gpt, assistant_tokens_trained=fit,
        bought=bought(runs),
    )


def bought(runs: Sequence[RowMetrics]) -> tuple[int, int, int]:
    """The summaries the compactions bought and their tokens, summed."""
    return tuple(sum(m.bought[k] for m in runs) for k in range(3))


def with_stubs(metrics: RowMetrics, row: Row) -> RowMetrics:
    """`metrics` with the stubs the row's segments hold (compression.prune), each counted once however many
    rows carry it, and the tokens they saved, counted from the input."""
    closing = {i: c for i, (c, _) in row.closing.items() if i not in row.stubs}  # stubbed in one row only
    saved = sum(row.measured.costs[i] - row.costs[i] for i in row.stubs) + sum(row.closing[i][1] for i in closing)
    stubs = [*row.stubs.values(), *closing.values()]
    return replace(metrics, pruned_outputs=len(stubs), pruned_tokens=saved,
                   deduplicated_outputs=sum(c.duplicate for c in stubs))
