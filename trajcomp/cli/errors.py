"""How a command ends on an error: one line on stderr and an exit code scripts can test."""

from __future__ import annotations

from typing import NoReturn

import typer

EXIT_FAILED = 1  # the run could not go on: endpoint preflight or failing, unreadable input
EXIT_USAGE = 2  # bad flags, config or paths: nothing was written
EXIT_ROWS_FAILED = 3  # the run completed, but some rows could not be summarized (kept as they were)
EXIT_INTERRUPTED = 130  # Ctrl-C: finished parts kept, the same command resumes
EXIT_TERMINATED = 143  # SIGTERM: likewise


def fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    typer.echo(f"trajcomp: error: {message}", err=True)
    raise typer.Exit(code)
