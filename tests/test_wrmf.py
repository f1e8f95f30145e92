"""WRMF (implicit ALS): the solves, the objective, fold-in, confidence, explanations, files, CLI."""
from __future__ import annotations

import io
import json
import os

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from click.testing import CliRunner

from mrec_warp.cli import main

from mrec_warp.errors import InputError
from mrec_warp.models import WRMF, Popularity, load
from mrec_warp.kernels import als as _als
from mrec_warp.models.early_stopping import precision_at_k
from mrec_warp.models.wrmf import LocalBlocks, TrainingData

from .conftest import planted_low_rank


def _problem(n_rows=40, n_cols=60, d=8, density=0.15, seed=0, index_dtype=np.int32):
    rng = np.random.default_rng(seed)
    Y = (rng.standard_normal((n_cols, d)) * 0.4).astype(np.float32)
    C = sp.random(n_rows, n_cols, density=density, random_state=seed, format="csr", dtype=np.float32)
    C.data = 1 + 9 * C.data  # confidences in (1, 10)
    C.sort_indices()
    G = (Y.T @ Y + 0.5 * np.eye(d)).astype(np.float32)
    return Y, C, G, C.indptr.astype(np.int64), C.indices.astype(index_dtype)


def _reference(Y, C, G):
    """Every row's exact solution in float64 with numpy."""
    out = []
    for u in range(C.shape[0]):
        lo, hi = C.indptr[u], C.indptr[u + 1]
        items, c = C.indices[lo:hi], C.data[lo:hi].astype(np.float64)
        A = G.astype(np.float64) + (Y[items].T * (c - 1)) @ Y[items]
        out.append(np.linalg.solve(A, Y[items].T @ c))
    return np.array(out)


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_cg_agrees_with_exact_cholesky(index_dtype):
    Y, C, G, indptr, indices = _problem(index_dtype=index_dtype)
    ref = _reference(Y, C, G)
    exact = np.zeros((C.shape[0], Y.shape[1]), np.float32)
    assert _als.solve_exact(exact, Y, G, indptr, indices, C.data, 0, C.shape[0]) == 0
    np.testing.assert_allclose(exact, ref, rtol=1e-5, atol=1e-5)
    # CG from zero reaches the exact solution in about d steps (here 2d for float32 slack)
    cg = np.zeros_like(exact)
    _als.solve_cg(cg, Y, G, indptr, indices, C.data, 0, C.shape[0], 2 * Y.shape[1])
    np.testing.assert_allclose(cg, ref, rtol=1e-3, atol=1e-4)
    # three warm-started steps move a solution by almost nothing, and an approximate one toward it
    again = exact.copy()
    _als.solve_cg(again, Y, G, indptr, indices, C.data, 0, C.shape[0], 3)
    np.testing.assert_allclose(again, ref, rtol=1e-4, atol=1e-4)
    rough = np.zeros_like(exact)
    _als.solve_cg(rough, Y, G, indptr, indices, C.data, 0, C.shape[0], 1)
    better = rough.copy()
    _als.solve_cg(better, Y, G, indptr, indices, C.data, 0, C.shape[0], 3)
    assert np.abs(better - ref).max() < 0.5 * np.abs(rough - ref).max()
    # only rows [start, stop) change
    part = np.zeros_like(exact)
    _als.solve_exact(part, Y, G, indptr, indices, C.data, 10, 20)
    assert not part[:10].any() and not part[20:].any()
    np.testing.assert_allclose(part[10:20], ref[10:20], rtol=1e-5, atol=1e-5)


def test_exact_solver_reports_singular_systems():
    Y, C, G, indptr, indices = _problem()
    X = np.zeros((C.shape[0], Y.shape[1]), np.float32)
    G0 = np.zeros_like(G)  # no regularisation and rows with < d items: not positive definite
    assert _als.solve_exact(X, Y, G0, indptr, indices, C.data, 0, C.shape[0]) > 0


def _values_matrix(planted, seed=0):
    train, _ = planted
    rng = np.random.default_rng(seed)
    m = train.copy()
    m.data = rng.integers(1, 20, m.nnz).astype(np.float32)
    return m


