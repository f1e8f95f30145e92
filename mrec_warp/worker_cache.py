"""A per-process cache of inputs read from files: workers load each model or staged input
once, however many units of a job they run (:mod:`mrec_warp.jobs`)."""
from __future__ import annotations

import os
import threading
from typing import Any, Callable, Dict, Tuple

import numpy as np

from .files import PathLike
from .models import load as load_model

_CACHE: Dict[Tuple, Any] = {}
_CACHE_LOCK = threading.Lock()
_CACHE_MAX = 4  # a worker rarely needs more than a model and a job's inputs


def cached(kind: str, path: PathLike, loader: Callable[[str], Any]) -> Any:
    """``loader(path)``, memoised per process on (path, size, mtime) so a changed file reloads."""
    st = os.stat(path)
    key = (kind, os.path.abspath(path), st.st_size, st.st_mtime_ns)
    with _CACHE_LOCK:
        if key in _CACHE:
            return _CACHE[key]
    value = loader(str(path))
    with _CACHE_LOCK:
        if len(_CACHE) >= _CACHE_MAX:
            _CACHE.pop(next(iter(_CACHE)))
        _CACHE[key] = value
    return value


def cached_model(path: PathLike):
    """The model in ``path``, loaded once per process."""
    return cached("model", path, load_model)


class ModelScorer:
    """A picklable ``score_fn`` for :func:`~mrec_warp.topk.iter_top_k`: pickles as the
    model file's path, and loads the model once per worker process."""

    def __init__(self, path: PathLike) -> None:
        self.path = str(path)

    def __call__(self, rows: np.ndarray) -> np.ndarray:
        return cached_model(self.path).score_users(rows)


__all__ = ["ModelScorer", "cached", "cached_model"]
