"""WRMF: implicit-feedback matrix factorisation by weighted alternating least squares.

Hu, Koren & Volinsky (2008), "Collaborative Filtering for Implicit Feedback Datasets".
Every observed pair has preference ``p_ui = 1`` and confidence ``c_ui = 1 + alpha * f(value)``;
every other pair has ``p_ui = 0`` and confidence 1. The model minimises

    sum_{u,i} c_ui (p_ui - x_u . y_i)^2 + regularization * (sum ||x_u||^2 + sum ||y_i||^2)

by solving for all users with the items fixed, then for all items with the users fixed.
The per-row solves are in the Cython kernel :mod:`mrec_warp.kernels.als`.
"""
from __future__ import annotations

import contextlib
from typing import Any, Callable, Dict, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
import pandas as pd
import scipy.sparse as sp

from ..data.confidence import (AUTO_ALPHA, CONFIDENCES, MAX_CONFIDENCE, all_equal, auto_alpha,
                               binary_alpha, check_confidence, confidence, observed_sizes)
from ..data.interactions import Interactions, as_csr
from ..data.npz import check_finite, check_shape
from ..errors import InputError, TrainingDivergedError
from ..progress import SILENT, Progress
from ..kernels import als as _als
from ..workers import Workers, effective_n_jobs
from .als_blocks import TrainingData as _TrainingData, block_solver, solves_remotely
from .wrmf_users import explain as explain_user, explain_frame as explain_user_frame, fold_in as fold_in_users
from .factor_model import FactorModel
from .foldin import refuse_features
from .history_vectors import wrmf_vector
from .declared import Param, n_jobs_param, seed_param, verbose_param
from .tuning import SCORE_RATE, TrialShape
from .validation import check_epochs, early_stopping_params, run_epochs

SOLVERS = ("cg", "cholesky")
Callback = Callable[["WRMF", Dict[str, Any]], Optional[bool]]


