"""The row core: the only place rows change. Imports nothing else from trajcomp: engines, formats,
summarizers and reports import it.

- `compressor.py`: `TrajectoryCompressor`, a row in, its output rows (or its reject) and figures out.
- `config.py`, `config_layout.py`: `CompressionConfig` and the config file's sections and keys.
- `metrics.py`, `row_result.py`: a row's figures and the run's aggregate; a row's result.
- `json_codec.py`: the one JSON serializer of rows, parts, caches and batch files (orjson, the standard
  library where orjson would read or write another value).

Its folders, bottom to top (each imports only those below it; docs/ARCHITECTURE.md): `dialects/`,
`counting/`, `planning/`, `summary/`, `segments/`.
"""
