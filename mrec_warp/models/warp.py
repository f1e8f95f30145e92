"""WARP: matrix factorisation trained with the WARP ranking loss (Weston et al., 2010).

A user's score for an item is ``f(u, i) = p_u . q_i + b_i``. An epoch visits every training
positive once, in a fresh random order (or, when confidences are used to sample, draws as
many positives in proportion to them); for each one the kernel (:mod:`mrec_warp.kernels.warp`)
draws items until one outranks the positive within the margin, estimates the positive's
rank from the number of draws, and steps the user, the positive and that negative on the
rank-weighted hinge. Several threads may share an epoch (hogwild shards); after it, the
learned arrays are checked for divergence.

The number of epochs is chosen by early stopping on a hold-out, then the model is refitted
on all the data: the loop every epoch-trained factor model shares (:mod:`.early_stopping`).
:meth:`WARP.partial_fit` trains on more pairs; :meth:`WARP.fold_in` fits new users' rows
against the fixed items with the same sampler, and :meth:`WARP.history_vector` gives the row
fold-in would fit for one anonymous history, bit for bit, without changing the model.
"""
from __future__ import annotations

import threading
import warnings
from typing import Any, Callable, Dict, Mapping, Optional, Sequence, Tuple

import numpy as np
import scipy.sparse as sp

from ..data.confidence import CONFIDENCES, check_confidence
from ..data.confidence import confidence as confidence_of
from ..data.interactions import Interactions, as_csr
from ..data.npz import check_finite, check_shape
from ..errors import InputError, TrainingDivergedError
from ..kernels import rng as _rng
from ..kernels import warp as _warp
from ..progress import SILENT, Progress, plural
from ..seeds import spawn_seed, spawn_seeds
from ..workers import effective_n_jobs, thread_map
from .declared import Param, declared_by_name, n_jobs_param, seed_param, verbose_param
from .factor_model import FactorModel
from .foldin import log_fold_in, add_history, known_pairs, refuse_features
from .tuning import SCORE_RATE, TrialShape
from .early_stopping import check_epochs, early_stopping_params, need, run_epochs

LOSSES = {"warp": 0, "bpr": 1, "warp-kos": 2}
#: Most positives a WARP-kOS step may compare (the kernel keeps them on the stack).
KOS_MAX_N = 64
SCHEDULES = ("adagrad", "sgd")
#: How WARP uses a confidence: draw positives in proportion to it, or scale each step by it.
CONFIDENCE_USES = ("sample", "weight")

#: Positives per kernel call: small enough for a live progress bar and Ctrl-C, large
#: enough that the Python overhead between calls is negligible.
CHUNK = 262144

#: Training stops as diverged when a learned array's typical vector length (root mean square
#: of its row norms) passes this many times the initial one (``init_scale``, counted as at
#: least 0.1). With the hinge's margin of 1, sound models stay within about 30 times: 1.6 on
#: MovieLens 100k and planted data with the defaults, ~130 even at learning rate 10, while a
#: learning rate of 1e6 reaches 1e8 times in one epoch.
DIVERGENCE_GROWTH = 1e4

#: Largest bitmap of the positives (one bit per user and item) the WARP kernel tests its
#: negatives against instead of searching CSR rows; bigger sets keep the search (a bitmap
#: that does not stay in cache would cost a memory load per draw).
SEEN_BITMAP_BYTES = 16 * 1024 * 1024

#: Default passes over a folded-in user's history. The item side is fixed, so each pass is
#: cheap; starting from a zero vector, about this many passes bring a folded-in user's
#: precision close to that of a user trained in (see tests/test_foldin.py).
FOLD_IN_EPOCHS = 30

#: Mixed into the model's seed so that fold-in samples its own stream.
FOLD_IN_SALT = 0x5F0D1D

Callback = Callable[["WARP", Dict[str, Any]], Optional[bool]]


