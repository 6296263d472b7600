"""Numbers as the reports show them, in text and on pages alike."""

from __future__ import annotations


def number(value: float) -> str:
    """A count with thousands separators; any other number with two decimals."""
    return f"{value:,}" if isinstance(value, int) else f"{value:,.2f}"


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """`n` and its noun, plural unless `n` is 1: "1 request", "2 requests", "2 batches" (`plural` given)."""
    many = plural or (noun[:-1] + "ies" if noun.endswith("y") else noun + "s")
    return f"{number(n)} {noun if n == 1 else many}"


def figure_text(value: float | None, decimals: int | None, sign: str = "") -> str:
    """A figure of `compare`: "-" when missing, a count as an integer, else `decimals` places."""
    if value is None:
        return "-"
    if isinstance(value, int) and decimals is None:
        return f"{value:{sign},}"
    return f"{value:{sign},.{2 if decimals is None else decimals}f}"
