"""The similar-items stage: for given items, the items a model finds closest.

>>> result = similar("model.npz", "50,181", k=5)     # doctest: +SKIP
>>> result.frame                                      # item, similar_item, score, rank
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import List, Optional, Sequence, Union

import numpy as np
import pandas as pd

from ..data.id_lines import read_id_list
from ..data.near_ids import did_you_mean
from ..errors import InputError, ParameterError
from ..models import Recommender
from ..models.base import open_model
from ..models.families import families_with
from ..topk import capped_k

PathLike = Union[str, os.PathLike]


@dataclass
class SimilarResult:
    """What :func:`similar` found.

    Attributes
    ----------
    frame : pandas.DataFrame
        ``item, similar_item, score, rank`` rows, best first per item, ids as given.
    model : Recommender
        The model asked (its ``id_encoding_`` says how to write the ids back).
    notes : list of str
        What the caller should hear about: a ``k`` larger than the catalogue, asked items
        that got no row.
    """

    frame: pd.DataFrame
    model: Recommender
    notes: List[str] = field(default_factory=list)


def split_id_list(text: str) -> List[str]:
    """The ids of a comma-separated list: the text between commas, exactly (nothing stripped).

    Ids are the user's bytes, so ``'a, b'`` is the ids ``'a'`` and ``' b'``; empty pieces
    (``'a,,b'``, a trailing comma) are skipped, as no id is empty. An id that holds a comma
    cannot be given this way: a file of ids (``items_file``) takes one whole line per id.
    """
    return [s for s in text.split(",") if s != ""]


def similar(
    model: Union[PathLike, Recommender],
    items: Union[None, str, Sequence[str]] = None,
    *,
    items_file: Optional[PathLike] = None,
    k: int = 10,
) -> SimilarResult:
    """The ``k`` items most similar to each of ``items``.

    Similar means the closest factors (cosine), or with an item-item model (itemknn, slim,
    ease) the largest learned weights.

    Parameters
    ----------
    model : path-like or Recommender
        A model file or a fitted model.
    items : str or sequence of str, optional
        Item ids. A string that is an item id of the model is that one id (commas and all);
        any other string is split at commas, each piece taken exactly as given (spaces
        included).
    items_file : path-like, optional
        A file of item ids, one whole line per id (for ids that hold a comma).
    k : int
        Neighbours per item (at most the other items there are).

    Returns
    -------
    SimilarResult
    """
    model, model_file = open_model(model)
    if not model.finds_similar_items:
        raise InputError(f"a {type(model).__name__} model has no item factors or item-item weights",
                         path=model_file, hint=f"train a {', '.join(families_with('finds_similar_items'))} model")
    if (items is None) == (items_file is None):
        raise ParameterError("give exactly one of `items` or `items_file`")
    text = items if isinstance(items, str) else None
    if text is not None and (model.item_indices([text], strict=False) >= 0).all():
        ids = [text]  # the whole string is an id of the model ("Warhammer 40,000"): do not cut it
    elif text is not None:
        ids = split_id_list(text)
    elif items is None:
        assert items_file is not None  # exactly one of them, checked above
        ids = read_id_list(items_file, "item")
    else:
        ids = [str(i) for i in items]
    idx = model.item_indices(ids, strict=False)
    if (idx < 0).any():
        bad = ids[int((idx < 0).argmax())]
        near = did_you_mean(bad, model.interactions().item_index, model.item_ids.tolist())
        hint = _unknown_item_hint(bad, text, model) if text is not None else "use item ids present in the training data"
        raise InputError(f"item {bad!r} is not in the model" + (f" ({near})" if near else ""),
                         path=None if items_file is None else str(items_file), hint=hint)
    k, note = capped_k(k, model.n_items - 1, "other items")
    frame = model.similar(ids, k=k)  # item, similar_item, score, rank: the ids as given
    notes = [n for n in (note, _without_neighbours(ids, frame, model)) if n]
    return SimilarResult(frame, model, notes)


def _unknown_item_hint(bad: str, items: str, model) -> str:
    """How to fix an unknown id of a comma-separated list: spaces kept as given, or an id cut at a comma."""
    if bad.strip() != bad and (model.item_indices([bad.strip()], strict=False) >= 0).all():
        return "`items` takes ids exactly as given between commas, spaces included: write `items='a,b'`, not 'a, b'"
    whole = _cut_id(bad, items, model)
    if whole is not None:
        return (f"`items` splits at commas, so the id {whole!r} is cut in pieces: "
                "put ids with commas in a file, one id per line, and give it with `items_file`")
    return "use item ids present in the training data"


#: The most pieces one id holding commas is looked for in (the search is quadratic in it).
_MAX_CUT = 8


def _cut_id(bad: str, items: str, model) -> Optional[str]:
    """The known id holding a comma that the unknown piece ``bad`` was cut from, if any:
    a run of two to :data:`_MAX_CUT` comma-separated pieces of ``items``, ``bad`` among them."""
    pieces = items.split(",")
    for at in (i for i, piece in enumerate(pieces) if piece == bad):
        for start in range(max(0, at - _MAX_CUT + 1), at + 1):
            for end in range(max(at + 1, start + 2), min(len(pieces), start + _MAX_CUT) + 1):
                joined = ",".join(pieces[start:end])
                if (model.item_indices([joined], strict=False) >= 0).all():
                    return joined
    return None


def _without_neighbours(ids: List[str], frame: pd.DataFrame, model) -> str:
    """One line on the asked items that got no row at all, and why ("" when every one did).

    An item-item model lists only positive learned weights: SLIM leaves the row of an item
    empty when it explains nothing, and EASE learns nothing for items outside its
    ``max_items`` most popular. Without this note such items would silently vanish.
    """
    asked = list(dict.fromkeys(ids))
    listed = set(frame["item"])
    missing = [i for i in asked if i not in listed]
    if not missing:
        return ""
    name = type(model).__name__
    kept = getattr(model, "kept_items_", None)
    reasons = []
    rest = len(missing)
    if kept is not None:
        inside = np.zeros(model.n_items, dtype=bool)
        inside[kept] = True
        outside = int((~inside[model.item_indices(missing)]).sum())
        if outside:
            reasons.append(f"{outside:,} lie outside the {len(kept):,} most popular items {name} learned "
                           f"weights for (`max_items={len(kept):,}`)")
        rest -= outside
    if rest:
        what = "learned weights" if getattr(model, "weights_", None) is not None else "similarities"
        reasons.append(f"{rest:,} have no positive {what} to any other item in the {name} model")
    return (f"{len(missing):,} of the {len(asked):,} item(s) asked have no neighbours and are not listed "
            f"(first: {missing[0]!r}): {'; '.join(reasons)}")
