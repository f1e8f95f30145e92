"""WRMF: implicit-feedback matrix factorisation by weighted alternating least squares.

Hu, Koren & Volinsky (2008), "Collaborative Filtering for Implicit Feedback Datasets".
Every observed pair has preference ``p_ui = 1`` and confidence ``c_ui = 1 + alpha * f(value)``;
every other pair has ``p_ui = 0`` and confidence 1. The model minimises

    sum_{u,i} c_ui (p_ui - x_u . y_i)^2 + regularization * (sum ||x_u||^2 + sum ||y_i||^2)

by solving for all users with the items fixed, then for all items with the users fixed.
The per-row solves are in the Cython kernel :mod:`mrec_warp.kernels.als`.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import pandas as pd
import scipy.sparse as sp
from threadpoolctl import threadpool_limits

from ..data.confidence import check_confidence, confidence
from ..data.interactions import Interactions, as_csr
from ..data.npz import check_finite, check_shape
from ..errors import InputError, TrainingDivergedError
from ..progress import SILENT, Progress
from ..kernels import als as _als
from ..workers import effective_n_jobs
from .wrmf_users import explain as explain_user, explain_frame as explain_user_frame, fold_in as fold_in_users
from .base import Recommender, factor_scores
from .foldin import append_empty_rows
from .params import check_choice, check_number
from .validation import check_common_params, check_epoch_params, fit_or_select, run_epochs

SOLVERS = ("cg", "cholesky")

Callback = Callable[["WRMF", Dict[str, Any]], Optional[bool]]


class WRMF(Recommender):
    """Weighted regularised matrix factorisation for implicit feedback (Hu et al., 2008).

    ``f(u, i) = x_u . y_i``, fitted by alternating least squares with confidence weights.

    Parameters
    ----------
    factors : int
        Latent dimensions.
    alpha : float
        Confidence slope: an observed pair weighs ``1 + alpha * f(value)``, unobserved pairs 1.
    confidence : {"linear", "log", "none"}
        ``f(value)`` = ``value``, or ``log1p(value / eps)`` for heavy-tailed counts (the
        shared rule of :mod:`mrec_warp.data.confidence`). With ``"none"``, or without values
        (``fit(..., use_values=False)``, a file without a value column), every observed pair
        weighs ``1 + alpha``: WRMF's observed pairs always outweigh the unobserved ones.
    eps : float
        Scale of the ``log`` confidence.
    regularization : float
        L2 penalty on every user and item vector.
    solver : {"cg", "cholesky"}
        ``cg``: ``cg_steps`` conjugate-gradient steps per row and half-iteration, warm-started
        from the previous iterate (Takacs, Pilaszy & Tikk, 2011); ``cholesky``: the exact
        solve of every row (slower by about ``factors / cg_steps``).
    cg_steps : int
        Conjugate-gradient steps per row and half-iteration.
    epochs : int or None
        Run exactly this many ALS iterations (users then items); ``None`` (default) picks
        the count by early stopping on a validation split, up to ``max_epochs``.
    max_epochs, patience, eval_every, eval_k, validation_fraction, validation_users, refit
        Early stopping, as for :class:`~mrec_warp.models.warp.WARP`: evaluate precision@eval_k
        every ``eval_every`` iterations, stop at the first evaluation ``patience`` or more
        iterations after the last improvement, and (``refit``) refit from scratch on all the
        data for the best count.
    init_scale : float
        Initial item factors are normal with standard deviation ``init_scale / sqrt(factors)``;
        user factors start at 0 (the first half-iteration solves for them).
    n_jobs : int
        Threads solving blocks of rows at once. Each row's solve depends only on its own data
        and BLAS runs single-threaded, so a fixed ``random_state`` gives bit-for-bit the same
        model on one thread and, on this build, on any number of threads.
    random_state : int or None
        Seed of the initial factors and the validation split.
    verbose : bool
        Log one line per iteration to standard error.
    """

    def __init__(
        self,
        factors: int = 64,
        alpha: float = 1.0,
        confidence: str = "linear",
        eps: float = 1.0,
        regularization: float = 40.0,
        solver: str = "cg",
        cg_steps: int = 3,
        epochs: Optional[int] = None,
        max_epochs: int = 50,
        patience: int = 3,
        eval_every: int = 1,
        eval_k: int = 10,
        validation_fraction: float = 0.1,
        validation_users: int = 5000,
        refit: bool = True,
        init_scale: float = 1.0,
        n_jobs: int = 1,
        random_state: Optional[int] = None,
        verbose: bool = False,
    ) -> None:
        self.factors = factors
        self.alpha = alpha
        self.confidence = confidence
        self.eps = eps
        self.regularization = regularization
        self.solver = solver
        self.cg_steps = cg_steps
        self.epochs = epochs
        self.max_epochs = max_epochs
        self.patience = patience
        self.eval_every = eval_every
        self.eval_k = eval_k
        self.validation_fraction = validation_fraction
        self.validation_users = validation_users
        self.refit = refit
        self.init_scale = init_scale
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose

    # -- checks ------------------------------------------------------------------------------
    def _check_params(self) -> None:
        check_number(self.factors, "factors", integer=True, at_least=1)
        check_confidence(self.confidence, self.alpha, self.eps)
        check_number(self.regularization, "regularization", at_least=0)
        check_choice(self.solver, "solver", SOLVERS)
        check_number(self.cg_steps, "cg_steps", integer=True, at_least=1)
        check_number(self.init_scale, "init_scale", at_least=0)
        check_epoch_params(self)
        check_common_params(self)

    def confidences(self, values: Optional[np.ndarray], n: Optional[int] = None) -> np.ndarray:
        """The confidence of observed pairs with these values: the shared rule
        (:func:`mrec_warp.data.confidence.confidence`), or ``1 + alpha`` for each of ``n`` pairs
        when there are no values (``None``) or ``confidence`` is ``"none"``."""
        if values is None or self.confidence == "none":
            return np.full(len(values) if values is not None else int(n), 1.0 + float(self.alpha), dtype=np.float32)
        return confidence(values, self.confidence, float(self.alpha), float(self.eps))

    # -- state -------------------------------------------------------------------------------
    def _init_state(self, n_users: int, n_items: int, rng: np.random.Generator) -> None:
        d = int(self.factors)
        self.user_factors_ = np.zeros((n_users, d), dtype=np.float32)
        self.item_factors_ = rng.standard_normal((n_items, d), dtype=np.float32) * np.float32(
            self.init_scale / np.sqrt(d))
        self.epochs_done_ = 0

    def _snapshot(self) -> Tuple[np.ndarray, np.ndarray]:
        return self.user_factors_.copy(), self.item_factors_.copy()

    def _restore(self, snap: Tuple[np.ndarray, np.ndarray]) -> None:
        self.user_factors_, self.item_factors_ = snap

    def _gram(self, Y: np.ndarray) -> np.ndarray:
        """``Y^T Y + reg * I`` (BLAS), the part of every row's system that all rows share."""
        G = Y.T @ Y
        G[np.diag_indices_from(G)] += np.float32(self.regularization)
        return np.ascontiguousarray(G, dtype=np.float32)

    # -- one half-iteration ------------------------------------------------------------------
    def _solve_rows(self, X: np.ndarray, Y: np.ndarray, rows: "_Rows", pool: Optional[ThreadPoolExecutor],
                    exact: bool = False) -> None:
        """Solve every row of ``rows`` for ``X`` against the fixed ``Y`` (in place)."""
        G = self._gram(Y)
        exact = exact or self.solver == "cholesky"

        def run(bounds: Tuple[int, int]) -> int:
            if exact:
                return _als.solve_exact(X, Y, G, rows.indptr, rows.indices, rows.conf, *bounds)
            _als.solve_cg(X, Y, G, rows.indptr, rows.indices, rows.conf, *bounds, int(self.cg_steps))
            return 0

        chunks = rows.chunks(X.shape[1], 1 if pool is None else effective_n_jobs(self.n_jobs))
        failed = sum(pool.map(run, chunks) if pool is not None else map(run, chunks))
        if failed:
            raise TrainingDivergedError(f"{failed} least-squares systems were not positive definite",
                                        hint="use regularization > 0")

    def _half_iteration(self, data: "_TrainingData", side: str, pool: Optional[ThreadPoolExecutor] = None) -> None:
        if side == "users":
            self._solve_rows(self.user_factors_, self.item_factors_, data.users, pool)
        else:
            self._solve_rows(self.item_factors_, self.user_factors_, data.items, pool)

    def _iteration(self, data: "_TrainingData", pool: Optional[ThreadPoolExecutor]) -> None:
        self._half_iteration(data, "users", pool)
        self._half_iteration(data, "items", pool)
        self.epochs_done_ += 1
        # a float64 sum is finite exactly when every entry is (and needs no n x d temporary)
        if not (np.isfinite(self.user_factors_.sum(dtype=np.float64))
                and np.isfinite(self.item_factors_.sum(dtype=np.float64))):
            raise TrainingDivergedError(f"training diverged at iteration {self.epochs_done_}: factors are not finite",
                                        hint="raise regularization or lower alpha")

    def loss(self, data: Optional["_TrainingData"] = None) -> float:
        """The objective on the training data (or ``data``): weighted squared error plus L2."""
        self._check_fitted()
        rows = (data or _TrainingData(self._confidence_csr())).users
        X = self.user_factors_.astype(np.float64)
        Y = self.item_factors_.astype(np.float64)
        everything = float(np.sum((X.T @ X) * (Y.T @ Y)))  # sum over all pairs of s^2
        observed = _als.observed_loss(self.user_factors_, self.item_factors_, rows.indptr, rows.indices, rows.conf)
        return everything + observed + float(self.regularization) * float((X * X).sum() + (Y * Y).sum())

    # -- public training API -----------------------------------------------------------------
    def fit(self, X, validation=None, callbacks: Sequence[Callback] = (), progress: Optional[Progress] = None,
            use_values: bool = True, user_ids: Optional[Sequence] = None,
            item_ids: Optional[Sequence] = None) -> "WRMF":
        """Fit on a users x items matrix (CSR or :class:`Interactions`) of values.

        Parameters
        ----------
        X : Interactions or sparse matrix
            Every stored non-zero entry is an observed pair; its value sets the confidence.
        validation : Interactions or sparse matrix, optional
            Held-out positives (same shape) for early stopping; without it, and with
            ``epochs=None``, ``validation_fraction`` of each user's items is held out and,
            if ``refit``, the model is refitted on everything for the best count.
        callbacks : sequence of callables
            ``callback(model, logs)`` after every iteration; returning ``True`` stops.
        progress : Progress, optional
        use_values : bool
            ``False``: ignore the values, every observed pair weighs ``1 + alpha``.
        user_ids, item_ids : sequences, optional
            With a plain matrix: the id of each row and column, as for WARP.
        """
        self._check_params()
        progress = progress or (Progress(verbose=True) if self.verbose else SILENT)
        X = self._with_ids(X, user_ids, item_ids)
        raw = X.matrix if isinstance(X, Interactions) else as_csr(X)
        csr = self._set_training_data(X)
        if raw.nnz != csr.nnz:  # binary_csr dropped explicit zeros: drop their values too
            raw = raw.copy()
            raw.eliminate_zeros()
        self.confidence_ = self.confidences(raw.data if use_values else None, csr.nnz)
        conf_csr = self._confidence_csr()
        self.history_: List[Dict[str, Any]] = []
        fit_or_select(self, conf_csr, validation, np.random.default_rng(self.random_state), progress, callbacks,
                      unit="iteration")
        return self

    def _confidence_csr(self) -> sp.csr_matrix:
        return sp.csr_matrix((self.confidence_, self.train_.indices, self.train_.indptr), shape=self.train_.shape)

    def _train(self, conf_csr, epochs, progress, callbacks, validation=None, phase="fit") -> int:
        """Run up to ``epochs`` iterations; with ``validation``, early-stop and keep the best."""
        data = _TrainingData(conf_csr)
        with _thread_pool(self.n_jobs) as pool:
            def step():
                self._iteration(data, pool)
                return {}, ""

            return run_epochs(self, step, epochs, progress, callbacks, validation, phase, unit="iteration",
                              n_jobs=effective_n_jobs(self.n_jobs))

    # -- scoring -------------------------------------------------------------------------------
    def score_users(self, users: np.ndarray, out: Optional[np.ndarray] = None) -> np.ndarray:
        self._check_fitted()
        return factor_scores(self.user_factors_[np.asarray(users)], self.item_factors_, None, out)

    @property
    def user_factors(self) -> np.ndarray:
        return self.user_factors_

    @property
    def item_factors(self) -> np.ndarray:
        return self.item_factors_

    # -- fold-in and explanations ------------------------------------------------------------
    def fold_in(self, history, epochs: Optional[int] = None, progress: Optional[Progress] = None,
                user_ids: Optional[Sequence] = None) -> "WRMF":
        """Add users from a history by one exact solve each, without refitting (in place;
        returns ``self``). ``history`` is anything :meth:`WARP.fold_in` takes (a sparse
        matrix's values are confidences' values, its rows the users ``user_ids``). See
        :func:`mrec_warp.models.wrmf_users.fold_in`."""
        return fold_in_users(self, history, epochs=epochs, progress=progress, user_ids=user_ids)

    def _append_users(self, ids: np.ndarray, user_features=None) -> None:
        if user_features is not None:
            raise InputError("user features need a hybrid model", hint="train with `model=hybrid`")
        d = self.user_factors_.shape[1]
        self.user_factors_ = np.vstack([self.user_factors_, np.zeros((len(ids), d), np.float32)])
        self.user_ids = np.concatenate([self.user_ids, np.asarray(ids, dtype=str)])
        self.train_ = append_empty_rows(self.train_, len(ids))
        self._interactions_cache = None


    def explain(self, user: int, items: Sequence[int], k: int = 10) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Which of ``user``'s training items drove the scores of ``items``: (history items,
        contributions, scores), see :func:`mrec_warp.models.wrmf_users.explain`."""
        return explain_user(self, user, items, k=k)

    def explain_frame(self, user_id, item_ids: Optional[Sequence] = None, k: int = 5, n: int = 10) -> pd.DataFrame:
        """:meth:`explain` for ids, as a table (user, item, score, history_item, contribution,
        rank); without ``item_ids`` the user's top-``n`` recommendations are explained."""
        return explain_user_frame(self, user_id, item_ids, k=k, n=n)

    # -- persistence -------------------------------------------------------------------------
    def _get_arrays(self) -> Dict[str, np.ndarray]:
        return {"user_factors": self.user_factors_, "item_factors": self.item_factors_,
                "confidence": self.confidence_}

    @classmethod
    def _array_spec(cls, params: Dict[str, Any], n_users: int, n_items: int) -> Dict[str, Tuple[str, Tuple]]:
        """Kind and shape of each saved array (``None``: any size), checked before loading."""
        d = params.get("factors")
        return {"user_factors": ("f", (n_users, d)), "item_factors": ("f", (n_items, d)),
                "confidence": ("f", (None,))}

    def _set_arrays(self, arrays: Dict[str, np.ndarray]) -> None:
        uf, itf, conf = (np.ascontiguousarray(arrays[k], dtype=np.float32)
                         for k in ("user_factors", "item_factors", "confidence"))
        d = uf.shape[1] if uf.ndim == 2 else -1
        check_shape(uf, (self.n_users, d), "user factors")
        check_shape(itf, (self.n_items, d), "item factors")
        check_shape(conf, (self.train_.nnz,), "confidences (one per training pair)")
        for arr, what in ((uf, "user factors"), (itf, "item factors"), (conf, "confidences")):
            check_finite(arr, what)
        if len(conf) and conf.min() < 1:
            raise ValueError("confidences below 1")
        self.user_factors_, self.item_factors_, self.confidence_ = uf, itf, conf

    def _get_attrs(self) -> Dict[str, Any]:
        return {**super()._get_attrs(), "epochs_done_": int(getattr(self, "epochs_done_", 0)),
                "best_epoch_": int(getattr(self, "best_epoch_", 0) or 0)}


