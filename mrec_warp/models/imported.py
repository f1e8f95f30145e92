"""Factors computed elsewhere, as a model every command serves: :class:`Factors`.

The model behind ``mrec-warp factors`` (mrec's ``mrec_factors``): user and item factor
matrices (and optionally item biases) from another tool -- implicit, LightFM, an SVD, a
model exported from mrec-warp itself -- scored as ``user_factors @ item_factors.T +
item_bias``, exactly as a WARP model scores, so ``recommend``, ``evaluate`` (through
recommend's output), ``similar`` and ``explain``'s neighbours treat it like their own. It
has no ``fit``: it is built from arrays by :meth:`Factors.from_arrays`, checked as a model
file is checked on load (finite values, shapes that agree, unique non-empty ids).
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Sequence, Tuple, Union

import numpy as np
import scipy.sparse as sp

from ..data.npz import check_finite, check_ids, check_shape
from ..errors import InputError
from ..progress import SILENT, Progress
from .base import Recommender
from .declared import Param
from .factor_model import FactorScoring
from .foldin import log_fold_in, add_history, append_user_ids, refuse_features


class Factors(FactorScoring, Recommender):
    """User and item factors computed elsewhere (no training; see the module docstring).

    Parameters
    ----------
    item_bias : bool
        Whether the scores add the item biases (``from_arrays`` sets it when biases are given).
    regularization : float
        Ridge penalty of :meth:`fold_in`, relative to the mean eigenvalue of the item factors'
        Gram matrix (so it does not depend on their scale).

    Fitted attributes: ``user_factors_`` (n_users, d), ``item_factors_`` (n_items, d),
    ``item_bias_`` (n_items,; zeros without biases), as float32.
    """

    #: loaded from model files, but built by `mrec-warp factors`: no family `train` fits
    name = None

    PARAMETERS = (
        Param("item_bias", bool, False, "Whether the scores add the item biases."),
        Param("regularization", float, 0.01, "Ridge penalty of fold-in, relative to the mean eigenvalue of the "
              "item factors' Gram matrix.", low=0),
    )
    supports_fold_in = True
    has_factors = True
    finds_similar_items = True

    user_factors_: np.ndarray
    item_factors_: np.ndarray
    item_bias_: np.ndarray

    def __init__(self, item_bias: bool = False, regularization: float = 0.01) -> None:
        self.item_bias = item_bias
        self.regularization = regularization


    @classmethod
    def from_arrays(cls, user_factors: np.ndarray, item_factors: np.ndarray, user_ids: Union[Sequence, np.ndarray],
                    item_ids: Union[Sequence, np.ndarray], item_bias: Optional[np.ndarray] = None,
                    train: Optional[sp.spmatrix] = None, **params: Any) -> "Factors":
        """A model of the given arrays, each checked (:class:`InputError` in one line).

        ``train`` (users x items, in the ids' order) is what ``recommend`` excludes by
        default; without it nothing is excluded unless ``recommend`` is given ``train``.
        """
        model = cls(item_bias=item_bias is not None, **params)
        model.check_params()
        model.user_ids = _ids(user_ids, "user")
        model.item_ids = _ids(item_ids, "item")
        n_users, n_items = len(model.user_ids), len(model.item_ids)
        if train is None:
            train = sp.csr_matrix((n_users, n_items), dtype=np.float32)
        train = sp.csr_matrix(train, dtype=np.float32)
        if train.shape != (n_users, n_items):
            raise InputError(f"the training matrix is {train.shape[0]:,} x {train.shape[1]:,}, the ids name "
                             f"{n_users:,} users x {n_items:,} items")
        train.sum_duplicates()
        train.data[:] = 1.0  # what was seen, not how much: a stored 0 is an interaction too
        model.train_ = train
        model.ids_generated_ = False
        arrays = {"user_factors": user_factors, "item_factors": item_factors,
                  "item_bias": np.zeros(n_items, np.float32) if item_bias is None else item_bias}
        try:
            model.set_arrays(arrays)
        except ValueError as exc:
            raise InputError(str(exc), hint="give arrays of one row per id and the same width") from None
        return model

    def fit(self, X, **kwargs) -> "Factors":
        raise InputError("imported factors are not trained here",
                         hint="build the model with Factors.from_arrays (mrec-warp factors), or train warp or wrmf")

    # -- scoring: FactorScoring (the same product as a trained factor model) ----------------------

    # -- fold-in ---------------------------------------------------------------------------------
    def fold_in(self, history, *, epochs: Optional[int] = None, user_features=None,
                progress: Optional[Progress] = None, user_ids: Optional[Sequence] = None) -> "Factors":
        """Add (or refine) users from a history without the other tool, in place.

        Each user's row is the ridge least-squares fit of their 0/1 row of interactions
        (training items plus the history) against the fixed item factors,
        ``p = (VᵀV + λI)⁻¹ Vᵀ r`` with ``λ = regularization × trace(VᵀV) / d``: one solve
        for all users, the projection an SVD model folds users in by. ``epochs`` is ignored
        (nothing is iterated). ``history`` is anything :meth:`WARP.fold_in` takes.
        """
        self.check_fitted()
        refuse_features(self, user_features)
        progress = progress or SILENT
        if epochs is not None:
            progress.log("note: fold-in epochs do not apply to imported factors, whose fold-in is one exact solve")
        added = add_history(self, history, user_ids=user_ids)
        rows, positives = added["rows"], added["positives"]
        v = self.item_factors_.astype(np.float64)
        gram = v.T @ v
        d = gram.shape[0]
        lam = float(self.regularization) * max(float(np.trace(gram)) / max(d, 1), 1e-12)
        rhs = np.asarray((positives @ v).T)  # d x users
        solved = np.linalg.solve(gram + lam * np.eye(d), rhs).T
        self.user_factors_[rows] = solved.astype(np.float32)
        self.fold_in_summary_ = dict(added["summary"], epochs=0)
        log_fold_in(progress, self.fold_in_summary_, ", least squares")
        return self

    def append_users(self, ids, user_features=None) -> None:
        if user_features is not None:
            raise InputError("user features need a hybrid model", hint="train a hybrid model (`model=hybrid`)")
        d = self.user_factors_.shape[1]
        self.user_factors_ = np.vstack([self.user_factors_, np.zeros((len(ids), d), np.float32)])
        append_user_ids(self, ids)

    # -- persistence -------------------------------------------------------------------------
    def get_arrays(self) -> Dict[str, np.ndarray]:
        return {"user_factors": self.user_factors_, "item_factors": self.item_factors_, "item_bias": self.item_bias_}

    @classmethod
    def array_spec(cls, params: Dict[str, Any], n_users: int, n_items: int) -> Dict[str, Tuple[str, Tuple]]:
        """Kind and shape of each saved array (the width is any, checked equal in ``set_arrays``)."""
        return {"user_factors": ("f4", (n_users, None)), "item_factors": ("f4", (n_items, None)),
                "item_bias": ("f4", (n_items,))}

    def set_arrays(self, arrays: Dict[str, np.ndarray]) -> None:
        uf = np.ascontiguousarray(arrays["user_factors"], dtype=np.float32)
        itf = np.ascontiguousarray(arrays["item_factors"], dtype=np.float32)
        ib = np.ascontiguousarray(arrays["item_bias"], dtype=np.float32)
        if uf.ndim != 2 or itf.ndim != 2:
            raise ValueError(f"factors must be 2-D (one row per id), got user factors of shape {uf.shape} and item "
                             f"factors of shape {itf.shape}")
        check_shape(uf, (self.n_users, uf.shape[1]), "user factors")
        check_shape(itf, (self.n_items, uf.shape[1]), "item factors")
        check_shape(ib, (self.n_items,), "item biases")
        if uf.shape[1] == 0:
            raise ValueError("factors have no columns")
        for arr, what in ((uf, "user factors"), (itf, "item factors"), (ib, "item biases")):
            check_finite(arr, what)
        self.user_factors_, self.item_factors_, self.item_bias_ = uf, itf, ib


def _ids(ids: Union[Sequence, np.ndarray], kind: str) -> np.ndarray:
    """``ids`` as a str array, each id as given (spaces are part of an id, as
    :class:`~mrec_warp.data.interactions.Interactions` keeps them): non-empty, unique."""
    given = list(ids) if not isinstance(ids, np.ndarray) else ids
    for i, one in enumerate(given):  # numpy's text arrays drop trailing NULs: refused, never changed
        if isinstance(one, str) and one.endswith("\0"):
            raise InputError(f"{kind} id {i + 1} ({one[:80]!r}) ends in a NUL character, which an id cannot keep",
                             hint=f"give every {kind} an id without a trailing NUL")
    arr = np.asarray(given).astype(str)
    if arr.ndim != 1 or len(arr) == 0:
        raise InputError(f"no {kind} ids", hint=f"give one {kind} id per row of the {kind} factors")
    if (np.char.str_len(arr) == 0).any():
        first = int(np.argmax(np.char.str_len(arr) == 0))
        raise InputError(f"{kind} id {first + 1} is empty", hint=f"give every {kind} a non-empty id")
    try:
        check_ids(arr, f"{kind} ids")
    except ValueError as exc:
        raise InputError(str(exc), hint=f"each {kind} must have one row") from None
    return arr


__all__ = ["Factors"]
