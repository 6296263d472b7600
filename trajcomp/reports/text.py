"""Short human-readable views of a report, an estimate, dataset stats or a comparison of reports."""

from __future__ import annotations

from typing import Any, Sequence

from .comparison import Comparison, Figure
from .numbers import counted, figure_text, number
from .reading import read_report
from .schema import DatasetStats, Report


def render_report(report: Report | dict[str, Any], report_path: str, page_path: str | None = None) -> str:
    """The text report of a compress run (a report with every section: one this trajcomp wrote)."""
    r = report if isinstance(report, Report) else read_report(report)
    s, t, rows, p, d, calls = r.summary, r.tokens, r.rows, r.processing, r.distribution, r.summarization
    unchanged = {k: v for k, v in s.outcomes.items() if k not in ("compressed", "failed") and v}
    sources = s.summaries_by_source
    resumed = p.rows_from_checkpoint  # rows/s counts only the rows this run read
    this_run = f", {number(rows.read - resumed)} of them in this run:" if resumed else " in"
    lines = [
        f"trajcomp: {number(rows.read)} rows read{this_run} {p.duration_seconds:.1f}s ({number(p.rows_per_second)} rows/s)",
        f"  written             {_written(rows)}",
        f"  compressed          {_compressed(r)}"
        # Say so when some summaries are not the chosen summarizer's (the on_failure fallback).
        + (_reasons(sources) if set(sources) - {calls.summarizer} else ""),
        f"  left unchanged      {number(sum(unchanged.values()))}" + _reasons(unchanged),
        f"  failed              {number(s.trajectories_failed)} (no summary could be had: written unchanged, flagged)",
        f"  rejected            {number(rows.rejected)}" + _reasons(rows.reject_reasons),
        f"  still over limit    {number(s.trajectories_still_over_limit)} (of the rows written)"
        + _cannot_fit(r),
        f"  tokens              {number(t.total_original)} in -> {number(t.total_compressed)} written "
        f"(ratio {t.overall_compression_ratio})",
        f"  tokens per row p50  {number(d.before.p50)} -> {number(d.after.p50)}, max {number(d.before.max)} -> {number(d.after.max)}",
        f"  summarizer          {calls.summarizer}: {counted(calls.api_calls, 'API call')}, "
        f"{counted(calls.errors, 'error')}"
        # api_calls is what the summaries took, some maybe in earlier runs; http_requests is this run's.
        + (f", {counted(calls.http_requests, 'HTTP request')} by this run" if calls.http_requests is not None else "")
        + (f", {counted(calls.cache_hits, 'summary')} from the cache" if calls.cache_hits else ""),
        f"  report              {report_path}",
    ]
    retention = r.identifier_retention
    if retention is not None and retention.mean is not None:
        lines.insert(-1, f"  identifiers kept    {retention.mean:.1%} on average (of {counted(retention.rows, 'compressed row')})")
    kept = r.assistant_tokens_kept
    if kept is not None and kept.mean is not None:
        lines.insert(-1, f"  assistant kept      {kept.mean:.1%} of assistant tokens on average (of {counted(kept.rows, 'row')})")
    if calls.checks is not None:
        lines.insert(-1, f"  summary checks      {checks_text(calls)}")
    if r.pruning is not None:
        lines.insert(-1, f"  pruned              {pruning_text(r.pruning)}")
    if t.trained is not None:
        lines.insert(-1, f"  assistant trained   {trained_text(t.trained, t.assistant, t.trained_share)}")
    if r.segments is not None:
        lines[-1:-1] = segments_lines(r.segments)
    cut = r.human_turns_cut
    if cut is not None and cut.turns:
        lines.insert(-1, f"  user turns cut      {number(cut.turns)} too long to carry whole (in {counted(cut.rows, 'row')})")
    batch = calls.batch if calls is not None else None
    if batch is not None:
        lines.insert(-1, f"  batches             {_batches_text(batch)}")
    if page_path is not None:
        lines.append(f"  page                {page_path}")
    not_taken = {k: getattr(rows, k) for k in ("not_sampled", "other_shards") if getattr(rows, k)}
    if not_taken:
        lines.insert(1, f"  not taken           {number(sum(not_taken.values()))}" + _reasons(not_taken))
    if p.rows_from_checkpoint:
        lines.insert(1, f"  resumed             {number(p.rows_from_checkpoint)} rows were done before the interruption")
    return "\n".join(lines + _files_lines(p))


