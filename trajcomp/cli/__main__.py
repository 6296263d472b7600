"""`python -m trajcomp.cli`: the `trajcomp` command."""

from .commands import main

main()