@pytest.mark.parametrize("solver", ["cg", "cholesky"])
def test_loss_decreases_every_half_iteration(planted, solver):
    m = _values_matrix(planted)
    model = WRMF(factors=8, alpha=0.5, regularization=5.0, solver=solver, epochs=1, random_state=0).fit(m)
    data = TrainingData(model._confidence_csr())
    model.init_state(*m.shape, np.random.default_rng(3))
    losses = [model.loss(data)]
    for _ in range(6):
        for side in ("users", "items"):
            model._half_iteration(LocalBlocks(data), side)
            losses.append(model.loss(data))
    steps = np.diff(losses)
    assert (steps < 0).all(), losses
    assert losses[-1] < 0.5 * losses[0]


def test_loss_matches_brute_force(planted):
    m = _values_matrix(planted)
    model = WRMF(factors=4, alpha=0.3, regularization=2.0, epochs=2, random_state=0).fit(m)
    S = model.user_factors_.astype(np.float64) @ model.item_factors_.T.astype(np.float64)
    P = (m.toarray() > 0).astype(float)
    C = 1 + 0.3 * m.toarray()
    brute = (C * (P - S) ** 2).sum() + 2.0 * ((model.user_factors_.astype(float) ** 2).sum()
                                              + (model.item_factors_.astype(float) ** 2).sum())
    assert model.loss() == pytest.approx(brute, rel=1e-5)


def test_fold_in_is_the_exact_solve(planted):
    m = _values_matrix(planted)
    model = WRMF(factors=8, alpha=0.5, regularization=5.0, epochs=4, random_state=0).fit(m)
    before = model.user_factors_.copy()
    history = pd.DataFrame({"user": ["new", "new", "new", "new", "0", "new"],
                            "item": ["3", "17", "42", "no-such", "5", "3"],
                            "value": [4.0, 1.0, 9.0, 2.0, 30.0, 2.0]})  # "new" played item 3 twice: 4 + 2
    model.fold_in(history)
    assert model.user_ids[-1] == "new" and model.n_users == m.shape[0] + 1
    assert model.fold_in_summary_["rows_with_unknown_items"] == 1
    Y = model.item_factors_.astype(np.float64)
    G = Y.T @ Y + 5.0 * np.eye(8)

    def exact(items, values):
        c = 1 + 0.5 * np.asarray(values, float)
        return np.linalg.solve(G + (Y[items].T * (c - 1)) @ Y[items], Y[items].T @ c)

    np.testing.assert_allclose(model.user_factors_[-1], exact([3, 17, 42], [6, 1, 9]), rtol=1e-4, atol=1e-5)
    # a known user is re-solved from training plus history; item 5 joins their training row
    lo, hi = m.indptr[0], m.indptr[1]
    items = np.concatenate([m.indices[lo:hi], [5]]) if 5 not in m.indices[lo:hi] else m.indices[lo:hi]
    values = dict(zip(m.indices[lo:hi].tolist(), m.data[lo:hi].tolist()))
    values[5] = max(values.get(5, 0), 30.0)
    items = np.array(sorted(values))
    np.testing.assert_allclose(model.user_factors_[0], exact(items, [values[i] for i in items]), rtol=1e-4, atol=1e-5)
    assert 5 in model.train_.indices[model.train_.indptr[0]:model.train_.indptr[1]]
    np.testing.assert_array_equal(model.user_factors_[1:m.shape[0]], before[1:])  # nobody else moved
    # bad values change nothing
    n_before = model.n_users
    with pytest.raises(InputError, match="cannot be a confidence"):
        model.fold_in(pd.DataFrame({"user": ["other"], "item": ["3"], "value": [-1.0]}))
    assert model.n_users == n_before
    # the folded user's explanation adds up to exactly the score it gets
    _, _, total = model.explain(model.n_users - 1, [0, 1, 2])
    np.testing.assert_allclose(total, model.score_users([model.n_users - 1])[0, :3], rtol=1e-4, atol=1e-5)


