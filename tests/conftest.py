"""Shared fixtures: MovieLens 100k from ../shared (never copied here) and small planted data."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

ML100K = Path(__file__).resolve().parents[2] / "shared" / "data" / "ml-100k"


@pytest.fixture(scope="session")
def ml100k_dir() -> Path:
    if not (ML100K / "u.data").exists():
        pytest.skip("MovieLens 100k not found beside the project (../shared/data/ml-100k)")
    return ML100K


def planted_low_rank(n_users=600, n_items=300, rank=4, per_user=30, seed=0):
    """Users and items in ``rank`` clusters; users pick mostly from their cluster.

    Popularity is flat inside clusters, so only a model that learns the clusters does well.
    Returns (train, test) CSR matrices.
    """
    rng = np.random.default_rng(seed)
    user_group = rng.integers(0, rank, n_users)
    item_group = rng.integers(0, rank, n_items)
    rows, cols = [], []
    for u in range(n_users):
        own = np.flatnonzero(item_group == user_group[u])
        other = np.flatnonzero(item_group != user_group[u])
        n_own = int(per_user * 0.9)
        items = np.concatenate([rng.choice(own, n_own, replace=False),
                                rng.choice(other, per_user - n_own, replace=False)])
        rows.extend([u] * len(items))
        cols.extend(items.tolist())
    rows, cols = np.array(rows), np.array(cols)
    test_mask = rng.random(len(rows)) < 0.2
    shape = (n_users, n_items)
    train = sp.csr_matrix((np.ones((~test_mask).sum(), dtype=np.float32), (rows[~test_mask], cols[~test_mask])), shape=shape)
    test = sp.csr_matrix((np.ones(test_mask.sum(), dtype=np.float32), (rows[test_mask], cols[test_mask])), shape=shape)
    return train, test


@pytest.fixture(scope="session")
def planted():
    return planted_low_rank()


def step_settings(**changes):
    """The kernels' ``StepSettings`` dict: plain WARP, lr 0.05, max_sampled 10, no L2, no norm
    limit, adagrad with biases; ``changes`` override fields."""
    cfg = dict(loss=0, max_sampled=10, learning_rate=0.05, user_reg=0.0, item_reg=0.0, adagrad=True,
               use_bias=True, user_max_norm=0.0, item_max_norm=0.0, kos_n=10, kos_k=5)
    cfg.update(changes)
    return cfg
