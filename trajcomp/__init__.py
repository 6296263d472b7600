"""trajcomp: compress agent trajectories so they fit a training context window.

The public API: `TrajectoryCompressor`, `CompressionConfig` and `load_config` here; `trajcomp.hf`
(`datasets`) and `trajcomp.ray` (Ray Data) for engines; `trajcomp.summarizers` for summarizers.
docs/ARCHITECTURE.md describes the packages behind them.
"""

from .core.compressor import TrajectoryCompressor
from .core.config import CompressionConfig, load_config
from .version import __version__

__all__ = ["CompressionConfig", "TrajectoryCompressor", "load_config", "__version__"]
