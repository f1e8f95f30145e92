"""EASE within its means: the estimate announced before fitting, the refusal and its override,
sparsified weights (file size, kept entries exact) and old dense files."""
from __future__ import annotations

import io
import json
import re
import zipfile

import numpy as np
import pytest
import scipy.sparse as sp
from click.testing import CliRunner

from mrec_warp.cli import main
from mrec_warp.errors import InputError
from mrec_warp.models import EASE, load
from mrec_warp.models import ease as ease_module
from mrec_warp.progress import Progress
from tests.conftest import planted_low_rank


def long_tail(n_users=300, n_items=1000, per_user=12, seed=0):
    """A users x items binary matrix whose item popularity falls off like a power law."""
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, n_items + 1) ** 0.8
    weights /= weights.sum()
    rows, cols = [], []
    for u in range(n_users):
        items = rng.choice(n_items, size=per_user, replace=False, p=weights)
        rows += [u] * per_user
        cols += items.tolist()
    return sp.csr_matrix((np.ones(len(rows), np.float32), (rows, cols)), shape=(n_users, n_items))


def test_the_estimate_is_logged_before_the_fit_starts(monkeypatch):
    train, _ = planted_low_rank(n_users=80, n_items=40, per_user=8, seed=1)
    stream = io.StringIO()

    def no_fit(*args, **kwargs):
        raise RuntimeError("fit started")

    monkeypatch.setattr(ease_module, "gram_matrix", no_fit)
    with pytest.raises(RuntimeError, match="fit started"):
        EASE(l2=10.0).fit(train, progress=Progress(verbose=True, stream=stream))
    line = stream.getvalue()
    assert re.search(r"ease: 40 items, float32: estimated peak memory [\d.,]+ \w+, time [\d.,]+ s, "
                     r"model file [\d.,]+ \w+", line), line


def test_refusal_above_the_limit_names_the_override_and_the_override_fits():
    train, _ = planted_low_rank(n_users=80, n_items=40, per_user=8, seed=1)
    cost = ease_module.estimate(train, "float32", EASE().topk)
    too_small = cost.peak_bytes / 2**20 / 2
    with pytest.raises(InputError, match=r"EASE on 40 items needs .* more than the .* limit") as info:
        EASE(memory_limit_mb=too_small).fit(train)
    assert "raise `memory_limit_mb`" in str(info.value)
    EASE(memory_limit_mb=cost.peak_bytes / 2**20 * 1.01).fit(train)  # the override: a larger limit


def test_cli_refusal_is_one_line_with_the_flag(tmp_path):
    train, _ = planted_low_rank(n_users=80, n_items=40, per_user=8, seed=1)
    coo = train.tocoo()
    tsv = tmp_path / "train.tsv"
    tsv.write_text("".join(f"u{u}\ti{i}\n" for u, i in zip(coo.row, coo.col)))
    res = CliRunner().invoke(main, ["train", str(tsv), "--model", "ease", "--memory-limit-mb", "1",
                                    "-o", str(tmp_path / "m.npz")])
    assert res.exit_code != 0 and not (tmp_path / "m.npz").exists()
    error = [line for line in res.output.splitlines() if line.startswith("Error:")]
    assert len(error) == 1 and "raise --memory-limit-mb" in error[0], res.output


def test_sparsified_file_is_a_tenth_of_dense_and_kept_entries_are_exact(tmp_path):
    train = long_tail()
    dense = EASE(l2=20.0, topk=0).fit(train)
    sparse = EASE(l2=20.0, topk=10).fit(train)
    assert isinstance(dense.weights_, np.ndarray) and sp.issparse(sparse.weights_)
    W = dense.weights_
    kept = sparse.weights_.tocoo()
    assert kept.nnz == 10 * train.shape[1]  # topk per item on average
    # the dense values rounded to float16 precision (kept as float32), bit for bit
    np.testing.assert_array_equal(kept.data, W[kept.row, kept.col].astype(np.float16).astype(np.float32))
    assert kept.data.dtype == np.float32
    # the kept entries are the largest magnitudes: nothing dropped is larger than the smallest kept
    dropped = np.abs(W).copy()
    dropped[kept.row, kept.col] = 0
    assert dropped.max() <= np.abs(W[kept.row, kept.col]).min()
    # scores are the history times the kept weights exactly
    users = np.arange(1, 50)
    expected = train[users] @ sparse.weights_.toarray()
    np.testing.assert_allclose(sparse.score_users(users), expected, rtol=1e-6, atol=1e-7)
    dense.save(tmp_path / "dense.npz")
    sparse.save(tmp_path / "sparse.npz")
    size_dense, size_sparse = (tmp_path / "dense.npz").stat().st_size, (tmp_path / "sparse.npz").stat().st_size
    assert size_sparse <= 0.10 * size_dense, (size_sparse, size_dense)
    back = load(tmp_path / "sparse.npz")
    assert back.get_params()["topk"] == 10
    np.testing.assert_array_equal(back.score_users(users), sparse.score_users(users))
    items, _ = back.recommend(users=users, k=5)
    assert np.array_equal(items, sparse.recommend(users=users, k=5)[0])