def test_confidence_moves_the_ranking_the_expected_way():
    """Twenty users hold items {1, 3}, twenty {2, 4}; a target user holds 1 and 2. With two
    factors the user sits between the two groups; whichever
    of 1 and 2 they used more must pull its companion (3 or 4) up."""
    def fitted(v1, v2, use_values=True):
        rows = [[1, 3]] * 20 + [[2, 4]] * 20 + [[1, 2]]
        r = np.repeat(np.arange(len(rows)), 2)
        c = np.array(rows).ravel()
        v = np.ones(len(c), np.float32)
        v[-2:] = [v1, v2]
        X = sp.csr_matrix((v, (r, c)), shape=(len(rows), 5))
        return WRMF(factors=2, alpha=2.0, regularization=0.1, solver="cholesky", epochs=10,
                    random_state=0).fit(X, use_values=use_values)

    def gap(model):  # score of item 3 minus item 4 for the target user
        s = model.score_users([40])[0]
        return s[3] - s[4]

    assert gap(fitted(10.0, 1.0)) > 0.1
    assert gap(fitted(1.0, 10.0)) < -0.1
    assert abs(gap(fitted(10.0, 1.0, use_values=False))) < 0.01  # without values: no preference


def test_confidence_formulas():
    v = np.array([0.0, 1.0, 9.0])
    np.testing.assert_allclose(WRMF(alpha=2.0).confidences(v), [1, 3, 19])
    np.testing.assert_allclose(WRMF(alpha=2.0, confidence="log", eps=0.5).confidences(v),
                               1 + 2 * np.log1p(v / 0.5), rtol=1e-6)
    np.testing.assert_allclose(WRMF(alpha=2.0, confidence="log").confidences(None, 2), [3, 3])
    np.testing.assert_allclose(WRMF(alpha=2.0, confidence="none").confidences(v), [3, 3, 3])
    X = sp.csr_matrix(np.array([[3.0, 0, 1.0], [0, 2.0, 5.0]]))
    model = WRMF(alpha=1.5, epochs=1).fit(X)
    np.testing.assert_allclose(model.confidence_, [5.5, 2.5, 4.0, 8.5])
    model = WRMF(alpha=1.5, epochs=1).fit(X, use_values=False)
    np.testing.assert_allclose(model.confidence_, [2.5] * 4)
    with pytest.raises(InputError, match="negative"):
        WRMF(epochs=1).fit(sp.csr_matrix(np.array([[1.0, -2.0]])))


def test_one_thread_with_a_seed_is_bit_reproducible(planted):
    m = _values_matrix(planted)
    fits = [WRMF(factors=16, epochs=4, random_state=7, n_jobs=n).fit(m) for n in (1, 1, 2)]
    for other in fits[1:]:
        assert np.array_equal(fits[0].user_factors_, other.user_factors_)
        assert np.array_equal(fits[0].item_factors_, other.item_factors_)
    different = WRMF(factors=16, epochs=4, random_state=8).fit(m)
    assert not np.array_equal(fits[0].item_factors_, different.item_factors_)


def test_planted_clusters_beat_popularity(planted):
    train, test = planted
    model = WRMF(random_state=0).fit(train)
    pop = Popularity().fit(train)
    p_model = precision_at_k(model.score_users, model.n_items, train, test, 10)
    p_pop = precision_at_k(pop.score_users, pop.n_items, train, test, 10)
    assert p_model > 3 * p_pop and p_model > 0.08, (p_model, p_pop)  # WARP: 0.10, popularity: 0.024
    assert 1 <= model.best_epoch_ <= model.max_epochs
    assert any("val_precision@10" in h for h in model.history_)
    assert model.history_[-1]["phase"] == "refit"


def test_save_load_round_trip_and_validation(planted, tmp_path):
    m = _values_matrix(planted)
    model = WRMF(factors=8, epochs=3, random_state=0).fit(m)
    path = tmp_path / "wrmf.npz"
    model.save(path)
    back = load(path)
    assert isinstance(back, WRMF) and back.get_params() == model.get_params()
    np.testing.assert_array_equal(back.score_users([0, 1]), model.score_users([0, 1]))
    np.testing.assert_array_equal(back.confidence_, model.confidence_)
    np.testing.assert_array_equal(back.explain(0, [1, 2])[1], model.explain(0, [1, 2])[1])
    np.testing.assert_array_equal(back.similar_items([0], k=3)[0], model.similar_items([0], k=3)[0])

    def tampered(**changes):
        with np.load(path, allow_pickle=False) as z:
            files = {k: z[k] for k in z.files}
        files.update(changes)
        buf = io.BytesIO()
        np.savez(buf, **files)
        buf.seek(0)
        return buf

    bad_uf = model.user_factors_.copy()
    bad_uf[3, 2] = np.nan
    for changes, what in (({"arr_user_factors": bad_uf}, "NaN"), ({"arr_item_factors": model.item_factors_[:-1]}, "item_factors"),
                          ({"arr_confidence": model.confidence_[:-1]}, "confidences"),
                          ({"arr_confidence": np.zeros_like(model.confidence_)}, "below 1")):
        with pytest.raises(InputError, match=what) as err:
            load(tampered(**changes))
        assert "re-create it" in str(err.value)


