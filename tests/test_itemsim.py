"""Item-kNN, SLIM and EASE against references written straight from their definitions."""
from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from click.testing import CliRunner

from mrec_warp.cli import main
from mrec_warp.context import ExecutionContext
from mrec_warp.errors import InputError
from mrec_warp.models import EASE, SLIM, ItemKNN, Popularity, load
from mrec_warp.models.early_stopping import precision_at_k

from .conftest import error_line
from .conftest import planted_low_rank


def small_matrix(seed=0, n_users=30, n_items=12, density=0.3):
    rng = np.random.default_rng(seed)
    dense = (rng.random((n_users, n_items)) < density).astype(np.float32)
    dense[0, :] = 0  # a user with no items: the popularity fallback
    return sp.csr_matrix(dense), dense


def keep_top(sim, k):
    """Each row's k largest positive entries (ties at the k-th value broken by index)."""
    out = np.zeros_like(sim)
    for i, row in enumerate(sim):
        best = np.argsort(-row, kind="stable")[:k]
        best = best[row[best] > 0]
        out[i, best] = row[best]
    return out


# -- item-kNN ------------------------------------------------------------------------------------
@pytest.mark.parametrize("shrink", [0.0, 3.0])
def test_cosine_matches_a_dense_computation(shrink):
    csr, X = small_matrix()
    norms = np.linalg.norm(X, axis=0)
    sim = (X.T @ X) / (np.outer(norms, norms) + shrink + (shrink == 0) * 1e-30)
    np.fill_diagonal(sim, 0)
    model = ItemKNN(neighbours=4, similarity="cosine", shrink=shrink, memory_mb=0.001).fit(csr)  # tiny budget: many blocks
    got = model.weights_.toarray()
    # cosines of 0/1 columns can tie at the 4th place, where either neighbour is right: each
    # row keeps the 4 largest values, and every kept weight is that pair's similarity
    np.testing.assert_allclose(np.sort(got, axis=1), np.sort(keep_top(sim, 4), axis=1), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(got[got != 0], sim[got != 0], rtol=1e-5)


def test_bm25_and_tfidf_match_dense_computations():
    csr, X = small_matrix(seed=1)
    n_users, n_items = X.shape
    n_u, n_i = X.sum(axis=1), X.sum(axis=0)
    idf = np.log(n_items) - np.log1p(n_u)
    k1, b = 1.2, 0.75
    length = (1 - b) + b * n_i / n_i.mean()
    V = X * (k1 + 1) / (k1 * length[None, :] + X) * idf[:, None]
    sim = V.T @ V
    np.fill_diagonal(sim, 0)
    model = ItemKNN(neighbours=5, similarity="bm25").fit(csr)
    np.testing.assert_allclose(model.weights_.toarray(), keep_top(sim, 5), rtol=1e-5, atol=1e-6)

    T = np.sqrt(X) * idf[:, None]
    T = T / np.linalg.norm(T, axis=0)
    sim = T.T @ T
    np.fill_diagonal(sim, 0)
    model = ItemKNN(neighbours=5, similarity="tfidf").fit(csr)
    np.testing.assert_allclose(model.weights_.toarray(), keep_top(sim, 5), rtol=1e-5, atol=1e-6)


def test_scores_are_history_times_weights_and_cold_users_get_popularity():
    csr, X = small_matrix(seed=2)
    model = ItemKNN(neighbours=3).fit(csr)
    scores = model.score_users(np.arange(X.shape[0]))
    expected = X @ model.weights_.toarray()
    cold = X.sum(axis=1) == 0
    assert cold[0] and not cold.all()
    expected[cold] = X.sum(axis=0)  # users without items get the item counts
    np.testing.assert_allclose(scores, expected, rtol=1e-6)
    pop = Popularity().fit(csr)
    np.testing.assert_array_equal(model.recommend(users=[0], k=5)[0], pop.recommend(users=[0], k=5)[0])


def test_blocks_on_threads_give_the_same_neighbours():
    csr, _ = small_matrix(seed=3, n_items=40)
    one = ItemKNN(neighbours=6).fit(csr).weights_
    many = ItemKNN(neighbours=6, memory_mb=0.002, n_jobs=2).fit(csr).weights_
    assert (one != many).nnz == 0


# -- SLIM ----------------------------------------------------------------------------------------
def projected_gradient(X, l1, l2, iters=20000):
    """Every column j of argmin 1/2||x_j - X w||^2 + l2/2||w||^2 + l1 sum(w), w >= 0, w_j = 0,
    by projected gradient descent with step 1/L (smooth on w >= 0, where |w| = w); all
    columns at once since they are independent problems."""
    G = X.T @ X
    L = np.linalg.eigvalsh(G).max() + l2
    W = np.zeros_like(G)
    for _ in range(iters):
        W = np.maximum(W - (G @ W - G + l2 * W + l1) / L, 0)
        np.fill_diagonal(W, 0)
    return W


@pytest.mark.parametrize("l1,l2", [(0.5, 1.0), (2.0, 0.5), (0.0, 3.0)])
def test_slim_coordinate_descent_matches_a_brute_force_solve(l1, l2):
    csr, X = small_matrix(seed=4, n_users=40, n_items=10, density=0.4)
    model = SLIM(l1=l1, l2=l2, tol=1e-10, max_iter=5000, topk=10).fit(csr)
    W = model.weights_.toarray()
    assert np.all(W >= 0) and np.all(np.diag(W) == 0)
    np.testing.assert_allclose(W, projected_gradient(X.astype(np.float64), l1, l2), atol=2e-5)


def test_slim_keeps_the_topk_largest_weights_and_backends_agree():
    csr, _ = small_matrix(seed=5, n_users=60, n_items=30, density=0.3)
    full = SLIM(l1=0.1, l2=1.0, topk=29).fit(csr).weights_.toarray()
    top = SLIM(l1=0.1, l2=1.0, topk=3).fit(csr).weights_.toarray()
    for j in range(full.shape[1]):
        np.testing.assert_array_equal(top[:, j], keep_top(full[:, j][None, :], 3)[0])
    threads = SLIM(l1=0.1, l2=1.0, n_jobs=2).fit(csr).weights_
    processes = SLIM(l1=0.1, l2=1.0, n_jobs=2, backend="processes").fit(csr).weights_
    assert (threads != processes).nnz == 0
    assert (threads != sp.csr_matrix(full)).nnz == 0


# -- EASE ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_ease_matches_numpy_inverse(dtype):
    csr, X = small_matrix(seed=6)
    lam = 5.0
    P = np.linalg.inv(X.T.astype(np.float64) @ X + lam * np.eye(X.shape[1]))
    B = np.eye(X.shape[1]) - P / np.diag(P)[None, :]
    np.fill_diagonal(B, 0)
    W = EASE(l2=lam, dtype=dtype).fit(csr).weights_
    np.testing.assert_allclose(W, B, atol=1e-6 if dtype == "float64" else 1e-4)


def test_ease_refuses_before_allocating_when_it_would_not_fit():
    csr, _ = small_matrix(seed=7, n_items=12)
    need = EASE.memory_needed(12, EASE().dtype, csr.nnz)
    with pytest.raises(InputError, match=r"EASE on 12 items needs .* GiB .*`max_items`") as info:
        EASE(memory_limit_mb=need / 2**20 / 2).fit(csr)
    assert re.search(r"EASE on 12 items needs .* GiB .*--max-items", error_line(info.value))
    EASE(memory_limit_mb=need / 2**20 * 1.01).fit(csr)  # just enough


def test_ease_on_the_most_popular_items_never_recommends_the_others():
    csr, X = small_matrix(seed=8, n_users=60, n_items=20)
    model = EASE(l2=5.0, max_items=8).fit(csr)
    counts = X.sum(axis=0)
    kept = set(np.lexsort((np.arange(20), -counts))[:8].tolist())
    assert set(model.kept_items_.tolist()) == kept
    items, _ = model.recommend(users=np.arange(1, 60), k=5)
    assert set(items[items >= 0].tolist()) <= kept
    sub = X[:, sorted(kept)]
    ref = EASE(l2=5.0).fit(sp.csr_matrix(sub)).weights_
    np.testing.assert_allclose(model.weights_, ref, rtol=1e-6)


# -- shared behaviour ------------------------------------------------------------------------------
MODELS = [lambda: ItemKNN(neighbours=20), lambda: SLIM(l1=0.5, l2=10.0), lambda: EASE(l2=50.0)]


@pytest.mark.parametrize("make", MODELS, ids=["itemknn", "slim", "ease"])
def test_fold_in_equals_refit(make):
    """A folded-in user is scored exactly as if they had been in the training data."""
    train, _ = planted_low_rank(n_users=150, n_items=60, per_user=12, seed=1)
    model = make().fit(train)
    coo = train[7].tocoo()
    history = pd.DataFrame({"user": "newcomer", "item": model.item_ids[coo.col]})
    before = model.score_users(np.arange(model.n_users))
    model.fold_in(history)
    new = model.user_indices(["newcomer"])[0]
    assert new == model.n_users - 1
    np.testing.assert_array_equal(model.score_users([new])[0], model.score_users([7])[0])
    np.testing.assert_array_equal(model.score_users(np.arange(len(before))), before)  # nobody else moves
    assert set(model.recommend(users=[new], k=10)[0][0].tolist()).isdisjoint(coo.col.tolist())


@pytest.mark.parametrize("make", MODELS, ids=["itemknn", "slim", "ease"])
def test_each_model_beats_popularity_on_planted_clusters(make, planted):
    train, test = planted
    pop = Popularity().fit(train)
    model = make().fit(train)
    p_pop = precision_at_k(pop.score_users, pop.n_items, train, test, 10)
    p_model = precision_at_k(model.score_users, model.n_items, train, test, 10)
    assert p_model > 3 * p_pop, (p_model, p_pop)


@pytest.mark.parametrize("make", MODELS, ids=["itemknn", "slim", "ease"])
def test_similar_items_are_the_largest_weights(make):
    train, _ = planted_low_rank(n_users=150, n_items=60, per_user=12, seed=2)
    model = make().fit(train)
    items, weights = model.similar_items([3, 10], k=4)
    dense = model.weights_.toarray() if sp.issparse(model.weights_) else model.weights_
    for row, i in enumerate([3, 10]):
        expected = keep_top(dense[i][None, :], 4)[0]
        got = np.zeros_like(expected)
        ok = items[row] >= 0
        got[items[row][ok]] = weights[row][ok]
        np.testing.assert_allclose(got, expected, rtol=1e-6)
        assert i not in items[row]


# -- the CLI ---------------------------------------------------------------------------------------
def test_cli_trains_recommends_folds_in_and_lists_similar(tmp_path):
    train, _ = planted_low_rank(n_users=80, n_items=60, per_user=10, seed=3)
    coo = train.tocoo()
    tsv = tmp_path / "train.tsv"
    tsv.write_text("".join(f"u {u}\tit-{i}\n" for u, i in zip(coo.row, coo.col)))
    (tmp_path / "hist.tsv").write_text("new user\tit-1\nnew user\tit-2\n")
    runner = CliRunner()
    for name, extra in (("itemknn", ["--neighbours", "15", "--similarity", "bm25"]),
                        ("slim", ["--l1", "0.5", "--l2", "10", "--n-jobs", "2"]),
                        ("ease", ["--l2", "50"])):
        model_file = tmp_path / f"{name}.npz"
        res = runner.invoke(main, ["train", str(tsv), "-o", str(model_file), "--model", name, *extra])
        assert res.exit_code == 0, res.output
        model = load(model_file)
        assert type(model).__name__.lower() == name
        res = runner.invoke(main, ["recommend", str(model_file), "-o", str(tmp_path / "r.tsv"), "-k", "3",
                                   "--history", str(tmp_path / "hist.tsv")])
        assert res.exit_code == 0, res.output
        rows = (tmp_path / "r.tsv").read_text().splitlines()
        assert len(rows) == 3 and all(r.startswith("new user\tit-") for r in rows)
        assert not {r.split("\t")[1] for r in rows} & {"it-1", "it-2"}
        res = runner.invoke(main, ["similar", str(model_file), "--items", "it-1", "-k", "2"])
        assert res.exit_code == 0, res.output
        assert res.stdout.startswith("it-1\tit-")
    res = runner.invoke(main, ["train", str(tsv), "-o", str(tmp_path / "y.npz"), "--model", "ease", "--neighbours", "3"])
    assert res.exit_code != 0 and "does not apply to --model ease" in res.output


def test_recommend_on_processes_writes_the_same_file_as_on_threads(tmp_path):
    from mrec_warp.data.interactions import Interactions
    from mrec_warp.stages.recommend import write_recommendations

    train, _ = planted_low_rank(n_users=120, n_items=60, per_user=12, seed=4)
    data = Interactions(train, [f"u{i}" for i in range(120)], [f"i{j}" for j in range(60)])
    for model in (SLIM(l1=0.5, l2=10.0).fit(data), EASE(l2=20.0, max_items=50).fit(data)):
        path = tmp_path / "model.npz"
        model.save(path)
        write_recommendations(model, tmp_path / "threads.tsv", k=5)
        write_recommendations(model, tmp_path / "procs.tsv", k=5, part_size=50, model_file=path,
                              context=ExecutionContext("processes", n_jobs=2, workdir=tmp_path / "parts"))
        assert (tmp_path / "procs.tsv").read_bytes() == (tmp_path / "threads.tsv").read_bytes()


@pytest.mark.parametrize("make", [lambda: ItemKNN(neighbours=20), lambda: SLIM(l1=0.5, l2=10.0),
                                  lambda: EASE(l2=50.0, max_items=40)], ids=["itemknn", "slim", "ease"])
def test_users_whose_history_has_no_weights_get_popularity(make):
    """A history made only of items with no learned weights scores all zero; such a user is
    ranked by popularity (like a user with no history), not by file order."""
    train, _ = planted_low_rank(n_users=150, n_items=60, per_user=12, seed=5)
    dense = train.toarray()
    dense[:, 58:] = 0
    dense[148:, :] = 0
    dense[148, 58] = dense[149, 59] = 1  # items 58 and 59: each alone in one user's history
    model = make().fit(sp.csr_matrix(dense))
    model.fold_in(pd.DataFrame({"user": "nouveau", "item": model.item_ids[[58, 59]]}))
    new = model.user_indices(["nouveau"])[0]
    counts = model.item_counts_
    for user in (new, 148):
        np.testing.assert_array_equal(model.score_users([user])[0], counts)
        out = np.full((2, model.n_items), -7.0, dtype=np.float32)  # the grid_scores path writes in place
        assert model.score_users([user, 0], out=out) is out
        np.testing.assert_array_equal(out[0], counts)
        np.testing.assert_array_equal(out[1], model.score_users([0])[0])
    items = model.recommend(users=[new], k=5)[0][0]
    pop = np.lexsort((np.arange(model.n_items), -counts))
    assert items.tolist() == [i for i in pop if i not in (58, 59)][:5]


def test_similar_notes_items_without_neighbours(tmp_path):
    """Items SLIM learned no weights for, or outside EASE's --max-items, are named in a note
    on stderr (not silently dropped); --quiet silences it."""
    train, _ = planted_low_rank(n_users=80, n_items=60, per_user=10, seed=6)
    dense = train.toarray()
    dense[:, 58:] = 0
    dense[78, :] = dense[79, :] = 0
    dense[78, 58] = dense[79, 59] = 1  # items 58 and 59 share no user with any other item
    coo = sp.coo_matrix(dense)
    tsv = tmp_path / "train.tsv"
    tsv.write_text("".join(f"u{u}\tit-{i}\n" for u, i in zip(coo.row, coo.col)))
    top = f"it-{int(dense.sum(axis=0).argmax())}"  # inside EASE's --max-items
    runner = CliRunner()
    for name, extra, why in (("slim", ["--l1", "0.5", "--l2", "10"], "no positive learned weights"),
                             ("ease", ["--l2", "50", "--max-items", "30"], "outside the 30 most popular")):
        model_file = tmp_path / f"{name}.npz"
        assert runner.invoke(main, ["train", str(tsv), "-o", str(model_file), "--model", name, *extra]).exit_code == 0
        res = runner.invoke(main, ["similar", str(model_file), "--items", f"it-58,{top},it-59", "-k", "2"])
        assert res.exit_code == 0, res.output
        assert res.stdout.startswith(f"{top}\tit-") and "it-58\t" not in res.stdout, res.stderr
        assert "2 of the 3 item(s) asked have no neighbours" in res.stderr and why in res.stderr
        assert "'it-58'" in res.stderr
        res = runner.invoke(main, ["similar", str(model_file), "--items", "it-58", "--quiet"])
        assert res.exit_code == 0 and res.stderr == "" and res.stdout == ""


@pytest.mark.parametrize("name,bad,needle", [("itemknn", -5.0, "negative"), ("ease", -5.0, "negative"),
                                             ("slim", np.inf, "infinite"), ("popularity", -5.0, "negative")])
def test_recommend_refuses_damaged_item_counts(tmp_path, name, bad, needle):
    """A model file is untrusted input: a negative (or infinite) item count would silently
    rank its item last for users without history, so loading refuses it in one line."""
    tsv = tmp_path / "train.tsv"
    tsv.write_text("u1\ta\nu1\tb\nu2\tb\nu2\tc\nu3\ta\nu3\tc\nu4\tb\n")
    model_file = tmp_path / "m.npz"
    res = CliRunner().invoke(main, ["train", str(tsv), "-o", str(model_file), "--model", name, "--quiet"])
    assert res.exit_code == 0, res.output
    with np.load(model_file, allow_pickle=False) as z:
        members = {k: z[k] for k in z.files}
    counts = members["arr_item_counts"].astype(np.float32)
    counts[1] = bad
    members["arr_item_counts"] = counts
    damaged = tmp_path / "damaged.npz"
    np.savez(damaged, **members)
    out = tmp_path / "recs.tsv"
    res = CliRunner().invoke(main, ["recommend", str(damaged), "-o", str(out)])
    assert res.exit_code == 2, (res.output, res.exception)
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"Error: {damaged}"), res.output
    assert "item counts" in lines[0] and needle in lines[0] and "Traceback" not in res.output, lines[0]
    assert not out.exists()
