"""Rows before and after as one self-contained HTML page: inline CSS and SVG, no script, light and dark.

Each row is a grid of two columns, the input's turns beside the output's: the head and the tail
line up turn by turn, and the replaced turns stand in one highlighted cell beside the summary turn
that took their place, linked both ways.
"""

from __future__ import annotations

from html import escape
from typing import Sequence

from ..html.markup import document
from ..numbers import number
from .row_view import RowView, TurnView

CSS = """
a{color:var(--s1)}nav.rows{font-size:14px;color:var(--muted)}nav.rows a{margin-right:10px}
section.row{border-top:1px solid var(--line);margin-top:24px}
.pair{display:grid;grid-template-columns:1fr 1fr;gap:6px 14px}.pair.one{grid-template-columns:1fr}
.col-head{font-weight:600;color:var(--muted);font-size:13px}
.turn{border:1px solid var(--line);border-radius:6px;padding:4px 8px;background:var(--panel);min-width:0}
.turn .meta{font-size:12px;color:var(--muted);display:flex;gap:8px;align-items:center}
.turn .role{font-weight:600;color:var(--fg)}
.turn pre{margin:2px 0 0;white-space:pre-wrap;word-break:break-word;font-size:12.5px;max-height:none}
.cell{display:flex;flex-direction:column;gap:4px;min-width:0}
.cell.replaced{border-left:4px solid var(--s2);padding-left:6px}
.replaced .turn,.turn.summary{background:color-mix(in srgb,var(--s2) 18%,var(--bg));border-color:var(--s2)}
.turn.summary{border-width:2px}.cell.summary{position:sticky;top:4px;align-self:start}
.turn details>summary{font-size:12.5px}
.tie{font-size:12px;font-weight:600;color:var(--fg)}
svg.tokbar{width:120px;height:8px;display:inline-block}svg.tokbar .track{fill:var(--line)}
svg.tokbar .fill{fill:var(--s1)}.replaced svg.tokbar .fill,.summary svg.tokbar .fill{fill:var(--s2)}
.why{border-left:4px solid var(--bad);padding-left:8px}
"""
FOLD_CHARS, FOLD_LINES = 500, 8  # a text longer than this is folded under its first line


def rows_page(views: Sequence[RowView], title: str, note: str = "") -> str:
    body = [f"<header><h1>trajcomp rows</h1><p class=sub>{escape(title)}</p></header>"]
    if note:
        body.append(f"<p class=note>{escape(note)}</p>")
    if not views:
        body.append("<p class=note>No rows to show.</p>")
    links = " ".join(f'<a href="#{_anchor(v)}">{escape(_name(v))}</a>' for v in views)
    body.append(f"<nav class=rows aria-label=rows>{links}</nav>")
    body += [_row(v) for v in views]
    return document(f"trajcomp rows: {title}", body, CSS)


def _anchor(v: RowView) -> str:
    return f"row-{escape(v.source)}-{v.row}".replace(" ", "_")


def _name(v: RowView) -> str:
    return f"row {v.row}" + (f" ({v.id})" if v.has_id else "")


def _row(v: RowView) -> str:
    before = number(v.tokens_before) if v.tokens_before is not None else "?"
    figures = [f"tokens {before} → {number(v.tokens_after)}"]
    if v.target is not None:
        figures.append(f"target {number(v.target)}")
    if v.metrics is not None:
        figures.append(f"passes {v.metrics.get('passes', 0)}")
    where = f"{v.source}" + (f", input {v.input_where}" if v.input_where else "")
    parts = [f'<section class=row id="{_anchor(v)}"><h2>{escape(_name(v))} · {escape(v.status or "status unknown")}</h2>',
             f"<p class=sub>{escape(where)} · {escape(' · '.join(figures))}</p>"]
    parts += [f"<p class=note>{escape(n)}</p>" for n in v.notes]
    if v.why is not None:
        parts.append(f"<p class=why><strong>Why still over the limit:</strong> {escape(v.why.text)}</p>")
    parts.append(_grid(v))
    return "".join(parts) + "</section>"


