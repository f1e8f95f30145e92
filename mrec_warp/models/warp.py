"""WARP matrix factorisation: the Python side (initialisation, epochs, early stopping).

The per-interaction work is in the Cython kernel :mod:`mrec_warp.kernels.warp`; the epoch
loop and early stopping in :mod:`.validation`, fold-in in :mod:`.foldin`, the positives'
arrays in :mod:`.positives`, new data's ids in :mod:`.alignment`. What is left is one job,
the estimator, over ~450 lines because ~90 of them document its parameters.
"""
from __future__ import annotations

import warnings
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import scipy.sparse as sp

from ..data.confidence import check_confidence, confidence as confidence_of
from ..data.interactions import Interactions, as_csr
from ..data.npz import check_finite, check_shape
from ..errors import InputError
from ..progress import SILENT, Progress, plural
from ..kernels import rng as _rng
from ..kernels import warp as _warp
from ..seeds import spawn_seed, spawn_seeds
from ..workers import effective_n_jobs, thread_map
from .alignment import known_pairs
from .base import Recommender, factor_scores
from .single_user import warp_vector
from .foldin import fold_in, warp_append_users, warp_problem
from .positives import TrainingData, check_divergence, merge_seen
from .params import check_choice, check_flag, check_number
from .validation import check_common_params, check_epoch_params, fit_or_select, need, run_epochs

LOSSES = {"warp": 0, "bpr": 1, "warp-kos": 2}
#: Most positives a WARP-kOS step may compare (the kernel keeps them on the stack).
KOS_MAX_N = 64
SCHEDULES = ("adagrad", "sgd")
#: How WARP uses a confidence: draw positives in proportion to it, or scale each step by it.
CONFIDENCE_USES = ("sample", "weight")

#: Positives per kernel call: small enough for a live progress bar and Ctrl-C, large
#: enough that the Python overhead between calls is negligible.
CHUNK = 262144

Callback = Callable[["WARP", Dict[str, Any]], Optional[bool]]



