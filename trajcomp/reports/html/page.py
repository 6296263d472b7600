"""A report, or several side by side, as one self-contained HTML page: inline SVG and CSS, no script.

Reads the report schema only (and the figures compared); the charts are figures.py's, the scaffolding markup.py's.
"""

from __future__ import annotations

from html import escape
from typing import Any, Sequence

from ..comparison import FIGURES, Comparison
from .figures import assistant_figure, lengths_figure, ratio_figure, retention_figure, status_figure
from .markup import cell_html, document, missing_html, table_html
from ..numbers import figure_text, number
from ..schema import Report
from ..text import run_letters


def report_page(r: Report, rows_page: str | None = None) -> str:
    """The report's page; `rows_page`: the page of the run's rows beside it, linked from the header."""
    name = _run_name(r)
    target = r.target_max_tokens
    rows = (f'<p class=sub><a id=rows-link href="{escape(rows_page)}">Rows before and after compression</a></p>'
            if rows_page else "")
    body = [f"<header><h1>trajcomp report</h1><p class=sub>{escape(name)}</p>{rows}</header>", _key_figures(r)]
    body.append(lengths_figure([r], ["run"], target))
    if r.compression_ratios is not None:
        body.append(ratio_figure([r], ["run"]))
    if r.statuses is not None:
        body.append(status_figure([r], ["run"]))
    if r.identifier_retention is not None and r.identifier_retention.rows:
        body.append(retention_figure([r], ["run"]))
    if r.assistant_tokens_kept is not None and r.assistant_tokens_kept.rows:
        body.append(assistant_figure([r], ["run"]))
    body += [_summarizer_section([r], ["run"]), _passes_section([r], ["run"]), _worst_section(r), _config_section(r)]
    return document(f"trajcomp report: {name}", body)


def _run_name(r: Report) -> str:
    outputs = r.processing.outputs if r.processing else []
    when = f" ({r.processing.started_at})" if r.processing and r.processing.started_at else ""
    return (", ".join(outputs[:3]) + (f" and {len(outputs) - 3} more" if len(outputs) > 3 else "") or "a run") + when


def _key_figures(r: Report) -> str:
    statuses = r.statuses or {}
    items = [
        ("rows read", number(r.rows.read) if r.rows else "-"),
        ("rows in → out", _rows_in_out(r)),
        ("compressed (now fit)", number(statuses.get("compressed", r.summary.trajectories_compressed))),
        ("still over the limit", number(r.summary.trajectories_still_over_limit)),
        ("cannot fit", number(statuses["cannot_fit"]) if "cannot_fit" in statuses else "-"),
        ("failed", number(r.summary.trajectories_failed)),
        ("rejected", number(r.rows.rejected) if r.rows else "-"),
        ("tokens in → written", f"{number(r.tokens.total_original)} → {number(r.tokens.total_compressed)}"),
        ("ratio written / in", f"{r.tokens.overall_compression_ratio:.4f}"),
        ("target", number(r.target_max_tokens) if r.target_max_tokens is not None else "-"),
        ("summarizer calls", number(r.summarization.api_calls) if r.summarization else "-"),
    ]
    for label, share in (("identifier retention", r.identifier_retention),
                         ("assistant tokens kept", r.assistant_tokens_kept)):
        if share is not None and share.mean is not None:
            items.append((label, f"{share.mean:.1%}"))
    if r.tokens.trained is not None:
        share = f" ({r.tokens.trained_share:.1%})" if r.tokens.trained_share is not None else ""
        items.append(("assistant tokens trained", f"{number(r.tokens.trained)} of {number(r.tokens.assistant or 0)}{share}"))
    if r.human_turns_cut is not None:
        items.append(("user turns cut", number(r.human_turns_cut.turns)))
    if r.pruning is not None:
        items += [("tool outputs pruned", number(r.pruning.outputs_pruned)),
                  ("rows fit with no summary", number(r.pruning.rows_fit_without_summary)),
                  ("tokens saved by pruning", number(r.pruning.tokens_saved))]
    if r.segments is not None:
        items += _segment_figures(r.segments)
    cells = "".join(f"<div><dt>{escape(k)}</dt><dd>{escape(v)}</dd></div>" for k, v in items)
    return f'<section aria-label="key figures"><dl class=figures>{cells}</dl></section>'


def _rows_in_out(r: Report) -> str:
    """Input rows written → output rows (several per input row with segments)."""
    if r.rows is None:
        return "-"
    inputs = r.rows.inputs_written if r.rows.inputs_written is not None else r.rows.written
    return f"{number(inputs)} → {number(r.rows.written)}"


