"""Engines move rows through the row core and never change them. One folder per job, each importing
only those below it (docs/ARCHITECTURE.md):

- `runners/`: what moves rows: local files (`pipeline`), worker processes (`workers`), Ray (`ray`, the
  `[ray]` extra), `datasets` (`hf`), the dry run (`estimate`) and the run's end (`run_report`);
- `parts/`: parts and resume: a part's rows and files, checkpoints and manifests, the work a worker
  or actor does on a part, the coordinator's stream of parts, and parts through object storage;
- `summaries/`: buying summaries: the summary cache and batch rounds, answers and files;
- `flow/`: what every run needs: its layout (`paths`), selection, order, progress, a record's fate;
- `storage/`: object storage (`remote`).

Imports `core`, `formats`, `summarizers` and `reports`; only the CLI and the public `trajcomp.hf` and
`trajcomp.ray` modules import the engines.
"""
