"""RP3beta: a hand-computed example, a dense reference, the shared contract, CLI and tune."""
from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.sparse as sp
from click.testing import CliRunner

from mrec_warp.cli import main
from mrec_warp.errors import InputError
from mrec_warp.models import load
from mrec_warp.models.rp3beta import RP3beta

from .model_contract import ModelContract

# 3 users x 4 items: u0 has i0, i1; u1 has i1, i2, i3; u2 has i0, i3
X = sp.csr_matrix(np.array([[1, 1, 0, 0], [0, 1, 1, 1], [1, 0, 0, 1]], dtype=np.float32))

# By hand: P_ui rows 1/2, 1/3, 1/2; P_iu rows 1/2 (i0, i1, i3) and 1 (i2). The walk
# W = P_iu P_ui, diagonal zeroed, is
#   i0: [0, 1/4, 0, 1/4]   i1: [1/4, 0, 1/6, 1/6]   i2: [0, 1/3, 0, 1/3]   i3: [1/4, 1/6, 1/6, 0]
WALK = np.array([[0, 1 / 4, 0, 1 / 4], [1 / 4, 0, 1 / 6, 1 / 6], [0, 1 / 3, 0, 1 / 3], [1 / 4, 1 / 6, 1 / 6, 0]])
POPULARITY = np.array([2.0, 2.0, 1.0, 2.0])  # users per item


def test_hand_computed_weights_without_and_with_the_popularity_penalty():
    np.testing.assert_allclose(RP3beta(alpha=1.0, beta=0.0).fit(X).weights_.toarray(), WALK, rtol=1e-6)
    # beta = 1: each column divided by its item's user count
    want = np.array([[0, 1 / 8, 0, 1 / 8], [1 / 8, 0, 1 / 6, 1 / 12], [0, 1 / 6, 0, 1 / 6], [1 / 8, 1 / 12, 1 / 6, 0]])
    model = RP3beta(alpha=1.0, beta=1.0).fit(X)
    np.testing.assert_allclose(model.weights_.toarray(), want, rtol=1e-6)
    # u0 (i0, i1) scores rows i0 + i1 = [1/8, 1/8, 1/6, 5/24]: i3 then i2, its own items excluded
    np.testing.assert_allclose(model.score_users(np.array([0]))[0], [1 / 8, 1 / 8, 1 / 6, 5 / 24], rtol=1e-6)
    items, scores = model.recommend(np.array([0]), k=2)
    assert items[0].tolist() == [3, 2]
    np.testing.assert_allclose(scores[0], [5 / 24, 1 / 6], rtol=1e-6)


def test_neighbours_keep_each_items_largest_weights_and_normalize_makes_rows_sum_one():
    # beta = 1, two neighbours: i1 and i3 drop their 1/12
    got = RP3beta(alpha=1.0, beta=1.0, neighbours=2).fit(X).weights_.toarray()
    assert got[1].tolist() == pytest.approx([1 / 8, 0, 1 / 6, 0]) and got[3].tolist() == pytest.approx([1 / 8, 0, 1 / 6, 0])
    normal = RP3beta(alpha=1.0, beta=0.0, normalize=True).fit(X).weights_.toarray()
    np.testing.assert_allclose(normal.sum(axis=1), 1.0, rtol=1e-6)
    np.testing.assert_allclose(normal, WALK / WALK.sum(axis=1, keepdims=True), rtol=1e-6)


def dense_reference(dense: np.ndarray, alpha: float, beta: float) -> np.ndarray:
    """RP3beta from its definition: every transition probability to the power alpha."""
    n_u, n_i = dense.sum(axis=1), dense.sum(axis=0)
    P_ui = np.where(dense > 0, 1.0 / np.maximum(n_u, 1)[:, None], 0.0) ** alpha * (dense > 0)
    P_iu = (np.where(dense > 0, 1.0 / np.maximum(n_i, 1)[None, :], 0.0) ** alpha * (dense > 0)).T
    W = (P_iu @ P_ui) / np.where(n_i > 0, n_i, 1.0)[None, :] ** beta * (n_i > 0)[None, :]
    np.fill_diagonal(W, 0.0)
    return W


