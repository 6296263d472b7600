"""trajcomp: compress agent trajectories so they fit a training context window.

The public API: `TrajectoryCompressor`, `CompressionConfig` and `load_config` here; `trajcomp.hf`
(`datasets`) and `trajcomp.ray` (Ray Data) for engines; `trajcomp.summarizers` for summarizers.
docs/ARCHITECTURE.md describes the packages behind them.
"""

from .version import __version__
from .core.config import CompressionConfig, load_config
from .core.compressor import TrajectoryCompressor

__all__ = ["CompressionConfig", "TrajectoryCompressor", "load_config", "__version__"]
