"""The charts the report and comparison pages show, each with the table of its numbers."""

from __future__ import annotations

from html import escape
from typing import Sequence

from ...core.metrics import bin_index
from .markup import figure_html, missing_html, table_html
from ..numbers import number
from ..schema import Report, Retention
from .svg import Marker, Series, bar_svg, bin_label

STATUS_TEXT = {
    "under_target": "under target: already fit, left as they were",
    "compressed": "compressed: summarized, and now fit",
    "still_over": "still over: summarized (or tried) but still over the limit",
    "cannot_fit": "cannot fit: over the limit even with everything between head and tail summarized",
    "failed": "failed: no summary could be had; written unchanged, flagged",
    "rejected": "rejected: sent to the rejects file with a reason",
}


def lengths_figure(reports: Sequence[Report], names: Sequence[str], target: int | None) -> str:
    """Tokens per row: before (of the first report) and after (of each), on the fixed bins."""
    with_lengths = [(r, n) for r, n in zip(reports, names) if r.lengths is not None]
    if not with_lengths:
        return missing_html("Tokens per row", "this report has no length histograms (written by an older trajcomp)")
    first = with_lengths[0][0].lengths
    single = len(reports) == 1
    series = [Series("before" if single else f"before ({with_lengths[0][1]})", first.before)]
    series += [Series("after" if single else f"after ({n})", r.lengths.after) for r, n in with_lengths]
    marker = Marker(target, f"target {number(target)}", "target") if target is not None else None
    lacking = [n for r, n in zip(reports, names) if r.lengths is None]
    note = f"<p class=note>Not in this chart: {escape(', '.join(lacking))} (no length histograms: an older report).</p>"
    return _histogram_figure(
        "lengths", "Tokens per row, before and after",
        "Rows per token-length bin (fixed bins, ten per decade, log scale), with the target marked.",
        first.edges, series, marker, "tokens per row (log scale)", log=True, note=note if lacking else "",
    )


def ratio_figure(reports: Sequence[Report], names: Sequence[str]) -> str:
    pairs = [(r.compression_ratios, n) for r, n in zip(reports, names) if r.compression_ratios is not None]
    edges = pairs[0][0].edges
    series = [Series("compressed rows" if len(reports) == 1 else n, h.counts) for h, n in pairs]
    return _histogram_figure(
        "ratios", "Compression ratio of the compressed rows",
        "Compressed ÷ original tokens of each row a summary was made for; lower is more compressed.",
        edges, series, None, "compressed ÷ original tokens",
    )


def retention_figure(reports: Sequence[Report], names: Sequence[str]) -> str:
    return _share_figure(
        [r.identifier_retention for r in reports], names, "retention", "Identifier retention",
        "Share of the summarized turns' identifiers kept verbatim in the summary, per compressed row",
        "identifiers kept (share)",
    )


def assistant_figure(reports: Sequence[Report], names: Sequence[str]) -> str:
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


def status_figure(reports: Sequence[Report], names: Sequence[str]) -> str:
    keys = list(STATUS_TEXT)
    series = [Series("rows" if len(reports) == 1 else n, [(r.statuses or {}).get(k, 0) for k in keys])
              for r, n in zip(reports, names)]
    svg = bar_svg("statuses", "Rows by status", "Every row taken is in exactly one status.",
                   keys, series, None, "status", boundaries=False, category_labels=[k.replace("_", " ") for k in keys])
    table = table_html(["status", *(s.name for s in series)], [[k, *(number(s.counts[i]) for s in series)] for i, k in enumerate(keys)])
    legend = "".join(f"<li><b>{escape(k.replace('_', ' '))}</b>{escape(v[v.index(':'):])}</li>" for k, v in STATUS_TEXT.items())
    return figure_html("statuses", "Rows by status", svg, table, f"<ul class=defs>{legend}</ul>")


def _histogram_figure(fid: str, title: str, desc: str, edges: Sequence[float], series: list[Series],
                      marker: Marker | None, x_label: str, log: bool = False, note: str = "") -> str:
    lo, hi = _visible(edges, series, marker)
    shown = [Series(s.name, list(s.counts[lo:hi])) for s in series]
    svg = bar_svg(fid, title, desc, list(range(hi - lo)), shown, marker, x_label, edges=edges[lo:hi + 1], log=log)
    rows = [[bin_label(edges, i), *(number(s.counts[i]) for s in series)] for i in range(len(edges) - 1)
            if any(s.counts[i] for s in series)]
    table = table_html(["bin", *(s.name for s in series)], rows or [["(no rows)", *("" for _ in series)]])
    return figure_html(fid, title, svg, table, note)


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
