"""The inputs of a recommend run, read in one step: the model (extended for newcomers), the
users asked for, the interactions to exclude and the items never to recommend.

:func:`recommend_inputs` is the first step of the recommend stage's straight line
(inputs -> model -> candidates -> top-k -> writer: :mod:`mrec_warp.stages.recommend`).
Cold start is part of it: a trained model meets three kinds of newcomers -- users known by
their features (a model that learns from features adds them without training), users with a
short history (folded in: their vectors are fitted against the fixed items, no refit), and
items known by their features (ranked beside, or instead of, the trained ones).
:func:`cold_start` extends a loaded model with all three. Each input is checked against the
model's ids; what a family can do is asked of its capabilities, never of its name.
"""
from __future__ import annotations

import copy
import os
from dataclasses import dataclass, field
from typing import Any, List, Optional, Sequence, Union

import numpy as np
import pandas as pd
import scipy.sparse as sp

from ..data.features import FeatureFiles
from ..data.id_lines import read_id_list
from ..data.near_ids import did_you_mean
from ..data.ratings import read_ratings
from ..data.rows import refuse_negatives
from ..errors import InputError
from ..models.base import Recommender, open_model
from ..models.fallback import (Fallback, check_unknown_users, refuse_lookalikes, refuse_without_training_data,
                               users_per_item)
from ..models.families import families_with, takes_features
from ..progress import SILENT, Progress, plural
from ..tables import POPULAR, SOURCE_COLUMN

PathLike = Union[str, os.PathLike]


@dataclass(frozen=True)
class ColdStartOptions:
    """The newcomers a recommend run adds to a trained model (:func:`run_cold_start`).

    Attributes
    ----------
    features : FeatureFiles
        Features of new users / items (a hybrid model), and how to read them.
    include_new_items, new_items_only : bool
        Rank items known by their features alone beside the trained ones, or alone.
    history : path-like, optional
        ``user item`` rows of users to fold in without refitting (new ones are added, known
        ones refined).
    fold_in_epochs : int, optional
        Passes over ``history`` (a family whose fold-in has epochs: ``fold_in_epochs``).
    """

    features: FeatureFiles = field(default_factory=FeatureFiles)
    include_new_items: bool = False
    new_items_only: bool = False
    history: Optional[PathLike] = None
    fold_in_epochs: Optional[int] = None


@dataclass
class RecommendInputs:
    """What a recommend run ranks with and for.

    Attributes
    ----------
    model : Recommender
        The model to recommend with (a copy when the caller's model was extended).
    model_file : str or None
        The file it was loaded from, while the model is still what that file holds (workers
        in other processes may read it); ``None`` otherwise.
    source : str or None
        The file it was loaded from, extended or not (its ANN index sits beside it).
    user_ids : list of str or None
        Users to recommend for, in output order; ``None``: every user of the model.
    exclude : "train" or sparse matrix
        Items never to recommend to a user: the model's training items, or the ``train``
        file's interactions in the model's index space.
    filtered : list of str or None
        Item ids never recommended to anyone.
    notes : list of str
        What the caller should hear about.
    fallback : Fallback or None
        With ``unknown_users="popular"``: the users (appended to ``model``) who get the
        fallback list; ``None`` otherwise.
    skipped : int
        Users of the ``users`` file left out as unknown (``unknown_users="skip"``).
    """

    model: Recommender
    model_file: Optional[str]
    user_ids: Optional[List[str]]
    exclude: Any
    filtered: Optional[List[str]]
    source: Optional[str] = None
    notes: List[str] = field(default_factory=list)
    fallback: Optional[Fallback] = None
    skipped: int = 0


