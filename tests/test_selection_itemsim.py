"""EASE, item-kNN, RP3beta and SLIM choose their settings left at "auto" on the internal hold-out."""
from __future__ import annotations

import json
import logging

import numpy as np
import pytest
import scipy.sparse as sp
from click.testing import CliRunner

from mrec_warp.cli import main
from mrec_warp.models import EASE, SLIM, ItemKNN, RP3beta, load
from mrec_warp.kernels.itemsim import history_times_weights, rows_into_dense
from mrec_warp.kernels.topk import product_top_k_classes
from mrec_warp.models._itemsim import (ENTRY_BYTES, SELECTION_SEED, HistoryRows, ItemProduct, RankedWeights, ScaledRows,
                                       beyond_noise, history_scores, item_blocks, keep_classes, nested_top_k,
                                       top_k_by_blocks, weights_scorer)
from mrec_warp.models.ease import items_side_scores, users_side_scores
from mrec_warp.models.slim import gram_arrays, solve_path_block
from mrec_warp.models.early_stopping import HoldoutScorer, internal_holdout
from mrec_warp.models.selection import PASSED_OVER, Candidate, report
from mrec_warp.progress import SILENT, Progress

from .conftest import planted_low_rank

FAMILIES = (EASE, ItemKNN, RP3beta, SLIM)


def holdout_of(model, X):
    """The hold-out a fit of ``model`` on ``X`` chooses on, and its scorer."""
    holdout = internal_holdout(model, X, np.random.default_rng(SELECTION_SEED))
    return holdout, HoldoutScorer(holdout.fit, holdout.held_out, holdout.users, 10)


def tried(model, X, caplog):
    """The settings a fit tried and their scores, read from its -v lines."""
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="mrec_warp"):
        model.fit(X, progress=Progress())
    out = []
    for record in caplog.records:
        message = record.getMessage()
        if ": tried " in message:
            setting, _, rest = message.split(": tried ")[1].partition(": P@10 ")
            values = dict(kv.split("=") for kv in setting.split())
            out.append((values, float(rest.split()[0])))
    return out


def explicit(cls, values):
    """A select=False model of ``cls`` with the tried ``values`` (the log's text) given."""
    kinds = {"l1": float, "l2": float, "beta": float, "neighbours": int, "similarity": str}
    params = {k: kinds[k](v) for k, v in values.items()}
    if cls is EASE:
        params["topk"] = 0  # the choice scores the dense weights
    return cls(select=False, **params)


@pytest.mark.parametrize("cls", FAMILIES)
def test_each_tried_setting_scores_what_its_model_scores_and_the_best_is_chosen(cls, caplog):
    X, _ = planted_low_rank(n_users=300, n_items=300, per_user=16, seed=5)
    model = cls()
    settings = tried(model, X, caplog)
    assert len(settings) >= 3
    holdout, scorer = holdout_of(model, X)
    for values, score in settings:
        if cls is SLIM:  # scored on a sample of the items' columns: checked in its own test below
            break
        reference = explicit(cls, values).fit(holdout.fit)
        # the same weights up to ties at the k-th value (which the fit breaks arbitrarily; this
        # data has many: flat popularity within clusters), so about the same precision
        assert scorer(reference.score_users) == pytest.approx(score, abs=6e-5 if cls is EASE else 2e-3), values
    best_score = max(score for _, score in settings)
    first_best = next(values for values, score in settings if score == best_score)
    chosen = {name: getattr(model, name + "_") for name in first_best}
    # the best, unless it is within the hold-out's noise of the fixed values (then those)
    assert chosen in ({name: getattr(explicit(cls, first_best), name) for name in first_best},
                      {name: cls.FIXED[name] for name in first_best})
    kept = [r.getMessage() for r in caplog.records if "within the hold-out's noise" in r.getMessage()]
    assert bool(kept) == (chosen != {name: getattr(explicit(cls, first_best), name) for name in first_best})
    assert all(getattr(model, name) == "auto" for name in cls.SELECTED)  # the parameters stay "auto"


