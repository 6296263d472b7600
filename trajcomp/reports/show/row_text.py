"""Rows as `show` prints them in a terminal: styled rich Text, which prints as plain text off a terminal."""

from __future__ import annotations

from typing import Sequence

from rich.text import Text

from ..numbers import number
from .row_view import RowView, TurnView

FIRST_LINES = 2  # of a kept turn, when not --full
WIDTH = 110  # characters of a line shown, when not --full
ROLE_STYLES = {"system": "magenta", "human": "cyan", "gpt": "green", "tool": "yellow"}


def render_rows(views: Sequence[RowView], full: bool = False, width: int = WIDTH) -> Text:
    """The rows; a line of a text shown in part is cut at `width` characters (the terminal's, less the margin)."""
    out = Text()
    for view in views:
        out.append_text(render_row(view, full, width))
        out.append("\n")
    return out


def _segment(view: RowView) -> str:
    seg = view.segment
    return f" · segment {seg.get('index', 0) + 1} of {seg.get('count', '?')}" if seg else ""


def render_row(view: RowView, full: bool, width: int = WIDTH) -> Text:
    out = Text()
    title = f"row {view.row}" + (f" · id {view.id}" if view.has_id else "") + _segment(view) \
        + f" · {view.status or 'status unknown'}"
    out.append(f"── {title} ", style="bold")
    out.append(f"({view.source}{', input ' + view.input_where if view.input_where else ''})\n", style="dim")
    out.append(_figures(view) + "\n")
    for note in view.notes:
        out.append(f"note: {note}\n", style="dim")
    for i, turn in enumerate(view.kept):
        if turn.summary:
            out.append_text(_summary(i, turn, view, full, width))
        else:
            out.append_text(_turn(f"{i + 1:>3}", turn, full, FIRST_LINES, width))
        if i in view.originals:  # a stub: the output it stands for, beside it
            out.append_text(_turn("      stubbed from:", view.originals[i], full, 1, width - 6, style="dim"))
    if view.why is not None:
        out.append("why: ", style="bold red")
        out.append(view.why.text + "\n")
    return out


def _figures(view: RowView) -> str:
    before = number(view.tokens_before) if view.tokens_before is not None else "?"
    parts = [f"tokens {before} → {number(view.tokens_after)}"]
    m = view.metrics
    if m is not None:
        parts[0] += f" (target {number(view.target)})" if view.target is not None else " (target unknown: no report)"
        parts.append(f"passes {m.get('passes', 0)}")
        for key, label in (("identifier_retention", "identifiers kept"), ("assistant_tokens_kept", "assistant tokens kept")):
            if m.get(key) is not None:
                parts.append(f"{label} {m[key]:.0%}")
        if m.get("pruned_outputs"):
            parts.append(f"tool outputs pruned {m['pruned_outputs']} ({m.get('deduplicated_outputs', 0)} older copies, "
                         f"{number(m.get('pruned_tokens', 0))} tokens saved)")
        if m.get("error"):
            parts.append(f"error: {m['error']}")
    if view.input_turns is not None:
        parts.append(f"turns {len(view.input_turns)} → {len(view.kept)}")
    if view.frame_tokens:
        parts.append(f"system prompt and tools {number(view.frame_tokens)} tokens (never shortened)")
    return " · ".join(parts)


def _summary(i: int, turn: TurnView, view: RowView, full: bool, width: int) -> Text:
    out = Text()
    out.append(f"{i + 1:>3} ▶ summary turn", style="bold reverse")
    out.append(f" {turn.role} {number(turn.tokens)} tokens", style="bold")
    if view.region is not None:
        start, end = view.region
        replaced = sum(t.tokens for t in view.replaced or [])
        out.append(f", in place of input turns {start + 1}–{end} ({number(replaced)} tokens)", style="bold")
    out.append("\n")
    for line in turn.text.splitlines() or [""]:
        out.append(f"      {line}\n", style="bold")
    if view.replaced:
        out.append("      replaced:\n", style="dim")
        start = view.region[0] if view.region else 0
        for j, old in enumerate(view.replaced):
            out.append_text(_turn(f"      {start + j + 1:>3}", old, full, 1, width - 6, style="dim"))
    return out


def _turn(label: str, turn: TurnView, full: bool, lines: int, width: int, style: str = "") -> Text:
    out = Text()
    out.append(f"{label} ", style=style)
    out.append(f"{turn.role:<6}", style=style or ROLE_STYLES.get(turn.role, ""))
    out.append(f" {number(turn.tokens):>7}  ", style=style)
    shown = turn.text.splitlines() or [""]
    if not full and lines == 1:  # one line: the text's words, whatever its line breaks
        flat = " ".join(turn.text.split())
        shown = [flat[:width] + ("…" if len(flat) > width else "")]
    elif not full:
        more = len(shown) > lines
        shown = [line[:width] + ("…" if len(line) > width else "") for line in shown[:lines]]
        if more and not shown[-1].endswith("…"):
            shown[-1] += " …"
    pad = " " * (len(label) + 17)
    out.append(("\n" + pad).join(shown) + "\n", style=style)
    return out