def _segment_figures(seg) -> list[tuple[str, str]]:
    """compression.segments' figures: input rows by segments, the summaries they used."""
    per_row = ", ".join(f"{k}: {v}" for k, v in seg.segments_per_row.items())
    return [("input rows by segments", per_row or "-"), ("summaries used", number(seg.summaries))]


def _summarizer_section(reports: Sequence[Report], names: Sequence[str]) -> str:
    def row(label: str, get) -> list[str]:
        return [label, *(cell_html(get(r.summarization)) if r.summarization else "-" for r in reports)]

    rows = [
        ["summarizer", *(escape(r.summarization.summarizer) if r.summarization else "-" for r in reports)],
        row("API calls (the summaries' own)", lambda s: s.api_calls),
        row("errors", lambda s: s.errors),
        row("HTTP requests by this run", lambda s: s.http_requests),
        row("retries", lambda s: s.retries),
        row("cache hits", lambda s: s.cache_hits),
        row("answer checks", lambda s: None if s.checks is None else (", ".join(s.checks) or "off")),
        *(row(f"answers failed: {name}", lambda s, name=name: _failed(s, name)) for name in _checks_failed(reports)),
        row("rows fallen back (checks)", lambda s: s.rows_fallen_back_on_checks),
        row("latency p50 (ms)", lambda s: s.latency_ms and s.latency_ms.p50),
        row("latency p95 (ms)", lambda s: s.latency_ms and s.latency_ms.p95),
        row("prompt tokens", lambda s: s.usage and s.usage.prompt_tokens),
        row("completion tokens", lambda s: s.usage and s.usage.completion_tokens),
        row("batches", lambda s: s.batch and s.batch.batches),
        row("batch rounds", lambda s: s.batch and s.batch.rounds),
        row("batch requests", lambda s: s.batch and s.batch.requests),
        row("batch requests failed", lambda s: s.batch and s.batch.failed),
        row("batch failures by reason", lambda s: s.batch and _reasons_text(s.batch.failed_by_reason)),
        row("batch wait (s)", lambda s: s.batch and s.batch.wait_seconds),
        row("batch prompt tokens", lambda s: s.batch and s.batch.prompt_tokens),
        row("batch completion tokens", lambda s: s.batch and s.batch.completion_tokens),
        row("model", lambda s: s.model),
    ]
    rows = [r for r in rows if any(c != "-" for c in r[1:])]
    head = ["figure", *(["value"] if len(reports) == 1 else names)]
    return f"<section id=summarizer><h2>Summarizer</h2>{table_html(head, rows, escaped=True)}</section>"


def _reasons_text(reasons: dict[str, int]) -> str | None:
    return "; ".join(f"{why}: {n}" for why, n in reasons.items()) or None


def _checks_failed(reports: Sequence[Report]) -> list[str]:
    """The checks that turned an answer away in any of the reports."""
    return sorted({name for r in reports if r.summarization for name in r.summarization.answers_failed_checks or {}})


def _failed(s, name: str) -> int | None:
    return None if s.answers_failed_checks is None else s.answers_failed_checks.get(name, 0)


def _passes_section(reports: Sequence[Report], names: Sequence[str]) -> str:
    keys = sorted({k for r in reports for k in (r.passes or {})}, key=int)
    if not keys:
        return ""
    rows = [[k, *(number((r.passes or {}).get(k, 0)) for r in reports)] for k in keys]
    head = ["summaries made for a row", *(["rows"] if len(reports) == 1 else names)]
    return (f"<section id=passes><h2>Passes</h2><p class=note>A second pass asks again or extends the summarized "
            f"region when a row is still over the limit.</p>{table_html(head, rows)}</section>")


def _worst_section(r: Report) -> str:
    if r.worst_rows is None:
        return missing_html("Rows most over the limit", "not in this report (written by an older trajcomp)")
    if not r.worst_rows:
        return "<section id=worst><h2>Rows most over the limit</h2><p class=note>None: every row written fits.</p></section>"
    rows = [[w.source or "-", number(w.line) if w.line is not None else "-", number(w.original_tokens), number(w.compressed_tokens),
             f"+{number(w.over_by)}", w.status.replace("_", " ")] for w in r.worst_rows]
    head = ["input file", "line", "tokens before", "tokens after", "over by", "status"]
    return f"<section id=worst><h2>Rows most over the limit</h2>{table_html(head, rows)}</section>"


