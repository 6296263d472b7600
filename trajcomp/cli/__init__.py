"""The `trajcomp` command: a thin Typer layer over the engines and reports (compress, report, stats, compare).

May import every other package; none imports it.
"""

from .commands import app, main

__all__ = ["app", "main"]