def test_explain_contributions_add_up_to_the_exact_score(planted):
    m = _values_matrix(planted)
    model = WRMF(factors=8, alpha=0.5, regularization=5.0, epochs=3, random_state=0).fit(m)
    u = 4
    lo, hi = m.indptr[u], m.indptr[u + 1]
    hist, contrib, total = model.explain(u, [0, 7], k=hi - lo)
    assert sorted(hist[0].tolist()) == sorted(m.indices[lo:hi].tolist())
    assert (np.diff(contrib, axis=1) <= 0).all()  # largest first
    Y = model.item_factors_.astype(np.float64)
    c = 1 + 0.5 * m.data[lo:hi]
    items = m.indices[lo:hi]
    x = np.linalg.solve(Y.T @ Y + 5 * np.eye(8) + (Y[items].T * (c - 1)) @ Y[items], Y[items].T @ c)
    np.testing.assert_allclose(total, Y[[0, 7]] @ x, rtol=1e-6)
    np.testing.assert_allclose(contrib.sum(axis=1), total, rtol=1e-4, atol=1e-5)
    short, _, _ = model.explain(u, [0], k=hi - lo + 3)
    assert (short[0, hi - lo:] == -1).all()
    with pytest.raises(InputError):
        model.explain(m.shape[0], [0])


# -- command line -----------------------------------------------------------------------------
class _Result:
    def __init__(self, res):
        self.returncode, self.stdout, self.stderr = res.exit_code, res.stdout, res.stderr


def _run(*args, cwd):
    """The CLI in-process (click's runner) from folder ``cwd``."""
    old = os.getcwd()
    os.chdir(cwd)
    try:
        return _Result(CliRunner().invoke(main, [str(a) for a in args]))
    finally:
        os.chdir(old)


@pytest.fixture(scope="module")
def cli_files(tmp_path_factory):
    """A play-count file with ids that are not positions, and a model trained on it."""
    tmp = tmp_path_factory.mktemp("wrmf")
    m = _values_matrix(planted_low_rank(n_users=120, n_items=60, per_user=12))
    coo = m.tocoo()
    pd.DataFrame({"u": [f"user {r}" for r in coo.row], "i": [f"it-{c}" for c in coo.col],
                  "v": coo.data.astype(int)}).to_csv(tmp / "plays.tsv", sep="\t", header=False, index=False)
    res = _run("train", "plays.tsv", "-o", "w.npz", "--model", "wrmf", "--epochs", "3", "--alpha", "0.5",
               "--confidence", "log", "--regularization", "2", cwd=tmp)
    assert res.returncode == 0, res.stderr
    return tmp


def test_cli_train_recommend_similar_explain(cli_files):
    tmp = cli_files
    model = load(tmp / "w.npz")
    assert isinstance(model, WRMF) and model.confidence == "log" and model.alpha == 0.5
    assert model.confidence_.min() > 1 and len(np.unique(model.confidence_)) > 5  # the counts were used
    assert _run("recommend", "w.npz", "-o", "recs.tsv", "-k", "5", cwd=tmp).returncode == 0
    recs = pd.read_csv(tmp / "recs.tsv", sep="\t", header=None, dtype=str)
    assert recs[0].str.startswith("user ").all() and len(recs) == 5 * model.n_users
    res = _run("similar", "w.npz", "--items", "it-3", "-k", "4", cwd=tmp)
    assert res.returncode == 0 and len(res.stdout.splitlines()) == 4
    res = _run("explain", "w.npz", "--user", "user 7", "--top", "3", "-k", "2", "-o", "why.tsv", cwd=tmp)
    assert res.returncode == 0, res.stderr
    why = pd.read_csv(tmp / "why.tsv", sep="\t", header=None, dtype={0: str, 1: str, 3: str})
    assert len(why) == 6 and (why[0] == "user 7").all() and why[5].tolist() == [1, 2] * 3
    top3 = recs[recs[0] == "user 7"][1].tolist()[:3]
    assert why[1].drop_duplicates().tolist() == top3
    seen = set(pd.read_csv(tmp / "plays.tsv", sep="\t", header=None, dtype=str).pipe(lambda t: t[t[0] == 'user 7'])[1])
    assert set(why[3]) <= seen