def _files_lines(p) -> list[str]:
    """The run's other files: rejects, summary examples, inputs that were not data, strays."""
    lines = []
    if p.rejects_file:
        lines.append(f"  rejects             {p.rejects_file}")
    if p.summary_examples_file:
        lines.append(f"  summary examples    {p.summary_examples_file}")
    if p.skipped_files:
        lines.append(f"  not data, skipped   {', '.join(p.skipped_files)}")
    if p.stray_files_in_output:  # an earlier run's outputs: training on the folder would take them too
        lines.append(f"  not from this run   {', '.join(p.stray_files_in_output)} (in the output folder)")
    return lines


def pruning_text(pruning) -> str:
    """What compression.prune did, in one line."""
    return (f"{counted(pruning.outputs_pruned, 'tool output')} made stubs ({number(pruning.outputs_deduplicated)} "
            f"older copies) in {counted(pruning.rows_pruned, 'row')}, {number(pruning.tokens_saved)} tokens saved; "
            f"{number(pruning.rows_fit_without_summary)} rows fit with no summary")


def segments_lines(seg) -> list[str]:
    """What compression.segments made of the rows: rows in and out, the segments per row, the summaries."""
    per_row = ", ".join(f"{k}: {v}" for k, v in seg.segments_per_row.items())
    return [f"  segments            {number(seg.rows_in)} rows in -> {number(seg.rows_out)} rows out "
            f"(input rows by segments: {per_row}), {counted(seg.summaries, 'summary', 'summaries')} used"]


def trained_text(trained: int, assistant: int | None, share: float | None) -> str:
    """The assistant tokens trained: in unmarked assistant turns of the rows at or under the target."""
    of = f" of {number(assistant)}" if assistant is not None else ""
    return (f"{number(trained)}{of} assistant tokens" + (f" ({share:.1%})" if share is not None else "")
            + " (unmarked, in rows at or under the target)")


def _written(rows) -> str:
    """The output rows written; with segments, the input rows they came from."""
    inputs = rows.inputs_written
    came = f" (from {counted(inputs, 'input row')})" if inputs is not None and inputs != rows.written else ""
    return f"{counted(rows.written, 'row')}{came}"


def _compressed(r: Report) -> str:
    """The rows a summary or stubs brought to the target: compressed means the row now fits. Rows
    compressed and still over are counted with those still over."""
    fit = (r.statuses or {}).get("compressed", r.summary.trajectories_compressed)
    over = r.summary.trajectories_compressed - fit
    return f"{number(fit)} (now fit" + (f"; {number(over)} more summarized but still over" if over > 0 else "") + ")"


def checks_text(calls) -> str:
    """The answer checks in a few words: off, or the answers each turned away and the rows fallen back."""
    if not calls.checks:
        return "off (summarization.checks: none): answers were not checked"
    failed = calls.answers_failed_checks or {}
    if not failed:
        return f"every answer passed ({', '.join(calls.checks)})"
    fell = calls.rows_fallen_back_on_checks or 0
    return (f"{counted(sum(failed.values()), 'answer')} turned away" + _reasons(failed)
            + f", {counted(fell, 'row')} with no answer passing (on_failure)")


def _cannot_fit(r: Report) -> str:
    cannot = (r.statuses or {}).get("cannot_fit", 0)
    return f", {number(cannot)} of them cannot fit" if cannot else ""


def _batches_text(batch) -> str:
    """What a batch run bought, or that it bought nothing: every summary was in the cache."""
    if not batch.requests:
        return "none submitted: every summary was in the cache (batch import, or an earlier run)"
    return (f"{counted(batch.batches, 'batch', 'batches')} in {counted(batch.rounds, 'round')}: "
            f"{counted(batch.requests, 'request')}, {number(batch.answered)} answered, "
            f"{number(batch.failed)} failed{_reasons(batch.failed_by_reason) if batch.failed else ''}, "
            f"{batch.wait_seconds:,.0f} s waiting")


def _reasons(reasons: dict[str, int]) -> str:
    return " (" + ", ".join(f"{k}: {v}" for k, v in reasons.items()) + ")" if reasons else ""


def render_estimate(est: DatasetStats) -> str:
    b, a = est.tokens_before, est.tokens_after_estimate
    return "\n".join(
        [
            f"trajcomp (dry run): {number(est.rows)} rows, target {number(est.target_max_tokens)} tokens",
            f"  over target             {number(est.over_target)}",
            f"  would fit after         {number(est.would_fit_after_compression)}",
            f"  would stay over target  {number(est.would_stay_over_target)}",
            f"  summarizer calls        {number(est.summarizer_calls_needed)} "
            f"(~{number(est.summary_tokens_needed)} summary tokens)",
            *([f"  rows out (segments)     {number(est.rows_out)}, {counted(est.summaries or 0, 'summary', 'summaries')}"
               " (cut by the run's row core, extractive summaries)"] if est.rows_out is not None else []),
            *([f"  fit by pruning alone    {number(est.pruning.rows_fit_without_summary)} {_pruned_note(est.pruning)}"]
              if est.pruning else []),
            f"  rejected                {number(est.rows_rejected)}" + _reasons(est.reject_reasons),
            f"  tokens min/p50/p90/p99/max  {b.min}/{b.p50}/{b.p90}/{b.p99}/{b.max}"
            f" -> ~{a.min}/{a.p50}/{a.p90}/{a.p99}/{a.max}",
        ]
    )


