"""What a user the model does not know gets: an error, nothing, or the fallback list.

A batch of users (``recommend --users``), :meth:`~mrec_warp.models.base.Recommender.recommend_frame`
and ``serve`` meet users the model never saw. ``unknown_users`` says what they get
(:data:`UNKNOWN_USERS`):

* ``refuse`` (the default): an error naming the first one;
* ``skip``: no list, and the caller hears how many were left out;
* ``popular``: the model's fallback list -- the items most users have in its training
  interactions (``train_``), ties broken by item index as every top-k here: the list a
  :class:`~mrec_warp.models.popularity.Popularity` model fitted on the same data gives a
  user without history. Such a user has no training row, so nothing is excluded but the
  items filtered for everyone.

A fallback list is marked wherever it goes -- the ``source`` column of a recommendations
table (:data:`SOURCE_COLUMN`: ``popular``, or ``personal`` for the model's own lists), and
``"fallback": "popular"`` in a served answer -- so that no one takes it for a personal list.

An unknown id that is a known one written otherwise (``17850.0`` for ``17850``, surrounding
spaces: :func:`lookalike`) is refused even under ``popular``: that user has seen items, which
a fallback list would not exclude.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np
import pandas as pd
import scipy.sparse as sp

from ..data.near_ids import spelled_otherwise
from ..errors import InputError
from ..tables import PERSONAL, POPULAR, SOURCE_COLUMN
from ..topk import block_to_frame, top_k_block
from .single_user import top_k_scores

#: The choices of ``unknown_users``; the first is the default.
UNKNOWN_USERS = ("refuse", "skip", "popular")

_NOTHING_EXCLUDED = np.zeros(0, dtype=np.int32)


def check_unknown_users(value: str) -> str:
    """``value`` when it is one of :data:`UNKNOWN_USERS`, else a one-line :class:`InputError`."""
    if value not in UNKNOWN_USERS:
        raise InputError(f"`unknown_users` must be one of {', '.join(UNKNOWN_USERS)}, got {value!r}",
                         hint="e.g. `unknown_users=skip`")
    return value


def users_per_item(train: sp.spmatrix) -> np.ndarray:
    """How many users have each item in ``train`` (users x items; a stored entry is an
    interaction whatever its value, a repeated one counts once), as float32 scores."""
    csr = sp.csr_matrix(train)
    if not csr.has_canonical_format:
        csr = csr.copy()
        csr.sum_duplicates()
    return np.bincount(csr.indices, minlength=csr.shape[1]).astype(np.float32)


def lookalike(unknown: Iterable[str], index: Dict[str, int]) -> Optional[Tuple[str, str]]:
    """The first of the ``unknown`` ids that is a known user's id with surrounding spaces or
    written as a float (:func:`~mrec_warp.data.near_ids.spelled_otherwise`), and the "did you
    mean" naming it; ``None`` when there is none. By the id's spellings only (dict look-ups):
    a case-blind scan per unknown id would be quadratic in a large batch."""
    return next(((u, f"did you mean {near!r}?") for u in unknown for near in [spelled_otherwise(u, index)] if near),
                None)


def refuse_lookalikes(unknown: Iterable[str], index: Dict[str, int], path: Optional[str] = None,
                      ids: Optional[List[str]] = None) -> None:
    """Refuse, before it is served as a new user, an ``unknown`` id that is a known user's id
    written otherwise (:func:`lookalike`); ``path`` and ``ids`` (its lines) say where it was read."""
    near = lookalike(unknown, index)
    if near is not None:
        raise InputError(f"user {near[0]!r} is not in the model ({near[1]})", path=path,
                         line=None if ids is None else ids.index(near[0]) + 1,
                         hint="write the ids as the training data does: this one looks like a known user's, whose "
                              "own items would not be excluded if it were served as a new user")


def refuse_without_training_data(train: sp.spmatrix, n_unknown: Optional[int] = None,
                                 path: Optional[str] = None) -> None:
    """Refuse a fallback from a model that stores no training interactions (imported
    factors): it knows no item's popularity. ``n_unknown``: the users who would have got it
    (``None``: a server's, still to come)."""
    if train.nnz == 0:
        whom = "users it does not know" if n_unknown is None else f"the {n_unknown:,} users it does not know"
        raise InputError(f"the model stores no training interactions, so it has no popular items for {whom}",
                         path=path, hint="serve it with `unknown_users=refuse`" if n_unknown is None else
                         "use `unknown_users=skip`, or give their history with `history`")


def fallback_list(counts: np.ndarray, k: int, item_mask: Optional[np.ndarray] = None
                  ) -> Tuple[np.ndarray, np.ndarray]:
    """The fallback list of a user who has seen nothing: the top ``k`` of ``counts``
    (:func:`users_per_item`) without the items ``item_mask`` marks, as item indices and
    scores, ``(k,)``, padded with ``-1`` / ``-inf`` as every top-k here."""
    k = max(1, min(int(k), len(counts)))
    return top_k_scores(np.ascontiguousarray(counts[None, :], dtype=np.float32), k, _NOTHING_EXCLUDED, item_mask)


def lists_frame(model, ids: Sequence[str], rows: np.ndarray, items: np.ndarray, scores: np.ndarray,
                item_mask: Optional[np.ndarray] = None) -> pd.DataFrame:
    """The recommendations table of ``ids`` (user ids, in output order) with the fallback list
    for the unknown ones, as ``recommend_frame(unknown_users="popular")`` returns it.

    ``rows`` are the ids' user rows in ``model`` (``-1``: unknown), ``items`` and ``scores``
    the model's top-k of the known ones, in order; ``item_mask`` marks the items filtered
    for everyone. A known id written otherwise is refused (:func:`refuse_lookalikes`)."""
    unknown = rows < 0
    k = items.shape[1]
    lists = np.empty((len(ids), k), dtype=np.int64), np.empty((len(ids), k), dtype=np.float32)
    lists[0][~unknown], lists[1][~unknown] = items, scores
    if unknown.any():
        strangers = [u for u, new in zip(ids, unknown) if new]
        refuse_lookalikes(strangers, model.id_map("user"))
        refuse_without_training_data(model.train_, len(set(strangers)))
        lists[0][unknown], lists[1][unknown] = fallback_list(users_per_item(model.train_), k, item_mask)
    frame = block_to_frame(_Ids(np.asarray(ids, dtype=str), model.item_ids), np.arange(len(ids)), *lists)
    return with_sources(frame, np.repeat(unknown, k)[lists[0].ravel() >= 0])


class _Ids(NamedTuple):
    """The id arrays :func:`~mrec_warp.topk.block_to_frame` maps rows and columns with."""

    user_ids: np.ndarray
    item_ids: np.ndarray


def with_sources(frame: pd.DataFrame, popular: np.ndarray) -> pd.DataFrame:
    """``frame`` with the :data:`SOURCE_COLUMN` column: ``popular`` where ``popular`` (one
    bool per row) is set, ``personal`` elsewhere."""
    frame[SOURCE_COLUMN] = np.where(popular, POPULAR, PERSONAL)
    return frame


@dataclass(frozen=True)
class Fallback:
    """The users of a model who get the fallback list: its rows from ``first_row`` on.

    The recommend stage appends the users the model does not know after its own (with
    empty training rows), scores every user as usual, then puts the fallback list in
    their rows (:meth:`frame`).

    Attributes
    ----------
    first_row : int
        The first user row that gets the fallback list; rows before it get the model's.
    counts : numpy.ndarray
        Each item's score in the fallback list (:func:`users_per_item` of the training data).
    """

    first_row: int
    counts: np.ndarray

    def score_users(self, users: np.ndarray, out: Optional[np.ndarray] = None) -> np.ndarray:
        """The fallback scores of ``users`` (every row the same), as a model's ``score_users``."""
        if out is None:
            out = np.empty((len(users), len(self.counts)), dtype=np.float32)
        out[:] = self.counts
        return out

    def frame(self, model, users: np.ndarray, items: np.ndarray, scores: np.ndarray,
              exclude=None, item_mask: Optional[np.ndarray] = None) -> pd.DataFrame:
        """One block's table (:func:`~mrec_warp.topk.block_to_frame`) with the fallback users'
        lists in their rows and the :data:`SOURCE_COLUMN` column.

        ``items`` and ``scores`` are the block's top-k, ``exclude`` and ``item_mask`` what
        they were ranked with (a fallback user's row of ``exclude`` -- one named in a
        ``train`` file -- is excluded from their list too)."""
        rows = np.flatnonzero(users >= self.first_row)
        if len(rows):
            items, scores = items.copy(), scores.copy()
            _, items[rows], scores[rows] = top_k_block(self.score_users, users[rows], items.shape[1], exclude,
                                                       0, item_mask)
        frame = block_to_frame(model, users, items, scores)
        return with_sources(frame, np.repeat(users >= self.first_row, items.shape[1])[items.ravel() >= 0])