class _Rows:
    """One side of the problem: CSR structure and confidences of the rows being solved."""

    def __init__(self, csr: sp.csr_matrix) -> None:
        self.indptr = csr.indptr.astype(np.int64, copy=False)
        self.indices = csr.indices
        self.conf = np.ascontiguousarray(csr.data, dtype=np.float32)

    def chunks(self, d: int, n_workers: int) -> List[Tuple[int, int]]:
        """Row ranges of about equal work (a row costs about d + its entries per CG step),
        four per worker so a slow range does not leave the others idle."""
        n = len(self.indptr) - 1
        if n_workers <= 1 or n == 0:
            return [(0, n)]
        cost = np.cumsum(np.diff(self.indptr) + d)
        cuts = np.searchsorted(cost, np.linspace(0, cost[-1], 4 * n_workers + 1)[1:-1])
        bounds = np.unique(np.concatenate([[0], cuts, [n]]))
        return [(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:])]


class _TrainingData:
    """Both sides of a confidence matrix: users x items and its transpose."""

    def __init__(self, conf_csr: sp.csr_matrix) -> None:
        self.users = _Rows(conf_csr)
        self.items = _Rows(conf_csr.T.tocsr())


@contextmanager
def _thread_pool(n_jobs: Optional[int]) -> Iterator[Optional[ThreadPoolExecutor]]:
    """Plain threads for the kernels (they release the GIL); none for one job.

    As for WARP, not joblib.Parallel: its set-up per call is as long as a half-iteration on
    a small data set. BLAS runs on one thread throughout: the Gram matrices then come out
    the same whatever ``n_jobs`` is (so do the factors, as every row's solve is independent),
    they cost little next to the solves, and BLAS threads competing with ours (or with other
    programs on a busy machine) made a 1414 x 64 Gram matrix take 100 ms instead of 0.2 ms.
    """
    n = effective_n_jobs(n_jobs)
    with threadpool_limits(limits=1, user_api="blas"):
        if n <= 1:
            yield None
            return
        with ThreadPoolExecutor(max_workers=n) as pool:
            yield pool
