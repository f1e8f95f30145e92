"""Stratified epochs: T threads that never step on the same user row or positive item row.

Hogwild shards (every thread visits a random share of all positives) let two threads
update the same hot item row at once, and the row's cache lines then bounce between the
cores. The schedule here follows DSGD (Gemulla et al., 2011): users and items are cut
into T strata each, so the positives fall into T x T blocks, and an epoch runs in T
rounds; in round ``r`` thread ``t`` visits block ``(t, (t + r) mod T)``. Within a round
no two threads share a user stratum or an item stratum, so the rows of a step's user and
positive item are one thread's alone. WARP's negatives are still drawn from every item
(the sampling rule does not change); they are read far more often than they are written
(one write per update, after up to ``max_sampled`` reads), and are the only rows threads
still share.

Every positive is visited exactly once per epoch, in an order shuffled within its block.
Strata balance their positives: users (items) are sorted by how many positives they hold
and dealt out in snake order (0, 1, ..., T-1, T-1, ..., 0, 0, 1, ...), so each stratum
gets as many heavy rows as light ones, and the T blocks of a round do about equal work.
"""
from __future__ import annotations

from typing import Callable, List, Sequence, Tuple

import numpy as np

from ..kernels import rng as _rng

#: ``run(start, stop, state)``: one kernel call on the positives ``order[start:stop]``
#: with the sampler state ``state``; returns the kernel's 4 totals.
ShardRunner = Callable[[int, int, np.ndarray], Sequence[float]]
#: ``map_shards(run, shards)``: ``[run(*s) for s in shards]``, the shards at once on threads.
ShardMap = Callable[[ShardRunner, List[Tuple[int, int, np.ndarray]]], Sequence[Sequence[float]]]


def snake_strata(counts: np.ndarray, n_strata: int) -> np.ndarray:
    """The stratum (0..n_strata-1) of each row, balancing the rows' ``counts`` between strata.

    Rows sorted by count (heaviest first, ties by row number) are dealt out in snake order.
    """
    ranked = np.argsort(-np.asarray(counts, dtype=np.int64), kind="stable")
    lap = np.arange(len(ranked)) % (2 * n_strata)
    deal = np.where(lap < n_strata, lap, 2 * n_strata - 1 - lap)
    strata = np.empty(len(ranked), dtype=np.int64)
    strata[ranked] = deal
    return strata


class Strata:
    """The positives of a :class:`~mrec_warp.models.positives.TrainingData` in T x T blocks.

    Building one regroups ``data.order`` in place (it is a permutation of the same
    positions, and is shuffled every epoch anyway): block ``(a, b)`` -- the positives of
    user stratum ``a`` and item stratum ``b`` -- is ``order[bounds[a * T + b]:bounds[a * T + b + 1]]``.
    """

    def __init__(self, data, n_strata: int) -> None:
        self.n_strata = T = int(n_strata)
        order = data.order
        users = data.pos_users[order]
        items = data.indices[order]
        n_users = len(data.indptr) - 1
        n_items = int(items.max()) + 1 if len(items) else 0
        user_strata = snake_strata(np.bincount(users, minlength=n_users), T)
        item_strata = snake_strata(np.bincount(items, minlength=n_items), T)
        block = user_strata[users] * T + item_strata[items]
        regroup = np.argsort(block, kind="stable")
        order[:] = order[regroup]
        self.bounds = np.searchsorted(block[regroup], np.arange(T * T + 1)).astype(np.int64)
        self.order = order

    def shuffle(self, state: np.ndarray) -> None:
        """Shuffle each block in place (blocks in order, one RNG stream)."""
        for k in range(self.n_strata ** 2):
            lo, hi = int(self.bounds[k]), int(self.bounds[k + 1])
            if hi - lo > 1:
                _rng.shuffle(self.order[lo:hi], state)

    def rounds(self) -> List[List[Tuple[int, int]]]:
        """The epoch's rounds: in round ``r``, thread ``t`` visits block ``(t, (t + r) mod T)``."""
        T = self.n_strata
        return [[(int(self.bounds[t * T + (t + r) % T]), int(self.bounds[t * T + (t + r) % T + 1]))
                 for t in range(T)] for r in range(T)]


def strata_of(data, n_strata: int) -> Strata:
    """The :class:`Strata` of ``data`` for ``n_strata`` threads, built on first use and kept
    on ``data`` (which the model keeps for all its epochs)."""
    cached = getattr(data, "_strata", None)
    if cached is None or cached.n_strata != int(n_strata):
        cached = Strata(data, n_strata)
        data._strata = cached
    return cached


def stratified_epoch(run: ShardRunner, strata: Strata, states: Sequence[np.ndarray],
                     map_shards: ShardMap) -> np.ndarray:
    """Run one epoch of ``strata`` round by round, thread ``t`` on sampler ``states[t]``.

    Rounds run one after another (each waits for its slowest block); the blocks of a round
    run at once through ``map_shards``. Returns the summed kernel totals.
    """
    totals = np.zeros(4)
    for blocks in strata.rounds():
        shards = [(lo, hi, states[t]) for t, (lo, hi) in enumerate(blocks)]
        for r in map_shards(run, shards):
            totals += r
    return totals