def test_ease_walks_to_the_planted_best_penalty(caplog):
    # items drawn by popularity alone: nothing to learn beyond it, so the weights fitted to
    # co-occurrences are noise and the largest penalty (scores closest to popularity) is best;
    # the walk must leave the fixed 200 upwards
    rng = np.random.default_rng(1)
    n_users, n_items = 1500, 120
    popularity = 1.0 / np.arange(1, n_items + 1) ** 0.8
    rows = np.repeat(np.arange(n_users), 12)
    cols = np.concatenate([rng.choice(n_items, size=12, replace=False, p=popularity / popularity.sum())
                           for _ in range(n_users)])
    X = sp.csr_matrix((np.ones(len(rows), np.float32), (rows, cols)), shape=(n_users, n_items))
    model = EASE()
    settings = tried(model, X, caplog)
    l2s = [float(v["l2"]) for v, _ in settings]
    best = max(score for _, score in settings)
    assert l2s[:3] == [200.0, 100.0, 400.0] and model.l2_ >= 800
    assert model.l2_ == next(float(v["l2"]) for v, score in settings if score == best)


@pytest.mark.parametrize("cls, given", [
    (EASE, {"l2": 50.0}),
    (ItemKNN, {"neighbours": 7}),
    (ItemKNN, {"similarity": "cosine"}),
    (RP3beta, {"beta": 0.2}),
    (RP3beta, {"neighbours": 9, "beta": 0.0}),
    (SLIM, {"l2": 30.0}),
    (SLIM, {"l1": 2.0, "l2": 50.0}),
])
def test_an_explicit_value_is_never_overridden(cls, given, caplog):
    X, _ = planted_low_rank(n_users=200, n_items=80, per_user=12, seed=2)
    model = cls(**given)
    settings = tried(model, X, caplog)
    for name, value in given.items():
        assert getattr(model, name) == value and getattr(model, name + "_") == value
        assert all(name not in values for values, _ in settings)
    others = [n for n in cls.SELECTED if n not in given]
    if others:  # the rest is still chosen
        assert settings and all(set(values) == set(others) for values, _ in settings)
    else:
        assert not settings


@pytest.mark.parametrize("cls", FAMILIES)
def test_select_off_is_the_model_of_the_fixed_values(cls):
    X, _ = planted_low_rank(n_users=200, n_items=80, per_user=12, seed=4)
    off = cls(select=False).fit(X)
    fixed = cls(**cls.FIXED).fit(X)  # explicit values: no choice either
    for name, value in cls.FIXED.items():
        assert getattr(off, name) == "auto" and getattr(off, name + "_") == value
    a, b = off.weights_, fixed.weights_
    if sp.issparse(a):
        assert (a != b).nnz == 0
    else:
        np.testing.assert_array_equal(a, b)
    users = np.arange(X.shape[0])
    np.testing.assert_array_equal(off.score_users(users), fixed.score_users(users))


@pytest.mark.parametrize("cls", FAMILIES)
def test_a_model_file_records_the_chosen_values_and_loads(cls, tmp_path):
    X, _ = planted_low_rank(n_users=200, n_items=80, per_user=12, seed=6)
    model = cls().fit(X)
    path = tmp_path / "model.npz"
    model.save(path)
    loaded = load(path)
    for name in cls.SELECTED:
        assert getattr(loaded, name) == "auto"
        assert getattr(loaded, name + "_") == getattr(model, name + "_") is not None
    users = np.arange(X.shape[0])
    np.testing.assert_array_equal(loaded.score_users(users), model.score_users(users))