def _config_section(r: Report) -> str:
    if not r.config:
        return ""
    parts = []
    for section, keys in r.config.items():
        rows = [[k, _config_value(v)] for k, v in keys.items()]
        parts.append(f"<h3>{escape(section)}</h3>{table_html(['key', 'value'], rows)}")
    tok = f"<p>Tokenizer: {escape(str(r.tokenizer.name))} ({escape(r.tokenizer.class_name)})</p>" if r.tokenizer else ""
    return f"<section id=config><h2>Configuration</h2>{tok}<details><summary>The effective config</summary>{''.join(parts)}</details></section>"


def _config_value(value: Any) -> str:
    return "null" if value is None else str(value).lower() if isinstance(value, bool) else str(value)


def comparison_page(reports: Sequence[Report], c: Comparison) -> str:
    letters = run_letters(len(reports))
    legend = "".join(f"<li><b>{l}</b> {escape(name)}</li>" for l, name in zip(letters, c.names))
    targets = {r.target_max_tokens for r in reports}
    target = targets.pop() if len(targets) == 1 else None  # one line only when the runs share a target
    body = [
        f"<header><h1>trajcomp comparison</h1><ol class=runs>{legend}</ol></header>",
        _callouts(c, letters),
        _figures_table(c, letters),
        lengths_figure(reports, letters, target),
    ]
    if target is None:
        body.append("<p class=note>The runs have different targets: " + escape(", ".join(
            f"{l} {number(r.target_max_tokens) if r.target_max_tokens else '-'}" for l, r in zip(letters, reports))) + "</p>")
    if all(r.compression_ratios is not None for r in reports):
        body.append(ratio_figure(reports, letters))
    if all(r.statuses is not None for r in reports):
        body.append(status_figure(reports, letters))
    if any(r.identifier_retention is not None and r.identifier_retention.rows for r in reports):
        body.append(retention_figure(reports, letters))  # it leaves out the runs without retention itself
    if any(r.assistant_tokens_kept is not None and r.assistant_tokens_kept.rows for r in reports):
        body.append(assistant_figure(reports, letters))
    body += [_summarizer_section(reports, letters), _passes_section(reports, letters)]
    return document("trajcomp comparison: " + ", ".join(c.names), body)


CALLOUTS = ("still_over_limit", "cannot_fit", "failed", "tokens_saved", "identifier_retention", "assistant_tokens_kept",
            "human_turns_cut", "api_calls", "retries")


SHARES = ("identifier_retention", "assistant_tokens_kept")  # shown as percentage points


def _callouts(c: Comparison, letters: Sequence[str]) -> str:
    """The differences that matter, each later run against the first, said in words."""
    by_key = {f.key: f for f in FIGURES}
    items = []
    for key in CALLOUTS:
        f = by_key[key]
        base = c.values[key][0]
        for letter, value, diff in zip(letters[1:], c.values[key][1:], c.differences(key)):
            delta = diff["absolute"]
            if delta in (None, 0):
                continue
            good = (delta < 0) == (f.better == "lower")
            shown = f"{delta:+.1%}" if key in SHARES else f"{delta:+,}"
            pct = f" ({diff['percent']:+.1f}%)" if diff["percent"] is not None and key not in SHARES else ""
            items.append(f'<li class="{"good" if good else "bad"}"><b>{letter}</b> {escape(f.label)}: '
                         f"{escape(figure_text(value, f.decimals))} vs {escape(figure_text(base, f.decimals))} in A, "
                         f"{escape(shown)}{escape(pct)} <span class=verdict>{'better' if good else 'worse'}</span></li>")
    if not items:
        items = ["<li>No difference in rows over the limit, tokens saved, retention or summarizer calls.</li>"]
    return f"<section id=callouts><h2>Differences that matter</h2><ul class=callouts>{''.join(items)}</ul></section>"


def _figures_table(c: Comparison, letters: Sequence[str]) -> str:
    head = ["figure", letters[0]]
    for letter in letters[1:]:
        head += [letter, f"{letter}−{letters[0]}"]
    rows = []
    for f in FIGURES:
        values = c.values[f.key]
        if all(v is None for v in values):
            continue
        row = [f.label, figure_text(values[0], f.decimals)]
        for value, diff in zip(values[1:], c.differences(f.key)):
            row += [figure_text(value, f.decimals), figure_text(diff["absolute"], f.decimals, "+")]
        rows.append(row)
    return f"<section id=table><h2>Figures</h2>{table_html(head, rows)}</section>"
