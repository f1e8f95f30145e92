"""WARP matrix factorisation: the Python side (initialisation, epochs, early stopping).

The per-interaction work is in the Cython kernel :mod:`mrec_warp.kernels.warp`; one epoch
in :mod:`.warp_epoch`, the epoch loop and early stopping in :mod:`.validation`, what every
factor model shares in :mod:`.factor_model`, fold-in in :mod:`.foldin`, ``partial_fit`` in
:mod:`.partial_fit`, the positives' arrays in :mod:`.positives`. What is left is the
estimator, a third of it the documentation of its parameters.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Mapping, Optional, Sequence, Tuple

import numpy as np
import scipy.sparse as sp

from ..data.confidence import CONFIDENCES, check_confidence
from ..data.npz import check_finite, check_shape
from ..errors import InputError
from ..progress import SILENT, Progress
from ..kernels import rng as _rng
from ..kernels import warp as _warp
from ..seeds import spawn_seed
from ..workers import effective_n_jobs
from .factor_model import FactorModel
from .history_vectors import warp_vector
from .foldin import fold_in, warp_problem
from .partial_fit import partial_fit
from .warp_epoch import LOSSES, run_epoch, step_settings, training_data, with_confidence
from .positives import TrainingData
from .declared import Param, declared_by_name, n_jobs_param, seed_param, verbose_param
from .tuning import SCORE_RATE, TrialShape
from .validation import check_epochs, early_stopping_params, need, run_epochs

#: Most positives a WARP-kOS step may compare (the kernel keeps them on the stack).
KOS_MAX_N = 64
SCHEDULES = ("adagrad", "sgd")
#: How WARP uses a confidence: draw positives in proportion to it, or scale each step by it.
CONFIDENCE_USES = ("sample", "weight")

Callback = Callable[["WARP", Dict[str, Any]], Optional[bool]]


class WARP(FactorModel):
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
    late_rate, late_rate_epoch : float, int
        A learning-rate schedule on top of either rule: the first ``late_rate_epoch``
        epochs step at ``learning_rate``, every later one at ``late_rate * learning_rate``
        (default: 0.02 for 15 epochs, then 0.04; ``late_rate=1`` is a constant rate).
        Adagrad's steps shrink as its accumulators grow; once the first epochs have laid
        out the factors, the higher rate lets the later ones keep moving. It depends on the
        epoch number alone: the refit replays it from the epoch it starts at (0, or the
        reused fit state's, ``refit_reuse``), ``epochs=N`` runs its first N epochs, a warm
        refit and ``partial_fit`` go on from the epoch the model is at, and fold-in (a new
        user's row against the trained items) steps at ``learning_rate``. Chosen on the
        selection suite over 12 seeds (docs/models/warp.rst, "Model selection"): against a
        constant 0.02 it trained 5-32% fewer epochs, fit and refit (ml-100k 72 instead of
        106), and test precision@10 moved by +0.0057 (ml-latest-small, binary), +0.0046
        (ratings >= 4), +0.0016 (ml-100k), +0.0003
        (long tail), +0.0001 (20k x 400) and -0.0005 (counts; standard error 0.0004, within
        seed noise). A high rate in the *first* epochs (1.5-4 times, decaying) overfits
        instead: it lost 0.5-5% on ml-100k and the 20k x 400 set.
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
        every dataset of the defaults study (docs/models/warp.rst).
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
        with the blocked BLAS top-k of :mod:`mrec_warp.topk`, to keep it cheap. Every user
        with two or more items still holds out its ``validation_fraction``. Default 1000:
        the product of the sampled users' vectors with every item is what an evaluation
        costs (on a 2k x 13.5k long-tail set, twice an epoch's training); on the selection
        suite 1000 users instead of 5000 halved it where there are more than 1000 users
        and changed no set's test precision@10 beyond seed noise (docs/models/warp.rst, 'Model selection').
    refit : bool
        After early stopping on an internal split, train on all the data (default), rather
        than keep the model fitted on less data. How: see ``refit_reuse`` and ``warm_epochs``.
    warm_epochs : int
        ``0`` (default): the refit trains up to the chosen number of epochs, from the fit's
        state after about ``refit_reuse`` of them (or from scratch with ``refit_reuse=0``).
        ``N > 0``: it continues from the best epoch's factors for N epochs on all the data,
        with adagrad's accumulators restarted, so that the held-out positives, pushed down as
        negatives until then, are learned in a few epochs. That roughly halves the time of a
        default fit but cost 1.6-2.3% precision@10 on dense and long-tail data
        (docs/models/warp.rst, "Model selection"), so it is an option, not the default.
    refit_reuse : float
        Share of the chosen epoch count the refit from scratch (``warm_epochs=0``) takes
        over from the fit instead of repeating it: the refit starts from the fit's whole
        training state (factors, biases, adagrad's accumulators, the sampler) after epoch
        ``k``, the latest of the states kept on a geometric grid of epochs at or before
        ``round(refit_reuse * best_epoch_)`` (:mod:`~mrec_warp.models.refit_states`), and
        trains epochs ``k + 1 .. best_epoch_`` on all the data (``refit_start_`` is ``k``).
        ``0``: every refit epoch from scratch; ignored with ``warm_epochs``. Default 0.25:
        on the selection suite (3 seeds) it took 18-25% of the refit's epochs over and no
        set's test precision@10 moved beyond seed noise; 0.5 lost 0.3-1.0% on five of the
        six sets (the fit's first epochs saw 90% of the pairs and pushed the held-out rest
        down as negatives; late enough, that no longer washes out). See docs/models/warp.rst,
        'Model selection'.
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
        beat binary input by 2-4% P@10 on planted counts and on ml-100k ratings (docs/guide/value-column.rst,
        "The value column"); neither is clearly ahead of the other.
    """

    # -- what tune asks (TuneHooks) --------------------------------------------------------------
    #: Epoch caps of a budgeted search's rungs (the last: the full trial).
    tune_rungs = (5, 15, None)
    #: Seconds per ``nnz x factors`` and epoch at 50 sampled negatives (one thread), measured
    #: on ml-100k and a 1.9k x 16k long-tail synthetic set (2 shared cores).
    TUNE_RATE = 3.5e-8
    #: Epochs an early-stopped full trial is assumed to run (its ``max_epochs`` is an upper bound).
    TUNE_EPOCHS = 60

    @classmethod
    def fit_cost(cls, shape: TrialShape, params: Mapping[str, Any], epochs_cap: Optional[int] = None) -> float:
        """Epochs (the typical count, or the cap) of sampled WARP steps and of validation scoring."""
        full = min(int(params.get("max_epochs", 100)), cls.TUNE_EPOCHS)
        epochs = min(epochs_cap, full) if epochs_cap else full
        factors = int(params.get("factors", 64))
        sampled = min(int(params.get("max_sampled", 50)), 100) / 50  # negatives drawn per positive, about
        evaluations = 1 / max(1, int(params.get("eval_every", 1)))  # per epoch
        scored = declared_by_name(cls)["validation_users"].default
        per_epoch = cls.TUNE_RATE * shape.nnz * factors * (0.5 + sampled) / 1.5 \
            + SCORE_RATE * min(shape.sampled_users(epochs_cap), int(params.get("validation_users", scored))) \
            * shape.items * evaluations
        return epochs * per_epoch + shape.scoring()

    #: What a model file written before a parameter existed was trained with: a constant rate.
    PARAMS_BEFORE: Dict[str, Any] = {"late_rate": 1.0}

    name = "warp"
    supports_confidence = True
    fold_in_epochs = True
    hogwild = True
    LEARNED = ("user_factors_", "item_factors_", "item_bias_")
    _STOPPING = early_stopping_params(
        max_epochs=200, patience=10, eval_every=1, validation_users=1000,
        refit_help="After early stopping on an internal hold-out, train on all the data (how: `refit_reuse`, `warm_epochs`).")
    PARAMETERS: Tuple[Param, ...] = (
        Param("factors", int, 64, "Latent dimensions.", low=1, tune=[32, 64, 128], grid=(32, 128)),
        Param("loss", str, "warp", "Ranking loss.", choices=tuple(LOSSES), tune=True),
        Param("learning_rate", float, 0.02, "Base step size.", low=0, open=True, tune=("log", 0.007, 0.06)),
        Param("learning_schedule", str, "adagrad", "Step rule.", choices=SCHEDULES, tune=True),
        Param("decay", float, 0.0, "SGD: decay of the rate per epoch (adagrad ignores it).", low=0, option=False),
        Param("late_rate", float, 2.0, "The rate after the first late_rate_epoch epochs, as a multiple of "
              "learning_rate (1: a constant rate).", low=0, open=True),
        Param("late_rate_epoch", int, 15, "Epochs at learning_rate before late_rate applies.", low=0),
        Param("user_reg", float, 0.0, "L2 penalty on user vectors.", low=0, tune=("log0", 1e-7, 1e-4)),
        Param("item_reg", float, 0.0, "L2 penalty on item vectors.", low=0, tune=("log0", 1e-7, 1e-4)),
        Param("max_sampled", int, 50, "Most negatives compared per positive.", low=1, tune=[20, 50, 100]),
        Param("user_max_norm", float, 1.25, "Longest a user vector may grow; 0 = no limit.", low=0, nullable=True,
              tune=[None, 1.0, 1.25, 1.5], hint="0 or None: no limit"),
        Param("item_max_norm", float, None, "Longest an item vector may grow; 0 = no limit.", low=0, nullable=True,
              tune=True, hint="0 or None: no limit", shown="0"),
        Param("kos_k", int, 5, "warp-kos: step on the k-th best of the sampled positives.", low=1, tune=True),
        Param("kos_n", int, 10, f"warp-kos: positives sampled per step, at most {KOS_MAX_N}.", low=1, high=KOS_MAX_N,
              tune=True),
        Param("item_bias", bool, True, "Learn item biases.", tune=True),
        _STOPPING["epochs"], _STOPPING["max_epochs"], _STOPPING["patience"], _STOPPING["eval_every"],
        _STOPPING["eval_k"],
        Param("min_improvement", float, 0.0, "A rise resets the patience only when above the last one by more "
              "than this fraction of it.", low=0),
        _STOPPING["validation_fraction"], _STOPPING["validation_users"], _STOPPING["refit"],
        Param("warm_epochs", int, 0, "Refit: continue N epochs on all data from the best epoch's factors (about "
              "half the time, up to 2% lower P@10 on long-tail data); 0 = the refit of refit_reuse.", low=0,
              hint="0: the refit of refit_reuse"),
        Param("refit_reuse", float, 0.25, "Refit: start from the fit's training state (factors, adagrad, sampler) "
              "at about this share of the best epoch count and train only the epochs after it on all the data; "
              "0 = every refit epoch from scratch.", low=0, high=0.9, hint="0: refit from scratch"),
        Param("init_scale", float, 0.1, "Initial factors' standard deviation times sqrt(factors).", low=0,
              option=False),
        n_jobs_param("Threads per epoch (hogwild; >1 is fast but not bitwise reproducible; -1: every core)."),
        seed_param(),
        verbose_param(),
        Param("confidence", str, "none", "Weigh each row by its value: linear c = 1 + alpha*value, log "
              "c = 1 + alpha*log1p(value/eps); none = every row counts 1.", choices=CONFIDENCES),
        Param("alpha", float, 1.0, "Confidence scale alpha.", low=0, check=False),  # the confidence rule's
        Param("eps", float, 1.0, "Confidence log: the value that counts as one unit.", low=0, open=True,
              check=False),
        Param("confidence_use", str, "weight", "Scale each step by confidence (over its mean), or draw positives "
              "in proportion to it.", choices=CONFIDENCE_USES),
    )

    def __init__(
        self,
        factors: int = 64,
        loss: str = "warp",
        learning_rate: float = 0.02,
        learning_schedule: str = "adagrad",
        decay: float = 0.0,
        late_rate: float = 2.0,
        late_rate_epoch: int = 15,
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
        validation_users: int = 1000,
        refit: bool = True,
        warm_epochs: int = 0,
        refit_reuse: float = 0.25,
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
        self.late_rate = late_rate
        self.late_rate_epoch = late_rate_epoch
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
        self.refit_reuse = refit_reuse
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
    STATE_COPIES = 2
    OPTIMISER_STATE = ("_user_accum", "_item_accum", "_bias_accum", "_rng_state")

    def _step_scales(self) -> Dict[str, float]:
        """Parameters other than ``alpha`` that multiply each step (named first by a
        divergence's hint); none here, a hook for subclasses."""
        return {}

    def _check_extra(self) -> None:
        need(int(self.kos_k) <= int(self.kos_n), f"kos_k and kos_n need 1 <= kos_k <= kos_n <= {KOS_MAX_N}")
        check_epochs(self)
        if int(self.warm_epochs) and (self.epochs is not None or not self.refit):
            # it shapes the refit after early stopping: with neither, it would do nothing
            raise InputError(f"`warm_epochs` applies to the refit after early stopping, not with "
                             f"{'`epochs`' if self.epochs is not None else '`refit=False`'}",
                             hint="drop `warm_epochs`, or let early stopping choose the epochs")
        if self.supports_confidence:  # (the hybrid trains without one)
            # the shared rule of every confidence; the values are checked against it at fit time
            check_confidence(self.confidence, self.alpha, self.eps)

    def _check_file_params(self) -> None:
        if self.supports_confidence:  # a file has no values to check alpha against: the largest any file holds
            check_confidence(self.confidence, self.alpha, self.eps, bounded=True)

    # -- state -------------------------------------------------------------------------------
    def init_state(self, n_users: int, n_items: int, seed_rng: np.random.Generator) -> None:
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
        self._steps_restarted = False

    def restart_steps(self) -> None:
        """Adagrad's accumulators back at 1 (the learned arrays and the sampler stay): the
        next steps are as large as the first epoch's."""
        for accum in (self._user_accum, self._item_accum, self._bias_accum):
            accum.fill(1.0)
        # steps from fresh accumulators on trained factors: at learning_rate, never the
        # late rate (warm refits and partial fits were measured at a constant rate)
        self._steps_restarted = True

    # -- one epoch ---------------------------------------------------------------------------
    def _epoch(self, data: "TrainingData", progress: Progress) -> Dict[str, float]:
        """One epoch on ``data`` (:func:`.warp_epoch.run_epoch`): its statistics."""
        return run_epoch(self, data, progress)

    def _step_settings(self, epoch: int, boosted: bool = True) -> Dict[str, Any]:
        """What every kernel step takes at ``epoch`` (:func:`.warp_epoch.step_settings`)."""
        return step_settings(self, epoch, boosted)

    def _base_learning_rate(self) -> float:
        """The learning rate in force (a hook: subclasses may resolve a default from the data)."""
        return float(self.learning_rate)

    def _late_rate(self) -> float:
        """The ``late_rate`` in force (a hook, as :meth:`_base_learning_rate`)."""
        return float(self.late_rate)

    def _fit_shard(self, data: "TrainingData", start: int, stop: int, state: np.ndarray,
                   cfg: Dict[str, Any]) -> Tuple[float, float, float, float]:
        """One kernel call on positives ``data.order[start:stop]`` (a hook for subclasses)."""
        return _warp.fit_shard(
            self.user_factors_, self.item_factors_, self.item_bias_,
            self._user_accum, self._item_accum, self._bias_accum,
            data.indptr, data.indices, data.pos_users, data.order,
            start, stop, data.rank_weights, state, cfg, data.step_weights, data.seen_bits,
        )

    def _learned_arrays(self) -> Tuple[np.ndarray, ...]:
        """The arrays training writes, checked for divergence after every epoch."""
        return tuple(getattr(self, name) for name in self.LEARNED)

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
        self.check_params()
        progress = progress or (Progress(verbose=True) if self.verbose else SILENT)
        X = self._with_ids(X, user_ids, item_ids)
        csr = self._with_confidence(X, self.set_training_data(X))
        self._fit_prepared(csr, validation, callbacks, progress, warm_epochs=int(self.warm_epochs))
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
        return partial_fit(self, X, epochs, progress)

    def train_epochs(self, csr, epochs, progress, callbacks, validation=None, phase="fit", first: int = 0) -> int:
        """Run up to ``epochs`` epochs on ``csr`` (or prepared :class:`TrainingData`), numbered
        from ``first + 1``; with ``validation``, early-stop and keep the best."""
        data = csr if isinstance(csr, TrainingData) else training_data(self, csr)

        def step():
            stats = self._epoch(data, progress)
            return stats, (f"updates {stats['updates']:.1%}  mean L(rank) {stats['mean_weight']:.3f}  "
                           f"loss {stats['loss']:.4f}  lr {stats['learning_rate']:.4g}")

        return run_epochs(self, step, epochs, progress, callbacks, validation, phase, n_jobs=effective_n_jobs(self.n_jobs),
                          min_improvement=float(self.min_improvement), first=first)

    # -- confidence ----------------------------------------------------------------------------
    def _confidence_kind(self) -> str:
        # a subclass that does not support a confidence (the hybrid) trains without one
        return getattr(self, "confidence", "none") if self.supports_confidence else "none"

    def _with_confidence(self, X, binary: sp.csr_matrix) -> sp.csr_matrix:
        """``binary`` with each positive's confidence as its value (:func:`.warp_epoch.with_confidence`)."""
        kind = self._confidence_kind()
        return binary if kind == "none" else with_confidence(X, binary, kind, self.alpha, self.eps)

    # -- fold-in (mrec_warp.models.foldin) ---------------------------------------------------
    def fold_in(self, history, *, epochs: Optional[int] = None, user_features=None,
                progress: Optional[Progress] = None, user_ids: Optional[Sequence] = None) -> "WARP":
        """Add users from a short history without refitting (in place; returns ``self``).

        Each user of ``history`` (a ratings path, a ``user, item`` DataFrame,
        Interactions, a list of ``(user, item)`` pairs, or a sparse matrix with one column
        per model item whose rows are the users ``user_ids``) gets a factor row fitted by
        ``epochs`` WARP passes (default :data:`~mrec_warp.models.foldin.FOLD_IN_EPOCHS`)
        over their items against the fixed item factors; new users are appended to
        ``user_ids``, known ones are refined from their training items plus the history;
        every history item joins the user's training row, so it is excluded from their
        recommendations. Nothing else changes. ``user_features``: a hybrid's new users'
        features (a plain WARP refuses them). See :func:`mrec_warp.models.foldin.fold_in`.
        """
        return fold_in(self, history, epochs=epochs, user_features=user_features, progress=progress,
                       user_ids=user_ids)

    def _fold_in_problem(self, users: np.ndarray):
        return warp_problem(self, users)

    def _fold_in_store(self, users: np.ndarray, rows: np.ndarray) -> None:
        self.user_factors_[users] = rows

    def history_vector(self, items: np.ndarray) -> np.ndarray:
        return warp_vector(self, items)

    # -- persistence -------------------------------------------------------------------------
    def get_arrays(self) -> Dict[str, np.ndarray]:
        return {"user_factors": self.user_factors_, "item_factors": self.item_factors_,
                "item_bias": self.item_bias_}

    @classmethod
    def array_spec(cls, params: Dict[str, Any], n_users: int, n_items: int) -> Dict[str, Tuple[str, Tuple]]:
        return {**cls._factor_spec(params, n_users, n_items), "item_bias": ("f4", (n_items,))}

    def set_arrays(self, arrays: Dict[str, np.ndarray]) -> None:
        uf, itf = self._checked_factors(arrays)
        ib = np.ascontiguousarray(arrays["item_bias"], dtype=np.float32)
        check_shape(ib, (self.n_items,), "item biases")
        for arr, what in ((uf, "user factors"), (itf, "item factors"), (ib, "item biases")):
            check_finite(arr, what)
        self.user_factors_, self.item_factors_, self.item_bias_ = uf, itf, ib

    def merge_sub_models(self, parts: Sequence[Dict[str, np.ndarray]]) -> None:
        """The sub-models' factors side by side and their item biases summed, so that a score is
        the sum of theirs; the epochs are the most any of them ran."""
        self.set_arrays({
            "user_factors": np.hstack([p["user_factors"] for p in parts]),
            "item_factors": np.hstack([p["item_factors"] for p in parts]),
            "item_bias": np.sum([p["item_bias"] for p in parts], axis=0),
        })
        self.best_epoch_ = int(max(int(p["best_epoch"]) for p in parts))
        self.epochs_done_ = self.best_epoch_
