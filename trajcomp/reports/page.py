"""A report, or several side by side, as one self-contained HTML page: inline SVG and CSS, no script.

Depends on the report schema only. Every chart is an <svg role="img"> with a title and a
description, axis labels, and the table of its numbers below it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Any, Sequence

from ..formats.base import AtomicFile
from ..core.metrics import bin_index
from .text import _n, run_letters
from .text import _value as _fmt
from .comparison import FIGURES, Comparison
from .schema import Report, Retention

STATUS_TEXT = {
    "under_target": "under target: already fit, left as they were",
    "compressed": "compressed: summarized, and now fit",
    "still_over": "still over: summarized (or tried) but still over the limit",
    "cannot_fit": "cannot fit: over the limit even with everything between head and tail summarized",
    "failed": "failed: no summary could be had; written unchanged, flagged",
    "rejected": "rejected: sent to the rejects file with a reason",
}

# Chart geometry (SVG user units; the SVG scales to the page width).
WIDTH, HEIGHT = 640, 260
LEFT, RIGHT, TOP, BOTTOM = 60, 16, 34, 48
PLOT_W, PLOT_H = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM


@dataclass(frozen=True)
class Series:
    name: str
    counts: Sequence[int]


@dataclass(frozen=True)
class Marker:
    value: float
    label: str
    kind: str  # css class: target | mean


def write_page(path: Path, page: str) -> None:
    """The page, written atomically."""
    with AtomicFile(path) as f:
        f.handle.write(page.encode("utf-8"))


# ---------------------------------------------------------------------------
# One report
# ---------------------------------------------------------------------------


def report_page(r: Report) -> str:
    name = _run_name(r)
    target = r.target_max_tokens
    body = [f"<header><h1>trajcomp report</h1><p class=sub>{escape(name)}</p></header>", _key_figures(r)]
    body.append(_lengths_figure([r], ["run"], target))
    if r.compression_ratios is not None:
        body.append(_ratio_figure([r], ["run"]))
    if r.statuses is not None:
        body.append(_status_figure([r], ["run"]))
    if r.identifier_retention is not None and r.identifier_retention.rows:
        body.append(_retention_figure([r], ["run"]))
    if r.assistant_tokens_kept is not None and r.assistant_tokens_kept.rows:
        body.append(_assistant_figure([r], ["run"]))
    body += [_summarizer_section([r], ["run"]), _passes_section([r], ["run"]), _worst_section(r), _config_section(r)]
    return _document(f"trajcomp report: {name}", body)


def _run_name(r: Report) -> str:
    outputs = r.processing.outputs if r.processing else []
    when = f" ({r.processing.started_at})" if r.processing and r.processing.started_at else ""
    return (", ".join(outputs[:3]) + (f" and {len(outputs) - 3} more" if len(outputs) > 3 else "") or "a run") + when


def _key_figures(r: Report) -> str:
    statuses = r.statuses or {}
    items = [
        ("rows read", _n(r.rows.read) if r.rows else "-"),
        ("compressed", _n(r.summary.trajectories_compressed)),
        ("still over the limit", _n(r.summary.trajectories_still_over_limit)),
        ("cannot fit", _n(statuses["cannot_fit"]) if "cannot_fit" in statuses else "-"),
        ("failed", _n(r.summary.trajectories_failed)),
        ("rejected", _n(r.rows.rejected) if r.rows else "-"),
        ("tokens", f"{_n(r.tokens.total_original)} → {_n(r.tokens.total_compressed)}"),
        ("overall ratio", f"{r.tokens.overall_compression_ratio:.4f}"),
        ("target", _n(r.target_max_tokens) if r.target_max_tokens is not None else "-"),
        ("summarizer calls", _n(r.summarization.api_calls) if r.summarization else "-"),
    ]
    for label, share in (("identifier retention", r.identifier_retention),
                         ("assistant tokens kept", r.assistant_tokens_kept)):
        if share is not None and share.mean is not None:
            items.append((label, f"{share.mean:.1%}"))
    if r.human_turns_cut is not None:
        items.append(("user turns cut", _n(r.human_turns_cut.turns)))
    cells = "".join(f"<div><dt>{escape(k)}</dt><dd>{escape(v)}</dd></div>" for k, v in items)
    return f'<section aria-label="key figures"><dl class=figures>{cells}</dl></section>'


# ---------------------------------------------------------------------------
# Figures shared by the report and the comparison pages
# ---------------------------------------------------------------------------


def _lengths_figure(reports: Sequence[Report], names: Sequence[str], target: int | None) -> str:
    """Tokens per row: before (of the first report) and after (of each), on the fixed bins."""
    with_lengths = [(r, n) for r, n in zip(reports, names) if r.lengths is not None]
    if not with_lengths:
        return _missing("Tokens per row", "this report has no length histograms (written by an older trajcomp)")
    first = with_lengths[0][0].lengths
    single = len(reports) == 1
    series = [Series("before" if single else f"before ({with_lengths[0][1]})", first.before)]
    series += [Series("after" if single else f"after ({n})", r.lengths.after) for r, n in with_lengths]
    marker = Marker(target, f"target {_n(target)}", "target") if target is not None else None
    lacking = [n for r, n in zip(reports, names) if r.lengths is None]
    note = f"<p class=note>Not in this chart: {escape(', '.join(lacking))} (no length histograms: an older report).</p>"
    return _histogram_figure(
        "lengths", "Tokens per row, before and after",
        "Rows per token-length bin (fixed bins, ten per decade, log scale), with the target marked.",
        first.edges, series, marker, "tokens per row (log scale)", log=True, note=note if lacking else "",
    )


def _ratio_figure(reports: Sequence[Report], names: Sequence[str]) -> str:
    pairs = [(r.compression_ratios, n) for r, n in zip(reports, names) if r.compression_ratios is not None]
    edges = pairs[0][0].edges
    series = [Series("compressed rows" if len(reports) == 1 else n, h.counts) for h, n in pairs]
    return _histogram_figure(
        "ratios", "Compression ratio of the compressed rows",
        "Compressed ÷ original tokens of each row a summary was made for; lower is more compressed.",
        edges, series, None, "compressed ÷ original tokens",
    )


def _retention_figure(reports: Sequence[Report], names: Sequence[str]) -> str:
    return _share_figure(
        [r.identifier_retention for r in reports], names, "retention", "Identifier retention",
        "Share of the summarized turns' identifiers kept verbatim in the summary, per compressed row",
        "identifiers kept (share)",
    )


def _assistant_figure(reports: Sequence[Report], names: Sequence[str]) -> str:
    return _share_figure(
        [r.assistant_tokens_kept for r in reports], names, "assistant", "Assistant tokens kept",
        "Share of each row's assistant tokens still in it as assistant turns, unchanged: what the row "
        "still teaches the model to write", "assistant tokens kept (share)",
    )


def _share_figure(shares: Sequence[Retention | None], names: Sequence[str], key: str, title: str, what: str,
                  axis: str) -> str:
    """A histogram of a share per row (0 to 1 in tenths), one series per run that has it."""
    pairs = [(share, n) for share, n in zip(shares, names) if share is not None]
    edges = pairs[0][0].histogram.edges
    series = [Series("rows" if len(shares) == 1 else n, share.histogram.counts) for share, n in pairs]
    mean = pairs[0][0].mean
    marker = Marker(mean, f"mean {mean:.1%}", "mean") if len(shares) == 1 and mean is not None else None
    means = ", ".join(f"{n}: {share.mean:.1%}" for share, n in pairs if share.mean is not None)
    return _histogram_figure(key, title, f"{what} (mean {means}).", edges, series, marker, axis)


def _status_figure(reports: Sequence[Report], names: Sequence[str]) -> str:
    keys = list(STATUS_TEXT)
    series = [Series("rows" if len(reports) == 1 else n, [(r.statuses or {}).get(k, 0) for k in keys])
              for r, n in zip(reports, names)]
    svg = _bar_svg("statuses", "Rows by status", "Every row taken is in exactly one status.",
                   keys, series, None, "status", boundaries=False, category_labels=[k.replace("_", " ") for k in keys])
    table = _table(["status", *(s.name for s in series)], [[k, *(_n(s.counts[i]) for s in series)] for i, k in enumerate(keys)])
    legend = "".join(f"<li><b>{escape(k.replace('_', ' '))}</b>{escape(v[v.index(':'):])}</li>" for k, v in STATUS_TEXT.items())
    return _figure("statuses", "Rows by status", svg, table, f"<ul class=defs>{legend}</ul>")


def _histogram_figure(fid: str, title: str, desc: str, edges: Sequence[float], series: list[Series],
                      marker: Marker | None, x_label: str, log: bool = False, note: str = "") -> str:
    lo, hi = _visible(edges, series, marker)
    shown = [Series(s.name, list(s.counts[lo:hi])) for s in series]
    svg = _bar_svg(fid, title, desc, list(range(hi - lo)), shown, marker, x_label, edges=edges[lo:hi + 1], log=log)
    rows = [[_bin_label(edges, i), *(_n(s.counts[i]) for s in series)] for i in range(len(edges) - 1)
            if any(s.counts[i] for s in series)]
    table = _table(["bin", *(s.name for s in series)], rows or [["(no rows)", *("" for _ in series)]])
    return _figure(fid, title, svg, table, note)


def _visible(edges: Sequence[float], series: list[Series], marker: Marker | None) -> tuple[int, int]:
    """The bins to draw: from the first to the last non-empty one, the marker's bin included."""
    used = [i for i in range(len(edges) - 1) if any(s.counts[i] for s in series)]
    if marker is not None:
        used.append(bin_index(marker.value, edges))
    if not used:
        return 0, min(len(edges) - 1, 10)
    first, last = min(used), max(used)
    if len(edges) <= 25:  # a short linear scale (ratios, retention) is shown whole
        return 0, len(edges) - 1
    return max(0, first - 1), min(len(edges) - 1, last + 2)


