"""What ``tune`` asks a model family: how a trial is built and fitted, what it costs, and its rungs.

:class:`TuneHooks` is a base of :class:`~mrec_warp.models.base.Recommender`: every family
has these hooks with the defaults below, and overrides the ones its nature needs (WARP and
WRMF their cost formulas and rungs, EASE its cost and memory refusal, popularity its
cost). The search (:mod:`mrec_warp.stages.tune`, :mod:`~mrec_warp.stages.trials`,
:mod:`~mrec_warp.stages.budget`) only calls these hooks and reads capabilities, so a new
family needs nothing in ``stages/``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Dict, Mapping, Optional, Tuple

import scipy.sparse as sp

from ..data.interactions import binary_csr
from .families import fit_takes

#: Validation users the early stopping of a short trial scores (a sample of them).
SHORT_VALIDATION_USERS = 1000
#: Seconds of scoring one user against one item (one thread), measured here (2 shared
#: cores) on ml-100k and a 1.9k x 16k long-tail synthetic set.
SCORE_RATE = 9e-9
#: Seconds per co-occurrence (``sum_u n_u^2``) of a sparse item-item product, measured as
#: :data:`SCORE_RATE` was.
COOC_RATE = 2.0e-8
#: Seconds per training pair of a family that declares no cost formula: a rough placeholder
#: (not measured), corrected during a budgeted search by what the family's trials take.
GENERIC_RATE = 1e-6


@dataclass(frozen=True)
class TrialShape:
    """The sizes a trial's cost depends on (:func:`mrec_warp.stages.budget.data_shape` builds it).

    Attributes
    ----------
    users, items, nnz : int
        Size of the fit matrix.
    cooc : float
        Co-occurrences, ``sum_u n_u^2``.
    deg2 : float
        ``sum_k deg_k^2`` over items, ``deg_k`` the items co-occurring with ``k``.
    val_users : int
        Validation users (each scored against every item at the end of a trial).
    fit : scipy.sparse.csr_matrix, optional
        The fit matrix, for a family whose estimate reads it (EASE's users' lengths).
    measured : bool
        Times from this machine's measured speed where a family measures one (EASE's flop
        rate); else from fixed reference rates, so that the costs the tie rule compares are
        reproducible.
    """

    users: int
    items: int
    nnz: int
    cooc: float
    deg2: float
    val_users: int
    fit: Optional[sp.csr_matrix] = None
    measured: bool = False

    def scoring(self) -> float:
        """Seconds of a trial's final scoring of every validation user."""
        return SCORE_RATE * self.val_users * self.items

    def sampled_users(self, epochs_cap: Optional[int]) -> int:
        """Validation users an early-stopping trial scores each evaluation (a short one: a sample)."""
        return min(self.val_users, SHORT_VALIDATION_USERS) if epochs_cap else self.val_users


class TuneHooks:
    """The hooks ``tune`` calls on a family (class methods, plus :meth:`fit_trial`).

    Override what differs: :meth:`fit_cost` (the estimated seconds of a trial),
    :meth:`memory_refusal` (a family that can refuse a fit for its memory),
    :attr:`tune_rungs` (the short rungs of successive halving, for ``early_stopping``
    families), :meth:`trial_params` (the constructor parameters of a trial) and
    :attr:`tune_baseline` (the reference row of a search's table).
    """

    #: Epoch caps of a budgeted search's rungs, the last ``None`` (the full trial); empty:
    #: the family's trials are never shortened (only ``early_stopping`` families have rungs).
    tune_rungs: ClassVar[Tuple[Optional[int], ...]] = ()
    #: The family is the reference row of ``tune``'s table (never the pick).
    tune_baseline: ClassVar[bool] = False

    @classmethod
    def fit_cost(cls, shape: TrialShape, params: Mapping[str, Any], epochs_cap: Optional[int] = None) -> float:
        """Estimated seconds of one trial (fit and validation scoring), before it starts.

        ``params`` are the trial's constructor parameters (:meth:`trial_params`);
        ``epochs_cap`` a short trial's most epochs (``None``: a full trial). The default is
        proportional to the training pairs (:data:`GENERIC_RATE`) plus the final scoring.
        """
        return GENERIC_RATE * shape.nnz + shape.scoring()

    @classmethod
    def memory_refusal(cls, fit: sp.csr_matrix, params: Mapping[str, Any]) -> Optional[str]:
        """Why a fit of ``params`` on ``fit`` would not fit in memory (one line, naming
        what to change), or ``None`` (the default: the family never refuses)."""
        return None

    @classmethod
    def trial_params(cls, values: Mapping[str, Any], shared: Mapping[str, Any], k: int,
                     epochs_cap: Optional[int] = None) -> Dict[str, Any]:
        """The constructor parameters of a trial of ``values``.

        ``shared``: the search's parameters of every early-stopping trial (``max_epochs``,
        ``patience``, ``random_state``). An ``early_stopping`` family's trial chooses its
        epochs (``epochs=None``) on precision@``k``, single-threaded; a short one
        (``epochs_cap``) runs at most that many epochs and scores a sample of
        :data:`SHORT_VALIDATION_USERS` validation users. Other families: ``values`` alone.
        """
        if not getattr(cls, "early_stopping", False):
            return dict(values)
        cap = {} if epochs_cap is None else {"max_epochs": int(epochs_cap),
                                             "validation_users": SHORT_VALIDATION_USERS}
        return {**shared, **values, "epochs": None, "n_jobs": 1, "eval_k": k, **cap}

    def fit_trial(self, fit: sp.csr_matrix, validation: sp.csr_matrix, use_values: bool = False) -> None:
        """Fit a trial on ``fit``; ``validation`` is what an ``early_stopping`` family stops on.

        ``use_values``: ``fit`` holds the training values, which a family whose fit takes
        ``use_values`` (it weighs observed pairs with or without values: WRMF) weighs as
        confidences; every other family fits on the pairs alone.
        """
        fit_model = getattr(self, "fit")
        if fit_takes(self, "use_values"):
            fit_model(fit, validation=validation, use_values=use_values)
            return
        binary = binary_csr(fit) if use_values else fit
        if getattr(self, "early_stopping", False):
            fit_model(binary, validation=validation)
        else:
            fit_model(binary)
