"""mrec-warp: recommendations from implicit feedback.

The public API; everything else is an implementation detail.
"""
__version__ = "0.1.0"

from .errors import InputError, TrainingDivergedError  # noqa: E402
from .data.interactions import Interactions  # noqa: E402
from .data.io import read_ratings  # noqa: E402

__all__ = ["__version__", "InputError", "TrainingDivergedError", "Interactions", "read_ratings"]
