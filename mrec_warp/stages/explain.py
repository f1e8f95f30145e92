"""The explain stage: which of a user's items drove their recommendations (WRMF).

>>> result = explain("wrmf.npz", "196", k=3)     # doctest: +SKIP
>>> result.frame        # user, item, score, history_item, contribution, rank
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Sequence, Union

import pandas as pd

from ..errors import InputError
from ..models import Recommender
from ..models.base import explains, open_model
from ..models.families import families_with
from .similar import split_id_list

PathLike = Union[str, os.PathLike]


@dataclass
class Explanation:
    """What :func:`explain` found.

    Attributes
    ----------
    frame : pandas.DataFrame
        ``user, item, score, history_item, contribution, rank`` rows.
    model : Recommender
        The model asked (its ``id_encoding_`` says how to write the ids back).
    """

    frame: pd.DataFrame
    model: Recommender


def explain(
    model: Union[PathLike, Recommender],
    user: str,
    items: Union[None, str, Sequence[str]] = None,
    *,
    top: int = 10,
    k: int = 5,
) -> Explanation:
    """Explain a WRMF model's scores for ``user`` as sums over the user's training items.

    Parameters
    ----------
    model : path-like or Recommender
        A WRMF model file or a fitted WRMF model (Hu, Koren & Volinsky 2008).
    user : str
        The user id to explain.
    items : str or sequence of str, optional
        Items to explain (a string is split at commas); default: the user's ``top``
        recommendations.
    top : int
        Recommendations to explain when ``items`` is not given.
    k : int
        History items shown per explained item, largest contribution first.

    Returns
    -------
    Explanation
        The contributions of an item add up to its score under the exact least-squares user
        vector (the trained vector comes from a few conjugate-gradient steps and scores
        within a small margin of it).
    """
    model, model_file = open_model(model)
    if not explains(model):  # refused before any id is looked up, naming the file
        raise InputError(f"a {type(model).__name__} model cannot explain its scores", path=model_file,
                         hint=f"train a {' or '.join(families_with(explains))} model "
                              f"(`model={families_with(explains)[0]}`)")
    if model.user_indices([user], strict=False)[0] < 0:
        raise InputError(f"user {user!r} is not in the model", hint="use a user id of the training data")
    item_ids = None
    if items is not None:
        item_ids = split_id_list(items) if isinstance(items, str) else [str(i) for i in items]
        idx = model.item_indices(item_ids, strict=False)
        if not item_ids or (idx < 0).any():
            bad = item_ids[int((idx < 0).argmax())] if item_ids else items
            raise InputError(f"item {bad!r} is not in the model", hint="use item ids of the training data")
    return Explanation(model.explain_frame(user, item_ids, k=k, n=top), model)