def _bin_label(edges: Sequence[float], i: int) -> str:
    top = "" if i == len(edges) - 2 else _short(edges[i + 1])
    return f"{_short(edges[i])}–{top}" if top else f"{_short(edges[i])} and more"


def marker_x(value: float, edges: Sequence[float], log: bool) -> float:
    """Where `value` sits on a chart of equal-width bins over `edges`: log-interpolated within its bin on a log scale."""
    n = len(edges) - 1
    i = bin_index(value, edges)
    lo, hi = edges[i], edges[i + 1]
    value = min(max(value, lo), hi)
    if log and lo > 0:
        frac = math.log(value / lo) / math.log(hi / lo)
    else:
        frac = (value - lo) / (hi - lo)
    return LEFT + (i + frac) * PLOT_W / n


def _bar_svg(fid: str, title: str, desc: str, categories: list, series: list[Series], marker: Marker | None,
             x_label: str, *, boundaries: bool = True, edges: Sequence[float] = (), log: bool = False,
             category_labels: Sequence[str] = ()) -> str:
    n, m = len(categories), len(series)
    top, step = _y_scale(max((c for s in series for c in s.counts), default=0))
    bw = PLOT_W / max(n, 1)
    base = TOP + PLOT_H
    out = [
        f'<svg id="{fid}-chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-labelledby="{fid}-t {fid}-d" '
        f'xmlns="http://www.w3.org/2000/svg">',
        f'<title id="{fid}-t">{escape(title)}</title><desc id="{fid}-d">{escape(desc)}</desc>',
    ]
    for tick in range(0, top + 1, step):  # y grid and labels
        y = base - tick / top * PLOT_H
        out.append(f'<line class=grid x1="{LEFT}" x2="{LEFT + PLOT_W}" y1="{y:.1f}" y2="{y:.1f}"/>'
                   f'<text class=tick x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor=end>{_short(tick)}</text>')
    for i in range(n):
        for k, s in enumerate(series):
            count = s.counts[i]
            if not count:
                continue
            width = (bw - 2) / m
            x, h = LEFT + i * bw + 1 + k * width, count / top * PLOT_H
            where = _bin_label(edges, i) if boundaries else str(category_labels[i])
            attrs = f' data-lo="{edges[i]}" data-hi="{edges[i + 1]}"' if boundaries else f' data-category="{categories[i]}"'
            out.append(f'<rect class="bar s{k}" x="{x:.2f}" y="{base - h:.2f}" width="{width:.2f}" height="{h:.2f}" '
                       f'data-series="{escape(s.name)}" data-count="{count}"{attrs}>'
                       f'<title>{escape(s.name)}: {_n(count)} rows, {escape(where)}</title></rect>')
    out.append(f'<line class=axis x1="{LEFT}" x2="{LEFT + PLOT_W}" y1="{base}" y2="{base}"/>')
    out += _x_labels(n, bw, base, boundaries, edges, category_labels)
    if marker is not None:
        x = marker_x(marker.value, edges, log)
        out.append(f'<line class="marker {marker.kind}" x1="{x:.2f}" x2="{x:.2f}" y1="{TOP}" y2="{base}" '
                   f'data-value="{marker.value}"/>'
                   f'<text class="marker-label {marker.kind}" x="{x + 4:.2f}" y="{TOP + 12}">{escape(marker.label)}</text>')
        if x > LEFT + PLOT_W * 0.8:  # near the right edge the label goes to the line's left
            out[-1] = out[-1].replace(f'x="{x + 4:.2f}"', f'x="{x - 4:.2f}" text-anchor=end')
    out.append(f'<text class=label x="{LEFT + PLOT_W / 2}" y="{HEIGHT - 6}" text-anchor=middle>{escape(x_label)}</text>'
               f'<text class=label transform="translate(14 {TOP + PLOT_H / 2}) rotate(-90)" text-anchor=middle>rows</text>')
    if m > 1:  # above the plot, where no bar or marker label reaches
        out += _legend(series)
    if not any(c for s in series for c in s.counts):
        out.append(f'<text class=label x="{LEFT + PLOT_W / 2}" y="{TOP + PLOT_H / 2}" text-anchor=middle>no rows</text>')
    out.append("</svg>")
    return "".join(out)


