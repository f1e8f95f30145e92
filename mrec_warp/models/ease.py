"""EASE (Steck, 2019): a closed-form item-item model, ``B = I - P diag(1 / diag P)``.

``P = (X'X + lambda I)^-1`` is the inverse of the regularised Gram matrix; ``B`` is the
least-squares item-item weight matrix with a zero diagonal. It is dense, so EASE needs
``n_items^2`` floats: the fit checks that against a memory limit *before* allocating and
refuses with a one-line error saying how much it needs. ``max_items`` restricts the model
to the most popular items (the rest are never recommended) for catalogues too large.

The inverse goes through a Cholesky factorisation done in place by LAPACK (``potrf`` then
``potri``), so the Gram matrix, its factor and ``P`` share one ``n^2`` buffer; the Gram
matrix is filled from sparse products in row blocks, never a sparse ``X'X`` of its own.
"""
from __future__ import annotations

from typing import Optional

import numpy as np
import scipy.sparse as sp
from threadpoolctl import threadpool_limits
from scipy.linalg import lapack

from ..errors import InputError
from .. import memory
from ..workers import effective_n_jobs
from ..progress import Progress
from ._itemsim import ItemSimilarity
from .params import check_choice, check_n_jobs, check_number

DTYPES = ("float32", "float64")


class EASE(ItemSimilarity):
    """Embarrassingly shallow autoencoder: dense item-item weights in closed form.

    Parameters
    ----------
    l2 : float
        ``lambda``, the L2 penalty on the weights (Steck's only hyper-parameter). The default,
        200, was at least as good as 400 on every set of the selection suite and up to 6%
        better (``scripts/bench_defaults.py``).
    dtype : {"float32", "float64"}
        Precision of the factorisation. The weights are stored as float32 either way. On
        ml-100k and two synthetic sets float32 gave the same top-10 lists' precision as
        float64 to 5 digits (weights within 5e-7), in a third of the memory and faster.
    max_items : int or None
        Learn the weights among only this many most popular items; others are never
        recommended. ``None``: every item.
    memory_limit_mb : float or None
        Most memory the fit may use; default: 3/4 of the memory available at fit time
        (:func:`~mrec_warp.memory.available_bytes`: a container's limit and ``ulimit -v`` count).
    n_jobs : int
        BLAS threads of the factorisation (-1: every core). On a machine whose cores are
        busy with other work, more BLAS threads than free cores make it many times slower
        (they spin waiting for each other), so the default is one.
    """

    _dense_weights = True

    def __init__(self, l2: float = 200.0, dtype: str = "float32", max_items: Optional[int] = None,
                 memory_limit_mb: Optional[float] = None, n_jobs: int = 1) -> None:
        self.l2 = l2
        self.dtype = dtype
        self.max_items = max_items
        self.memory_limit_mb = memory_limit_mb
        self.n_jobs = n_jobs

    def _check_params(self) -> None:
        check_number(self.l2, "l2", above=0, hint="the Gram matrix may be singular")
        check_choice(self.dtype, "dtype", DTYPES)
        check_number(self.max_items, "max_items", integer=True, at_least=1, optional=True)
        check_number(self.memory_limit_mb, "memory_limit_mb", above=0, optional=True)
        check_n_jobs(self.n_jobs)

    @staticmethod
    def memory_needed(n_items: int, dtype: str = "float32", nnz: int = 0) -> int:
        """Peak bytes a fit over ``n_items`` items and ``nnz`` interactions adds: the ``n^2``
        factorisation buffer, the float32 copy of the weights when factorising in float64,
        and the working set of the Gram matrix's construction (two copies of the
        interactions in float64 and a band of sparse products, 32 MB dense)."""
        itemsize = np.dtype(dtype).itemsize
        square = n_items * n_items * (itemsize + (4 if itemsize != 4 else 0))
        return square + 3 * 12 * nnz + 96 * 2**20

    def _learn_weights(self, csr: sp.csr_matrix, progress: Progress) -> np.ndarray:
        n_all = csr.shape[1]
        if self.max_items is not None and int(self.max_items) < n_all:
            counts = self.item_counts_
            order = np.lexsort((np.arange(n_all), -counts))  # most popular first, ties by index
            self.kept_items_ = np.sort(order[: int(self.max_items)]).astype(np.int64)
            csr = sp.csr_matrix(csr[:, self.kept_items_])
        n = csr.shape[1]
        need = self.memory_needed(n, self.dtype, csr.nnz)
        limit = (self.memory_limit_mb * 2**20 if self.memory_limit_mb is not None
                 else 0.75 * memory.available_bytes())
        if need > limit:
            raise InputError(
                f"EASE on {n:,} items needs {need / 2**30:.1f} GiB ({self.dtype}, n_items^2 and working space), "
                f"more than the {limit / 2**30:.1f} GiB limit",
                hint="restrict it to the most popular items with `max_items`"
                     + (", use `dtype=float32`" if self.dtype != "float32" else "")
                     + ", or pick `model=itemknn` or slim")
        dtype = np.dtype(self.dtype)
        progress.log(f"ease: {n:,} items, {need / 2**20:,.0f} MiB in {dtype.name}")
        with threadpool_limits(effective_n_jobs(self.n_jobs), user_api="blas"):
            gram = gram_matrix(csr, dtype)
            gram[np.diag_indices(n)] += dtype.type(self.l2)
            return ease_from_gram(gram)


