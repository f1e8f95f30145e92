"""Per-group results: the same metrics for groups of users or of test items.

* ``user-activity``: evaluated users binned by their training-profile size (number of
  training items) into tertiles: with ``a`` and ``b`` the 1/3 and 2/3 quantiles of the
  evaluated users' profile sizes (numpy's linear interpolation), ``light`` is a size <= a,
  ``medium`` a < size <= b, ``heavy`` size > b. Many equal sizes can leave a bin small or
  empty. Each group is scored on its users only (coverage and Gini over their lists).
* ``item-popularity``: ``head`` and ``tail`` items by the rule of
  :func:`~mrec_warp.evaluation.beyond.head_items` (the most-interacted training items that
  hold 20% of the training interactions are the head). Each group is scored against the
  test items of that group only -- the lists are unchanged, a hit on an item of the other
  group is not counted -- so the users evaluated are those with a test item in the group:
  ``recall@k`` on ``tail`` says how much of the long tail users liked is found.

Group membership is decided per split (from its training data), so with several splits a
bin's bounds may move a little; ``bounds`` in the JSON gives them per split.
"""
from __future__ import annotations

from dataclasses import replace
from typing import List, Tuple

import numpy as np

from .beyond import HEAD_SHARE, head_items, item_popularity
from .space import Space

GROUPINGS = ("user-activity", "item-popularity")

RULES = {
    "user-activity": "evaluated users in tertiles of training-profile size: light <= 1/3 quantile < medium "
                     "<= 2/3 quantile < heavy",
    "item-popularity": f"head: the most-interacted training items holding {HEAD_SHARE:.0%} of training "
                       "interactions (ties included); tail: every other item; each group scored on its own "
                       "test items, the lists unchanged, so coverage, Gini, novelty and popularity describe the "
                       "whole lists of the group's users over the whole catalogue (not the group's items only): "
                       "read the accuracy metrics across groups",
}


def group_spaces(space: Space, grouping: str) -> List[Tuple[str, Space, str]]:
    """``(label, restricted space, bounds in words)`` for every group of ``grouping``."""
    n_items = max(space.n_items, 1)
    if grouping == "user-activity":
        profile = np.bincount(space.train_keys // n_items, minlength=space.n_users)
        evaluated = space.n_test > 0
        sizes = profile[evaluated]
        a, b = (np.quantile(sizes, [1 / 3, 2 / 3]) if len(sizes) else (0.0, 0.0))
        bins = [("light", profile <= a, f"profile size <= {a:g}"),
                ("medium", (profile > a) & (profile <= b), f"{a:g} < profile size <= {b:g}"),
                ("heavy", profile > b, f"profile size > {b:g}")]
        return [(label, restrict_users(space, mask), words) for label, mask, words in bins]
    if grouping == "item-popularity":
        popularity, _ = item_popularity(space)
        head = head_items(popularity[:space.n_train_items])
        head = np.concatenate([head, np.zeros(space.n_items - space.n_train_items, dtype=bool)])
        share = popularity[head].sum() / max(popularity.sum(), 1)
        return [("head", restrict_items(space, head), f"{int(head.sum())} items, {share:.1%} of training interactions"),
                ("tail", restrict_items(space, ~head), f"{int((~head).sum())} items")]
    raise ValueError(f"unknown grouping {grouping!r}; use one of {', '.join(GROUPINGS)}")


def restrict_users(space: Space, users: np.ndarray) -> Space:
    """``space`` with test pairs only for the users in mask ``users``."""
    keep = users[space.test_keys // max(space.n_items, 1)]
    return replace(space, test_keys=space.test_keys[keep], n_test=np.where(users, space.n_test, 0))


def restrict_items(space: Space, items: np.ndarray) -> Space:
    """``space`` with test pairs only for the items in mask ``items``."""
    n_items = max(space.n_items, 1)
    test_keys = space.test_keys[items[space.test_keys % n_items]]
    n_test = np.bincount(test_keys // n_items, minlength=space.n_users)
    return replace(space, test_keys=test_keys, n_test=n_test)