class WARP(Recommender):
    """Matrix factorisation trained with the WARP ranking loss (Weston et al., 2010).

    ``f(u, i) = p_u . q_i + b_i``. For each training positive (u, i), items are drawn until
    one outranks i within the margin; the fewer draws it takes, the worse i is ranked and
    the bigger the step. See :mod:`mrec_warp.kernels.warp` for the exact sampling rule.

    Parameters
    ----------
    factors : int
        Latent dimensions.
    loss : {"warp", "bpr", "warp-kos"}
        WARP; Bayesian personalised ranking (one negative per positive) for comparison; or
        WARP-kOS (Weston et al., 2013), where each step is on the ``kos_k``-th best of
        ``kos_n`` of the user's positives drawn at random.
    learning_rate : float
        Step size (adagrad's base rate, or SGD's initial rate).
    learning_schedule : {"adagrad", "sgd"}
        Per-parameter adaptive steps (adagrad) or plain SGD whose rate decays as
        ``learning_rate / (1 + decay * epoch)``.
    decay : float
        SGD decay per epoch (ignored by adagrad).
    user_reg, item_reg : float
        L2 penalties on user and item vectors, applied at each step they take part in.
    max_sampled : int
        Most negatives compared per positive before giving up (no update).
    user_max_norm, item_max_norm : float or None
        Longest a user (item) vector may grow: after every step a longer one is scaled
        back to this length, the norm constraint WSABIE (Weston et al., 2010) regularises
        with. The hinge's margin is 1, so the limit bounds how far apart a user's scores
        can spread. ``0`` or ``None`` mean no limit, as ``--user-max-norm 0`` does on the
        command line. Users default to 1.25, items to no limit (``None``): that was best on
        every dataset of the defaults study (see the README).
    kos_k, kos_n : int
        WARP-kOS only: which order statistic (1 = the best-scored) of how many sampled
        positives (at most 64) each step is on. LightFM's defaults, 5 of 10.
    item_bias : bool
        Learn an item bias ``b_i``.
    epochs : int or None
        Train exactly this many epochs; ``None`` (default) chooses the count by early
        stopping on a validation split, up to ``max_epochs``.
    max_epochs, patience, eval_every, eval_k : int
        Early stopping: evaluate precision@eval_k every ``eval_every`` epochs (default 1) and
        stop at the first evaluation ``patience`` or more epochs (default 10) after the last
        rise of the score; the best-scoring epoch's factors are kept. (Every 2 epochs with a
        patience of 6 and ``min_improvement`` 0.002 stopped at half the epochs and lost up to
        9% precision@10 on a long-tail log: speed comes from cheap evaluations, not early stops.)
    min_improvement : float
        A rise of the validation score resets the patience only when it beats the previous
        such rise by more than this fraction of it (default 0: any rise).
    validation_fraction : float
        Share of each user's items held out for early stopping when ``fit`` is not given a
        ``validation`` matrix. Which pairs are held out depends on ``random_state`` and the
        (user id, item id) pairs, not on the order of the rows.
    validation_users : int
        At most this many users (a fixed sample, drawn by id) are scored per evaluation,
        with the blocked BLAS top-k of :mod:`mrec_warp.topk`, to keep it cheap.
    refit : bool
        After early stopping on an internal split, train on all the data (default), rather
        than keep the model fitted on less data. How: see ``warm_epochs``.
    warm_epochs : int
        ``0`` (default): the refit retrains from scratch for the chosen number of epochs.
        ``N > 0``: it continues from the best epoch's factors for N epochs on all the data,
        with adagrad's accumulators restarted, so that the held-out positives, pushed down as
        negatives until then, are learned in a few epochs. That roughly halves the time of a
        default fit but cost 1.6-2.3% precision@10 on dense and long-tail data (README,
        "Model selection"), so it is an option, not the default.
    init_scale : float
        Initial factors are normal with standard deviation ``init_scale / sqrt(factors)``.
    n_jobs : int
        Threads running shards of each epoch at once (hogwild). One thread with a fixed
        ``random_state`` is bit-for-bit reproducible; more threads are not.
    random_state : int or None
        Seed for initialisation, shuffling and sampling.
    verbose : bool
        Log one line per epoch to standard error.
    confidence : {"none", "linear", "log"}
        How the values of ``X`` (play counts, hours, ratings) weigh each positive, with
        :func:`mrec_warp.data.confidence.confidence`: ``"none"`` (default) treats every
        stored entry as a positive of weight 1; ``"linear"`` gives ``c = 1 + alpha * value``
        and ``"log"`` ``c = 1 + alpha * log1p(value / eps)``. An entry of value 0 is a
        positive of the lowest confidence, 1 (and is never recommended back); a negative
        value is refused.
    alpha, eps : float
        Parameters of ``confidence``.
    confidence_use : {"weight", "sample"}
        ``"weight"`` (default): every positive is visited once and its step is scaled by
        its confidence divided by the mean confidence (mean weight 1); ``"sample"``: every
        epoch draws as many positives as there are, with replacement, each with
        probability proportional to its confidence (an alias table, O(1) per draw). Both
        beat binary input by 2-4% P@10 on planted counts and on ml-100k ratings (README,
        "The value column"); neither is clearly ahead of the other.
    """

    def __init__(
        self,
        factors: int = 64,
        loss: str = "warp",
        learning_rate: float = 0.02,
        learning_schedule: str = "adagrad",
        decay: float = 0.0,
        user_reg: float = 0.0,
        item_reg: float = 0.0,
        max_sampled: int = 50,
        user_max_norm: Optional[float] = 1.25,
        item_max_norm: Optional[float] = None,
        kos_k: int = 5,
        kos_n: int = 10,
        item_bias: bool = True,
        epochs: Optional[int] = None,
        max_epochs: int = 200,
        patience: int = 10,
        eval_every: int = 1,
        eval_k: int = 10,
        min_improvement: float = 0.0,
        validation_fraction: float = 0.1,
        validation_users: int = 5000,
        refit: bool = True,
        warm_epochs: int = 0,
        init_scale: float = 0.1,
        n_jobs: int = 1,
        random_state: Optional[int] = None,
        verbose: bool = False,
        confidence: str = "none",
        alpha: float = 1.0,
        eps: float = 1.0,
        confidence_use: str = "weight",
    ) -> None:
        self.factors = factors
        self.loss = loss
        self.learning_rate = learning_rate
        self.learning_schedule = learning_schedule
        self.decay = decay
        self.user_reg = user_reg
        self.item_reg = item_reg
        self.max_sampled = max_sampled
        self.user_max_norm = user_max_norm
        self.item_max_norm = item_max_norm
        self.kos_k = kos_k
        self.kos_n = kos_n
        self.item_bias = item_bias
        self.epochs = epochs
        self.max_epochs = max_epochs
        self.patience = patience
        self.eval_every = eval_every
        self.eval_k = eval_k
        self.min_improvement = min_improvement
        self.validation_fraction = validation_fraction
        self.validation_users = validation_users
        self.refit = refit
        self.warm_epochs = warm_epochs
        self.init_scale = init_scale
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose
        self.confidence = confidence
        self.alpha = alpha
        self.eps = eps
        self.confidence_use = confidence_use

    # -- checks ------------------------------------------------------------------------------
    #: Arrays of the factors' size a fit keeps: the factors and their adagrad accumulators.
    _state_copies = 2

    def _step_scales(self) -> Dict[str, float]:
        """Parameters other than ``alpha`` that multiply each step (named first by a
        divergence's hint); none here, a hook for subclasses."""
        return {}

    def _check_params(self) -> None:
        check_number(self.factors, "factors", integer=True, at_least=1)
        check_choice(self.loss, "loss", sorted(LOSSES))
        check_choice(self.learning_schedule, "learning_schedule", SCHEDULES)
        check_number(self.learning_rate, "learning_rate", above=0)
        check_number(self.decay, "decay", at_least=0)
        for name in ("user_reg", "item_reg"):
            check_number(getattr(self, name), name, at_least=0)
        check_number(self.max_sampled, "max_sampled", integer=True, at_least=1)
        check_number(self.kos_k, "kos_k", integer=True, at_least=1)
        check_number(self.kos_n, "kos_n", integer=True, at_least=1, at_most=KOS_MAX_N)
        need(int(self.kos_k) <= int(self.kos_n), f"kos_k and kos_n need 1 <= kos_k <= kos_n <= {KOS_MAX_N}")
        for name in ("user_max_norm", "item_max_norm"):
            check_number(getattr(self, name), name, at_least=0, optional=True, hint="0 or None: no limit")
        check_flag(self.item_bias, "item_bias")
        check_epoch_params(self)
        check_number(self.min_improvement, "min_improvement", at_least=0)
        check_number(self.warm_epochs, "warm_epochs", integer=True, at_least=0, hint="0: refit from scratch")
        if int(self.warm_epochs) and (self.epochs is not None or not self.refit):
            # it shapes the refit after early stopping: with neither, it would do nothing
            raise InputError(f"`warm_epochs` applies to the refit after early stopping, not with "
                             f"{'`epochs`' if self.epochs is not None else '`refit=False`'}",
                             hint="drop `warm_epochs`, or let early stopping choose the epochs")
        check_number(self.init_scale, "init_scale", at_least=0)
        check_common_params(self)
        if "confidence" in self._param_names():  # (the hybrid trains without one)
            # alpha and eps are checked even when unused: a wrong one is a mistake either way
            check_confidence(self.confidence, self.alpha, self.eps)
            check_choice(self.confidence_use, "confidence_use", CONFIDENCE_USES)

    # -- state -------------------------------------------------------------------------------
    def _init_state(self, n_users: int, n_items: int, seed_rng: np.random.Generator) -> None:
        d = int(self.factors)
        scale = np.float32(self.init_scale / np.sqrt(d))
        self.user_factors_ = (seed_rng.standard_normal((n_users, d), dtype=np.float32) * scale)
        self.item_factors_ = (seed_rng.standard_normal((n_items, d), dtype=np.float32) * scale)
        self.item_bias_ = np.zeros(n_items, dtype=np.float32)
        # adagrad accumulators start at 1: the first steps are plain SGD steps of size lr
        self._user_accum = np.ones((n_users, d), dtype=np.float32)
        self._item_accum = np.ones((n_items, d), dtype=np.float32)
        self._bias_accum = np.ones(n_items, dtype=np.float32)
        self._rng_state = _rng.seed_state(spawn_seed(seed_rng))
        self.epochs_done_ = 0

    def _fresh_optimizer_state(self, seed_rng: np.random.Generator) -> None:
        """Adagrad accumulators (at 1) and a sampler seed for the learned arrays as they are,
        e.g. to continue training a model loaded from disk."""
        self._user_accum, self._item_accum, self._bias_accum = (
            np.ones_like(a) for a in self._learned_arrays())
        self._rng_state = _rng.seed_state(spawn_seed(seed_rng))

    def _restart_steps(self) -> None:
        """Adagrad's accumulators back at 1 (the learned arrays and the sampler stay): the
        next steps are as large as the first epoch's."""
        for accum in (self._user_accum, self._item_accum, self._bias_accum):
            accum.fill(1.0)

    def _snapshot(self) -> Tuple[np.ndarray, ...]:
        return (self.user_factors_.copy(), self.item_factors_.copy(), self.item_bias_.copy())

    def _restore(self, snap: Tuple[np.ndarray, ...]) -> None:
        self.user_factors_, self.item_factors_, self.item_bias_ = snap

    # -- one epoch ---------------------------------------------------------------------------
    def _epoch(self, data: "TrainingData", progress: Progress) -> Dict[str, float]:
        """Shuffle the positives (or draw them by confidence), then visit each (in shards on several threads)."""
        if data.alias is not None:
            _rng.draw_positives(data.order, *data.alias, self._rng_state, data.targets)
        else:
            _rng.shuffle(data.order, self._rng_state)
        cfg = self._step_settings(self.epochs_done_)
        nnz = len(data.order)
        n_jobs = effective_n_jobs(self.n_jobs)

        def run(start: int, stop: int, state: np.ndarray):
            return self._fit_shard(data, start, stop, state, cfg)

        totals = np.zeros(4)
        if n_jobs == 1:
            chunks = [(s, min(s + CHUNK, nnz)) for s in range(0, nnz, CHUNK)]
            for s, e in progress.iterate(chunks, total=len(chunks), desc=f"epoch {self.epochs_done_ + 1}", unit="chunk"):
                totals += run(s, e, self._rng_state)
        else:
            bounds = np.linspace(0, nnz, n_jobs + 1).astype(np.int64)
            # one independent sampler per thread, seeded from the model's state and the epoch
            seeds = spawn_seeds([int(self._rng_state[0]), self.epochs_done_], n_jobs)
            states = [_rng.seed_state(int(x)) for x in seeds]
            self._rng_state = _rng.seed_state(int(self._rng_state[1]))
            # one hogwild shard per thread, on the fitting threads every model shares
            shards = [(int(bounds[w]), int(bounds[w + 1]), states[w]) for w in range(n_jobs)]
            for r in thread_map(run, shards, n_jobs):
                totals += r
        self.epochs_done_ += 1
        n_updates, total_weight, total_loss, n_compared = totals
        weighted = self._confidence_kind() != "none" and self.confidence_use == "weight"
        check_divergence(self._learned_arrays(), float(self.init_scale), self._base_learning_rate(),
                         f"training diverged at epoch {self.epochs_done_}", alpha=float(self.alpha) if weighted else None,
                         scales=self._step_scales())
        return {
            "updates": n_updates / max(nnz, 1),
            "mean_weight": total_weight / max(n_updates, 1),
            "loss": total_loss / max(nnz, 1),
            "compared_per_positive": n_compared / max(nnz, 1),
        }

    def _step_settings(self, epoch: int) -> Dict[str, Any]:
        """What every kernel step takes at ``epoch`` (0-based), as the kernels' ``StepSettings``
        struct (``kernels/steps.pxd``) wants it: a dict of every field."""
        lr = self._base_learning_rate()
        if self.learning_schedule == "sgd":
            lr = lr / (1.0 + float(self.decay) * epoch)
        return dict(
            loss=LOSSES[self.loss], max_sampled=int(self.max_sampled), learning_rate=lr,
            user_reg=float(self.user_reg), item_reg=float(self.item_reg),
            adagrad=self.learning_schedule == "adagrad", use_bias=bool(self.item_bias),
            user_max_norm=_limit(self.user_max_norm), item_max_norm=_limit(self.item_max_norm),
            kos_n=int(self.kos_n), kos_k=int(self.kos_k),
        )

    def _base_learning_rate(self) -> float:
        """The learning rate in force (a hook: subclasses may resolve a default from the data)."""
        return float(self.learning_rate)

    def _fit_shard(self, data: "TrainingData", start: int, stop: int, state: np.ndarray,
                   cfg: Dict[str, Any]) -> Tuple[float, float, float, float]:
        """One kernel call on positives ``data.order[start:stop]`` (a hook for subclasses)."""
        return _warp.fit_shard(
            self.user_factors_, self.item_factors_, self.item_bias_,
            self._user_accum, self._item_accum, self._bias_accum,
            data.indptr, data.indices, data.pos_users, data.order,
            start, stop, data.rank_weights, state, cfg, data.step_weights,
        )

    def _learned_arrays(self) -> Tuple[np.ndarray, ...]:
        """The arrays training writes, checked for divergence after every epoch."""
        return (self.user_factors_, self.item_factors_, self.item_bias_)

    # -- public training API -----------------------------------------------------------------
    def fit(
        self,
        X,
        validation=None,
        callbacks: Sequence[Callback] = (),
        progress: Optional[Progress] = None,
        user_ids: Optional[Sequence] = None,
        item_ids: Optional[Sequence] = None,
    ) -> "WARP":
        """Fit on a users x items matrix (CSR or :class:`Interactions`).

        Parameters
        ----------
        X : Interactions or sparse matrix
            Every stored entry is a positive.
        user_ids, item_ids : sequences, optional
            With a plain matrix: the id of each row and column (kept as text), so that
            ``recommend_frame`` and the saved model use your ids. Without them the ids are
            the row and column numbers "0".."n-1".
        validation : Interactions or sparse matrix, optional
            Held-out positives (same shape as ``X``) for early stopping. Without it, and
            with ``epochs=None``, a ``validation_fraction`` of each user's items is held out
            internally and, if ``refit``, the model then trains on everything: ``warm_epochs``
            more epochs from the best epoch's factors, or (``warm_epochs=0``) from scratch.
        callbacks : sequence of callables
            Each is called as ``callback(model, logs)`` after every epoch; ``logs`` holds
            the epoch number, seconds, loss estimates and, when one was computed, the
            validation metric and its cost (``eval_seconds``). A callback returning ``True``
            stops training.
        progress : Progress, optional
            Where to log; default follows ``verbose``.
        """
        self._check_params()
        progress = progress or (Progress(verbose=True) if self.verbose else SILENT)
        X = self._with_ids(X, user_ids, item_ids)
        csr = self._with_confidence(X, self._set_training_data(X))
        self.history_: List[Dict[str, Any]] = []
        fit_or_select(self, csr, validation, np.random.default_rng(self.random_state), progress, callbacks,
                      warm_epochs=int(self.warm_epochs))
        return self

    def partial_fit(self, X, epochs: int = 1, progress: Optional[Progress] = None) -> "WARP":
        """Continue training for ``epochs`` epochs on the pairs of ``X``, without validation.

        The first call on an unfitted model initialises it from ``X`` as :meth:`fit` would.
        On a fitted (or loaded) model the pairs of ``X`` are *added* to what the model has
        seen: ``train_`` becomes the union of the training pairs (folded-in histories
        included) and ``X``, so recommendations keep excluding both, and every seen pair is
        ruled out as a negative; the epochs visit the pairs of ``X`` only.

        Parameters
        ----------
        X : Interactions or sparse matrix
            New (or repeated) positives. Interactions are matched to the model by id: pairs
            whose user or item the model does not know are skipped, with a ``UserWarning``
            and their count in ``partial_fit_summary_`` (add new users with
            :meth:`fold_in`; new items need a refit). A matrix must have the model's shape.
        epochs : int
            Passes over ``X`` (at least 1).
        progress : Progress, optional
        """
        self._check_params()
        if int(epochs) < 1:
            raise InputError(f"partial_fit needs epochs >= 1, got {epochs}")
        progress = progress or (Progress(verbose=True) if self.verbose else SILENT)
        if getattr(self, "train_", None) is None:
            csr = self._with_confidence(X, self._set_training_data(X))
            self._init_state(*csr.shape, np.random.default_rng(self.random_state))
            data = self._training_data(csr)
            summary = {"pairs": int(csr.nnz), "new_pairs": int(csr.nnz), "skipped_pairs": 0,
                       "unknown_users": 0, "unknown_items": 0}
        else:
            if not hasattr(self, "_rng_state"):  # a loaded model keeps its factors, not the optimiser
                self._fresh_optimizer_state(np.random.default_rng(self.random_state))
            new, summary = known_pairs(X, self, keep_values=self._confidence_kind() != "none")
            values = self._with_confidence(new, new).data if self._confidence_kind() != "none" else None
            new.data[:] = 1.0
            seen = merge_seen(self.train_, new)
            summary["new_pairs"] = int(seen.nnz - self.train_.nnz)
            data = self._training_data(seen, visit=new, values=values)
            self.train_ = seen
            self._interactions_cache = None
        self.partial_fit_summary_: Dict[str, int] = summary
        if summary["skipped_pairs"]:
            message = (f"partial_fit skipped {summary['skipped_pairs']:,} of {plural(summary['pairs'], 'pair')} naming "
                       f"{plural(summary['unknown_users'], 'user')} and {plural(summary['unknown_items'], 'item')} "
                       "the model does not know (add new users with fold_in; new items need a refit)")
            warnings.warn(message, UserWarning, stacklevel=2)
            progress.log(f"warning: {message}")
        if not hasattr(self, "history_"):
            self.history_ = []
        self._train(data, int(epochs), progress, ())
        return self

    def _train(self, csr, epochs, progress, callbacks, validation=None, phase="fit") -> int:
        """Run up to ``epochs`` epochs on ``csr`` (or prepared :class:`TrainingData`); with
        ``validation``, early-stop and keep the best."""
        data = csr if isinstance(csr, TrainingData) else self._training_data(csr)

        def step():
            stats = self._epoch(data, progress)
            return stats, (f"updates {stats['updates']:.1%}  mean L(rank) {stats['mean_weight']:.3f}  "
                           f"loss {stats['loss']:.4f}")

        return run_epochs(self, step, epochs, progress, callbacks, validation, phase, n_jobs=effective_n_jobs(self.n_jobs),
                          min_improvement=float(self.min_improvement))

    # -- confidence ----------------------------------------------------------------------------
    def _training_data(self, csr: sp.csr_matrix, visit: Optional[sp.csr_matrix] = None,
                       values: Optional[np.ndarray] = None) -> "TrainingData":
        """The kernel's arrays for ``csr``; with a confidence, ``values`` (default
        ``csr.data``) are the confidences of the visited pairs."""
        if self._confidence_kind() == "none":
            return TrainingData(csr, visit)
        return TrainingData(csr, visit, confidence=csr.data if values is None else values,
                             use=self.confidence_use)

    def _confidence_kind(self) -> str:
        # subclasses whose constructor does not take ``confidence`` (the hybrid) train without it
        return getattr(self, "confidence", "none") if "confidence" in self._param_names() else "none"

    def _with_confidence(self, X, binary: sp.csr_matrix) -> sp.csr_matrix:
        """``binary`` (the positives) with each positive's confidence as its value.

        Without a confidence, ``binary`` itself. The values come from ``X`` (the same stored
        entries as ``binary``: a value of 0 is a positive of the lowest confidence); the visit
        order and hold-out splits only look at the structure, so they do not change with the
        confidence.
        """
        if self._confidence_kind() == "none":
            return binary

        raw = X.matrix if isinstance(X, Interactions) else as_csr(X)
        if raw.nnz != binary.nnz:  # cannot happen through fit; guards a subclass's _set_training_data
            raise ValueError("confidence values do not line up with the positives")
        conf = confidence_of(raw.data, self.confidence, self.alpha, self.eps)
        return sp.csr_matrix((conf, binary.indices, binary.indptr), shape=binary.shape)

    # -- fold-in (mrec_warp.models.foldin) ---------------------------------------------------
    def fold_in(self, history, epochs: Optional[int] = None, progress: Optional[Progress] = None,
                user_ids: Optional[Sequence] = None) -> "WARP":
        """Add users from a short history without refitting (in place; returns ``self``).

        Each user of ``history`` (a ratings path, a ``user, item`` DataFrame,
        Interactions, a list of ``(user, item)`` pairs, or a sparse matrix with one column
        per model item whose rows are the users ``user_ids``) gets a factor row fitted by
        ``epochs`` WARP passes over their items against the fixed item factors; new users
        are appended to ``user_ids``, known ones are refined from their training items plus
        the history. Nothing else changes. See
        :func:`mrec_warp.models.foldin.fold_in`.
        """
        return fold_in(self, history, epochs=epochs, progress=progress, user_ids=user_ids)

    def _append_users(self, ids, user_features=None) -> None:
        if user_features is not None:
            raise InputError("user features need a hybrid model", hint="train a hybrid model (`model=hybrid`)")
        warp_append_users(self, ids)

    def _fold_in_problem(self, users: np.ndarray):
        return warp_problem(self, users)

    def _fold_in_store(self, users: np.ndarray, rows: np.ndarray) -> None:
        self.user_factors_[users] = rows

    # -- scoring -------------------------------------------------------------------------------
    def score_users(self, users: np.ndarray, out: Optional[np.ndarray] = None) -> np.ndarray:
        self._check_fitted()
        return factor_scores(self.user_factors_[np.asarray(users)], self.item_factors_,
                             self.item_bias_ if self.item_bias else None, out)

    def _history_vector(self, items: np.ndarray) -> np.ndarray:
        """The user vector :meth:`fold_in` fits for a new user with history ``items`` (sorted
        unique indices), the model unchanged (:func:`.single_user.recommend_history`)."""
        return warp_vector(self, items)

    def _factor_parts(self) -> Tuple[np.ndarray, np.ndarray, Optional[np.ndarray]]:
        """(user vectors, item vectors, item biases or None): what :meth:`score_users` multiplies,
        for one-user scoring (:mod:`.single_user`)."""
        return self.user_factors_, self.item_factors_, self.item_bias_ if self.item_bias else None

    @property
    def user_factors(self) -> np.ndarray:
        return self.user_factors_

    @property
    def item_factors(self) -> np.ndarray:
        return self.item_factors_

    # -- persistence -------------------------------------------------------------------------
    def _get_arrays(self) -> Dict[str, np.ndarray]:
        return {"user_factors": self.user_factors_, "item_factors": self.item_factors_,
                "item_bias": self.item_bias_}

    @classmethod
    def _array_spec(cls, params: Dict[str, Any], n_users: int, n_items: int) -> Dict[str, Tuple[str, Tuple]]:
        """Kind and shape of each saved array (``None``: any size), checked before loading."""
        d = params.get("factors")
        return {"user_factors": ("f4", (n_users, d)), "item_factors": ("f4", (n_items, d)),
                "item_bias": ("f4", (n_items,))}

    def _set_arrays(self, arrays: Dict[str, np.ndarray]) -> None:
        uf = np.ascontiguousarray(arrays["user_factors"], dtype=np.float32)
        itf = np.ascontiguousarray(arrays["item_factors"], dtype=np.float32)
        ib = np.ascontiguousarray(arrays["item_bias"], dtype=np.float32)
        d = uf.shape[1] if uf.ndim == 2 else -1
        check_shape(uf, (self.n_users, d), "user factors")
        check_shape(itf, (self.n_items, d), "item factors")
        check_shape(ib, (self.n_items,), "item biases")
        for arr, what in ((uf, "user factors"), (itf, "item factors"), (ib, "item biases")):
            check_finite(arr, what)
        self.user_factors_, self.item_factors_, self.item_bias_ = uf, itf, ib

    def _get_attrs(self) -> Dict[str, Any]:
        return {**super()._get_attrs(), "epochs_done_": int(getattr(self, "epochs_done_", 0)),
                "best_epoch_": int(getattr(self, "best_epoch_", 0) or 0)}


def _limit(max_norm: Optional[float]) -> float:
    """A norm limit as the kernels take it: 0 for none (``None`` and 0 both mean no limit)."""
    return 0.0 if max_norm is None else float(max_norm)