def _x_labels(n: int, bw: float, base: float, boundaries: bool, edges: Sequence[float],
              category_labels: Sequence[str]) -> list[str]:
    out = []
    if not boundaries:
        for i, label in enumerate(category_labels):
            out.append(f'<text class=tick x="{LEFT + (i + 0.5) * bw:.1f}" y="{base + 16}" text-anchor=middle>{escape(label)}</text>')
        return out
    every = max(1, math.ceil((n + 1) / 12))  # at most about a dozen labels
    labelled = [i for i, edge in enumerate(edges) if _round_edge(edge)]  # a log axis: 1, 2 and 5 x 10^k
    if len(labelled) < 3:
        labelled = range(0, len(edges), every)
    for i in labelled:
        edge = edges[i]
        x = LEFT + i * bw
        out.append(f'<line class=axis x1="{x:.1f}" x2="{x:.1f}" y1="{base}" y2="{base + 4}"/>'
                   f'<text class=tick x="{x:.1f}" y="{base + 16}" text-anchor=middle>{_short(edge)}</text>')
    return out


def _round_edge(edge: float) -> bool:
    """1, 2 and 5 times a power of ten: the labels of a long log axis."""
    if edge <= 0 or edge < 100:
        return False
    mantissa = edge / 10 ** math.floor(math.log10(edge))
    return any(abs(mantissa - m) < 1e-9 for m in (1, 2, 5))