def test_sparsified_with_max_items_saves_and_loads():
    train = long_tail(n_items=300)
    model = EASE(l2=20.0, topk=5, max_items=100).fit(train)
    assert sp.issparse(model.weights_) and model.weights_.shape == (100, 100)
    buf = io.BytesIO()
    model.save(buf)
    buf.seek(0)
    back = load(buf)
    users = np.arange(20)
    np.testing.assert_array_equal(back.score_users(users), model.score_users(users))
    items, _ = back.similar_items([int(model.kept_items_[0])], k=3)
    assert set(items[0][items[0] >= 0].tolist()) <= set(model.kept_items_.tolist())


def _as_old_file(path):
    """Rewrite a saved model's header as a version without ``topk`` wrote it."""
    with zipfile.ZipFile(path) as z:
        members = {name: z.read(name) for name in z.namelist()}
    meta_name = next(n for n in members if n.startswith("__meta__"))
    meta_arr = np.load(io.BytesIO(members[meta_name]))
    meta = json.loads(str(meta_arr))
    del meta["params"]["topk"]
    out = io.BytesIO()
    np.save(out, np.array(json.dumps(meta)))
    members[meta_name] = out.getvalue()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        for name, data in members.items():
            z.writestr(name, data)


def test_old_dense_files_load_and_score_identically(tmp_path):
    train = long_tail(n_items=600)  # more than twice the default topk: a new file would be sparse
    dense = EASE(l2=20.0, topk=0).fit(train)
    path = tmp_path / "old.npz"
    dense.save(path)
    _as_old_file(path)
    old = load(path)
    assert isinstance(old.weights_, np.ndarray) and old.topk == 0  # nothing was dropped
    users = np.arange(40)
    np.testing.assert_array_equal(old.score_users(users), dense.score_users(users))
    old.save(tmp_path / "again.npz")  # and it saves again as it is
    np.testing.assert_array_equal(load(tmp_path / "again.npz").score_users(users), dense.score_users(users))


@pytest.mark.parametrize("shape", [(60, 200), (300, 80)], ids=["fewer users than items", "more users than items"])
@pytest.mark.parametrize("params", [{"select": False}, {}, {"l2": 300.0}, {"max_items": 50},
                                    {"max_items": 50, "select": False}],
                         ids=["select off", "l2 chosen", "l2 given", "max_items chosen", "max_items fixed"])
def test_tunes_estimate_plans_the_path_the_fit_takes(monkeypatch, shape, params):
    """fit_cost prices the steps the fit runs: the choice of l2 (when it is made) by the same
    side over the same items and hold-out sizes, then the weights over the same items."""
    from mrec_warp.models.tuning import TrialShape

    train = long_tail(n_users=shape[0], n_items=shape[1], per_user=10, seed=2)
    params = {**params, "memory_limit_mb": 4096.0}  # (the choice's plan reads the limit)
    calls = []
    plan, weights = ease_module.selection_plan, ease_module.fit_seconds

    def spy_plan(*args, **kwargs):
        calls.append(("plan", args, tuple(sorted(kwargs.items()))))
        return plan(*args, **kwargs)

    def spy_weights(csr, *args, **kwargs):
        calls.append(("weights", csr.shape, csr.nnz))
        return weights(csr, *args, **kwargs)

    monkeypatch.setattr(ease_module, "selection_plan", spy_plan)
    monkeypatch.setattr(ease_module, "fit_seconds", spy_weights)
    EASE(**params).fit(train)
    fitted, calls[:] = list(calls), []
    trial = TrialShape(users=shape[0], items=shape[1], nnz=train.nnz, cooc=0.0, deg2=0.0, val_users=0, fit=train)
    cost = EASE.fit_cost(trial, params)
    assert calls == fitted and cost > 0
    chooses = params.get("select", True) and "l2" not in params
    assert [c[0] for c in calls] == (["plan"] if chooses else []) + ["weights"]
    items = min(shape[1], params.get("max_items", shape[1]))
    if chooses:  # the side the fit took: the users' with fewer users than items
        side = plan(*calls[0][1], **dict(calls[0][2]))[0]
        assert side == ("users" if shape[0] < items else "items")
    assert calls[-1][1][1] == items


def test_the_estimate_counts_the_choice_of_l2_and_larger_matrices_factorise_faster():
    train = long_tail(n_users=60, n_items=200, per_user=10, seed=2)
    rate = ease_module.REFERENCE_RATE  # a fixed speed: the relative costs alone
    fixed = EASE(select=False).estimated_fit_seconds(train, rate)
    assert EASE(l2=300.0).estimated_fit_seconds(train, rate) == fixed  # a given l2: no choice
    choosing = EASE(memory_limit_mb=4096.0).estimated_fit_seconds(train, rate)
    assert choosing == pytest.approx(fixed + ease_module.selection_seconds(train, "float32", rate, None, 4096.0 * 2**20))
    assert EASE(max_items=50, select=False).estimated_fit_seconds(train, rate) < fixed
    speeds = [ease_module.size_speed(n) for n in (512, 2048, 8192, 10**6)]
    assert speeds == sorted(speeds) and speeds[1] == 1.0 and speeds[-1] == ease_module.LARGE_SIZE_GAIN
