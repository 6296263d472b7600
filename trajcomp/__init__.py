"""trajcomp: compress agent trajectories so they fit a training context window."""

__version__ = "0.1.0"

from .config import CompressionConfig, load_config  # noqa: E402
from .compressor import TrajectoryCompressor  # noqa: E402

__all__ = ["CompressionConfig", "TrajectoryCompressor", "load_config", "__version__"]