def test_cli_history_fold_in(cli_files):
    tmp = cli_files
    (tmp / "hist.tsv").write_text("newbie\tit-1\t3\nnewbie\tit-2\t1\nnewbie\tnope\t2\n")
    res = _run("recommend", "w.npz", "-o", "new.tsv", "-k", "3", "--history", "hist.tsv", cwd=tmp)
    assert res.returncode == 0, res.stderr
    rows = pd.read_csv(tmp / "new.tsv", sep="\t", header=None, dtype=str)
    assert rows[0].tolist() == ["newbie"] * 3 and not {"it-1", "it-2"} & set(rows[1])


def test_cli_errors_are_one_line(cli_files, tmp_path):
    tmp = cli_files
    (tmp_path / "neg.tsv").write_text("a\tx\t1\na\ty\t-3\nb\tx\t2\n")
    res = _run("train", "neg.tsv", "-o", "n.npz", "--model", "wrmf", "--epochs", "1", cwd=tmp_path)
    # a negative value is refused by the row rules before any model sees it, naming the line and the choices
    assert res.returncode == 2 and "neg.tsv:2: 1 negative value (" in res.stderr and "--negatives drop" in res.stderr
    assert "Traceback" not in res.stderr
    assert not (tmp_path / "n.npz").exists()
    res = _run("train", str(tmp / "plays.tsv"), "-o", "x.npz", "--model", "wrmf", "--user-reg", "1", cwd=tmp_path)
    assert res.returncode == 2 and "--user-reg does not apply to --model wrmf" in res.stderr
    res = _run("train", str(tmp / "plays.tsv"), "-o", "x.npz", "--model", "warp", "--regularization", "1",
               cwd=tmp_path)
    assert res.returncode == 2 and "regularization" in res.stderr
    assert _run("train", str(tmp / "plays.tsv"), "-o", "pop.npz", "--model", "popularity", cwd=tmp_path).returncode == 0
    res = _run("explain", "pop.npz", "--user", "user 1", cwd=tmp_path)
    assert res.returncode == 2 and "cannot explain" in res.stderr and len(res.stderr.strip().splitlines()) == 1
    res = _run("explain", str(tmp / "w.npz"), "--user", "nobody", cwd=tmp_path)
    assert res.returncode == 2 and "nobody" in res.stderr and "Traceback" not in res.stderr
    res = _run("explain", str(tmp / "w.npz"), "--user", "user 1", "--items", "it-1,zzz", cwd=tmp_path)
    assert res.returncode == 2 and "zzz" in res.stderr


