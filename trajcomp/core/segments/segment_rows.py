"""A replayed row's output rows (core/segments/segments.py): each with its turns marked, its place among the
input row's segments, its own figures (its length against the target, its status, what it trains) and
what its compaction did; and the input row's metrics over them all, kept in each row under `input`."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Sequence

from ..config import CompressionConfig
from ..metrics import Outcome, RowMetrics
from .walk import Replay, Row, Segment


def is_marked(turn: dict[str, Any], fmt, train_field: str) -> bool:
    """A turn the input itself marks as not trained (OpenAI's `"weight": 0`, ShareGPT's `train_field: false`):
    no trainer trains it, so no figure counts it as trained."""
    return turn.get("weight") == 0 if fmt.name == "openai" else turn.get(train_field) is False


def input_marks(native: Sequence[dict[str, Any]], fmt, train_field: str) -> frozenset[int]:
    return frozenset(i for i, turn in enumerate(native) if isinstance(turn, dict) and is_marked(turn, fmt, train_field))


def trained(seg: Segment, roles: Sequence[str], summaries: set[int], marks: frozenset[int] = frozenset()) -> list[int]:
    """The input's assistant turns new in `seg`: the ones it trains (a live summary is no agent's turn, and
    a turn the input marks is trained nowhere)."""
    return [i for i in seg.origins if i >= seg.new_from and roles[i] == "gpt" and i not in summaries and i not in marks]


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
    each row's own metrics (metrics.written), what its compaction did, and the input row's under `input`."""
    n = len(replay.segments)
    out = []
    for k, (seg, own) in enumerate(zip(replay.segments, metrics.written)):
        made = with_lineage(fmt.with_turns(row, marked(seg, fmt, roles, summaries, config.train_field)),
                            config.segment_field, k, n)
        if config.metrics_per_trajectory:
            made["compression_metrics"] = {
                **own.to_dict(), "segments": n, "segment_tokens": seg.tokens, "turns_summarized": seg.summarized,
                "turns_carried": seg.carried, "turns_new": sum(i >= seg.new_from for i in seg.origins),
                "segment_cannot_fit": own.cannot_fit, "input": metrics.to_dict(),
            }
        out.append(made)
    return tuple(out)


@dataclass(frozen=True)
class Walked:
    """What every output row's figures are counted from: the input's roles, its turns' costs and fixed
    overhead, its live summaries and the turns it marks itself, and the target."""

    roles: Sequence[str]
    costs: Sequence[int]
    overhead: int
    summaries: set[int]
    marks: frozenset[int]
    target: int


def own_metrics(seg: Segment, run: RowMetrics | None, w: Walked) -> RowMetrics:
    """One output row's own figures: its length against the target, its status, the assistant tokens new in
    it and those it trains (none when it is over the target: a trainer cuts or drops it). Its original is
    the input's turns up to its last, as they were: the context the live agent would have held uncompacted."""
    over = seg.tokens > w.target
    gpt = sum(w.costs[i] for i in seg.origins if i >= seg.new_from and w.roles[i] == "gpt" and i not in w.summaries)
    fit = 0 if over else sum(w.costs[i] for i in trained(seg, w.roles, w.summaries, w.marks))
    if seg.compacted:
        outcome, region = Outcome.COMPRESSED, (seg.body_from - seg.summarized, seg.body_from)
    else:  # a row cut from the input with no summary of its own
        outcome, region = (Outcome.NOTHING_TO_COMPRESS if over else Outcome.SKIPPED_UNDER_TARGET), None
    run = run or RowMetrics(outcome, 0, 0, 0, 0, w.target)
    return RowMetrics(
        outcome, sum(w.costs[:seg.end]) + w.overhead, seg.tokens, seg.end, len(seg.native), w.target, region,
        run.summarization_api_calls, run.summarization_errors, run.summary_source, run.error, run.passes,
        cannot_fit=over and seg.cannot_fit, identifier_retention=run.identifier_retention,
        human_turns_cut=run.human_turns_cut, assistant_tokens_kept=round(fit / gpt, 4) if gpt else None,
        summary_checks_failed=run.summary_checks_failed, summaries=int(seg.compacted), assistant_tokens=gpt,
        assistant_tokens_trained=fit, bought=run.bought,
    )


def replay_metrics(replay: Replay, w: Walked, total: int) -> RowMetrics:
    """The input row's metrics: its longest segment's length, the passes' costs summed, the assistant
    tokens trained (those of its rows at or under the target), and each output row's own (`written`)."""
    segs, runs = replay.segments, replay.passes
    compacted = iter(runs)
    written = tuple(own_metrics(s, next(compacted) if s.compacted else None, w) for s in segs)
    longest = max(segs, key=lambda s: s.tokens)
    gpt = sum(c for i, c in enumerate(w.costs) if w.roles[i] == "gpt" and i not in w.summaries)
    fit = sum(m.assistant_tokens_trained for m in written)
    checks = tuple(name for m in runs for name in m.summary_checks_failed)
    return RowMetrics(
        Outcome.COMPRESSED if runs else Outcome.NOTHING_TO_COMPRESS, total, longest.tokens, len(w.roles),
        len(longest.native), w.target, None, sum(m.summarization_api_calls for m in runs),
        sum(m.summarization_errors for m in runs), runs[-1].summary_source if runs else None,
        next((m.error for m in runs if m.error), None), passes=sum(m.passes for m in runs),
        cannot_fit=any(s.cannot_fit for s in segs), human_turns_cut=sum(m.human_turns_cut for m in runs),
        assistant_tokens_kept=round(fit / gpt, 4) if gpt else None, summary_checks_failed=checks,
        segments=len(segs), summaries=len(runs), assistant_tokens=gpt, assistant_tokens_trained=fit,
        bought=bought(runs), written=written,
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