@pytest.mark.parametrize("alpha, beta", [(1.0, 0.5), (0.6, 0.3), (2.0, 0.0)])
def test_matches_a_dense_reference_on_random_data_in_many_blocks(alpha, beta):
    rng = np.random.default_rng(3)
    dense = (rng.random((40, 25)) < 0.25).astype(np.float64)
    dense[:, 7] = 0  # an item nobody has: no weights, no division by zero
    want = dense_reference(dense, alpha, beta)
    model = RP3beta(alpha=alpha, beta=beta, neighbours=25, memory_mb=0.001).fit(sp.csr_matrix(dense))  # 1-row blocks
    np.testing.assert_allclose(model.weights_.toarray(), want, rtol=1e-5, atol=1e-8)
    threads = RP3beta(alpha=alpha, beta=beta, neighbours=25, n_jobs=2).fit(sp.csr_matrix(dense))
    np.testing.assert_array_equal(threads.weights_.toarray(), model.weights_.toarray())


def test_values_are_ignored_and_a_stored_zero_is_an_interaction():
    counts = X.copy()
    counts.data = np.array([5, 0, 2, 9, 1, 3, 7], dtype=np.float32)  # one stored 0
    np.testing.assert_allclose(RP3beta().fit(counts).weights_.toarray(), RP3beta().fit(X).weights_.toarray())


@pytest.mark.parametrize("params, name", [({"alpha": -1.0}, "alpha"), ({"beta": float("nan")}, "beta"),
                                          ({"neighbours": 0}, "neighbours"), ({"normalize": 1}, "normalize"),
                                          ({"memory_mb": 0}, "memory_mb"), ({"n_jobs": 1.5}, "n_jobs")])
def test_bad_parameters_are_refused_by_name_before_fitting(params, name):
    with pytest.raises(InputError, match=f"`{name}`"):
        RP3beta(**params).fit(X)


class TestRP3betaContract(ModelContract):
    model_class = RP3beta
    params = {"neighbours": 20}


def _train_file(tmp_path):
    rng = np.random.default_rng(0)
    rows = [f"u{u}\ti{i}" for u in range(40) for i in sorted(rng.choice(30, 6, replace=False))]
    path = tmp_path / "train.tsv"
    path.write_text("\n".join(rows) + "\n")
    return path


def test_cli_trains_rp3beta_with_its_generated_options(tmp_path):
    tsv, out = _train_file(tmp_path), tmp_path / "rp3.npz"
    runner = CliRunner()
    helped = runner.invoke(main, ["train", "--help"])
    assert "--beta" in helped.output and "rp3beta" in helped.output
    res = runner.invoke(main, ["train", str(tsv), "-o", str(out), "--model", "rp3beta", "--alpha", "0.8",
                               "--beta", "0.3", "--neighbours", "10", "--normalize"])
    assert res.exit_code == 0, res.output
    model = load(out)
    assert type(model) is RP3beta
    assert (model.alpha, model.beta, model.neighbours, model.normalize) == (0.8, 0.3, 10, True)
    # a parameter of another family is refused, naming rp3beta's own options as flags
    res = runner.invoke(main, ["train", str(tsv), "-o", str(out), "--model", "rp3beta", "--l2", "5"])
    assert res.exit_code == 2 and "--l2 does not apply to --model rp3beta" in res.output and "--beta" in res.output
    res = runner.invoke(main, ["train", str(tsv), "-o", str(out), "--model", "rp3beta", "--beta", "-1"])
    assert res.exit_code == 2 and "--beta" in res.output and "Traceback" not in res.output


def test_tune_searches_rp3beta(tmp_path):
    tsv = _train_file(tmp_path)
    grid = tmp_path / "grid.json"
    grid.write_text(json.dumps({"rp3beta": {"beta": [0.0, 0.5]}}))
    res = CliRunner().invoke(main, ["tune", str(tsv), "--models", "rp3beta", "--grid", str(grid), "--quiet",
                                    "-o", str(tmp_path / "best.json")])
    assert res.exit_code == 0, res.output
    best = json.loads((tmp_path / "best.json").read_text())
    assert best["model"] == "rp3beta" and set(best["params"]) <= {"alpha", "beta", "neighbours", "normalize"}