def recommend_inputs(
    model: Union[PathLike, Recommender],
    *,
    users: Optional[PathLike] = None,
    train: Optional[PathLike] = None,
    exclude_items: Optional[PathLike] = None,
    cold: Optional[ColdStartOptions] = None,
    unknown_users: str = "refuse",
    progress: Progress = SILENT,
) -> RecommendInputs:
    """Read a recommend run's inputs: the model (a file, or a model in hand that is copied
    before anything extends it), its cold start (``cold``: :func:`run_cold_start`), the
    ``users`` file with what its unknown users get (``unknown_users``:
    :func:`settle_unknown_users`), the ``train`` exclusions and the ``exclude_items`` file,
    each checked against the model."""
    check_unknown_users(unknown_users)
    given = isinstance(model, Recommender)
    model, model_file = open_model(model)
    if given:  # cold start and unknown users grow the model: grow a copy, not the caller's
        model = copy.deepcopy(model)
    notes: List[str] = []
    requested = read_id_list(users, unique=True, note=notes.append) if users else None
    # the fallback ranks by the training data, not by the histories folded in below
    trained = (model.item_ids, users_per_item(model.train_)) if unknown_users == "popular" else None
    # the model's own training pairs: a copy ranking only new items (new_items_only) holds none
    stores_training = model.train_.nnz > 0
    extended = run_cold_start(model, model_file, cold or ColdStartOptions(), requested_users=requested,
                              progress=progress)
    model, changed = extended.model, extended.changed
    user_ids: Optional[List[str]] = None
    settled = UnknownUsers(None)
    if users:
        settled = settle_unknown_users(model, requested or [], str(users), unknown_users, progress)
        user_ids, changed = settled.user_ids, settled.appended or changed
        notes.extend(settled.notes)
    elif extended.users is not None:  # user features / history: recommend for those users
        user_ids = extended.users
    fallback = None
    if trained is not None:
        first = model.n_users if settled.first_fallback is None else settled.first_fallback
        fallback = Fallback(first, popularity_on(model, *trained))
    exclude = train_exclusion(model, train, progress) if train else "train"
    if isinstance(exclude, str) and not stores_training:  # imported factors (mrec-warp factors) without `train`
        notes.append("the model stores no training interactions, so nothing is excluded: give `train` to exclude "
                     "the items users have seen")
    filtered = filtered_items(model, exclude_items, progress) if exclude_items else None
    return RecommendInputs(model, None if changed else model_file, user_ids, exclude, filtered, model_file, notes,
                           fallback, settled.skipped)


