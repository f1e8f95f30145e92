"""Cold start before recommending: users and items the model never trained on.

A trained model meets three kinds of newcomers: users known by their features (a hybrid
model adds them without training), users with a short history (folded in: their vectors are
fitted against the fixed items, no refit), and items known by their features (a hybrid model
ranks them beside, or instead of, the trained ones). :func:`cold_start` extends a loaded
model with all three, as ``recommend`` asks for them.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import List, Optional, Sequence, Union

import numpy as np
import pandas as pd

from ..data.ratings import read_ratings
from ..data.rows import refuse_negatives
from ..errors import InputError
from ..models.base import Recommender
from ..models.families import families_with
from ..progress import SILENT, Progress
from ._inputs import FeatureFiles

PathLike = Union[str, os.PathLike]


@dataclass
class ColdStart:
    """A model extended for newcomers.

    Attributes
    ----------
    model : Recommender
        The model to recommend with.
    users : list of str or None
        The users whose features or history were given (those the model knows now): who to
        recommend for when no users are asked for; ``None`` when there were none.
    changed : bool
        Whether ``model`` differs from the model file it was loaded from.
    """

    model: Recommender
    users: Optional[List[str]]
    changed: bool


def cold_start(
    model: Recommender,
    model_file: Optional[PathLike] = None,
    *,
    item_features: Optional[PathLike] = None,
    user_features: Optional[PathLike] = None,
    feature_sep: Optional[str] = None,
    feature_header: Optional[bool] = None,
    feature_columns: Optional[str] = None,
    include_new_items: bool = False,
    new_items_only: bool = False,
    history: Optional[PathLike] = None,
    fold_in_epochs: Optional[int] = None,
    requested_users: Optional[Sequence[str]] = None,
    progress: Optional[Progress] = None,
) -> ColdStart:
    """Extend a loaded model with new users (by features or history) and new items.

    Parameters
    ----------
    model : Recommender
        As loaded from ``model_file`` (named in errors).
    item_features, user_features : path-like, optional
        Features of new items / users (a hybrid model); ``feature_sep``,
        ``feature_header`` and ``feature_columns`` say how to read them.
    include_new_items, new_items_only : bool
        Rank items known by their features alone beside the trained ones, or alone.
    history : path-like, optional
        ``user item`` rows of users to fold in without refitting (new ones are added, known
        ones refined), with ``fold_in_epochs`` passes (a warp or hybrid model; the others'
        fold-in has no epochs, and an epoch count is refused rather than ignored).
    requested_users : sequence of str, optional
        The users recommendations are asked for: a hybrid model adds those it kept features
        of at training.
    progress : Progress, optional

    Returns
    -------
    ColdStart
    """
    progress = progress or SILENT
    files = FeatureFiles(user=user_features, item=item_features, sep=feature_sep, header=feature_header,
                         columns=feature_columns)
    user_table, item_table = files.read(getattr(model, "id_encoding_", None))
    features = model.uses_features
    kind = type(model).__name__
    if not features:
        with_features = " or ".join(families_with("uses_features"))
        for name, given in (("user_features", user_table is not None), ("item_features", item_table is not None),
                            ("include_new_items", include_new_items), ("new_items_only", new_items_only)):
            if given:
                raise InputError(f"`{name}` needs a {with_features} model, this is a {kind}", path=model_file,
                                 hint=f"train a {with_features} model (`model={families_with('uses_features')[0]}`)")
    if history and not model.supports_fold_in:
        raise InputError(f"`history` needs a model that folds users in, this is a {kind}, which cannot",
                         path=model_file, hint=f"use a model of {', '.join(families_with('supports_fold_in'))}, "
                                               "or retrain with the history")
    if fold_in_epochs is not None and not model.fold_in_epochs:
        # WRMF solves each user exactly, the others add the history as it is: an epoch count
        # would be ignored, and the user would believe it was used
        raise InputError(f"`fold_in_epochs` does not apply to a {kind}, whose fold-in has no epochs",
                         path=model_file, hint=f"drop `fold_in_epochs`: it is for "
                                               f"{' and '.join(families_with('fold_in_epochs'))} models")
    changed = False
    focus: List[str] = []

    if user_table is not None:
        ids = np.asarray(pd.unique(user_table["id"].to_numpy()), dtype=str)
        new = ids[model.user_indices(ids, strict=False) < 0]
        if len(new):
            before = model.n_users
            model = model.with_new_users(user_table[user_table["id"].isin(set(new))])
            bare = int(model.featureless_users()[before:].sum())
            progress.log(f"added {model.n_users - before} new users from their features"
                         + (f"; {bare} have no feature the model knows and get its non-personal ranking"
                            if bare else ""))
            changed = True
        known = model.user_indices(ids, strict=False) >= 0
        focus.extend(ids[known].tolist())
    if requested_users and features and len(model.new_user_ids):
        trained = set(model.user_ids.tolist())
        unknown = [u for u in requested_users if u not in trained]
        kept = set(model.new_user_ids.tolist())
        if any(u in kept for u in unknown):
            model = model.with_new_users()  # the users whose features were given at training
            changed = True
    if history:
        rows = read_ratings(history, reader_options=())  # recommend has no reader options
        refuse_negatives(rows, str(history))  # a return is no interaction to fold in
        _fold_in(model, rows, history, fold_in_epochs, progress)
        known = set(model.user_ids.tolist())
        focus.extend(u for u in pd.unique(rows["user"].astype(str).to_numpy()) if u in known)
        changed = True
    if include_new_items or new_items_only or item_table is not None:
        before = model.n_items
        model = model.with_new_items(item_table, only=new_items_only)
        n_new = model.n_items - (0 if new_items_only else before)
        if n_new == 0:
            raise InputError("there are no new items to rank", path=item_features or model_file,
                             hint="give `item_features` with items absent from training")
        progress.log(f"ranking {n_new} new items" + ("" if new_items_only else f" alongside {before} trained ones"))
        changed = True
    users = list(dict.fromkeys(focus)) if focus else None
    return ColdStart(model, users, changed)


def _fold_in(model: Recommender, rows: pd.DataFrame, history: PathLike, epochs: Optional[int],
             progress: Progress) -> None:
    """Fold the users of ``rows`` into ``model`` (in place); errors name the ``history`` file."""
    try:
        model.fold_in(rows, epochs=epochs, progress=progress)
    except InputError as exc:
        if exc.path is None:
            raise InputError(exc.message, path=history, hint=exc.hint) from None
        raise
