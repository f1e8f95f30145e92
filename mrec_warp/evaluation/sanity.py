"""Refuse evaluations whose inputs are the wrong files: a plausible-looking score from
swapped ``--train`` / ``--test`` / ``--recs`` is worse than an error.

Each check looks for a signature that the right files cannot produce:

* a *test* or *training* file whose 4th column counts 1, 2, 3, ... within every user while
  its 3rd never rises is a recommendations file (ranks read as timestamps, scores as values);
* a *recommendations* file with ranks beyond the number of items is a ratings file
  (timestamps read as ranks), and so is one without ranks whose 3rd column goes up and
  down within users (ratings, not the falling scores of ranked lists);
* recommendations that reach fewer than half of the evaluated test users were made for
  other users (or are the test file);
* recommendations that never hit a test item while many of them are the user's training
  items were made excluding the *test* file: ``--train`` and ``--test`` are swapped.
"""
from __future__ import annotations

from typing import Optional

import numpy as np
import pandas as pd

from ..errors import InputError

#: Share of rows whose 4th column equals their position in the user's rows (1, 2, ...)
#: from which a test file is taken for a recommendations file.
RANK_LIKE_SHARE = 0.99
#: Evaluated users needing recommendations: below this share the file was made for others.
MIN_USERS_WITH_RECS = 0.5
#: Training items among the recommendations, with not one test hit, that show a swap of
#: --train and --test (enough that "no hit" cannot be chance for any useful recommender).
SWAP_MIN_TRAIN_HITS = 20


def check_test_table(table: pd.DataFrame, source: Optional[str], role: str = "test") -> None:
    """Refuse a test (or, with ``role="train"``, training) table that is a recommendations
    file (user, item, score, rank): its 4th column (read as a timestamp) is each row's
    position in its user's rows, and its 3rd (read as a value) never rises within a user,
    as scores of a ranked list do."""
    if "timestamp" not in table.columns or len(table) == 0:
        return
    position = _by_user(table).cumcount().to_numpy() + 1
    ranks = np.asarray(table["timestamp"], dtype=np.float64)
    if np.mean(ranks == position) < RANK_LIKE_SHARE:
        return
    if "value" in table.columns and _rises(table, "value") > 1 - RANK_LIKE_SHARE:
        return
    option = "`train`" if role == "train" else "`test`"
    raise InputError(f"the {'training' if role == 'train' else 'test'} file looks like a recommendations file: "
                     "its 4th column counts 1, 2, 3, ... within each user, as ranks do", path=source,
                     hint=f"were {option} and `recs` swapped?")


def _rises(table: pd.DataFrame, column: str) -> float:
    """Share of rows whose ``column`` is above the previous row of the same user."""
    return float(np.mean(_by_user(table)[column].diff().to_numpy() > 0))


def _by_user(table: pd.DataFrame):
    """``table`` grouped by user in file order; a ``Categorical`` user column (ids read as
    codes) by its codes, so that users without rows make no groups."""
    users = table["user"]
    key = users.array.codes if isinstance(users.dtype, pd.CategoricalDtype) else users
    return table.groupby(key, sort=False)


def check_recs_table(recs: pd.DataFrame, n_items: int, source: Optional[str]) -> None:
    """Refuse recommendations whose ranks could not be ranks of these items, and a file with
    no rank column whose 3rd column goes up and down within each user: a ratings file (user,
    item, value), not ranked lists (the scores of a list only fall)."""
    if "rank" not in recs.columns or len(recs) == 0:
        return
    top = float(np.nanmax(recs["rank"].to_numpy(dtype=np.float64)))
    if top > n_items:
        raise InputError(f"ranks go up to {top:.0f} but there are only {n_items} items: this looks like a "
                         "ratings file (a timestamp column read as ranks)", path=source,
                         hint="`recs` takes the output of mrec-warp recommend: were `recs` and `test` "
                              "(or `train`) swapped?")
    if recs.attrs.get("rank_column", True) or "score" not in recs.columns or recs["score"].isna().any():
        return
    if _rises(recs, "score") > 1 - RANK_LIKE_SHARE:
        raise InputError("no rank column, and the 3rd column goes up and down within users' rows as ratings do "
                         "(the scores of ranked lists only fall): this looks like a ratings file", path=source,
                         hint="`recs` takes the output of mrec-warp recommend (user, item, score, rank): "
                              "were `recs` and `train` (or `test`) swapped?")


def check_evaluation(info: dict, per_user: pd.DataFrame, source: Optional[str],
                     n_train: int, n_test: int) -> None:
    """Refuse an evaluation whose counts show recommendations made for other users or
    against a swapped train/test pair."""
    evaluated = int(info["n_users_evaluated"])
    with_recs = evaluated - int(info["n_users_without_recs"])
    if evaluated and with_recs < MIN_USERS_WITH_RECS * evaluated:
        raise InputError(f"only {with_recs} of the {evaluated} test users have recommendations: they were made "
                         "for other users, or the files are swapped", path=source,
                         hint="recommend for every test user, or evaluate against a test file of only "
                              "the users recommended for")
    in_train = int(info["n_rec_rows_in_train"])
    if in_train >= SWAP_MIN_TRAIN_HITS and not (per_user["mrr"].to_numpy() > 0).any():
        raise InputError(f"not one recommendation is a test item, but {in_train} are training items of their "
                         f"user: `train` and `test` look swapped (train has {n_train} interactions, test "
                         f"{n_test})", path=source,
                         hint="give the file the model was trained on as `train`")