def test_train_and_info_show_what_auto_chose(tmp_path):
    X, _ = planted_low_rank(n_users=120, n_items=50, per_user=10, seed=3)
    coo = X.tocoo()
    tsv = tmp_path / "train.tsv"
    tsv.write_text("".join(f"u{u}\ti{i}\n" for u, i in zip(coo.row, coo.col)))
    runner = CliRunner()
    for name in ("ease", "itemknn", "rp3beta", "slim"):
        model_file = tmp_path / f"{name}.npz"
        res = runner.invoke(main, ["train", str(tsv), "-o", str(model_file), "--model", name])
        assert res.exit_code == 0, res.output
        res = runner.invoke(main, ["info", str(model_file), "--json"])
        assert res.exit_code == 0, res.output
        data = json.loads(res.output)
        model = load(model_file)
        for param in type(model).SELECTED:
            assert data["parameters"][param] == "auto"
            assert json.dumps(getattr(model, param + "_")) in res.output


def largest_by_rule(row: np.ndarray, own: int, k: int) -> set:
    """The reference: a row's ``k`` largest positive entries, its own column excluded, ties
    at the k-th value to the lowest column (the order a sorted CSR row stores them)."""
    cols = [j for j in range(len(row)) if row[j] > 0 and j != own]
    cols.sort(key=lambda j: (-row[j], j))
    return set(cols[:k])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_nested_top_k_keeps_each_rows_largest_at_every_count_ties_to_the_first_stored(seed):
    rng = np.random.default_rng(seed)
    # few distinct values: many ties at every threshold; negatives and zeros never kept
    dense = rng.integers(-2, 5, size=(30, 50)).astype(np.float64) * (rng.random((30, 50)) < 0.7)
    counts = [1, 3, 8, 20, 60]  # 60: more than a row has
    block = sp.csr_matrix(dense)
    weights, classes = nested_top_k(block, 7, counts)
    assert weights.dtype == np.float32 and weights.shape == block.shape
    for c, k in enumerate(counts):
        cut = keep_classes(weights, classes, c)
        for r in range(dense.shape[0]):
            got = set(cut.indices[cut.indptr[r]:cut.indptr[r + 1]].tolist())
            assert got == largest_by_rule(dense[r], 7 + r, k), (k, r)
            assert np.array_equal(cut[r].toarray().ravel()[sorted(got)], dense[r, sorted(got)].astype(np.float32))


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_long_rows_ranked_by_buckets_keep_the_same_entries_as_the_reference(seed):
    # rows longer than the kernel's bucketed threshold (128): values over many orders of
    # magnitude, clumps of equal values at the thresholds, infinities, one row all equal,
    # and counts above some rows' lengths
    rng = np.random.default_rng(seed)
    n_cols = 700
    dense = np.exp(rng.normal(0.0, 6.0, size=(12, n_cols))) * (rng.random((12, n_cols)) < 0.8)
    dense[1] = np.round(dense[1], 0)  # many ties
    dense[2, ::3] = dense[2, 5]
    dense[3] = 0.25
    dense[4, :40] = np.inf
    dense[5] = rng.integers(0, 3, size=n_cols)
    dense[6, 200:] = 0.0  # about 160 entries: above the bucketed threshold, below some counts
    dense[7] = -dense[7]  # nothing positive
    counts = [1, 7, 100, 150, 400, 650]
    weights, classes = nested_top_k(sp.csr_matrix(dense), 3, counts)
    for c, k in enumerate(counts):
        cut = keep_classes(weights, classes, c)
        for r in range(dense.shape[0]):
            got = set(cut.indices[cut.indptr[r]:cut.indptr[r + 1]].tolist())
            assert got == largest_by_rule(dense[r], 3 + r, k), (k, r)


def test_a_smaller_counts_weights_are_the_first_entries_of_every_row():
    rng = np.random.default_rng(11)
    dense = np.round(rng.random((30, 400)) * 5, 1) * (rng.random((30, 400)) < 0.9)
    counts = [2, 9, 150, 300]
    weights, classes = nested_top_k(sp.csr_matrix(dense), 0, counts)
    for c, k in enumerate(counts):
        cut = keep_classes(weights, classes, c)
        for r in range(dense.shape[0]):
            row = slice(weights.indptr[r], weights.indptr[r + 1])
            n = min(weights.indptr[r + 1] - weights.indptr[r], k)
            assert np.array_equal(weights.indices[row][:n], cut.indices[cut.indptr[r]:cut.indptr[r + 1]])