def gram_matrix(csr: sp.csr_matrix, dtype=np.float64, rows_per_block: Optional[int] = None) -> np.ndarray:
    """Dense ``X'X`` filled a block of rows at a time from sparse products."""
    n = csr.shape[1]
    csc = sp.csc_matrix(csr, dtype=np.float64)
    xt = sp.csr_matrix(csc.T)
    gram = np.empty((n, n), dtype=dtype)
    step = rows_per_block or max(1, (32 * 2**20) // (8 * max(n, 1)))
    for a in range(0, n, step):
        b = min(a + step, n)
        gram[a:b] = (xt[a:b] @ csc).toarray()
    return gram


def ease_from_gram(gram: np.ndarray) -> np.ndarray:
    """``B = I - P diag(1 / diag P)`` with ``P = gram^-1``, computed in ``gram``'s buffer.

    ``gram`` (C-contiguous, symmetric positive definite, regulariser already on the diagonal)
    is overwritten. Returns the float32 weights (the same buffer when ``gram`` is float32).
    """
    n = gram.shape[0]
    # gram is symmetric, so its transpose (Fortran order, no copy) is the same matrix
    # LAPACK wants; "lower=0" on the transpose is the lower triangle of the C array.
    potrf, potri = lapack.get_lapack_funcs(("potrf", "potri"), (gram,))
    _, info = potrf(gram.T, lower=0, overwrite_a=1, clean=0)
    if info != 0:
        raise InputError("EASE's Gram matrix is not positive definite (numerically)",
                         hint="raise `l2`")
    _, info = potri(gram.T, lower=0, overwrite_c=1)
    if info != 0:
        raise InputError("EASE's Gram matrix could not be inverted", hint="raise `l2`")
    # P's lower triangle (C order) is valid: mirror it to the upper one, a band at a time
    step = max(1, (32 * 2**20) // (gram.itemsize * max(n, 1)))
    for a in range(0, n, step):
        b = min(a + step, n)
        gram[a:b, b:] = gram[b:, a:b].T
        block = gram[a:b, a:b]
        block[np.triu_indices(b - a, 1)] = block.T[np.triu_indices(b - a, 1)]
    diag = gram.diagonal().copy()
    if not (np.isfinite(diag).all() and (diag > 0).all()):
        raise InputError("EASE's inverse is not finite", hint="raise `l2` or use `dtype=float64`")
    gram /= -diag[None, :]
    gram[np.diag_indices(n)] = 0.0
    return gram if gram.dtype == np.float32 else gram.astype(np.float32)