PERCENTILES = ("min", "p50", "p90", "p99", "max")


def table(rows: list[list[str]], align: str = "", indent: str = "  ") -> list[str]:
    """Rows as lines of aligned columns; `align` gives 'l' or 'r' per column (default: first left, rest right)."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    align = align or "l" + "r" * (len(widths) - 1)
    return [
        (indent + "  ".join(c.ljust(w) if a == "l" else c.rjust(w) for c, w, a in zip(row, widths, align))).rstrip()
        for row in rows
    ]


def render_stats(st: DatasetStats) -> str:
    """`trajcomp stats` as text: the length distribution, what a run would do, the rows of each file."""
    files = st.files
    lines = [
        f"trajcomp stats: {number(st.rows)} rows in {number(len(files))} file{'' if len(files) == 1 else 's'}, "
        f"tokenizer {st.tokenizer.name}",
        f"  target {number(st.target_max_tokens)} tokens per row, summaries of {number(st.summary_target_tokens)} "
        f"tokens, last {st.protect_last_n_turns} turns kept",
        "",
        *table([
            ["tokens per row", *PERCENTILES],
            ["now", *(number(getattr(st.tokens_before, k)) for k in PERCENTILES)],
            ["after (planned)", *(number(getattr(st.tokens_after_estimate, k)) for k in PERCENTILES)],
        ]),
        "",
        *table(_plan_rows(st), align="lrl"),
    ]
    if len(files) > 1:
        rows = [[f.path, number(f.rows), number(f.rejected)] for f in files]
        lines += ["", *table([["file", "rows", "rejected"], *rows])]
    return "\n".join(lines)


def _plan_rows(st: DatasetStats) -> list[list[str]]:
    d = st.decisions
    # Why rows stay over: the planner found no region, or one too small, or even the summary is not enough.
    why = {
        "nothing to compress": d["nothing_to_compress"],
        "no net savings": d["no_net_savings"],
        "still over after summary": st.would_stay_over_target - d["nothing_to_compress"] - d["no_net_savings"],
    }
    pruned = st.pruning
    return [
        ["rows over target", number(st.over_target), ""],
        ["  could be brought under", number(st.would_fit_after_compression), ""],
        *([["  by pruning alone", number(pruned.rows_fit_without_summary), _pruned_note(pruned)]] if pruned else []),
        ["  would stay over", number(st.would_stay_over_target), _reasons({k: v for k, v in why.items() if v}).strip()],
        ["summarizer calls needed", number(st.summarizer_calls_needed), f"(~{number(st.summary_tokens_needed)} summary tokens)"],
        *([["rows out (segments)", number(st.rows_out), f"({counted(st.summaries or 0, 'summary', 'summaries')}, "
            "extractive)"]] if st.rows_out is not None else []),
        ["rejected", number(st.rows_rejected), _reasons(st.reject_reasons).strip()],
    ]


def _pruned_note(pruned) -> str:
    return (f"({counted(pruned.outputs_pruned, 'tool output')} made stubs, {number(pruned.tokens_saved)} tokens saved, "
            f"{counted(pruned.summaries_avoided, 'summary')} avoided)")


def run_letters(n: int) -> list[str]:
    """The letters that name compared runs (A, B, ...): report paths are too long for headers."""
    return [chr(ord("A") + i) if i < 26 else f"R{i + 1}" for i in range(n)]


def render_comparison(comparison: Comparison, figures: Sequence[Figure]) -> str:
    """`trajcomp compare` as text: a row per figure, a column per report, each later one's difference to the first."""
    letters = run_letters(len(comparison.names))
    legend = [f"{letter} = {name}" for letter, name in zip(letters, comparison.names)]
    header = ["", letters[0]]
    for letter in letters[1:]:
        header += [letter, f"{letter}-{letters[0]}", "%"]
    rows = [header]
    for f in figures:
        first, *later = comparison.values[f.key]
        row = [f.label, figure_text(first, f.decimals)]
        for value, diff in zip(later, comparison.differences(f.key)):
            row += [figure_text(value, f.decimals), figure_text(diff["absolute"], f.decimals, "+"), _percent(diff["percent"])]
        rows.append(row)
    return "\n".join(legend + [""] + table(rows, indent=""))


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value:+.1f}%"