def test_cli_file_without_values_weighs_every_pair_alike(tmp_path):
    (tmp_path / "pairs.tsv").write_text("".join(f"u{u}\ti{(u * 7 + j) % 13}\n" for u in range(30) for j in range(4)))
    res = _run("train", "pairs.tsv", "-o", "m.npz", "--model", "wrmf", "--epochs", "2", "--alpha", "3", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    np.testing.assert_array_equal(load(tmp_path / "m.npz").confidence_, 4.0)


def test_tune_wrmf_keeps_values_and_checks_names(tmp_path):
    from mrec_warp.stages.candidates import grid_points
    from mrec_warp.stages.tune import tune

    m = _values_matrix(planted_low_rank(n_users=150, n_items=80, per_user=12))
    base = {"max_epochs": 4, "patience": 2}
    # the fixed factors and regularization: each trial fits one setting (no choice on its hold-out)
    points = [{**p, "model": "wrmf"} for p in grid_points({"alpha": [0.1, 3.0], "confidence": ["linear", "log"],
                                                           "factors": [64], "regularization": [40.0]})]
    result = tune(m, points, base=base, use_values=True, with_defaults=False)
    assert len(result.table) == 4 and result.table["precision@10"].notna().all()
    assert set(result.best_params) == {"alpha", "confidence", "factors", "regularization", "epochs"}
    # the values reach the trials: with them, linear and log confidence fit different models
    scores = result.table.set_index(["alpha", "confidence"])["precision@10"]
    binary = tune(m, points, base=base, use_values=False, with_defaults=False).table.set_index(["alpha", "confidence"])
    assert scores[(3.0, "linear")] != scores[(3.0, "log")]
    assert binary["precision@10"][(3.0, "linear")] == binary["precision@10"][(3.0, "log")]
    with pytest.raises(InputError, match="'regularization' is not a parameter of the warp model"):
        tune(m, grid_points({"regularization": [1.0, 10.0]}), base=base)
    res = _run("tune", "plays.tsv", "--models", "warp", "--grid", "g.json", cwd=_write_grid(tmp_path))
    assert res.returncode == 2 and "regularization" in res.stderr
    res = _run("tune", "plays.tsv", "--models", "wrmf", "--random", "2", "--max-epochs", "3", "-o", "best.json",
               cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert _run("train", "plays.tsv", "--params", "best.json", "-o", "m.npz",  # best.json names the model
                cwd=tmp_path).returncode == 0
    best = json.loads((tmp_path / "best.json").read_text())["params"]
    assert load(tmp_path / "m.npz").get_params()["alpha"] == best["alpha"]


def _write_grid(folder):
    (folder / "g.json").write_text('{"regularization": [1, 2]}')
    (folder / "plays.tsv").write_text("".join(f"u{u}\ti{(u * 7 + j) % 13}\t{j + 1}\n" for u in range(30) for j in range(4)))
    return folder


def test_fit_with_ids_keeps_them():
    X = sp.csr_matrix(np.array([[3.0, 0, 1.0], [0, 2.0, 5.0]]))
    model = WRMF(factors=2, epochs=1, alpha=1.0).fit(X, user_ids=["a", "b"], item_ids=["x", "y", "z"])
    assert model.user_ids.tolist() == ["a", "b"] and model.item_indices(["z"]).tolist() == [2]
    np.testing.assert_allclose(model.confidence_, [4.0, 2.0, 3.0, 6.0])


def test_cli_confidence_none_ignores_the_values(cli_files, tmp_path):
    res = _run("train", str(cli_files / "plays.tsv"), "-o", "n.npz", "--model", "wrmf", "--epochs", "1",
               "--confidence", "none", "--alpha", "2", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    np.testing.assert_array_equal(load(tmp_path / "n.npz").confidence_, 3.0)


def test_zero_iterations_are_refused_as_for_warp():
    with pytest.raises(InputError, match="epochs must be >= 1"):
        WRMF(epochs=0).fit(sp.csr_matrix(np.eye(3, dtype=np.float32)))



def test_explain_writes_csv_for_a_csv_name(tmp_path):
    import csv

    folder = _write_grid(tmp_path)  # writes plays.tsv
    assert _run("train", "plays.tsv", "--model", "wrmf", "--epochs", "2", "-o", "m.npz", cwd=folder).returncode == 0
    res = _run("explain", "m.npz", "--user", "u3", "-o", "why.csv", cwd=folder)
    assert res.returncode == 0, res.stderr
    rows = list(csv.reader((folder / "why.csv").open(newline="")))
    assert rows[0] == ["user", "item", "score", "history_item", "contribution", "rank"] and len(rows) > 1
    assert {r[0] for r in rows[1:]} == {"u3"}


def _pair_arrays(model, nnz):
    """Distinct arrays of one entry per training pair that the model holds."""
    found = {}

    def visit(value):
        if sp.issparse(value):
            visit(value.data), visit(value.indices)
        elif isinstance(value, tuple):
            for v in value:
                visit(v)
        elif isinstance(value, np.ndarray) and value.shape == (nnz,):
            found[value.__array_interface__["data"][0]] = value

    for value in vars(model).values():
        visit(value)
    return found


def test_a_fitted_model_holds_the_pairs_once_and_builds_its_ones_on_demand(planted):
    m = _values_matrix(planted)
    model = WRMF(factors=4, epochs=1, random_state=0).fit(m)
    assert len(_pair_arrays(model, m.nnz)) == 2  # the pairs' items and their confidences, no ones
    assert np.shares_memory(model.train_.indices, model._confidence_csr().indices)
    assert (model.train_ != (m > 0)).nnz == 0 and set(model.train_.data) == {1.0}
    assert len(_pair_arrays(model, m.nnz)) == 3  # recommend's exclusion (train_) built them, once
    assert model.train_ is model.train_