@pytest.mark.parametrize("density", [0.05, 0.9])  # sparse rows' kernel, and the dense weights
def test_a_counts_scores_read_from_the_ranked_arrays_are_those_of_its_cut_weights(density):
    rng = np.random.default_rng(12)
    dense = rng.random((60, 60)) * (rng.random((60, 60)) < density)
    marks = (rng.random((80, 60)) < 0.15).astype(np.float32)
    marks[3] = 0  # a cold user: popularity
    history = sp.csr_matrix(marks)
    counts = [1, 4, 30]
    ranked = RankedWeights.build(lambda a, b: sp.csr_matrix(dense[a:b]), history, counts, 0.01, SILENT, "")
    rows_of = HistoryRows(history)
    users = np.arange(80)
    for k in counts:
        got = ranked.scorer(k, rows_of)(users)
        want = weights_scorer(history, ranked.top(k))(users)
        assert np.array_equal(got, want)
        assert np.array_equal(got[3], rows_of.popularity)


def test_dense_weights_from_row_ranges_refuse_ranges_outside_the_entries():
    indices = np.array([0, 2, 1], np.int32)
    data = np.ones(3, np.float32)
    out = np.empty((2, 3), np.float32)
    rows_into_dense(np.array([0, 2], np.int64), np.array([2, 3], np.int64), indices, data, out)
    assert np.array_equal(out, [[1, 0, 1], [0, 1, 0]])
    with pytest.raises(ValueError, match="start before its end"):
        rows_into_dense(np.array([0, 2], np.int64), np.array([2, 4], np.int64), indices, data, out)
    with pytest.raises(ValueError, match="not a scored item"):
        rows_into_dense(np.array([0, 2], np.int64), np.array([2, 3], np.int64), indices, data, np.empty((2, 2), np.float32))


@pytest.mark.parametrize("scaled", [False, True])
def test_a_product_ranked_as_it_is_made_keeps_what_the_stored_product_keeps(scaled):
    # binary factors: many equal sums, so the ties follow the order scipy stores the product in;
    # an empty row, a zero sum (+1 - 1), a column scaled to 0 and the diagonal all occur
    rng = np.random.default_rng(13)
    left = (rng.random((50, 70)) < 0.1).astype(np.float64)
    left[7] = 0.0
    left[3, :2] = [1.0, -1.0]
    right = (rng.random((70, 400)) < 0.2).astype(np.float64)
    right[1] = right[0]
    scale = rng.random(400) if scaled else None
    if scaled:
        scale[::17] = 0.0
    counts = [3, 20, 60]
    stored = sp.csr_matrix(sp.csr_matrix(left) @ sp.csr_matrix(right))
    if scaled:
        stored.data *= scale[stored.indices]
    want = nested_top_k(stored, 5, counts)
    got = nested_top_k(ItemProduct(sp.csr_matrix(left), sp.csr_matrix(right), scale), 5, counts)
    for got_part, want_part in zip((got[0].indptr, got[0].indices, got[0].data, got[1]),
                                   (want[0].indptr, want[0].indices, want[0].data, want[1])):
        assert np.array_equal(got_part, want_part)  # the same entries, classes, values and order
    # one count (the fit's weights): a row keeping at least 400 / 16 entries comes in column order
    one = nested_top_k(ItemProduct(sp.csr_matrix(left), sp.csr_matrix(right), scale), 5, [60])[0]
    for r in range(left.shape[0]):
        cols = one.indices[one.indptr[r]:one.indptr[r + 1]]
        assert len(cols) < 25 or np.all(np.diff(cols) > 0)
    assert (one != nested_top_k(stored, 5, [60])[0]).nnz == 0


