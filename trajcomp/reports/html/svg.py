"""Bar charts as inline SVG: equal-width bins or categories, one series or several, an optional marker.

Every chart is an <svg role="img"> with a title, a description and axis labels.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape
from typing import Sequence

from ...core.metrics import bin_index
from ..numbers import number

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


def bin_label(edges: Sequence[float], i: int) -> str:
    top = "" if i == len(edges) - 2 else short(edges[i + 1])
    return f"{short(edges[i])}–{top}" if top else f"{short(edges[i])} and more"


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


def bar_svg(fid: str, title: str, desc: str, categories: list, series: list[Series], marker: Marker | None,
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
                   f'<text class=tick x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor=end>{short(tick)}</text>')
    for i in range(n):
        for k, s in enumerate(series):
            count = s.counts[i]
            if not count:
                continue
            width = (bw - 2) / m
            x, h = LEFT + i * bw + 1 + k * width, count / top * PLOT_H
            where = bin_label(edges, i) if boundaries else str(category_labels[i])
            attrs = f' data-lo="{edges[i]}" data-hi="{edges[i + 1]}"' if boundaries else f' data-category="{categories[i]}"'
            out.append(f'<rect class="bar s{k}" x="{x:.2f}" y="{base - h:.2f}" width="{width:.2f}" height="{h:.2f}" '
                       f'data-series="{escape(s.name)}" data-count="{count}"{attrs}>'
                       f'<title>{escape(s.name)}: {number(count)} rows, {escape(where)}</title></rect>')
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
                   f'<text class=tick x="{x:.1f}" y="{base + 16}" text-anchor=middle>{short(edge)}</text>')
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


def short(value: float) -> str:
    """1000 -> 1k, 2500000 -> 2.5M, 0.35 -> 0.35."""
    if value != int(value) or value < 1000:
        return f"{value:g}"
    for unit, size in (("M", 10**6), ("k", 10**3)):
        if value >= size:
            return f"{value / size:g}{unit}"
    return str(int(value))
