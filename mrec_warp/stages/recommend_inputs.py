"""What a recommend run reads besides the model: the users asked for, the interactions to
exclude and the items never to recommend, each checked against the model's ids."""
from __future__ import annotations

from typing import List

import numpy as np
import pandas as pd
import scipy.sparse as sp

from ..data.idlist import read_id_list
from ..data.near_ids import did_you_mean
from ..data.ratings import read_ratings
from ..data.rows import refuse_negatives
from ..errors import InputError


#: Most of a ``train`` file's rows that may name users or items the model does not know. A
#: few are legitimate (e.g. users or items dropped when the model was trained, which the
#: model cannot recommend to or recommend anyway); more means another data set's file.
MAX_UNKNOWN_TRAIN_SHARE = 0.05


def check_known_users(model, ids: List[str], path: str, progress) -> bool:
    """Refuse unknown users (from the ``users`` file ``path``), except for a model that
    ``appends_unknown_users`` (popularity serves them its overall ranking: they have no
    history). Returns whether the model gained users."""
    idx = model.user_indices(ids, strict=False)
    if not (idx < 0).any():
        return False
    unknown = list(dict.fromkeys(u for u, i in zip(ids, idx) if i < 0))
    index, known = model.interactions().user_index, model.user_ids.tolist()
    if model.appends_unknown_users:
        # a new user is served the overall ranking, but an id that is a known one written
        # otherwise (17850.0 for 17850) is that user, whose own items would not be excluded;
        # by its spellings only (dict look-ups): a case-blind scan per new user would be quadratic
        near = next(((u, n) for u in unknown for n in [did_you_mean(u, index)] if n), None)
        if near is not None:
            raise InputError(f"user {near[0]!r} is not in the model ({near[1]})", path=path,
                             line=ids.index(near[0]) + 1, hint="write the ids as the training data does: this one looks "
                             "like a known user's, whose own items would not be excluded if it were served "
                             "as a new user")
        model.append_users(unknown)
        progress.log(f"{len(unknown)} users are not in the model: they get the most popular items overall "
                     "(give their history with `history` to exclude what they have seen)")
        return True
    first = int((idx < 0).argmax())
    near = did_you_mean(ids[first], index, known)
    raise InputError(f"user {ids[first]!r} is not in the model" + (f" ({near})" if near else "")
                     + f", {len(unknown)} unknown", path=path, line=first + 1,
                     hint="list only users present in the training data, or fold new users in with `history`")


def train_exclusion(model, path: str, progress) -> sp.csr_matrix:
    """The interactions of a ``train`` file as an exclusion matrix in the model's id space.

    A file whose rows mostly name users or items the model does not know is another data
    set's (or another split's) file: excluding its items would silently let every user's
    own training items through, so it is refused with the counts.
    """
    rows = read_ratings(path, reader_options=())  # recommend has no reader options
    refuse_negatives(rows, path)  # a return is not an item the user has
    users = model.user_indices(rows["user"].to_numpy(), strict=False)
    items = model.item_indices(rows["item"].to_numpy(), strict=False)
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
