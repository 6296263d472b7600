"""The row core's entry: rows in, results out (an output row or a rejection, with metrics).

Counting, planning, summarizing and assembly happen in the row core and nowhere else; the engines
(engines/runners/pipeline.py for files, engines/runners/hf.py, engines/runners/ray.py) only move rows through `compress_rows`.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any, Sequence

from .dialects import compaction
from .summary.assembly import Assembler
from .config import CompressionConfig
from .planning.fit import Floor, plain_floor
from .dialects.frame import Chat
from .metrics import Outcome, RowMetrics, assistant_share
from .summary.passes import Attempt, Passes, plan_region, unchanged
from .planning.planner import Decision, Plan, PlanParams
from .planning.prune_fit import Pruned, Pruner, summary_avoided, with_pruning
from .row_result import RowResult, SummaryExample  # noqa: F401  (named with the compressor)
from .segments.segment_rows import Walked, bought, input_marks, replay_metrics, segment_rows, with_lineage, with_stubs
from .segments.segments import Segmenter
from .segments.walk import Row
from .dialects.rows import SHAREGPT, RowError, RowSchema, Turn
from .summary.sourcing import Sourcing
from .summary.summarizer import Summarizer, SummarizerUnavailable, SummaryPending
from .counting.bare_texts import bare_counts
from .counting.token_rows import token_row
from .counting.tokens import Measured, TokenCounter, lengths_for

_UNCHANGED = {
    Decision.SKIPPED_UNDER_TARGET: Outcome.SKIPPED_UNDER_TARGET,
    Decision.NOTHING_TO_COMPRESS: Outcome.NOTHING_TO_COMPRESS,
    Decision.NO_NET_SAVINGS: Outcome.NO_NET_SAVINGS,
}


class TrajectoryCompressor:
    """One row at a time: checks it, measures it, plans its region and has `Passes` summarize it;
    returns the output row or why it was rejected."""

    def __init__(
        self,
        config: CompressionConfig,
        counter: TokenCounter | None = None,
        summarizer: Summarizer | None = None,
    ):
        self.config = config
        self.counter = counter or TokenCounter.for_config(config)
        self.lengths = lengths_for(config.count_mode, self.counter)
        self.sourcing = Sourcing(config, self.counter, summarizer)
        self.schema = RowSchema.from_config(config)
        params = plan_params(config, self.lengths)
        self.passes = Passes(config, self.counter, self.lengths, params, self.sourcing, Assembler(config, self.counter))
        self.pruner = Pruner(config, self.lengths, params) if config.prune else None
        self.segmenter = Segmenter(config, self.counter, self.lengths, params, self.sourcing)

    @property
    def summarizer(self) -> Summarizer:
        return self.sourcing.summarizer

    @property
    def fallback(self) -> Summarizer | None:
        return self.sourcing.fallback

    @property
    def params(self) -> PlanParams:
        return self.passes.params

    async def start(self) -> None:
        await self.summarizer.start()

    async def close(self) -> None:
        await self.summarizer.close()

    async def __aenter__(self) -> "TrajectoryCompressor":
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def compress_rows(self, rows: Sequence[Any]) -> list[RowResult]:
        """One result per row, in order; the rows' summaries are made concurrently."""
        return list(await asyncio.gather(*(self.compress_row(row) for row in rows)))

    async def compress_row(self, row: Any) -> RowResult:
        """The output row (input fields kept, turns compressed) or a rejection; the input is never mutated.
        With `output.rows: tokens`, each output row as a token row; a row over the target is rejected."""
        result = await self._compress_row(row)
        if self.config.output_rows != "tokens" or result.rejected:
            return result
        return await asyncio.to_thread(self._as_tokens, result, self.schema.adapter(row))

    def _as_tokens(self, result: RowResult, adapter) -> RowResult:
        cfg, rows = self.config, []
        for k, out in enumerate(result.rows):
            made = token_row(out, adapter, self.counter, cfg.chat_roles, cfg.train_field)
            if len(made["input_ids"]) > cfg.target_max_tokens:  # never written as tokens: a trainer would cut it
                where = f"segment {k}: " if len(result.rows) > 1 else ""
                return RowResult.reject("token_row_over_target", f"{where}{len(made['input_ids'])} tokens, over the "
                                        f"target of {cfg.target_max_tokens}", result.metrics)
            rows.append(made)
        return replace(result, rows=tuple(rows))

    async def _compress_row(self, row: Any) -> RowResult:
        try:
            adapter = self.schema.adapter(row)
            native = adapter.native_turns(row)
        except RowError as exc:
            return RowResult.reject(exc.reason, exc.detail)
        try:
            if self.config.segments:
                return await self._segmented(row, adapter, native)
            turns, metrics, kept = await self._compress_turns(native, adapter)
        except (SummaryPending, SummarizerUnavailable):  # batch mode's wait, or a dead endpoint: the engine's
            raise
        except RowError as exc:  # found while counting (a chat template that cannot render the row)
            return RowResult.reject(exc.reason, exc.detail)
        except Exception as exc:  # one row's surprise must not stop a run of a million: reject it, named
            return RowResult.reject("internal_error", f"{type(exc).__name__}: {exc}")
        return self._one_row(row, adapter, native, turns, metrics, kept=kept)

    def _one_row(self, row, adapter, native, turns, metrics: RowMetrics, segment: str | None = None,
                 kept: Attempt | None = None) -> RowResult:
        """The row with its turns compressed, or why it is rejected; with its lineage field under `segment`,
        and the summary of the pass it `kept` as its one example."""
        rejected = self._rejected(metrics)
        if rejected is not None:
            return rejected
        out = adapter.with_turns(row, turns) if turns is not native else dict(row)
        if segment is not None:
            out = with_lineage(out, segment, 0, 1)
        if self.config.metrics_per_trajectory:
            out["compression_metrics"] = metrics.to_dict()
        examples = () if kept is None else (self.sourcing.example(kept.request, kept.sourced.summary.text, 0),)
        return RowResult((out,), metrics, examples=examples)

    def _rejected(self, metrics: RowMetrics) -> RowResult | None:
        if metrics.cannot_fit_reason is not None and self.config.cannot_fit == "reject":
            return RowResult.reject("cannot_fit", describe(metrics.cannot_fit_reason), metrics)
        if metrics.outcome is Outcome.FAILED and self.config.on_failure == "reject":
            return RowResult.reject("summary_failed", metrics.error or "", metrics)
        if metrics.still_over_limit and not self.config.save_over_limit:
            return RowResult.reject("still_over_limit", f"{metrics.compressed_tokens} tokens", metrics)
        return None

    async def _segmented(self, row, adapter, native) -> RowResult:
        """compression.segments: the row's segments (core/segments/segments.py); a row under the target is one."""
        turns = adapter.turns(native)
        target, field = self.config.target_max_tokens, self.config.segment_field
        measured = await self._measure(native, adapter, turns, costs_above=0)
        if measured.total <= target:
            out, metrics, _ = await self._plain(native, adapter, turns, measured)  # under the target: no summary
            metrics = await self._with_assistant_tokens(self._pruning_said(metrics), native, adapter, turns, measured)
            return self._one_row(row, adapter, native, out, metrics, field)
        walked = Row(native, adapter, turns, measured, self.config.summary_prefix)
        floor = self.segmenter.floor(walked)
        if floor is not None:  # no segment could fit: one row, never cut (kept, rejected or shortened whole)
            out, metrics, kept = await self._whole(native, adapter, turns, measured, floor)
            metrics = await self._with_assistant_tokens(self._pruning_said(metrics), native, adapter, turns, measured)
            return self._one_row(row, adapter, native, out, metrics, field, kept=kept)
        replay = await self.segmenter.replay(walked)
        if replay.failed is not None:  # no summary: the row as it was (summarization.on_failure)
            # a compaction that saved nothing is no failure: the row as it was, as a plain run says it
            saved_nothing = replay.failed.outcome is not Outcome.FAILED
            outcome = Outcome.NO_NET_SAVINGS if saved_nothing else Outcome.FAILED
            failed = replace(unchanged(outcome, turns, measured, target, None, error=replay.failed.error,
                                       cannot_fit=saved_nothing),
                             summarization_api_calls=replay.failed.summarization_api_calls,
                             summarization_errors=replay.failed.summarization_errors,
                             bought=bought([*replay.passes, replay.failed]))
            failed = await self._with_assistant_tokens(self._pruning_said(failed), native, adapter, turns, measured)
            return self._one_row(row, adapter, native, native, failed, field)
        marks = input_marks(native, adapter, self.config.train_field)
        w = Walked(walked.roles, measured.costs, measured.overhead, walked.summaries, marks, target)
        metrics = replay_metrics(replay, w, measured.total)
        if self.pruner is not None:
            metrics = with_stubs(metrics, walked)
        rejected = self._rejected(metrics)
        if rejected is not None:
            return rejected
        rows = segment_rows(row, adapter, walked.roles, walked.summaries, replay, metrics, self.config)
        return RowResult(rows, metrics, examples=tuple(replay.examples))

    async def compress_trajectory(self, turns: list[dict[str, str]]) -> tuple[list[dict[str, str]], RowMetrics]:
        """Compress ShareGPT turns (`[{"from", "value"}, ...]`); the input is never mutated."""
        return await self.compress_turns(turns, SHAREGPT.bind({SHAREGPT.key: turns}, self.schema))

    async def compress_turns(self, native: list[dict[str, Any]], fmt=SHAREGPT) -> tuple[list[dict[str, Any]], RowMetrics]:
        """Compress validated turns of any row format (rows.py, openai_rows.py); the input is never mutated."""
        out, metrics, _ = await self._compress_turns(native, fmt)
        return out, metrics

    async def _compress_turns(self, native, fmt):
        """`compress_turns`, and the pass whose summary the output holds (None: it holds none)."""
        turns = fmt.turns(native)
        measured = await self._measure(native, fmt, turns, costs_above=self.config.target_max_tokens)
        out, metrics, kept = await self._plain(native, fmt, turns, measured)
        return out, await self._with_assistant_tokens(self._pruning_said(metrics), native, fmt, turns, measured), kept

    def _pruning_said(self, metrics: RowMetrics) -> RowMetrics:
        """Pruning on: every row says what it pruned, 0 when nothing."""
        if self.pruner is not None and metrics.pruned_outputs is None:
            return replace(metrics, pruned_outputs=0)
        return metrics

    async def _with_assistant_tokens(self, metrics: RowMetrics, native, fmt, turns: Sequence[Turn],
                                     measured: Measured) -> RowMetrics:
        """The input's assistant tokens (its turns' costs; the texts' own counts when a template's row under
        the target has none, read from its rendering's pieces where they hold them) and those the output trains: its unmarked assistant turns the summary did not
        replace, none in a row over the target (a trainer cuts or drops it); and the one summary it holds."""
        gpt = [i for i, t in enumerate(turns) if t.role == "gpt"]
        if measured.costs:
            costs = dict(zip(gpt, (measured.costs[i] for i in gpt)))
        else:
            # a template's row under the target: the rendering's pieces hold most of the texts' counts
            split = getattr(self.lengths, "split", None)
            counts = await bare_counts(self.counter.acount, split, [turns[i].text for i in gpt], measured.pieces)
            costs = dict(zip(gpt, counts))
        summaries = int(metrics.was_compressed and metrics.passes > 0)
        start, end = metrics.region if summaries and metrics.region else (0, 0)
        marks = input_marks(native, fmt, self.config.train_field)
        trained = 0 if metrics.still_over_limit else sum(
            c for i, c in costs.items() if not start <= i < end and i not in marks)
        return replace(metrics, assistant_tokens=sum(costs.values()), assistant_tokens_trained=trained,
                       summaries=summaries)

    async def _plain(self, native, fmt, turns: list[Turn], measured: Measured):
        """The row compressed without segments, its metrics, and the pass it kept (None: no summary)."""
        target = self.config.target_max_tokens
        if measured.total <= target:
            return native, unchanged(Outcome.SKIPPED_UNDER_TARGET, turns, measured, target, None), None
        floor = plain_floor(turns, measured.costs, measured.overhead, self.params, fmt.alternation,
                            self.config.summary_prefix)
        if floor is not None:  # decided before any summary is asked for
            return await self._whole(native, fmt, turns, measured, floor)
        return await self._shortened(native, fmt, turns, measured)

    async def _whole(self, native, fmt, turns: list[Turn], measured: Measured, floor: Floor):
        """A row no rule can make fit (`floor`), as compression.cannot_fit says: as it was with no request
        (keep, and reject, which `_rejected` then sends away), or stubbed and summarized as far as the
        rules allow (shorten); flagged with the reason either way while it is over."""
        reason = floor.to_dict()
        if self.config.cannot_fit != "shorten":
            p = plan_region(self.params, turns, measured, fmt)
            outcome = _UNCHANGED.get(p.decision, Outcome.CANNOT_FIT)
            return native, replace(unchanged(outcome, turns, measured, self.config.target_max_tokens, None,
                                             cannot_fit=True), cannot_fit_reason=reason), None
        out, metrics, kept = await self._shortened(native, fmt, turns, measured)
        if metrics.still_over_limit:
            metrics = replace(metrics, cannot_fit=True, cannot_fit_reason=reason)
        return out, metrics, kept

    async def _shortened(self, native, fmt, turns: list[Turn], measured: Measured):
        """An over row stubbed (compression.prune) and summarized: the output, its metrics, the pass kept."""
        target = self.config.target_max_tokens
        pruned = await self.pruner.fit(native, fmt, turns, measured) if self.pruner is not None else None
        if pruned is not None:
            out, metrics, kept = await self._summarize_pruned(fmt, turns, measured, pruned)
            return out, with_pruning(metrics, measured, pruned), kept
        p = plan_region(self.params, turns, measured, fmt)
        if p.decision is not Decision.COMPRESS:
            region = (p.start, p.end) if p.decision is Decision.NO_NET_SAVINGS else None
            return native, unchanged(_UNCHANGED[p.decision], turns, measured, target, region, cannot_fit=True), None
        p, previous, covered = updating(turns, p, self.config.summary_prefix)
        return await self.passes.run(native, fmt, turns, measured, p, None, previous, covered)

    async def _summarize_pruned(self, fmt, turns: list[Turn], measured: Measured, pruned: Pruned):
        """A pruned row as it is when it fits, else summarized: the region planned on its stubbed length (the
        stubs cost little, so it reaches no further than without them), the summary written from `turns`."""
        target, now = self.config.target_max_tokens, pruned.measured
        if now.total <= target:
            kept = assistant_share([t.role for t in turns], measured.costs, None)
            n, plain = len(turns), plan_region(self.params, turns, measured, fmt).decision
            return pruned.native, RowMetrics(Outcome.COMPRESSED, now.total, now.total, n, n, target,
                                             assistant_tokens_kept=kept,
                                             summary_avoided=summary_avoided(pruned, target, plain)), None
        p = plan_region(self.params, turns, now, fmt)
        if p.decision is not Decision.COMPRESS:
            region = (p.start, p.end) if p.decision is Decision.NO_NET_SAVINGS else None
            return pruned.native, unchanged(_UNCHANGED[p.decision], turns, now, target, region, cannot_fit=True), None
        return await self.passes.run(pruned.native, fmt, turns, now, p, original=measured)

    async def _measure(self, native, fmt, turns: Sequence[Turn], costs_above: int | None) -> Measured:
        # by turns, only the frame (the row's system and tools) besides the turns' texts
        chat = fmt.chat_messages(native, self.config.chat_roles) if self.lengths.mode == "chat_template" else None
        messages = chat if chat is not None else Chat((), fmt.frame)
        return await self.lengths.ameasure([t.text for t in turns], messages, costs_above)