def test_a_stored_product_ranked_with_a_column_scale_is_the_scaled_product():
    rng = np.random.default_rng(14)
    stored = sp.csr_matrix((rng.random((30, 200)) < 0.3) * np.round(rng.random((30, 200)), 1))
    scale = rng.random(200)
    scale[::7] = 0.0
    scaled = stored.copy()
    scaled.data *= scale[scaled.indices]
    got, want = nested_top_k(ScaledRows(stored, scale), 2, [4, 30]), nested_top_k(scaled, 2, [4, 30])
    for got_part, want_part in zip((got[0].indptr, got[0].indices, got[0].data, got[1]),
                                   (want[0].indptr, want[0].indices, want[0].data, want[1])):
        assert np.array_equal(got_part, want_part)


def test_a_product_refuses_factors_whose_indices_leave_them():
    left = sp.csr_matrix(np.eye(3))
    right = sp.csr_matrix(np.ones((2, 4)))  # left's third column is not a row of right
    with pytest.raises(ValueError, match="rows of B"):
        nested_top_k(ItemProduct(left, right), 0, [2])
    with pytest.raises(ValueError, match="column_scale"):
        nested_top_k(ItemProduct(left[:, :2], right, np.ones(3)), 0, [2])
    a = sp.csr_matrix(left[:, :2])
    out = (np.empty(8, np.int32), np.empty(8, np.float32), np.empty(8, np.uint8), np.empty(3, np.int64))
    with pytest.raises(ValueError, match="below n_cols"):  # right has 4 columns, not 3
        product_top_k_classes(a.indptr.astype(np.int64), a.indices, a.data, right.indptr.astype(np.int64),
                              right.indices, right.data, np.zeros(0), 3, 0, np.array([2], np.int64), *out)


def test_the_fits_weights_are_the_held_out_rankings_cut_at_its_count():
    rng = np.random.default_rng(3)
    dense = rng.random((40, 40)) * (rng.random((40, 40)) < 0.5) - 0.1
    history = sp.csr_matrix(np.ones((3, 40)))  # every item's product row as long as the catalogue
    rows = RankedWeights.build(lambda a, b: sp.csr_matrix(dense[a:b]), history, [2, 5, 12], 0.01, SILENT, "")
    for k in (2, 5, 12):
        fit = top_k_by_blocks(lambda a, b: sp.csr_matrix(dense[a:b]), history, k, 0.01, 1, SILENT, "")
        got = rows.top(k)
        got.sort_indices()
        assert (got != fit).nnz == 0


def test_blocks_cover_the_items_in_order_within_the_budget_of_their_products_rows():
    rng = np.random.default_rng(8)
    sparse = sp.random(2000, 3000, density=0.002, format="csr", random_state=9)
    dense = sp.csr_matrix(rng.random((200, 300)) < 0.5)
    for history, memory_mb in ((sparse, 0.05), (dense, 0.05), (sparse, 64.0)):
        n = history.shape[1]
        blocks = item_blocks(history, memory_mb)
        assert blocks[0][0] == 0 and blocks[-1][1] == n
        assert all(a[1] == b[0] and a[0] < a[1] for a, b in zip(blocks, blocks[1:]))
        per_user = np.diff(history.indptr)
        reach = np.bincount(history.indices, weights=np.repeat(per_user, per_user).astype(float), minlength=n)
        for start, stop in blocks:
            if stop - start > 1:  # a single item is its own block whatever its row costs
                assert ((np.minimum(reach[start:stop], n) + 1) * ENTRY_BYTES).sum() <= memory_mb * 2**20
    # rows of few entries: far fewer blocks than rows as long as the catalogue would take
    assert len(item_blocks(sparse, 0.05)) * 20 < len(item_blocks(sp.csr_matrix(np.ones((3, 3000))), 0.05))
    assert len(item_blocks(sparse, 64.0, workers=2)) == 8  # a few per worker