def popularity_on(model: Recommender, item_ids: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The fallback scores ``counts`` of the items ``item_ids``
    (:func:`~mrec_warp.models.fallback.users_per_item` of the training data) for the items
    ``model`` ranks, matched by id: an item known only by its features (cold start) has no
    training user."""
    if len(item_ids) == model.n_items and (model.item_ids is item_ids or np.array_equal(model.item_ids, item_ids)):
        return counts
    out = np.zeros(model.n_items, dtype=np.float32)
    rows = model.item_indices(item_ids, strict=False)
    out[rows[rows >= 0]] = counts[rows >= 0]
    return out


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
    return run_cold_start(model, model_file,
                          ColdStartOptions(FeatureFiles(user=user_features, item=item_features, sep=feature_sep,
                                                        header=feature_header, columns=feature_columns),
                                           include_new_items=include_new_items, new_items_only=new_items_only,
                                           history=history, fold_in_epochs=fold_in_epochs),
                          requested_users=requested_users, progress=progress)


def run_cold_start(model: Recommender, model_file: Optional[PathLike], options: ColdStartOptions, *,
                   requested_users: Optional[Sequence[str]] = None,
                   progress: Optional[Progress] = None) -> ColdStart:
    """:func:`cold_start` with the newcomers as one object, as the recommend stage calls it."""
    progress = progress or SILENT
    include_new_items, new_items_only = options.include_new_items, options.new_items_only
    history, fold_in_epochs = options.history, options.fold_in_epochs
    user_table, item_table = options.features.read(getattr(model, "id_encoding_", None))
    features = takes_features(model)
    kind = type(model).__name__
    if not features:
        for name, given in (("user_features", user_table is not None), ("item_features", item_table is not None),
                            ("include_new_items", include_new_items), ("new_items_only", new_items_only)):
            if given:
                with_features = " or ".join(families_with(takes_features))
                raise InputError(f"`{name}` needs a {with_features} model, this is a {kind}", path=model_file,
                                 hint=f"train a {with_features} model (`model={families_with(takes_features)[0]}`)")
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
            raise InputError("there are no new items to rank", path=options.features.item or model_file,
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


@dataclass
class UnknownUsers:
    """The users of a ``users`` file after :func:`settle_unknown_users`.

    Attributes
    ----------
    user_ids : list of str or None
        The users to recommend for, in the file's order.
    appended : bool
        Whether the model gained users (the unknown ones, appended after its own).
    first_fallback : int or None
        The model's first row of users who get the fallback list (``unknown_users="popular"``).
    skipped : int
        Unknown users left out (``unknown_users="skip"``).
    notes : list of str
        What the caller should hear about them.
    """

    user_ids: Optional[List[str]]
    appended: bool = False
    first_fallback: Optional[int] = None
    skipped: int = 0
    notes: List[str] = field(default_factory=list)


def settle_unknown_users(model, ids: List[str], path: str, unknown_users: str, progress) -> UnknownUsers:
    """What the users of the ``users`` file (``path``) the model does not know get
    (:mod:`mrec_warp.models.fallback`): ``refuse``, :func:`check_known_users`; ``skip``,
    they are left out with a note; ``popular``, they are appended to ``model`` (in place)
    after its own users, whose rows then get the fallback list. A known id written otherwise
    is refused under ``popular`` (that user's seen items would not be excluded)."""
    idx = model.user_indices(ids, strict=False)
    unknown = [u for u, i in zip(ids, idx) if i < 0]  # the file's ids are unique
    if not unknown or unknown_users == "refuse":
        notes: List[str] = []
        return UnknownUsers(ids, check_known_users(model, ids, path, notes), notes=notes)
    index = model.interactions().user_index
    if unknown_users == "skip":
        near = did_you_mean(unknown[0], index)
        note = (f"{plural(len(unknown), 'user')} of {len(ids):,} {'is' if len(unknown) == 1 else 'are'} not in the "
                f"model and {'was' if len(unknown) == 1 else 'were'} skipped (`unknown_users=skip`), e.g. "
                f"{unknown[0]!r}" + (f" ({near})" if near else ""))
        return UnknownUsers([u for u, i in zip(ids, idx) if i >= 0], skipped=len(unknown), notes=[note])
    refuse_lookalikes(unknown, index, path, ids)
    refuse_without_training_data(model.train_, len(unknown), path)
    first = model.n_users
    model.append_users(unknown)
    note = (f"{plural(len(unknown), 'user')} of {len(ids):,} {'is' if len(unknown) == 1 else 'are'} not in the model: "
            f"{'it gets' if len(unknown) == 1 else 'they get'} its most popular training items, marked "
            f"{POPULAR!r} in the {SOURCE_COLUMN!r} column")
    return UnknownUsers(ids, True, first, notes=[note])


def check_known_users(model, ids: List[str], path: str, notes: List[str]) -> bool:
    """Refuse unknown users (from the ``users`` file ``path``), except for a model that serves
    them (:meth:`~mrec_warp.models.base.Recommender.unknown_user_ranking`: popularity, its
    overall ranking), which appends them with a line in ``notes``. Returns whether the model
    gained users."""
    idx = model.user_indices(ids, strict=False)
    if not (idx < 0).any():
        return False
    unknown = list(dict.fromkeys(u for u, i in zip(ids, idx) if i < 0))
    index, known = model.interactions().user_index, model.user_ids.tolist()
    ranking = model.unknown_user_ranking()
    if ranking is not None:
        # a new user is served the overall ranking, but an id that is a known one written
        # otherwise (17850.0 for 17850) is that user, whose own items would not be excluded
        refuse_lookalikes(unknown, index, path, ids)
        model.append_users(unknown)
        # said by default, as every fallback is: a list nobody asked for must not pass unseen
        notes.append(f"{plural(len(unknown), 'user')} of {len(ids):,} {'is' if len(unknown) == 1 else 'are'} not "
                     f"in the model: {'it gets' if len(unknown) == 1 else 'they get'} {ranking} (give their history "
                     "with `history` to exclude what they have seen)")
        return True
    first = int((idx < 0).argmax())
    near = did_you_mean(ids[first], index, known)
    raise InputError(f"user {ids[first]!r} is not in the model" + (f" ({near})" if near else "")
                     + f", {len(unknown)} unknown", path=path, line=first + 1,
                     hint="list only users present in the training data, fold new users in with `history`, or "
                          "choose `unknown_users=skip` or `unknown_users=popular`")


#: Most of a ``train`` file's rows that may name users or items the model does not know. A
#: few are legitimate (e.g. users or items dropped when the model was trained, which the
#: model cannot recommend to or recommend anyway); more means another data set's file.
MAX_UNKNOWN_TRAIN_SHARE = 0.05


def train_exclusion(model, path: str, progress) -> sp.csr_matrix:
    """The interactions of a ``train`` file as an exclusion matrix in the model's id space.

    A file whose rows mostly name users or items the model does not know is another data
    set's (or another split's) file: excluding its items would silently let every user's
    own training items through, so it is refused with the counts.
    """
    rows = read_ratings(path, reader_options=(), coded_ids=True)  # recommend has no reader options
    refuse_negatives(rows, path)  # a return is not an item the user has
    users = _known_indices(model.user_indices, rows["user"])
    items = _known_indices(model.item_indices, rows["item"])
    unknown = (users < 0) | (items < 0)
    n_bad = int(unknown.sum())
    if n_bad:
        n_users = len(pd.unique(rows["user"].to_numpy()[users < 0]))
        n_items = len(pd.unique(rows["item"].to_numpy()[items < 0]))
        what = f"{n_bad} of {len(rows)} rows name ids the model does not know ({n_users} users, {n_items} items)"
        if n_bad > MAX_UNKNOWN_TRAIN_SHARE * len(rows):
            first = int(np.argmax(unknown))
            kind = "user" if users[first] < 0 else "item"
            example = rows[kind].iloc[first]
            near = did_you_mean(example, getattr(model.interactions(), f"{kind}_index"), getattr(model, f"{kind}_ids").tolist())
            raise InputError(f"`train` does not match the model: {what}, e.g. {example!r}"
                             + (f" ({near})" if near else ""), path=path,
                             hint="give the training file of this model; without `train` the model's own "
                                  "training interactions are excluded")
        progress.log(f"note: `train`: {what}; those rows are ignored (the model cannot recommend those items "
                     "or to those users)")
    keep = ~unknown
    csr = sp.csr_matrix((np.ones(int(keep.sum()), np.float32), (users[keep], items[keep])),
                        shape=(model.n_users, model.n_items))
    csr.sum_duplicates()
    csr.data[:] = 1.0
    return csr


def _known_indices(lookup, column: pd.Series) -> np.ndarray:
    """Each row's index by ``lookup`` (a model's ``user_indices``), -1 where unknown; the ids
    of a ``Categorical`` column (a big file read as codes) are looked up once each."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        known = lookup(column.cat.categories.to_numpy(dtype=object), strict=False)
        return np.append(known, -1)[column.cat.codes.to_numpy()]
    return lookup(column.to_numpy(), strict=False)


def filtered_items(model, path: str, progress) -> List[str]:
    """The ``exclude_items`` file's ids that the model knows (unknown ones cannot be recommended anyway)."""
    ids = read_id_list(path, "item")
    known = model.item_indices(ids, strict=False) >= 0
    if not known.any():
        raise InputError(f"none of the {len(ids)} items is in the model, e.g. {ids[0]!r}", path=path,
                         hint="one item id of the training data per line")
    if not known.all():
        progress.log(f"note: `exclude_items`: {int((~known).sum())} of {len(ids)} items are not in the model "
                     "(they cannot be recommended anyway)")
    return [i for i, k in zip(ids, known) if k]
