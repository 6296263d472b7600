"""How a command ends on an error: one line on stderr and an exit code scripts can test."""

from __future__ import annotations

from typing import NoReturn

import typer

EXIT_FAILED = 1  # the run could not go on: endpoint preflight, unreadable input
EXIT_USAGE = 2  # bad flags, config or paths: nothing was written


def fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    typer.echo(f"trajcomp: error: {message}", err=True)
    raise typer.Exit(code)