def test_history_scores_of_sparse_weights_are_the_dense_product():
    rng = np.random.default_rng(4)
    hist = sp.random(25, 30, density=0.2, format="csr", random_state=5, dtype=np.float32)
    W = sp.random(30, 30, density=0.3, format="csr", random_state=6, dtype=np.float32)
    got = history_scores(hist, W, None, 30)
    assert got.dtype == np.float32 and got.flags.c_contiguous
    np.testing.assert_allclose(got, (hist @ W).toarray(), rtol=1e-6, atol=1e-7)
    kept = np.sort(rng.choice(40, size=30, replace=False))
    spread = history_scores(sp.random(25, 40, density=0.2, format="csr", random_state=7, dtype=np.float32), W,
                            kept, 40)
    assert np.isnan(np.delete(spread, kept, axis=1)).all()


def test_the_scoring_kernel_refuses_indices_outside_its_arrays():
    hist = sp.csr_matrix(np.array([[1.0, 0.0, 1.0]], dtype=np.float32))
    W = sp.csr_matrix(np.eye(2, dtype=np.float32))  # 2 rows: history item 2 is not one of them
    with pytest.raises(ValueError, match="not a row of the weights"):
        history_times_weights(hist.indptr.astype(np.int64), hist.indices, hist.data, W.indptr[:-1].astype(np.int64),
                              W.indptr[1:].astype(np.int64), W.indices, W.data, np.zeros((1, 2), np.float32))
    W3 = sp.csr_matrix((np.ones(3, np.float32), np.array([0, 1, 5], np.int32), np.array([0, 1, 2, 3])), shape=(3, 6))
    with pytest.raises(ValueError, match="not a scored item"):
        history_times_weights(hist.indptr.astype(np.int64), hist.indices, hist.data, W3.indptr[:-1].astype(np.int64),
                              W3.indptr[1:].astype(np.int64), W3.indices, W3.data, np.zeros((1, 3), np.float32))