def describe(reason: dict) -> str:
    """A Floor's dict (a row's cannot_fit_reason) as one line: which turns, and how many tokens over."""
    fixed = reason["tokens"] - reason["turn_tokens"] - reason["summary_tokens"]
    return Floor(tuple(tuple(s) for s in reason["turns"]), reason["turn_tokens"], reason["summary_tokens"], fixed,
                 reason["tokens"] - reason["over_by"]).describe()


def updating(turns: Sequence[Turn], p: Plan, prefix: str) -> tuple[Plan, str | None, int]:
    """A region reaching a live agent's compaction summary (compaction.py), which is no protected turn: the
    region starts there at the latest (after a human turn the summary joins it), and that summary is the
    previous one to update, with the turns it covers; (p, None, 0) in a row with none."""
    t = compaction.latest(turns, 0, p.end, prefix)
    if t is None or t == 0:
        return p, None, 0
    if t < p.start:
        after_human = turns[t - 1].role == "human"
        p = replace(p, start=t, merge_into_prev=after_human, merge_into_next=p.merge_into_next and not after_human)
    return p, compaction.body(turns[t].text, prefix), t - p.start + 1


def plan_params(config: CompressionConfig, lengths) -> PlanParams:
    """The planner's settings. What compressing adds to a row is planned as the summary turn at its
    budget, the template's markers around it and the notice; the passes then measure the real row."""
    added = config.summary_target_tokens + lengths.turn_markup(config.chat_roles["human"])
    if config.add_summary_notice:
        added += lengths.counter.count([config.summary_notice_text])[0]
    return PlanParams.from_config(config, summary_tokens=added)
