"""Engines move rows through the row core and never change them: local files (`pipeline`, with work
folders, checkpoints, paths, selection, progress, worker processes, object storage and the summary
cache), Hugging Face `datasets` (`hf`) and Ray (`ray`, the `[ray]` extra), and the dry run (`estimate`).

Imports `core`, `formats`, `summarizers` and `reports`; nothing imports the engines but the CLI and the
public `trajcomp.hf` and `trajcomp.ray` modules.
"""
