"""The top-k kernel against a plain numpy reference."""
import numpy as np
import pytest
import scipy.sparse as sp

from mrec_warp.context import ExecutionContext
from mrec_warp.kernels.topk import topk_masked
from mrec_warp.topk import iter_top_k


def reference_topk(scores, exclude, rows, k, mask=None):
    out = []
    for r, s in enumerate(scores):
        banned = set(exclude[rows[r]].indices.tolist()) if rows[r] >= 0 else set()
        if mask is not None:
            banned |= set(np.flatnonzero(mask).tolist())
        cands = [(-float(s[j]), j) for j in range(len(s)) if j not in banned]
        cands.sort()  # best score first, ties to the lower index
        items = [j for _, j in cands[:k]]
        out.append(items + [-1] * (k - len(items)))
    return np.array(out)


def run_kernel(scores, exclude, rows, k, mask=None):
    items = np.empty((scores.shape[0], k), dtype=np.int64)
    vals = np.empty((scores.shape[0], k), dtype=np.float32)
    m = np.zeros(0, dtype=np.uint8) if mask is None else mask.astype(np.uint8)
    topk_masked(scores, rows.astype(np.int64), exclude.indptr.astype(np.int64),
                exclude.indices.astype(np.int32), m, items, vals)
    return items, vals


@pytest.mark.parametrize("seed", range(5))
def test_matches_reference_with_ties_and_masks(seed):
    rng = np.random.default_rng(seed)
    n_rows, n_items = rng.integers(1, 30), rng.integers(1, 60)
    k = int(rng.integers(1, n_items + 5))
    # few distinct values -> many ties
    scores = rng.integers(0, 5, (n_rows, n_items)).astype(np.float32)
    exclude = sp.random(n_rows + 3, n_items, density=0.3, format="csr", random_state=seed)
    rows = rng.integers(-1, n_rows + 3, n_rows)
    mask = rng.random(n_items) < 0.1
    items, vals = run_kernel(scores, exclude, rows, k, mask)
    np.testing.assert_array_equal(items, reference_topk(scores, exclude, rows, k, mask))
    valid = items >= 0
    np.testing.assert_array_equal(vals[valid], scores[np.nonzero(valid)[0], items[valid]])
    assert np.all(np.isneginf(vals[~valid]))


def test_nan_scores_never_ranked():
    scores = np.array([[np.nan, 1.0, 2.0]], dtype=np.float32)
    items, _ = run_kernel(scores, sp.csr_matrix((1, 3)), np.array([-1]), 3)
    assert items.tolist() == [[2, 1, -1]]


def test_iter_top_k_blocks_and_threads_agree():
    rng = np.random.default_rng(1)
    scores = rng.standard_normal((97, 40)).astype(np.float32)
    exclude = sp.random(97, 40, density=0.2, format="csr", random_state=1)
    users = np.arange(97)
    fn = lambda rows: scores[rows]
    one = np.vstack([b[1] for b in iter_top_k(fn, 40, users, 5, exclude=exclude, block_size=97)])
    many = np.vstack([b[1] for b in iter_top_k(fn, 40, users, 5, exclude=exclude, block_size=7, n_jobs=2)])
    np.testing.assert_array_equal(one, many)
    np.testing.assert_array_equal(one, reference_topk(scores, exclude, users, 5))


@pytest.mark.parametrize("seed", range(3))
def test_long_rows_with_nans_match_reference(seed):
    # long rows exercise the skip-8-at-a-time scan; NaNs inside a chunk must not hide a winner
    rng = np.random.default_rng(seed)
    scores = rng.standard_normal((6, 203)).astype(np.float32)
    scores[rng.random(scores.shape) < 0.2] = np.nan
    scores[0, 2:4] = [100.0, np.nan]
    scores[1, 2:4] = [np.nan, 100.0]
    exclude = sp.random(6, 203, density=0.1, format="csr", random_state=seed)
    rows = np.arange(6)
    items, _ = run_kernel(scores, exclude, rows, 4)
    clean = np.where(np.isnan(scores), -np.inf, scores)
    ref = reference_topk(clean, exclude, rows, 4)
    for r in range(6):  # NaN entries map to -inf in the reference; never chosen while others remain
        assert items[r].tolist() == ref[r].tolist()


def _blas_scorer(n_users=700, n_items=1500, factors=64, seed=3):
    """A score function as the models have one: a float32 BLAS product of factor matrices."""
    rng = np.random.default_rng(seed)
    U = rng.standard_normal((n_users, factors)).astype(np.float32)
    V = rng.standard_normal((n_items, factors)).astype(np.float32)
    return (lambda rows: U[rows] @ V.T), n_users, n_items


@pytest.mark.parametrize("block_size,n_jobs,backend", [
    (1, 1, "threads"), (7, 2, "threads"), (50, 1, "threads"), (300, 2, "threads"), (97, 2, "processes"),
])
def test_a_users_scores_do_not_depend_on_how_users_are_cut(block_size, n_jobs, backend):
    # OpenBLAS rounds a row differently with the call's shape, the row's place in it and the
    # thread count (seen: 0.0667909 vs 0.0667908 between a part and a stream); every user must
    # come out with the same bits however blocks, workers and backends cut the list.
    fn, n_users, n_items = _blas_scorer()
    if backend == "processes":
        fn = _PicklableScorer()  # a lambda does not pickle to worker processes
    users = np.random.default_rng(0).permutation(n_users)
    ref = [b for b in iter_top_k(fn, n_items, users, 10)]
    with ExecutionContext(backend, n_jobs=n_jobs) as context:
        got = [b for b in iter_top_k(fn, n_items, users, 10, block_size=block_size, workers=context)]
    for name, i in (("users", 0), ("items", 1), ("scores", 2)):
        np.testing.assert_array_equal(np.concatenate([b[i] for b in got]), np.concatenate([b[i] for b in ref]),
                                      err_msg=name)


class _PicklableScorer:
    def __call__(self, rows):
        return _blas_scorer()[0](rows)


def test_grid_scores_match_for_any_cut_and_position():
    from mrec_warp.topk import SCORE_ROWS, grid_scores

    fn, n_users, _ = _blas_scorer()
    users = np.arange(n_users)
    whole = grid_scores(fn, users, 0)
    rng = np.random.default_rng(5)
    cuts = np.unique(np.concatenate([[0, n_users], rng.integers(0, n_users, 12)]))
    pieces = np.vstack([grid_scores(fn, users[a:b], a) for a, b in zip(cuts[:-1], cuts[1:])])
    np.testing.assert_array_equal(pieces, whole)
    assert whole.dtype == np.float32 and whole.shape == (n_users, 1500)
    # the same user at another place in its call may round differently: the grid pins it
    np.testing.assert_allclose(grid_scores(fn, users[SCORE_ROWS + 1:SCORE_ROWS + 2], 0)[0], whole[SCORE_ROWS + 1],
                               rtol=1e-5, atol=1e-5)


def test_scores_written_in_place_equal_the_copied_ones(planted):
    from mrec_warp.models import WARP
    from mrec_warp.topk import SCORE_ROWS, grid_scores

    train, _ = planted
    model = WARP(factors=16, epochs=1, random_state=0).fit(train)
    users = np.tile(np.arange(model.n_users), 2)  # > 3 calls, so several are written in place
    direct = grid_scores(model.score_users, users, 3)  # takes out=
    copied = grid_scores(lambda rows: model.score_users(rows), users, 3)
    assert len(users) > 3 * SCORE_ROWS
    np.testing.assert_array_equal(direct, copied)
