"""What a run would do, without summarizing or writing: read, count, plan (`--dry-run`); with segments, the
rows the run would write, cut by its own row core with offline summaries (preview.py)."""

from __future__ import annotations

from array import array
from collections import Counter
from dataclasses import dataclass, field, replace
from itertools import islice
from typing import TYPE_CHECKING, Iterable, Iterator

from ...core.metrics import distribution
from ...core.planning.fit import plain_floor
from ...core.planning.planner import Decision, Plan, PlanParams, plan
from ...core.planning.prune_fit import Pruned, Pruner, kept_and_saved, summary_avoided
from ...core.dialects.rows import RowError, RowSchema
from ...core.counting.tokens import Measured, TokenCounter, lengths_for
from ...formats import Record, format_for
from ...formats.base import read_checked
from ...reports.build import lengths
from ...reports.schema import DatasetStats, FileRows, Percentiles, Pruning, TokenizerInfo
from ..flow.paths import FileJob
from ..flow.selection import Selection, Taker

if TYPE_CHECKING:
    from .preview import Previewed

BATCH_ROWS = 256  # rows counted per call to the tokenizer
CANNOT_FIT = "cannot_fit"  # the decision for a row no rule can make fit, kept or rejected with no summary


@dataclass
class Estimate:
    params: PlanParams
    summary_target_tokens: int  # the configured budget (params.summary_tokens adds the template's markers and the notice)
    decisions: Counter = field(default_factory=Counter)
    rejects: Counter = field(default_factory=Counter)
    not_taken: Counter = field(default_factory=Counter)
    before: array = field(default_factory=lambda: array("q"))
    after: array = field(default_factory=lambda: array("q"))  # the rows written: none for a rejected row
    fit: int = 0  # rows over the target that would be under it
    files: list[FileRows] = field(default_factory=list)
    pruning: Pruning | None = None  # with compression.prune
    previewed: Previewed | None = None  # with compression.segments: the rows the run would write (preview.py)

    def add(self, total: int, decision: Decision, region_tokens: int, pruned_total: int | None = None) -> str:
        """A row of `total` tokens (`pruned_total` once pruned) and its plan; the decision it is counted under."""
        self.decisions[decision.value] += 1
        self.before.append(total)
        saved = region_tokens - self.params.summary_tokens if decision is Decision.COMPRESS else 0
        self.after.append(after := (total if pruned_total is None else pruned_total) - saved)
        self.fit += total > self.params.target_max_tokens >= after
        return decision.value

    def add_cannot_fit(self, total: int, decision: Decision, rejected: bool) -> str:
        """A row no rule can make fit, as compression.cannot_fit keeps it (as it was) or rejects it: no summary;
        its decision is the plan's unless that was to compress (as the run names its outcome)."""
        counted = CANNOT_FIT if decision is Decision.COMPRESS else decision.value
        self.decisions[counted] += 1
        self.before.append(total)
        if rejected:
            self.rejects[CANNOT_FIT] += 1
        else:
            self.after.append(total)
        return counted

    def decided_cannot_fit(self, planned: str) -> None:
        """A row planned `planned` that the segments' row core found cannot fit: counted as the run decides it."""
        self.decisions[planned] -= 1
        self.decisions[CANNOT_FIT] += 1

    def add_pruned(self, measured: Measured, pruned: Pruned, before: Plan, after: Plan) -> None:
        """A pruned row: its stubs outside the region still planned (`after`), and whether a summary was avoided."""
        region = range(after.start, after.end) if after.decision is Decision.COMPRESS else range(0)
        kept, saved = kept_and_saved(measured, pruned, region)
        p = self.pruning
        p.rows_pruned += bool(kept)
        p.rows_fit_without_summary += pruned.measured.total <= self.params.target_max_tokens
        p.outputs_pruned += len(kept)
        p.outputs_deduplicated += sum(c.duplicate for c in kept)
        p.tokens_saved += saved
        p.summaries_avoided += summary_avoided(pruned, self.params.target_max_tokens, before.decision)

    def to_stats(self, inputs: list[str], tokenizer: TokenizerInfo, with_not_taken: bool = False) -> DatasetStats:
        """The figures as a DatasetStats; `with_not_taken` adds the rows a sample or shard left out (--dry-run)."""
        p, seen = self.params, self.previewed
        calls = self.decisions[Decision.COMPRESS.value] if seen is None else seen.summaries  # a request each, at least
        after = self.after if seen is None else array("q", seen.after)  # with segments: the output rows'
        return DatasetStats(
            inputs=inputs,
            tokenizer=tokenizer,
            target_max_tokens=p.target_max_tokens,
            summary_target_tokens=self.summary_target_tokens,
            protect_last_n_turns=p.protect_last_n_turns,
            rows=len(self.before),
            rows_rejected=sum(self.rejects.values()) + (sum(seen.rejects.values()) if seen else 0),
            reject_reasons=dict(sorted((self.rejects + Counter(seen.rejects if seen else {})).items())),
            rows_not_sampled=self.not_taken["not_sampled"] if with_not_taken else None,
            rows_other_shards=self.not_taken["other_shards"] if with_not_taken else None,
            over_target=sum(1 for t in self.before if t > p.target_max_tokens),
            would_fit_after_compression=self.fit if seen is None else seen.fit,
            would_stay_over_target=sum(1 for a in after if a > p.target_max_tokens),
            decisions={d: self.decisions[d] for d in [*(d.value for d in Decision), CANNOT_FIT]},
            summarizer_calls_needed=calls,
            summary_tokens_needed=calls * self.summary_target_tokens,
            tokens_before=Percentiles(**distribution(self.before)),
            tokens_after_estimate=Percentiles(**distribution(after)),
            lengths=lengths(self.before, after),
            files=list(self.files),
            pruning=self.pruning,
            rows_out=seen.rows_out if seen else None,
            summaries=seen.summaries if seen else None,
        )


