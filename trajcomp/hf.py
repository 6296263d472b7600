"""Compress a Hugging Face `datasets` Dataset: the public entry point of the `datasets` engine.

`compress_dataset(dataset, config)` and `map_function(config)`; trajcomp/engines/runners/hf.py does the work.
"""

from .engines.runners.hf import BatchFunction, RowRejected, SummariesFailing, compress_dataset, map_function

__all__ = ["BatchFunction", "RowRejected", "SummariesFailing", "compress_dataset", "map_function"]