def _legend(series: list[Series]) -> list[str]:
    out = []
    for k, s in enumerate(series):
        x, y = LEFT + (k % 4) * 140, 14 + (k // 4) * 14
        out.append(f'<rect class="bar s{k}" x="{x}" y="{y - 9}" width="10" height="10"/>'
                   f'<text class=legend x="{x + 14}" y="{y}">{escape(s.name[:30])}</text>')
    return out


def _y_scale(peak: int) -> tuple[int, int]:
    """The axis top and tick step for counts up to `peak`: about four steps of 1, 2 or 5 × 10^k."""
    raw = max(peak / 4, 1)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    step = max(1, int(step))
    return max(step, math.ceil(peak / step) * step), step


def _figure(fid: str, title: str, svg: str, table: str, extra: str = "") -> str:
    return (f'<figure id="{fid}" aria-labelledby="{fid}-c"><figcaption id="{fid}-c">{escape(title)}</figcaption>'
            f'{svg}{extra}<details><summary>Table of this figure</summary>{table}</details></figure>')


def _missing(title: str, why: str) -> str:
    return f"<section><h2>{escape(title)}</h2><p class=note>Not shown: {escape(why)}.</p></section>"


# ---------------------------------------------------------------------------
# Tables
# ---------------------------------------------------------------------------


def _summarizer_section(reports: Sequence[Report], names: Sequence[str]) -> str:
    def row(label: str, get) -> list[str]:
        return [label, *(_cell(get(r.summarization)) if r.summarization else "-" for r in reports)]

    rows = [
        ["summarizer", *(escape(r.summarization.summarizer) if r.summarization else "-" for r in reports)],
        row("API calls (the summaries' own)", lambda s: s.api_calls),
        row("errors", lambda s: s.errors),
        row("HTTP requests by this run", lambda s: s.http_requests),
        row("retries", lambda s: s.retries),
        row("cache hits", lambda s: s.cache_hits),
        row("latency p50 (ms)", lambda s: s.latency_ms and s.latency_ms.p50),
        row("latency p95 (ms)", lambda s: s.latency_ms and s.latency_ms.p95),
        row("prompt tokens", lambda s: s.usage and s.usage.prompt_tokens),
        row("completion tokens", lambda s: s.usage and s.usage.completion_tokens),
        row("model", lambda s: s.model),
    ]
    rows = [r for r in rows if any(c != "-" for c in r[1:])]
    head = ["figure", *(["value"] if len(reports) == 1 else names)]
    return f"<section id=summarizer><h2>Summarizer</h2>{_table(head, rows, escaped=True)}</section>"


def _passes_section(reports: Sequence[Report], names: Sequence[str]) -> str:
    keys = sorted({k for r in reports for k in (r.passes or {})}, key=int)
    if not keys:
        return ""
    rows = [[k, *(_n((r.passes or {}).get(k, 0)) for r in reports)] for k in keys]
    head = ["summaries made for a row", *(["rows"] if len(reports) == 1 else names)]
    return (f"<section id=passes><h2>Passes</h2><p class=note>A second pass asks again or extends the summarized "
            f"region when a row is still over the limit.</p>{_table(head, rows)}</section>")


def _worst_section(r: Report) -> str:
    if r.worst_rows is None:
        return _missing("Rows most over the limit", "not in this report (written by an older trajcomp)")
    if not r.worst_rows:
        return "<section id=worst><h2>Rows most over the limit</h2><p class=note>None: every row written fits.</p></section>"
    rows = [[w.source or "-", _n(w.line) if w.line is not None else "-", _n(w.original_tokens), _n(w.compressed_tokens),
             f"+{_n(w.over_by)}", w.status.replace("_", " ")] for w in r.worst_rows]
    head = ["input file", "line", "tokens before", "tokens after", "over by", "status"]
    return f"<section id=worst><h2>Rows most over the limit</h2>{_table(head, rows)}</section>"


def _config_section(r: Report) -> str:
    if not r.config:
        return ""
    parts = []
    for section, keys in r.config.items():
        rows = [[k, _config_value(v)] for k, v in keys.items()]
        parts.append(f"<h3>{escape(section)}</h3>{_table(['key', 'value'], rows)}")
    tok = f"<p>Tokenizer: {escape(str(r.tokenizer.name))} ({escape(r.tokenizer.class_name)})</p>" if r.tokenizer else ""
    return f"<section id=config><h2>Configuration</h2>{tok}<details><summary>The effective config</summary>{''.join(parts)}</details></section>"


def _config_value(value: Any) -> str:
    return "null" if value is None else str(value).lower() if isinstance(value, bool) else str(value)


def _table(head: Sequence[str], rows: list[list[str]], escaped: bool = False) -> str:
    def cell(tag: str, text: str) -> str:
        return f"<{tag}>{text if escaped else escape(str(text))}</{tag}>"

    thead = "".join(f"<th scope=col>{escape(str(h))}</th>" for h in head)
    body = "".join("<tr>" + "".join(cell("td", c) for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{thead}</tr></thead><tbody>{body}</tbody></table>"


def _cell(value: Any) -> str:
    return "-" if value is None else escape(_n(value) if isinstance(value, (int, float)) else str(value))


def _short(value: float) -> str:
    """1000 -> 1k, 2500000 -> 2.5M, 0.35 -> 0.35."""
    if value != int(value) or value < 1000:
        return f"{value:g}"
    for unit, size in (("M", 10**6), ("k", 10**3)):
        if value >= size:
            return f"{value / size:g}{unit}"
    return str(int(value))


# ---------------------------------------------------------------------------
# Several reports
# ---------------------------------------------------------------------------


def comparison_page(reports: Sequence[Report], c: Comparison) -> str:
    letters = run_letters(len(reports))
    legend = "".join(f"<li><b>{l}</b> {escape(name)}</li>" for l, name in zip(letters, c.names))
    targets = {r.target_max_tokens for r in reports}
    target = targets.pop() if len(targets) == 1 else None  # one line only when the runs share a target
    body = [
        f"<header><h1>trajcomp comparison</h1><ol class=runs>{legend}</ol></header>",
        _callouts(c, letters),
        _figures_table(c, letters),
        _lengths_figure(reports, letters, target),
    ]
    if target is None:
        body.append("<p class=note>The runs have different targets: " + escape(", ".join(
            f"{l} {_n(r.target_max_tokens) if r.target_max_tokens else '-'}" for l, r in zip(letters, reports))) + "</p>")
    if all(r.compression_ratios is not None for r in reports):
        body.append(_ratio_figure(reports, letters))
    if all(r.statuses is not None for r in reports):
        body.append(_status_figure(reports, letters))
    if any(r.identifier_retention is not None and r.identifier_retention.rows for r in reports):
        body.append(_retention_figure(reports, letters))  # it leaves out the runs without retention itself
    if any(r.assistant_tokens_kept is not None and r.assistant_tokens_kept.rows for r in reports):
        body.append(_assistant_figure(reports, letters))
    body += [_summarizer_section(reports, letters), _passes_section(reports, letters)]
    return _document("trajcomp comparison: " + ", ".join(c.names), body)


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
                         f"{escape(_fmt(value, f.decimals))} vs {escape(_fmt(base, f.decimals))} in A, "
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
        row = [f.label, _fmt(values[0], f.decimals)]
        for value, diff in zip(values[1:], c.differences(f.key)):
            row += [_fmt(value, f.decimals), _fmt(diff["absolute"], f.decimals, "+")]
        rows.append(row)
    return f"<section id=table><h2>Figures</h2>{_table(head, rows)}</section>"


# ---------------------------------------------------------------------------
# The document
# ---------------------------------------------------------------------------

CSS = """
:root{color-scheme:light dark;--bg:#fff;--fg:#1b1f24;--muted:#59636e;--line:#d0d7de;--panel:#f6f8fa;
--s0:#8c959f;--s1:#0969da;--s2:#d4a72c;--s3:#1a7f37;--s4:#bf3989;--s5:#57606a;--s6:#8250df;
--target:#cf222e;--mean:#1a7f37;--good:#1a7f37;--bad:#cf222e}
@media (prefers-color-scheme:dark){:root{--bg:#0d1117;--fg:#e6edf3;--muted:#9198a1;--line:#30363d;--panel:#161b22;
--s0:#6e7681;--s1:#4493f8;--s2:#e3b341;--s3:#3fb950;--s4:#db61a2;--s5:#8b949e;--s6:#a371f7;
--target:#ff7b72;--mean:#3fb950;--good:#3fb950;--bad:#ff7b72}}
*{box-sizing:border-box}
body{margin:0 auto;max-width:980px;padding:24px;background:var(--bg);color:var(--fg);
font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif}
h1{margin:0;font-size:26px}h2{font-size:19px;margin:28px 0 8px}h3{font-size:15px;margin:14px 0 4px}
.sub,.note{color:var(--muted);margin:4px 0}
dl.figures{display:grid;grid-template-columns:repeat(auto-fill,minmax(170px,1fr));gap:10px;margin:18px 0}
dl.figures div{background:var(--panel);border:1px solid var(--line);border-radius:8px;padding:8px 12px}
dt{color:var(--muted);font-size:13px}dd{margin:0;font-size:20px;font-weight:600;font-variant-numeric:tabular-nums}
figcaption{font-size:17px;font-weight:600;margin:0 0 6px}
figure{margin:24px 0;padding:12px;border:1px solid var(--line);border-radius:8px;background:var(--bg)}
svg{width:100%;height:auto;display:block;font-size:12px}
svg text{fill:var(--fg)}svg .tick{fill:var(--muted)}svg .label{font-size:13px}
.grid{stroke:var(--line);stroke-width:1}.axis{stroke:var(--muted);stroke-width:1}
.bar.s0{fill:var(--s0)}.bar.s1{fill:var(--s1)}.bar.s2{fill:var(--s2)}.bar.s3{fill:var(--s3)}
.bar.s4{fill:var(--s4)}.bar.s5{fill:var(--s5)}.bar.s6{fill:var(--s6)}
#statuses .bar.s0,#ratios .bar.s0,#retention .bar.s0,#assistant .bar.s0{fill:var(--s1)}
#statuses .bar.s1,#ratios .bar.s1,#retention .bar.s1,#assistant .bar.s1{fill:var(--s2)}
#statuses .bar.s2,#ratios .bar.s2,#retention .bar.s2,#assistant .bar.s2{fill:var(--s3)}
.marker{stroke-width:2;stroke-dasharray:6 3}.marker.target{stroke:var(--target)}.marker.mean{stroke:var(--mean)}
svg text.marker-label.target{fill:var(--target);font-weight:600}svg text.marker-label.mean{fill:var(--mean);font-weight:600}
table{border-collapse:collapse;margin:8px 0;font-variant-numeric:tabular-nums;font-size:14px}
th,td{border-bottom:1px solid var(--line);padding:4px 10px;text-align:right}
th:first-child,td:first-child{text-align:left}th{color:var(--muted);font-weight:600}
details{margin-top:8px}summary{cursor:pointer;color:var(--muted)}
ul.defs{columns:2;font-size:13px;color:var(--muted);margin:8px 0;padding-left:18px}
ul.callouts{padding-left:18px}.callouts li.good .verdict{color:var(--good);font-weight:600}
.callouts li.bad .verdict{color:var(--bad);font-weight:600}ol.runs{margin:8px 0;padding-left:0;list-style:none}
"""


def _document(title: str, body: list[str]) -> str:
    return (
        "<!doctype html>\n<html lang=en><head><meta charset=utf-8>"
        '<meta name=viewport content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{CSS}</style></head><body>"
        + "\n".join(b for b in body if b)
        + "\n<footer class=note>Written by trajcomp; this page fetches nothing and runs no script.</footer></body></html>\n"
    )