def estimate(files: Iterable[FileJob], selection: Selection, counter: TokenCounter, cfg) -> Estimate:
    """Plan every selected row, counted as `compression.count_mode` says; the after-figures assume
    summaries of exactly the target size."""
    from ...core.compressor import plan_params  # the run's own planning: the estimate plans as compress does
    from .preview import Previewed, Previewer

    lengths = lengths_for(cfg.count_mode, counter)
    params, schema = plan_params(cfg, lengths), RowSchema.from_config(cfg)
    pruner = Pruner(cfg, lengths, params) if cfg.prune else None  # the run's own pruning, too
    result = Estimate(params, cfg.summary_target_tokens, pruning=Pruning() if cfg.prune else None)
    previewer = Previewer(cfg, counter) if cfg.segments else None
    if previewer is not None:
        result.previewed = Previewed()
    # with segments, the previewer's own row core decides the rows that cannot fit (and rejects them)
    whole = None if previewer is not None or cfg.cannot_fit == "shorten" else cfg
    for chunk in _chunks(_valid_rows(files, selection, result, schema), BATCH_ROWS):
        measures = _measures(chunk, lengths, cfg)
        planned = [_plan_row(result, pruner, row, measured, whole) for row, measured in zip(chunk, measures)]
        if previewer is not None:  # the rows the run would write, cut by its own row core, which decides cannot_fit
            cannot = previewer.add(result.previewed, [row for *_, row in chunk])
            for decision in (d for d, no in zip(planned, cannot) if no):
                result.decided_cannot_fit(decision)
    return result


def _plan_row(result: Estimate, pruner: Pruner | None, row: tuple, measured: Measured, whole=None) -> str:
    """The row planned as compress would plan it: after its stubs, with compression.prune; a row no rule can
    make fit decided first, as the run decides it (`whole`: the config, when compression.cannot_fit keeps or
    rejects such a row). The decision it was counted under."""
    turns, adapter, native, _ = row
    roles, params = [t.role for t in turns], replace(result.params, alternation=adapter.alternation)
    p = _plan(roles, measured, params)
    if whole is not None and _cannot_fit(turns, adapter, measured, result.params, whole):
        return result.add_cannot_fit(p.total_tokens, p.decision, rejected=whole.cannot_fit == "reject")
    pruned = None
    if pruner is not None and p.decision is not Decision.SKIPPED_UNDER_TARGET:
        pruned = pruner.fit_here(native, adapter, turns, measured)
    if pruned is None:
        return result.add(p.total_tokens, p.decision, p.region_tokens)
    now = _plan(roles, pruned.measured, params)
    result.add_pruned(measured, pruned, p, now)
    return result.add(p.total_tokens, now.decision, now.region_tokens, now.total_tokens)


def _cannot_fit(turns, adapter, measured: Measured, params: PlanParams, cfg) -> bool:
    """Whether the run's plain floor (core/planning/fit.py) is over the target, as compress decides it."""
    if measured.costs is None or measured.total <= params.target_max_tokens:
        return False
    return plain_floor(turns, measured.costs, measured.overhead, params, adapter.alternation,
                       cfg.summary_prefix) is not None


def _plan(roles: list[str], measured: Measured, params: PlanParams) -> Plan:
    if measured.costs is None:  # a rendering under the target: no per-turn costs, none needed
        return plan(roles, [], params, fixed=measured.total)
    return plan(roles, measured.costs, params, fixed=measured.overhead)


def _measures(chunk: list[tuple], lengths, cfg) -> Iterator[Measured]:
    """Each row's length and per-turn costs: turns counted in one batch for the whole chunk, or each
    rendering by the chat template (split into turns only when over the target)."""
    if lengths.mode == "turns":  # each row's turns, then its frame's texts (its fixed overhead)
        texts = [text for turns, adapter, *_ in chunk for text in [t.text for t in turns] + adapter.frame.texts()]
        counts = iter(lengths.counter.count(texts))
        for turns, adapter, *_ in chunk:
            costs = list(islice(counts, len(turns)))
            fixed = sum(islice(counts, len(adapter.frame.texts())))
            yield Measured(sum(costs) + fixed, costs, fixed)
        return
    for turns, adapter, native, _ in chunk:
        yield lengths.measure((), adapter.chat_messages(native, cfg.chat_roles), cfg.target_max_tokens)


def _valid_rows(files: Iterable[FileJob], selection: Selection, result: Estimate, schema: RowSchema) -> Iterator[tuple]:
    taker = Taker(selection)
    for job in files:
        file_rows = FileRows(str(job.input))
        result.files.append(file_rows)
        for record, verdict in taker.select(job.key, read_checked(format_for(job.input), job.input)):
            if verdict is not None:
                result.not_taken[verdict] += 1
                continue
            try:
                row = _turns(record, schema)
            except RowError as exc:
                result.rejects[exc.reason] += 1
                file_rows.rejected += 1
                continue
            file_rows.rows += 1
            yield row


def _turns(record: Record, schema: RowSchema) -> tuple[list, object, list, dict]:
    """The row's turns, its adapter (role names, alternation), its validated turn objects, and the row."""
    if record.error is not None:
        raise record.error
    adapter = schema.adapter(record.row)
    native = adapter.native_turns(record.row)
    return adapter.turns(native), adapter, native, record.row


def _chunks(items: Iterable, size: int) -> Iterator[list]:
    iterator = iter(items)
    while chunk := list(islice(iterator, size)):
        yield chunk