# -- the positives as the kernel reads them, and the check after an epoch ---------------------------
class TrainingData:
    """The arrays the kernel reads: CSR structure, the user of each positive, the visit order.

    Every stored pair of ``csr`` is a positive (never sampled as a negative); an epoch visits
    them all, or only the pairs of ``visit`` (a subset of ``csr``) when it is given.
    ``confidence``, one value per visited pair (in CSR order), weighs them: ``use="weight"``
    builds step weights (confidence over its mean; 1 for pairs not visited),
    ``use="sample"`` the alias table the epochs draw the visited pairs from.
    """

    def __init__(self, csr: sp.csr_matrix, visit: Optional[sp.csr_matrix] = None,
                 confidence: Optional[np.ndarray] = None, use: str = "weight") -> None:
        self.indptr = csr.indptr.astype(np.int64)  # small: one entry per user
        self.indices = csr.indices.astype(np.int32, copy=False)  # shared with the model's CSR
        counts = np.diff(self.indptr)
        self.pos_users = np.repeat(np.arange(csr.shape[0], dtype=np.int32), counts)
        # the visit order is shuffled in place every epoch; int32 halves its memory when it fits
        dtype = np.int32 if csr.nnz < 2**31 - 1 else np.int64
        if visit is None:
            self.order = np.arange(csr.nnz, dtype=dtype)
        else:
            self.order = _positions(csr, visit).astype(dtype)
        self.rank_weights = _rng.harmonic_table(csr.shape[1])
        self.shape: Tuple[int, int] = (int(csr.shape[0]), int(csr.shape[1]))
        self._seen_bits: Optional[np.ndarray] = None
        self._seen_lock = threading.Lock()  # hogwild shards ask for it at once in the first epoch
        self.alias: Optional[Tuple[np.ndarray, np.ndarray]] = None
        self.targets: Optional[np.ndarray] = None  # what an alias draw k stands for: order[k]
        self.step_weights: Optional[np.ndarray] = None
        if confidence is not None and len(self.order):
            values = np.asarray(confidence, dtype=np.float64)
            if use == "sample":
                self.alias = _rng.alias_table(values)
                if visit is not None:
                    self.targets = self.order.astype(np.int64)
            else:
                self.step_weights = np.ones(csr.nnz, dtype=np.float32)
                self.step_weights[self.order] = values / values.mean()

    @property
    def seen_bits(self) -> Optional[np.ndarray]:
        """The positives as a bitmap, bit ``u * n_items + j`` (little-endian within each
        byte), built at first use; ``None`` above :data:`SEEN_BITMAP_BYTES`."""
        n_users, n_items = self.shape
        with self._seen_lock:
            if self._seen_bits is None and 0 < n_users * n_items <= 8 * SEEN_BITMAP_BYTES:
                rows = np.repeat(np.arange(n_users, dtype=np.int64), np.diff(self.indptr))
                bits = rows * n_items + self.indices
                seen = np.zeros((n_users * n_items + 7) // 8, dtype=np.uint8)
                np.bitwise_or.at(seen, bits >> 3, np.left_shift(1, bits & 7).astype(np.uint8))
                self._seen_bits = seen
            return self._seen_bits


def _pair_keys(csr: sp.csr_matrix) -> np.ndarray:
    """One int64 per stored pair, ``row * n_cols + col``: increasing for sorted indices."""
    rows = np.repeat(np.arange(csr.shape[0], dtype=np.int64), np.diff(csr.indptr))
    return rows * csr.shape[1] + csr.indices


def _positions(csr: sp.csr_matrix, subset: sp.csr_matrix) -> np.ndarray:
    """Where each stored pair of ``subset`` sits among the stored pairs of ``csr``."""
    csr.sort_indices()
    subset.sort_indices()
    return np.searchsorted(_pair_keys(csr), _pair_keys(subset))


def merge_seen(seen: sp.csr_matrix, new: sp.csr_matrix) -> sp.csr_matrix:
    """The union of two binary users x items matrices: sorted, ones, float32."""
    merged = sp.csr_matrix(seen + new, dtype=np.float32)
    merged.sum_duplicates()
    merged.sort_indices()
    merged.data[:] = 1.0
    return merged


def check_divergence(arrays: Sequence[np.ndarray], init_scale: float, learning_rate: float, what: str,
                     alpha: Optional[float] = None, scales: Optional[Dict[str, float]] = None) -> None:
    """Raise :class:`TrainingDivergedError` when an array is not finite or has blown up.

    Blown up: its typical vector length (root mean square of the row norms; of the values
    for a 1-D array) passed :data:`DIVERGENCE_GROWTH` times ``init_scale`` (at least 0.1).
    ``alpha``: the confidence scale, when confidences weight each step; ``scales``: other
    parameters that multiply each step (a hybrid's un-normalised ``identity_weight``). The
    hint names them first, the largest first: a step scaled by ``identity_weight=1e30`` is
    not fixed by a learning rate ten times lower.
    """
    scales = {**({"alpha": alpha} if alpha else {}), **(scales or {})}
    scaled = "".join(f"lower `{name}` from {value:g} ({'confidences multiply' if name == 'alpha' else 'it multiplies'} "
                     "each step), " for name, value in sorted(scales.items(), key=lambda kv: -kv[1]))
    hint = (scaled + f"lower the learning rate from {learning_rate:g} to {learning_rate / 10:g} or less, "
            "or add regularisation")
    limit = DIVERGENCE_GROWTH * max(float(init_scale), 0.1)
    for a in arrays:
        if a.size == 0:
            continue
        flat = a.reshape(-1)
        typical = float(np.sqrt(np.dot(flat, flat) / a.shape[0]))  # float32 dot: inf when huge
        if not np.isfinite(typical) and not np.isfinite(flat).all():
            raise TrainingDivergedError(f"{what}: factors are no longer finite", hint=hint)
        if not typical <= limit:
            raise TrainingDivergedError(
                f"{what}: factor lengths grew to {typical:.3g}, more than {DIVERGENCE_GROWTH:.0e} times "
                f"their initial {max(float(init_scale), 0.1):g}", hint=hint)


# -- the rules of a step: confidence, rate, norm limit ------------------------------------------------
def with_confidence(X, binary: sp.csr_matrix, kind: str, alpha: float, eps: float) -> sp.csr_matrix:
    """``binary`` (the positives) with each positive's confidence (``kind``, ``alpha``, ``eps``)
    as its value.

    The values come from ``X`` (the same stored entries as ``binary``: a value of 0 is a
    positive of the lowest confidence); the visit order and hold-out splits only look at
    the structure, so they do not change with the confidence.
    """
    raw = X.matrix if isinstance(X, Interactions) else as_csr(X)
    if raw.nnz != binary.nnz:  # cannot happen through fit; guards a subclass's set_training_data
        raise ValueError("confidence values do not line up with the positives")
    conf = confidence_of(raw.data, kind, alpha, eps)
    return sp.csr_matrix((conf, binary.indices, binary.indptr), shape=binary.shape)


def rate_factor(late_rate: float, late_epoch: int, epoch: int) -> float:
    """The multiple of the learning rate at ``epoch`` (0-based): 1 for the first
    ``late_epoch`` epochs, ``late_rate`` from then on."""
    return float(late_rate) if epoch >= late_epoch else 1.0


def _limit(max_norm: Optional[float]) -> float:
    """A norm limit as the kernels take it: 0 for none (``None`` and 0 both mean no limit)."""
    return 0.0 if max_norm is None else float(max_norm)


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
        ``round(refit_reuse * best_epoch_)`` (:class:`~mrec_warp.models.early_stopping.RefitStates`), and
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
    order = 10
    supports_confidence = True
    SCALING_PARAMETERS = ("alpha", "learning_rate")
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

    def set_train_state(self, state: Dict[str, Any], copy: bool = True) -> None:
        super().set_train_state(state, copy)
        self._steps_restarted = False  # the fit's own accumulators, as they were

    def restart_steps(self) -> None:
        """Adagrad's accumulators back at 1 (the learned arrays and the sampler stay): the
        next steps are as large as the first epoch's."""
        for accum in (self._user_accum, self._item_accum, self._bias_accum):
            accum.fill(1.0)
        # steps from fresh accumulators on trained factors: at learning_rate, never the
        # late rate (warm refits and partial fits were measured at a constant rate)
        self._steps_restarted = True

    # -- one epoch ---------------------------------------------------------------------------
    def _training_data(self, csr: sp.csr_matrix, visit: Optional[sp.csr_matrix] = None,
                       values: Optional[np.ndarray] = None) -> TrainingData:
        """The kernel's arrays for the positives ``csr``; with a confidence, ``values``
        (default ``csr.data``) are the confidences of the visited pairs."""
        if self._confidence_kind() == "none":
            return TrainingData(csr, visit)
        return TrainingData(csr, visit, confidence=csr.data if values is None else values,
                            use=self.confidence_use)

    def _epoch(self, data: TrainingData, progress: Progress) -> Dict[str, float]:
        """Shuffle the positives (or draw them by confidence), then visit each (in shards on several threads).

        Returns the epoch's statistics (its ``history_`` entry): ``updates`` and ``loss`` per
        positive, ``mean_weight`` (mean L(rank)), ``compared_per_positive`` and the
        ``learning_rate`` of its steps."""
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
            for s, e in progress.iterate(chunks, total=len(chunks), desc=f"epoch {self.epochs_done_ + 1}", unit="chunk",
                                         lines=False):  # the epoch's line says it is done
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
        scales = self._step_scales()
        base_rate, late_rate = self._rates()
        if self._late_factor(self.epochs_done_ - 1) > 1:  # this epoch stepped at the late rate: the hint names it
            scales = {**scales, "late_rate": late_rate}
        check_divergence(self._learned_arrays(), float(self.init_scale), base_rate,
                         f"training diverged at epoch {self.epochs_done_}", alpha=float(self.alpha) if weighted else None,
                         scales=scales)
        return {
            "updates": n_updates / max(nnz, 1),
            "mean_weight": total_weight / max(n_updates, 1),
            "loss": total_loss / max(nnz, 1),
            "compared_per_positive": n_compared / max(nnz, 1),
            # the rate every step of the epoch took (the late rate, SGD's decay): visible in the log
            "learning_rate": float(cfg["learning_rate"]),
        }

    def _rates(self) -> Tuple[float, float]:
        """(learning rate, late rate) in force: the parameters, here; a hook for a subclass
        that resolves their defaults from its data (the hybrid)."""
        return float(self.learning_rate), float(self.late_rate)

    def _late_factor(self, epoch: int) -> float:
        """The ``late_rate`` multiple in force at ``epoch``: 1 before ``late_rate_epoch``, and
        1 after a restart of adagrad's accumulators on trained factors (a warm refit,
        ``partial_fit`` of a loaded model: measured at a constant rate)."""
        if getattr(self, "_steps_restarted", False):
            return 1.0
        return rate_factor(self._rates()[1], int(self.late_rate_epoch), epoch)

    def _step_settings(self, epoch: int, boosted: bool = True) -> Dict[str, Any]:
        """What every kernel step takes at ``epoch`` (0-based), as the kernels' ``StepSettings``
        struct (``kernels/steps.pxd``) wants it: a dict of every field.

        The rate depends on the epoch number alone (SGD's ``decay``, the ``late_rate``), so a
        refit replays the fit's rates epoch by epoch. ``boosted=False``: without the
        ``late_rate`` (fold-in, which fits a new user's row against the trained items at
        ``learning_rate``, as before the schedule existed)."""
        lr = self._rates()[0]
        if self.learning_schedule == "sgd":
            lr = lr / (1.0 + float(self.decay) * epoch)
        if boosted:
            lr = lr * self._late_factor(epoch)
        return dict(
            loss=LOSSES[self.loss], max_sampled=int(self.max_sampled), learning_rate=lr,
            user_reg=float(self.user_reg), item_reg=float(self.item_reg),
            adagrad=self.learning_schedule == "adagrad", use_bias=bool(self.item_bias),
            user_max_norm=_limit(self.user_max_norm), item_max_norm=_limit(self.item_max_norm),
            kos_n=int(self.kos_n), kos_k=int(self.kos_k),
        )

    def _fit_shard(self, data: TrainingData, start: int, stop: int, state: np.ndarray,
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
        self.check_params()
        if int(epochs) < 1:
            raise InputError(f"partial_fit needs epochs >= 1, got {epochs}")
        progress = progress or (Progress(verbose=True) if self.verbose else SILENT)
        if getattr(self, "train_", None) is None:
            csr = self._with_confidence(X, self.set_training_data(X))
            n_users, n_items = csr.shape
            self.init_state(n_users, n_items, np.random.default_rng(self.random_state))
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
        self.partial_fit_summary_: Dict[str, int] = summary
        if summary["skipped_pairs"]:
            message = (f"partial_fit skipped {summary['skipped_pairs']:,} of {plural(summary['pairs'], 'pair')} naming "
                       f"{plural(summary['unknown_users'], 'user')} and {plural(summary['unknown_items'], 'item')} "
                       "the model does not know (add new users with fold_in; new items need a refit)")
            warnings.warn(message, UserWarning, stacklevel=2)
            progress.log(f"warning: {message}")
        if not hasattr(self, "history_"):
            self.history_ = []
        self.train_epochs(data, int(epochs), progress, ())
        return self

    def _fresh_optimizer_state(self, seed_rng: np.random.Generator) -> None:
        """Adagrad accumulators (at 1) and a sampler seed for the learned arrays as they are,
        e.g. to continue training a model loaded from disk."""
        self._user_accum, self._item_accum, self._bias_accum = (
            np.ones_like(a) for a in self._learned_arrays())
        self._rng_state = _rng.seed_state(spawn_seed(seed_rng))
        self._steps_restarted = True  # fresh accumulators on trained factors: no late rate

    def train_epochs(self, csr, epochs, progress, callbacks, validation=None, phase="fit", first: int = 0) -> int:
        """Run up to ``epochs`` epochs on ``csr`` (or prepared :class:`TrainingData`), numbered
        from ``first + 1``; with ``validation``, early-stop and keep the best."""
        data = csr if isinstance(csr, TrainingData) else self._training_data(csr)

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
        """``binary`` with each positive's confidence as its value (:func:`with_confidence`)."""
        kind = self._confidence_kind()
        return binary if kind == "none" else with_confidence(X, binary, kind, self.alpha, self.eps)

    # -- fold-in -------------------------------------------------------------------------------
    def fold_in(self, history, *, epochs: Optional[int] = None, user_features=None,
                progress: Optional[Progress] = None, user_ids: Optional[Sequence] = None) -> "WARP":
        """Add users from a short history without refitting (in place; returns ``self``).

        For each user of ``history``, ``epochs`` WARP passes over their items update *only*
        that user's row (the user factors here, a hybrid's identity embedding) against item
        representations that do not move, so the rest of the model, and every other user's
        recommendations, stay exactly as they were. New users are appended to ``user_ids``;
        known ones are refined from their training items plus the history.

        Parameters
        ----------
        history : path, DataFrame, Interactions, (user, item) pairs or sparse matrix
            ``user, item`` rows (see :func:`~mrec_warp.models.foldin.read_history`); a sparse
            matrix has one column per model item and rows that are the users ``user_ids``.
            Items the model does not know are skipped (counted in ``fold_in_summary_``).
        epochs : int, optional
            Passes over the history (default :data:`FOLD_IN_EPOCHS`).
        user_features : path or DataFrame, optional
            A hybrid's new users' features (a plain WARP refuses them).
        progress : Progress, optional
        user_ids : sequence, optional
            With a sparse-matrix history: the id of each of its rows.

        Notes
        -----
        The learning rate (without the ``late_rate``), loss, ``max_sampled``, schedule and
        ``user_reg`` are the model's. Each folded user's history items join their training
        row (``train_``), so they are excluded from recommendations like training items are.
        One call with a fixed ``random_state`` is reproducible.
        """
        self.check_fitted()
        refuse_features(self, user_features)
        progress = progress or SILENT
        epochs = FOLD_IN_EPOCHS if epochs is None else int(epochs)
        if epochs < 1:
            raise InputError(f"fold-in epochs must be >= 1, got {epochs}")
        added = add_history(self, history, user_features, user_ids)
        idx, pos = added["rows"], added["positives"]

        rows, offset, scale, item_factors, item_bias = self._fold_in_problem(idx)
        rows = np.ascontiguousarray(rows, dtype=np.float32)
        accum = np.ones_like(rows)
        data = TrainingData(pos)
        # the model's first seed, salted: a stream of its own (kept as it was: the fold-in
        # quality test's margin was measured on this stream)
        state = _rng.seed_state(spawn_seed(self.random_state) ^ FOLD_IN_SALT)
        bias = np.ascontiguousarray(item_bias, dtype=np.float32) if self.item_bias else np.zeros(0, np.float32)
        offset, scale, item_factors = (np.ascontiguousarray(a, dtype=np.float32) for a in (offset, scale, item_factors))
        for epoch in range(epochs):
            _rng.shuffle(data.order, state)
            _warp.fold_in_shard(
                rows, accum, offset, scale, item_factors, bias,
                data.indptr, data.indices, data.pos_users, data.order, 0, len(data.order), data.rank_weights, state,
                self._step_settings(epoch, boosted=False),  # at learning_rate (no late_rate)
            )
        check_divergence([rows], float(self.init_scale), self._rates()[0], "fold-in diverged")
        self._fold_in_store(idx, rows)
        self.fold_in_summary_ = dict(added["summary"], epochs=epochs)
        log_fold_in(progress, self.fold_in_summary_, f", {epochs} epochs")
        return self

    def append_users(self, ids, user_features=None) -> None:
        """New users with zero factor rows, and fresh adagrad rows while training keeps them."""
        super().append_users(ids, user_features)
        if getattr(self, "_user_accum", None) is not None:
            d = self._user_accum.shape[1]
            self._user_accum = np.vstack([self._user_accum, np.ones((len(ids), d), np.float32)])

    def _fold_in_problem(self, users: np.ndarray) -> Tuple[np.ndarray, ...]:
        """What fold-in fits for ``users``: ``(rows, offset, scale, item_factors, item_bias)``
        with ``p_u = offset[u] + scale[u] * rows[u]`` (an empty offset / scale means 0 / 1).
        Here the user factors themselves, no offset, scale 1."""
        rows = self.user_factors_[users].copy()
        return rows, np.zeros((0, rows.shape[1]), np.float32), np.zeros(0, np.float32), self.item_factors_, self.item_bias_

    def _fold_in_store(self, users: np.ndarray, rows: np.ndarray) -> None:
        """Write the rows fold-in fitted for ``users`` back into the model."""
        self.user_factors_[users] = rows

    def history_vector(self, items: np.ndarray) -> np.ndarray:
        """The user vector :meth:`fold_in` fits for a new user whose history is ``items``
        (sorted unique indices), bit for bit, the model unchanged."""
        return self._fold_in_vector(items)

    def _fold_in_vector(self, items: np.ndarray, scale: Optional[float] = None) -> np.ndarray:
        """The factor row :meth:`fold_in` fits for one new user whose history is ``items``
        (sorted unique indices), bit for bit, leaving the model as it is.

        ``scale``: the weight of the user's own (identity) row in its vector, for a hybrid
        model's featureless user (``p_u = scale * row``); ``None`` for WARP (``p_u = row``).
        """
        cached = self._fold_in_cache()
        epochs = FOLD_IN_EPOCHS
        d = cached["side"].items.shape[1]
        n = len(items)
        rows = np.zeros((1, d), dtype=np.float32)
        accum = np.ones((1, d), dtype=np.float32)
        indptr = np.array([0, n], dtype=np.int64)
        pos_users = np.zeros(n, dtype=np.int32)
        order = np.arange(n, dtype=np.int32)
        state = _rng.seed_state(self._fold_in_seed(cached) ^ FOLD_IN_SALT)
        if scale is None:
            offset, scales = np.zeros((0, d), np.float32), np.zeros(0, np.float32)
        else:  # a featureless user: nothing but its own row, weighted
            offset, scales = np.zeros((1, d), np.float32), np.full(1, scale, np.float32)
        # every epoch in one kernel call: 30 calls of shuffle and fold_in_shard cost more than their steps
        _warp.fold_in_epochs(rows, accum, offset, scales, cached["side"].items, cached["bias"], indptr, items,
                             pos_users, order, cached["rank_weights"], state,
                             self._fold_in_settings(cached, epochs))
        check_divergence([rows], float(self.init_scale), self._rates()[0], "fold-in diverged")
        return rows[0] if scale is None else (np.float32(scale) * rows[0]).astype(np.float32)

    def _fold_in_cache(self) -> dict:
        """What every one-history fold-in of the model shares: the sampler's rank weights for
        its catalogue and the contiguous item side (built once per change of the item factors)."""
        side = self.item_side()
        assert side is not None  # trained and loaded factors are float32 and C-contiguous
        cached = self.__dict__.get("_fold_cache")
        if cached is None or cached["side"] is not side:
            bias = side.bias if side.bias is not None else np.zeros(0, np.float32)
            cached = {"side": side, "rank_weights": _rng.harmonic_table(self.n_items),
                      "bias": np.ascontiguousarray(bias, dtype=np.float32)}
            self.__dict__["_fold_cache"] = cached
        return cached

    def _fold_in_settings(self, cached: dict, epochs: int) -> list:
        """The step settings of epochs 0..epochs-1, kept in ``cached`` while its first and last
        epochs' are unchanged (they depend on the parameters and the epoch alone; building 30
        dicts was a third of the cost of a fold-in)."""
        # fold-in steps at learning_rate, without the late_rate (as before the schedule existed)
        first, last = self._step_settings(0, boosted=False), self._step_settings(epochs - 1, boosted=False)
        kept = cached.get("settings")
        if kept is None or len(kept) < epochs or kept[0] != first or kept[epochs - 1] != last:
            kept = cached["settings"] = [first] + [self._step_settings(e, boosted=False) for e in range(1, epochs)]
        return kept[:epochs]

    def _fold_in_seed(self, cached: dict) -> int:
        """``spawn_seed(random_state)``, kept in ``cached`` while an integer seed is unchanged
        (drawing it builds a generator: a fifth of a short fold-in). Any other seed is drawn
        every time: ``None`` must stay fresh and a Generator advances."""
        seed = self.random_state
        if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool):
            return spawn_seed(seed)
        kept = cached.get("seed")
        if kept is None or kept[0] != int(seed):
            kept = cached["seed"] = (int(seed), spawn_seed(seed))
        return kept[1]

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