@pytest.mark.parametrize("shape", [(150, 60), (60, 150)])
@pytest.mark.parametrize("restricted", [False, True])
def test_both_sides_of_eases_choice_score_the_model_exactly(shape, restricted):
    X, _ = planted_low_rank(n_users=shape[0], n_items=shape[1], per_user=10, seed=7)
    model = EASE(select=False)
    holdout, scorer = holdout_of(model, X)
    counts = np.bincount(holdout.fit.indices, minlength=X.shape[1]).astype(np.float32)
    kept = None
    if restricted:  # the most popular items, ties by index, as max_items keeps them
        kept = np.sort(np.lexsort((np.arange(X.shape[1]), -counts))[: X.shape[1] // 2])
    sub = holdout.fit if kept is None else sp.csr_matrix(holdout.fit[:, kept])
    for side in (items_side_scores, users_side_scores):
        make = side(sub, holdout.users, kept, X.shape[1], counts, np.dtype("float64"))
        for l2 in (25.0, 400.0):
            reference = EASE(l2=l2, topk=0, select=False, dtype="float64",
                             max_items=None if kept is None else len(kept)).fit(holdout.fit)
            rows = holdout.users[:8]
            expected, got = reference.score_users(rows), make(l2)(rows)
            off = (holdout.fit[rows].toarray() == 0) & ~np.isnan(expected)  # a user's own items are never ranked
            np.testing.assert_allclose(got[off], expected[off], atol=1e-5)
            assert scorer(make(l2)) == scorer(reference.score_users)


def test_a_setting_within_the_holdouts_noise_does_not_replace_the_fixed_one():
    rng = np.random.default_rng(0)
    base = rng.integers(0, 3, size=400)
    fixed = Candidate({"beta": 0.5}, base.mean() / 10, extra={"hits": base})
    noisy = base + rng.choice([-1, 0, 1], size=400)  # a little better on average, by chance
    noisy_candidate = Candidate({"beta": 0.3}, noisy.mean() / 10 + 1e-3, extra={"hits": noisy})
    assert beyond_noise([fixed, noisy_candidate], fixed) is fixed and "noise" in noisy_candidate.note
    better = base + (rng.random(400) < 0.4)  # 0.4 more hits per user: far beyond the noise
    better_candidate = Candidate({"beta": 0.7}, better.mean() / 10, extra={"hits": better})
    assert beyond_noise([fixed, noisy_candidate, better_candidate], fixed) is better_candidate


def test_slims_path_gives_each_settings_own_weights():
    # each setting of the warm-started path, on the sampled columns, is the cold fit's columns
    X, _ = planted_low_rank(n_users=200, n_items=120, per_user=12, seed=8)
    gram, g = gram_arrays(X)
    targets = np.array([3, 17, 40, 99], dtype=np.int32)
    l1s, l2s = np.array([4.0, 1.0, 1.0]), np.array([100.0, 100.0, 30.0])
    idx, val = solve_path_block(*g, targets, l1s, l2s, 100, 1e-6, 50)
    for s in range(3):
        cold = SLIM(l1=l1s[s], l2=l2s[s], tol=1e-6, topk=50).fit(X).weights_.toarray()
        for r, j in enumerate(targets):
            got = np.zeros(X.shape[1], np.float32)
            keep = idx[s, r] >= 0
            got[idx[s, r][keep]] = val[s, r][keep]
            np.testing.assert_allclose(got, cold[:, j], atol=2e-4)


def test_the_summary_warns_when_the_choice_narrows_the_lists_towards_popularity(caplog):
    fixed = Candidate({"regularization": 40.0}, 0.10, 1.0, "", {"coverage": 0.98})
    narrow = Candidate({"regularization": 150.0}, 0.12, 1.0, "", {"coverage": 0.07})
    wide = Candidate({"regularization": 15.0}, 0.12, 1.0, "", {"coverage": 0.90})
    progress = Progress(verbose=False, logger=logging.getLogger("mrec_warp.test_narrow"))
    with caplog.at_level(logging.INFO, logger="mrec_warp.test_narrow"):
        report(progress, "wrmf", [fixed, narrow], narrow, fixed, 2.0)
        report(progress, "wrmf", [fixed, wide], wide, fixed, 2.0)
        report(progress, "wrmf", [fixed, narrow], fixed, fixed, 2.0)
    summaries = [r.getMessage() for r in caplog.records if "chose" in r.getMessage()]
    assert len(summaries) == 3
    assert "cover 7% of the items against 98% at the fixed values" in summaries[0]
    assert "--regularization 40 keeps them" in summaries[0]
    assert "cover" not in summaries[1] and "cover" not in summaries[2]


def test_the_summary_names_only_the_setting_passed_over_for_the_noise(caplog):
    fixed = Candidate({"beta": 0.5}, 0.100)
    passed = Candidate({"beta": 0.3}, 0.104, extra={PASSED_OVER: True})
    early = Candidate({"beta": 0.1}, 0.130)  # scored on fewer users (a first rung): not comparable
    progress = Progress(verbose=False, logger=logging.getLogger("mrec_warp.test_passed"))
    with caplog.at_level(logging.INFO, logger="mrec_warp.test_passed"):
        report(progress, "rp3beta", [fixed, passed, early], fixed, fixed, 1.0)
        report(progress, "rp3beta", [fixed, early], fixed, fixed, 1.0)
    summaries = [r.getMessage() for r in caplog.records if "chose" in r.getMessage()]
    assert "chose beta=0.5 on the hold-out: P@10 0.1000 (beta=0.3 scored 0.1040, not clearly better than these " \
           "fixed values)" in summaries[0]
    assert "(the fixed values were best)" in summaries[1]


def test_the_noise_rule_notes_a_setting_passed_over_once():
    fixed = Candidate({"beta": 0.5}, 0.100, extra={"hits": np.array([1, 0, 1, 0])})
    top = Candidate({"beta": 0.3}, 0.110, extra={"hits": np.array([1, 1, 1, 0])})
    for _ in range(3):  # the kinds' walk and the final choice both apply the rule
        assert beyond_noise([fixed, top], fixed) is fixed
    assert top.note.count("within the hold-out's noise") == 1 and top.extra[PASSED_OVER]
