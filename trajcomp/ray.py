"""Compress a Ray Dataset on Ray actors (the `[ray]` extra): the public entry point of the Ray engine.

`compress(ds, config)`; trajcomp/engines/runners/ray.py does the work.
"""

from .engines.runners.ray import compress

__all__ = ["compress"]