def _grid(v: RowView) -> str:
    top = max([t.tokens for t in v.kept + (v.input_turns or [])] or [1]) or 1
    if v.input_turns is None:
        cells = ['<div class=col-head>after (output)</div>']
        cells += [_summary_cell(v, i, t, top) if t.summary else _cell([t], top) for i, t in enumerate(v.kept)]
        return f"<div class='pair one'>{''.join(cells)}</div>"
    cells = ["<div class=col-head>before (input)</div>", "<div class=col-head>after (output)</div>"]
    k = v.summary_index
    if k is None or v.region is None:
        cells += [_cell([a], top) + _cell([b], top) for a, b in zip(v.input_turns, v.kept)]
        return f"<div class=pair>{''.join(cells)}</div>"
    start, end = v.region
    tail_start = len(v.input_turns) - (len(v.kept) - k - 1)
    cells += [_cell([a], top) + _cell([b], top) for a, b in zip(v.input_turns[:k], v.kept[:k])]
    cells.append(_replaced_cell(v, v.input_turns[start:end], v.input_turns[end:tail_start], top))
    cells.append(_summary_cell(v, k, v.kept[k], top))
    cells += [_cell([a], top) + _cell([b], top) for a, b in zip(v.input_turns[tail_start:], v.kept[k + 1:])]
    return f"<div class=pair>{''.join(cells)}</div>"


def _cell(turns: list[TurnView], top: int) -> str:
    return "<div class=cell>" + "".join(_turn(t, top) for t in turns) + "</div>"


def _replaced_cell(v: RowView, replaced: list[TurnView], opened: list[TurnView], top: int) -> str:
    a = _anchor(v)
    total = sum(t.tokens for t in replaced)
    tie = (f'<a class=tie href="#{a}-summary">{len(replaced)} turns ({number(total)} tokens) replaced by the '
           f"summary turn →</a>")
    inside = "".join(_turn(t, top) for t in replaced)
    after = "".join(_turn(t, top, "the summary opens this turn") for t in opened)
    return f'<div class="cell replaced" id="{a}-region">{tie}{inside}</div>' + (f"<div class=cell>{after}</div>" if after else "")


def _summary_cell(v: RowView, i: int, turn: TurnView, top: int) -> str:
    a = _anchor(v)
    back = (f'<a class=tie href="#{a}-region">← summary turn {i + 1}, in place of input turns '
            f"{v.region[0] + 1}–{v.region[1]}</a>") if v.region else f"<span class=tie>summary turn {i + 1}</span>"
    return f'<div class="cell summary" id="{a}-summary">{back}{_turn(turn, top, css="summary", fold=False)}</div>'


def _turn(t: TurnView, top: int, label: str = "", css: str = "", fold: bool = True) -> str:
    width = round(120 * t.tokens / top, 1)
    bar = (f'<svg class=tokbar viewBox="0 0 120 8" role=img aria-label="{t.tokens} tokens">'
           f'<rect class=track width=120 height=8 rx=2></rect><rect class=fill width="{width}" height=8 rx=2></rect></svg>')
    meta = f"<div class=meta><span class=role>{escape(t.role)}</span>{bar}<span>{number(t.tokens)} tokens</span>"
    meta += (f"<span>{escape(label)}</span>" if label else "") + "</div>"
    text = escape(t.text)
    long = len(t.text) > FOLD_CHARS or t.text.count("\n") >= FOLD_LINES
    if fold and long:
        first = escape((t.text.strip().splitlines() or [""])[0][:120])
        text_html = f"<details><summary>{first} …</summary><pre>{text}</pre></details>"
    else:
        text_html = f"<pre>{text}</pre>"
    return f'<div class="turn {css}">{meta}{text_html}</div>'
