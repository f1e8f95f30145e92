"""Row and column indices as the models take them: checked, never counted from the end."""
from __future__ import annotations

import numbers
from typing import Sequence, Tuple, Union

import numpy as np
import scipy.sparse as sp

from ..errors import InputError

ExcludeArg = Union[str, None, sp.spmatrix]
#: One id or a sequence of ids (a str is always one id).
IdsArg = Union[str, int, Sequence, np.ndarray]
#: One index or a sequence of indices.
IndexArg = Union[int, Sequence[int], np.ndarray]


def numeric_ids(ids) -> bool:
    """Whether ``ids`` holds numbers (not text): one number or a numeric sequence."""
    if isinstance(ids, str):
        return False
    if np.ndim(ids) == 0:
        return isinstance(ids, numbers.Number)
    arr = np.asarray(ids)
    return arr.dtype.kind in "iuf" or (arr.dtype.kind == "O" and any(isinstance(x, numbers.Number) for x in arr.flat))


def as_indices(values: IndexArg, n: int, kind: str) -> Tuple[np.ndarray, bool]:
    """Row/column indices as an int64 array, and whether a single index was given.

    Indices must be integers in ``[0, n)``: a negative index would silently count from the
    end (``-1`` = the last user) and one past the end is a raw ``IndexError``, so both are
    an :class:`InputError` naming the first bad value.
    """
    scalar = np.ndim(values) == 0
    arr = np.asarray(values).reshape(-1) if scalar else np.asarray(values)
    if arr.size == 0:
        return np.zeros(0, dtype=np.int64), scalar
    if arr.dtype.kind not in "iu":
        if arr.dtype.kind == "f" and np.all(np.isfinite(arr)) and np.all(arr == np.round(arr)):
            arr = arr.astype(np.int64)
        else:
            raise InputError(f"{kind} indices must be integers, got {arr.reshape(-1)[0]!r}",
                             hint=f"map ids to indices with {kind}_indices(ids)")
    arr = arr.astype(np.int64, copy=False)
    if arr.ndim != 1:
        raise InputError(f"{kind} indices must be one index or a 1-D sequence, got shape {arr.shape}")
    bad = (arr < 0) | (arr >= n)
    if bad.any():
        first = int(arr[int(np.argmax(bad))])
        raise InputError(f"{kind} index {first} is out of range: the model has {n} {kind}s (0..{n - 1}); "
                         f"{int(bad.sum())} bad index(es)",
                         hint=f"indices are row numbers, not ids: map ids with {kind}_indices(ids)")
    return arr, scalar


def check_k(k) -> int:
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1:
        raise InputError(f"k must be a positive integer, got {k!r}")
    return int(k)