class WRMF(FactorModel):
    """Weighted regularised matrix factorisation for implicit feedback (Hu et al., 2008).

    ``f(u, i) = x_u . y_i``, fitted by alternating least squares with confidence weights.

    Parameters
    ----------
    factors : int
        Latent dimensions.
    alpha : float or "auto"
        Confidence slope: an observed pair weighs ``1 + alpha * f(value)``, unobserved pairs 1.
        ``"auto"`` (default) resolves at fit (:func:`auto_alpha`, kept as ``alpha_`` and
        logged). On a binary file (every value the same, or no values) every observed pair
        weighs ``1 + 3`` while the data is small against the fixed regularization and
        ``1 + 1`` once it is large: :func:`~mrec_warp.data.confidence.binary_evidence`
        ``= sqrt(users * pairs) * (pairs / items) ** 0.2`` up to 90,000 gives 3, from 130,000
        gives 1, geometric in between. On values that differ (ratings, counts) alpha 1, the
        previous default (scaling it to the mean value lost 2.5% on one suite set). Chosen on
        the selection suite and 34 binary sets of other shapes (``scripts/bench_defaults.py``,
        docs/models/wrmf.rst, 'alpha "auto"'): alpha 3 was 3-93% above alpha 1 on every small binary set and
        2-20% below it on every large one (20,000 users x 400 items, 200,000 pairs: -4%).
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
        iterations after the last improvement (``patience`` 10: with 3, the noisy hold-out of
        ml-latest-small stopped at iteration 3-5 where 15 scored 3% higher; on the selection
        suite, 3 seeds, 10 moved P@10 by -0.0003 on ml-100k and +0.0057 / +0.0021 / +0.0003 /
        +0.0004 / 0 on the others, for up to 2.6x the fit time, still 0.3-2.6 s), and
        (``refit``) refit from scratch on all the data for the best count.
    init_scale : float
        Initial item factors are normal with standard deviation ``init_scale / sqrt(factors)``;
        user factors start at 0 (the first half-iteration solves for them).
    n_jobs : int
        Threads solving blocks of rows at once (``fit(..., workers=...)`` solves them on
        processes or a Dask cluster instead). Each row's solve depends only on its own data
        and BLAS runs single-threaded, so a fixed ``random_state`` gives bit-for-bit the same
        model on one thread and, on this build, on any number of threads or workers.
    random_state : int or None
        Seed of the initial factors and the validation split.
    verbose : bool
        Log one line per iteration to standard error.
    """

    # -- what tune asks (TuneHooks) --------------------------------------------------------------
    #: Iteration caps of a budgeted search's rungs (the last: the full trial).
    tune_rungs = (5, 10, None)
    #: Seconds per ``(users + items) x factors^2`` and iteration (one thread), measured on
    #: ml-100k and a 1.9k x 16k long-tail synthetic set (2 shared cores).
    TUNE_RATE = 2.0e-9
    #: Iterations an early-stopped full trial is assumed to run.
    TUNE_EPOCHS = 15

    @classmethod
    def fit_cost(cls, shape: TrialShape, params: Mapping[str, Any], epochs_cap: Optional[int] = None) -> float:
        """Iterations (the typical count, or the cap) of ALS solves and of validation scoring."""
        epochs = min(epochs_cap, cls.TUNE_EPOCHS) if epochs_cap else cls.TUNE_EPOCHS
        f = int(params.get("factors", 64))
        per_epoch = cls.TUNE_RATE * (shape.users + shape.items) * f * f \
            + SCORE_RATE * shape.sampled_users(epochs_cap) * shape.items
        return epochs * per_epoch + shape.scoring()

    @classmethod
    def trial_params(cls, values: Mapping[str, Any], shared: Mapping[str, Any], k: int,
                     epochs_cap: Optional[int] = None) -> Dict[str, Any]:
        """The seed only of the search's shared parameters (ALS converges in few iterations:
        its own ``max_epochs`` and patience), early stopping scored on every validation user."""
        return super().trial_params(values, {"random_state": shared.get("random_state"), "validation_users": 10**9},
                                    k, epochs_cap)

    name = "wrmf"
    supports_confidence = True
    _STOPPING = early_stopping_params(max_epochs=50, patience=10, eval_every=1, unit="iteration",
                                      refit_help="After early stopping, refit from scratch on all the data for "
                                                 "the best iteration count.")
    PARAMETERS = (
        Param("factors", int, 64, "Latent dimensions.", low=1, tune=[32, 64, 128]),
        Param("alpha", float, "auto", "Confidence slope: an observed pair weighs 1 + alpha*f(value); auto: on a "
              "binary file 3 while sqrt(users*pairs)*(pairs/items)^0.2 <= 90,000, 1 from 130,000 (geometric in "
              "between); on values that differ 1.", low=0, check=False,
              tune=("log", 0.3, 30.0), grid=(1.0, 5.0, 20.0)),
        Param("confidence", str, "linear", "f(value): value (linear), log1p(value/eps) (log), or none = every "
              "observed pair weighs 1 + alpha.", choices=CONFIDENCES, tune=["linear", "log"]),
        Param("eps", float, 1.0, "Confidence log: the value that counts as one unit.", low=0, open=True,
              check=False),  # alpha and eps: the confidence rule's (_check_extra)
        Param("regularization", float, 40.0, "L2 penalty on every vector.", low=0, tune=("log", 1.0, 200.0),
              grid=(10.0, 40.0, 160.0)),
        Param("solver", str, "cg", "cg: a few conjugate-gradient steps per row; cholesky: the exact solve.",
              choices=SOLVERS, option=False),
        Param("cg_steps", int, 3, "Conjugate-gradient steps per row and half-iteration.", low=1, tune=True,
              option=False),
        _STOPPING["epochs"], _STOPPING["max_epochs"], _STOPPING["patience"], _STOPPING["eval_every"],
        _STOPPING["eval_k"], _STOPPING["validation_fraction"], _STOPPING["validation_users"], _STOPPING["refit"],
        Param("init_scale", float, 1.0, "Initial item factors' standard deviation times sqrt(factors).", low=0,
              option=False),
        n_jobs_param("Threads solving blocks of rows at once (-1: every core)."),
        seed_param(),
        verbose_param(),
    )

    def __init__(
        self,
        factors: int = 64,
        alpha: Union[float, str] = "auto",
        confidence: str = "linear",
        eps: float = 1.0,
        regularization: float = 40.0,
        solver: str = "cg",
        cg_steps: int = 3,
        epochs: Optional[int] = None,
        max_epochs: int = 50,
        patience: int = 10,
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
    #: factors x factors matrices a fit holds: the Gram matrix, and one system per solve.
    GRAM_COPIES = 2

    def _check_extra(self) -> None:
        check_epochs(self)
        if isinstance(self.alpha, str):
            if self.alpha != "auto":
                raise InputError(f"`alpha` must be a number >= 0 or \"auto\", got {self.alpha!r}",
                                 hint="e.g. `alpha=auto` (from the data) or `alpha=5`")
            check_confidence(self.confidence, 1.0, self.eps)  # the shared rule, alpha resolved by fit
        else:
            check_confidence(self.confidence, self.alpha, self.eps)  # the shared rule of every confidence

    def _check_file_params(self) -> None:
        if not isinstance(self.alpha, str):  # ("auto" was resolved by the fit into alpha_)
            # a file has no values to check alpha against: the largest any file holds
            check_confidence(self.confidence, self.alpha, self.eps, bounded=True)

    def confidences(self, values: Optional[np.ndarray], n: Optional[int] = None) -> np.ndarray:
        """The confidence of observed pairs with these values: the shared rule
        (:func:`mrec_warp.data.confidence.confidence`), or ``1 + alpha`` for each of ``n`` pairs
        when there are no values (``None``) or ``confidence`` is ``"none"``."""
        alpha = self.resolved_alpha()
        if values is None or self.confidence == "none":
            count = len(values) if values is not None else n
            if count is None:
                raise ValueError("confidences without values need the number of pairs (n)")
            return np.full(count, 1.0 + alpha, dtype=np.float32)
        return confidence(values, self.confidence, alpha, float(self.eps))

    def resolved_alpha(self) -> float:
        """The ``alpha`` in force: ``alpha_`` as the fit resolved ``"auto"``, else ``alpha``."""
        if isinstance(self.alpha, str):
            resolved = getattr(self, "alpha_", None)
            if resolved is None:
                raise InputError("`alpha=auto` is resolved by fit: fit the model first")
            return float(resolved)
        return float(self.alpha)

    # -- state -------------------------------------------------------------------------------
    def init_state(self, n_users: int, n_items: int, rng: np.random.Generator) -> None:
        d = int(self.factors)
        self.user_factors_ = np.zeros((n_users, d), dtype=np.float32)
        self.item_factors_ = rng.standard_normal((n_items, d), dtype=np.float32) * np.float32(
            self.init_scale / np.sqrt(d))
        self.epochs_done_ = 0

    def _gram(self, Y: np.ndarray) -> np.ndarray:
        """``Y^T Y + reg * I`` (BLAS), the part of every row's system that all rows share."""
        G = Y.T @ Y
        G[np.diag_indices_from(G)] += np.float32(self.regularization)
        return np.ascontiguousarray(G, dtype=np.float32)

    # -- one half-iteration ------------------------------------------------------------------
    def _half_iteration(self, blocks, side: str, exact: bool = False) -> None:
        """Solve every row of ``side`` against the other side's fixed factors (in place), the
        blocks of rows on ``blocks``' workers and the Gram matrix here, once."""
        X, Y = (self.user_factors_, self.item_factors_) if side == "users" else (self.item_factors_,
                                                                                  self.user_factors_)
        failed = blocks.solve(side, X, Y, self._gram(Y), exact or self.solver == "cholesky", int(self.cg_steps))
        if failed:
            raise TrainingDivergedError(f"{failed} least-squares systems were not positive definite",
                                        hint="use regularization > 0")

    def _iteration(self, blocks) -> None:
        self._half_iteration(blocks, "users")
        self._half_iteration(blocks, "items")
        self.epochs_done_ += 1
        # a float64 sum is finite exactly when every entry is (and needs no n x d temporary)
        if not (np.isfinite(self.user_factors_.sum(dtype=np.float64))
                and np.isfinite(self.item_factors_.sum(dtype=np.float64))):
            raise TrainingDivergedError(f"training diverged at iteration {self.epochs_done_}: factors are not finite",
                                        hint=self._divergence_hint())

    def _divergence_hint(self) -> str:
        """Which way to move: a regularization beyond any confidence (at most 1e15) is what
        overflows float32 (``regularization=3e38``); otherwise confidences outgrow it."""
        reg = float(self.regularization)
        if reg > MAX_CONFIDENCE:
            return f"lower `regularization` from {reg:g}: the float32 arithmetic overflows, e.g. `regularization=40`"
        return "raise `regularization` or lower `alpha`"

    def loss(self, data: Optional["_TrainingData"] = None) -> float:
        """The objective on the training data (or ``data``): weighted squared error plus L2."""
        self.check_fitted()
        rows = (data or _TrainingData(self._confidence_csr())).users
        X = self.user_factors_.astype(np.float64)
        Y = self.item_factors_.astype(np.float64)
        everything = float(np.sum((X.T @ X) * (Y.T @ Y)))  # sum over all pairs of s^2
        observed = _als.observed_loss(self.user_factors_, self.item_factors_, rows.indptr, rows.indices, rows.conf)
        return everything + observed + float(self.regularization) * float((X * X).sum() + (Y * Y).sum())

    # -- public training API -----------------------------------------------------------------
    def fit(self, X, validation=None, callbacks: Sequence[Callback] = (), progress: Optional[Progress] = None,
            use_values: bool = True, user_ids: Optional[Sequence] = None,
            item_ids: Optional[Sequence] = None, workers: Optional[Workers] = None) -> "WRMF":
        """Fit on a users x items matrix (CSR or :class:`Interactions`) of values.

        Parameters
        ----------
        X : Interactions or sparse matrix
            Every stored entry is an observed pair, also one of value 0; its value (>= 0)
            sets the confidence, 0 the lowest.
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
        workers : Workers, optional
            Where the half-iterations' blocks of rows run: worker processes or a Dask
            cluster (e.g. the stage's :class:`~mrec_warp.context.ExecutionContext`; entered
            here if it is not yet). Without it, or with threads, ``n_jobs`` threads of this
            process. The model is bit-for-bit the same either way
            (:mod:`~mrec_warp.models.als_blocks`).
        """
        self.check_params()
        progress = progress or (Progress(verbose=True) if self.verbose else SILENT)
        X = self._with_ids(X, user_ids, item_ids)
        raw = X.matrix if isinstance(X, Interactions) else as_csr(X)
        nnz = self._set_pairs(X)  # every stored entry, a value of 0 too (the weakest confidence)
        values = raw.data if use_values else None
        if isinstance(self.alpha, str):
            sizes = observed_sizes(raw)
            self.alpha_ = auto_alpha(values, self.confidence, float(self.eps), sizes)
            progress.log(f"wrmf: alpha auto = {self.alpha_:.4g} (" + (
                f"binary, {sizes[0]:,} users x {sizes[1]:,} items, {sizes[2]:,} pairs: every observed pair "
                f"weighs 1 + {binary_alpha(sizes):.3g})" if all_equal(values)
                else f"values differ: each unit of f(value) adds {AUTO_ALPHA:g} to a pair's weight)"))
        else:
            self.alpha_ = float(self.alpha)
        self.confidence_ = self.confidences(values, nnz)
        del raw
        conf_csr = self._confidence_csr()
        with workers if workers is not None else contextlib.nullcontext():
            if workers is not None and solves_remotely(workers):
                progress.log(f"wrmf: blocks of rows solved on {workers.describe()}")
            self._fit_prepared(conf_csr, validation, callbacks, progress, unit="iteration", workers=workers)
        return self

    #: The training pairs' structure ``(indptr, indices, shape)``, shared with the confidences
    #: (set by ``train_``'s setter; ``None`` before a fit, read through ``__dict__`` where it may be).
    _seen: Tuple[np.ndarray, np.ndarray, Tuple[int, int]]

    def _confidence_csr(self) -> sp.csr_matrix:
        """The training pairs with their confidences (shares ``train_``'s indptr and indices)."""
        indptr, indices, shape = self._seen
        return sp.csr_matrix((self.confidence_, indices, indptr), shape=shape)

    # -- the training matrix: its structure, shared with the confidences; its ones on demand ---
    def _set_pairs(self, X) -> int:
        """:meth:`set_training_data` keeping only the binary matrix's structure (see
        ``train_``): its ones go at once, as the fit needs none. Returns the number of pairs."""
        nnz = self.set_training_data(X).nnz
        self.__dict__["_binary_train"] = None
        return nnz

    @property
    def train_(self) -> Optional[sp.csr_matrix]:
        """The training pairs as a binary matrix (what recommend excludes, what is saved), as
        for every model. WRMF keeps only its structure, shared with the confidence matrix,
        and builds the ones on first use after the fit: a fit then holds no second array of
        values beside the confidences (about 4 bytes a pair of peak memory)."""
        train = self.__dict__.get("_binary_train")
        if train is None and self.__dict__.get("_seen") is not None:
            indptr, indices, shape = self._seen
            train = sp.csr_matrix((np.ones(len(indices), np.float32), indices, indptr), shape=shape)
            self.__dict__["_binary_train"] = train
        return train

    @train_.setter
    def train_(self, value: Optional[sp.csr_matrix]) -> None:
        self.__dict__["_binary_train"] = value
        self.__dict__["_seen"] = None if value is None else (value.indptr, value.indices, value.shape)

    def check_fitted(self) -> None:
        if self.__dict__.get("_seen") is None:  # without building train_'s ones
            super().check_fitted()

    def train_epochs(self, conf_csr, epochs, progress, callbacks, validation=None, phase="fit",
               workers: Optional[Workers] = None) -> int:
        """Run up to ``epochs`` iterations; with ``validation``, early-stop and keep the best.

        The half-iterations' blocks run on ``workers`` when they are other processes
        (:func:`~mrec_warp.models.als_blocks.block_solver`), else on a pool of ``n_jobs``
        threads kept for the whole run. BLAS runs on one thread here
        throughout: the Gram matrices then come out the same whatever ``n_jobs`` or the
        workers are (so do the factors, as every row's solve is independent), they cost
        little next to the solves, and BLAS threads competing with the pool's (or with
        other programs on a busy machine) made a 1414 x 64 Gram matrix take 100 ms instead
        of 0.2 ms.
        """
        data = _TrainingData(conf_csr)
        with block_solver(data, workers, self.n_jobs) as blocks:
            def step():
                self._iteration(blocks)
                return {}, ""

            return run_epochs(self, step, epochs, progress, callbacks, validation, phase, unit="iteration",
                              n_jobs=effective_n_jobs(self.n_jobs))

    # -- fold-in and explanations ------------------------------------------------------------
    def history_vector(self, items: np.ndarray) -> np.ndarray:
        """The user vector :meth:`fold_in` solves for a new user with history ``items`` (sorted
        unique indices, no values), the model unchanged."""
        return wrmf_vector(self, items)

    def fold_in(self, history, *, epochs: Optional[int] = None, user_features=None,
                progress: Optional[Progress] = None, user_ids: Optional[Sequence] = None) -> "WRMF":
        """Add users from a history by one exact solve each, without refitting (in place;
        returns ``self``). ``history`` is anything :meth:`WARP.fold_in` takes (a sparse
        matrix's values are confidences' values, its rows the users ``user_ids``); ``epochs``
        is ignored (nothing is iterated), ``user_features`` refused. See
        :func:`mrec_warp.models.wrmf_users.fold_in`."""
        refuse_features(self, user_features)
        return fold_in_users(self, history, epochs=epochs, progress=progress, user_ids=user_ids)

    def explain(self, user: int, items: Sequence[int], k: int = 10) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Which of ``user``'s training items drove the scores of ``items``: (history items,
        contributions, scores), see :func:`mrec_warp.models.wrmf_users.explain`."""
        return explain_user(self, user, items, k=k)

    def explain_frame(self, user_id, item_ids: Optional[Sequence] = None, k: int = 5, n: int = 10) -> pd.DataFrame:
        """:meth:`explain` for ids, as a table (user, item, score, history_item, contribution,
        rank); without ``item_ids`` the user's top-``n`` recommendations are explained."""
        return explain_user_frame(self, user_id, item_ids, k=k, n=n)

    # -- persistence -------------------------------------------------------------------------
    def get_arrays(self) -> Dict[str, np.ndarray]:
        return {"user_factors": self.user_factors_, "item_factors": self.item_factors_,
                "confidence": self.confidence_}

    @classmethod
    def array_spec(cls, params: Dict[str, Any], n_users: int, n_items: int) -> Dict[str, Tuple[str, Tuple]]:
        return {**cls._factor_spec(params, n_users, n_items), "confidence": ("f4", (None,))}

    def set_arrays(self, arrays: Dict[str, np.ndarray]) -> None:
        uf, itf = self._checked_factors(arrays)
        conf = np.ascontiguousarray(arrays["confidence"], dtype=np.float32)
        check_shape(conf, (len(self._seen[1]),), "confidences (one per training pair)")
        for arr, what in ((uf, "user factors"), (itf, "item factors"), (conf, "confidences")):
            check_finite(arr, what)
        if len(conf) and conf.min() < 1:
            raise ValueError("confidences below 1")
        self.user_factors_, self.item_factors_, self.confidence_ = uf, itf, conf

    def get_attrs(self) -> Dict[str, Any]:
        # the alpha the fit used (what "auto" became); None before a fit
        return {**super().get_attrs(),
                "alpha_": None if getattr(self, "alpha_", None) is None else float(self.alpha_)}
