"""Engines move rows through the row core and never change them: local files (`pipeline`, with the
run's order, parts, checkpoints, paths, selection, progress, worker processes, object storage and the
summary cache), Hugging Face `datasets` (`hf`), Ray (`ray`, the `[ray]` extra) and the dry run (`estimate`).

Imports `core`, `formats`, `summarizers` and `reports`; only the CLI and the public `trajcomp.hf` and
`trajcomp.ray` modules import the engines.
"""
