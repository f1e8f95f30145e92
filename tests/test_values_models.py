"""What models, confidence modes and tune do with values (issue 19 items 1-2, issue 20 item 8).

The rule: every stored entry of an interactions matrix is an interaction, also one of value
0 (the weakest positive: confidence 1 in every mode), so it is trained on and never
recommended back; a negative value is refused; a fit with nothing to learn is refused; and no
model or tuner changes the matrix it is given.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from click.testing import CliRunner

from mrec_warp.cli import main
from mrec_warp.data.interactions import Interactions, as_csr, binary_csr
from mrec_warp.errors import InputError
from mrec_warp.models import WARP, WRMF
from mrec_warp.models.base import Recommender
from mrec_warp.models.families import FAMILIES
from mrec_warp.seeds import DEFAULT_SEED
from mrec_warp.stages import recommend as recommend_stage
from mrec_warp.stages.recommend import _with_items
from mrec_warp.stages.tune import _split, tune
from mrec_warp.topk import _exclusion_rows

N_USERS, N_ITEMS = 24, 18

#: Every family x every confidence mode it has, with parameters that fit tiny data in well
#: under a second. WRMF "none" weighs every pair 1 + alpha; the others use the values
#: ("+sample": WARP draws positives in proportion to their confidence).
SMALL = {"warp": {"factors": 4, "epochs": 3, "random_state": 0, "n_jobs": 1},
         "hybrid": {"factors": 4, "epochs": 3, "random_state": 0, "n_jobs": 1},
         "wrmf": {"factors": 4, "epochs": 3, "random_state": 0, "n_jobs": 1},
         "itemknn": {"neighbours": 5}, "slim": {}, "ease": {}, "popularity": {}}
MODES = [("warp", "none"), ("warp", "linear"), ("warp", "log"), ("warp", "log+sample"), ("hybrid", None), ("wrmf", "none"),
         ("wrmf", "linear"), ("wrmf", "log"), ("itemknn", None), ("slim", None), ("ease", None),
         ("popularity", None)]


def make_model(family: str, mode, **extra) -> Recommender:
    params = {**SMALL[family], **extra}
    if mode is not None:
        params["confidence"], _, use = mode.partition("+")
        if use:
            params["confidence_use"] = use
    return FAMILIES[family].cls(**params)


def rows(kind: str, seed: int = 0) -> pd.DataFrame:
    """(user, item, value) rows of 24 users, 4-8 items each, on 18 items.

    ``zeros``: every value 0; ``duplicates``: every pair twice or three times, values >= 1
    (merged into one pair); ``mixed``: zeros, fractions, large counts, and repeated pairs
    whose values are 0 and 0 (merging to 0) or 0 and 5.
    """
    rng = np.random.default_rng(seed)
    out = []
    for u in range(N_USERS):
        for i in rng.choice(N_ITEMS, int(rng.integers(4, 9)), replace=False):
            out.append((f"u{u}", f"i{i}", 0.0))
    df = pd.DataFrame(out, columns=["user", "item", "value"])
    if kind == "duplicates":
        df["value"] = rng.integers(1, 5, len(df)).astype(float)
        df = pd.concat([df, df.sample(frac=0.6, random_state=seed), df.sample(frac=0.3, random_state=seed + 1)])
    elif kind == "mixed":
        df["value"] = rng.choice([0.0, 0.0, 0.25, 1.0, 3.0, 250.0], len(df))
        repeat = df.sample(frac=0.4, random_state=seed).assign(value=lambda d: rng.choice([0.0, 5.0], len(d)))
        df = pd.concat([df, repeat])
    return df.sample(frac=1.0, random_state=seed).reset_index(drop=True)


def seen_pairs(df: pd.DataFrame) -> set:
    return set(zip(df["user"], df["item"]))


def fit(family: str, mode, data: Interactions) -> Recommender:
    model = make_model(family, mode)
    if family == "wrmf":
        model.fit(data, use_values=True)
    else:
        model.fit(data)
    return model


# -- 1. a zero-valued pair is a positive and is never recommended back -------------------------
@pytest.mark.parametrize("values", ["zeros", "duplicates", "mixed"])
@pytest.mark.parametrize("family, mode", MODES)
def test_no_recommended_item_is_one_the_user_has(tmp_path, family, mode, values):
    df = rows(values)
    data = Interactions.from_dataframe(df, value_col="value")
    model = fit(family, mode, data)
    assert model.train_.nnz == data.nnz == len(seen_pairs(df))  # every kept pair is trained on
    out = tmp_path / "recs.tsv"
    recommend_stage(model, out, k=N_ITEMS)  # every item the user may get, so a seen one would show
    recs = pd.read_csv(out, sep="\t", header=None, names=["user", "item", "score", "rank"], dtype=str)
    got = set(zip(recs["user"], recs["item"]))
    assert not got & seen_pairs(df)
    # and nothing else is withheld: each user gets exactly the items they do not have
    assert len(got) == N_USERS * N_ITEMS - len(seen_pairs(df))


@pytest.mark.parametrize("family, mode", MODES)
def test_cli_recommend_without_train_never_gives_a_seen_item(tmp_path, family, mode):
    df = rows("mixed", seed=3)
    train = tmp_path / "train.tsv"
    df.to_csv(train, sep="\t", header=False, index=False)
    opts = [f"--{name.replace('_', '-')}={value}" for name, value in SMALL[family].items()
            if name not in ("random_state", "n_jobs", "neighbours")]
    if mode is not None:
        kind, _, use = mode.partition("+")
        opts += [f"--confidence={kind}"] + ([f"--confidence-use={use}"] if use else [])
    runner = CliRunner()
    result = runner.invoke(main, ["train", str(train), "-o", str(tmp_path / "m.npz"), "--model", family,
                                  "--n-jobs", "1", "--quiet", *opts])
    assert result.exit_code == 0, result.output
    result = runner.invoke(main, ["recommend", str(tmp_path / "m.npz"), "-o", str(tmp_path / "r.tsv"),
                                  "-k", str(N_ITEMS), "--n-jobs", "1"])
    assert result.exit_code == 0, result.output
    recs = pd.read_csv(tmp_path / "r.tsv", sep="\t", header=None, names=["user", "item", "score", "rank"], dtype=str)
    got = set(zip(recs["user"], recs["item"]))
    assert not got & seen_pairs(df)
    assert len(got) == N_USERS * N_ITEMS - len(seen_pairs(df))


def test_zero_is_the_lowest_positive_confidence_in_every_mode():
    # stored zeros at (0, 0) and (1, 0): interactions of the weakest strength
    X = sp.csr_matrix((np.array([0.0, 1.0, 9.0, 0.0, 2.0], np.float32), ([0, 0, 0, 1, 1], [0, 1, 2, 0, 3])),
                      shape=(2, 4))
    assert X.nnz == 5
    for mode, expected in (("linear", [1.0, 2.0, 10.0, 1.0, 3.0]),
                           ("log", [1.0, 1 + np.log(2), 1 + np.log(10), 1.0, 1 + np.log(3)])):
        wrmf = WRMF(factors=2, epochs=1, confidence=mode, alpha=1.0, random_state=0).fit(X)
        np.testing.assert_allclose(wrmf.confidence_, expected, rtol=1e-6)
        warp = WARP(factors=2, epochs=1, confidence=mode, random_state=0)
        np.testing.assert_allclose(warp._with_confidence(X, binary_csr(X)).data, expected, rtol=1e-6)
    wrmf = WRMF(factors=2, epochs=1, confidence="none", alpha=3.0, random_state=0).fit(X)
    assert wrmf.confidence_.tolist() == [4.0] * 5  # values ignored: every pair 1 + alpha
    assert binary_csr(X).nnz == 5 and binary_csr(X).data.tolist() == [1.0] * 5


def test_all_zero_values_train_like_binary_data_not_on_nothing():
    # log(1 + 0) = 0: every confidence is 1, which is binary data, not an empty fit
    df = rows("zeros")
    data = Interactions.from_dataframe(df, value_col="value")
    ones = Interactions.from_dataframe(df)
    for mode in ("linear", "log"):
        with_zeros = WARP(factors=4, epochs=3, random_state=0, n_jobs=1, confidence=mode).fit(data)
        binary = WARP(factors=4, epochs=3, random_state=0, n_jobs=1).fit(ones)
        assert with_zeros.history_[-1]["updates"] > 0
        np.testing.assert_array_equal(with_zeros.item_factors_, binary.item_factors_)


def test_partial_fit_and_fold_in_keep_zero_valued_pairs():
    df = rows("mixed", seed=5)
    data = Interactions.from_dataframe(df, value_col="value")
    model = WARP(factors=4, epochs=2, random_state=0, n_jobs=1, confidence="log").fit(data)
    extra = sp.csr_matrix((np.zeros(2, np.float32), ([0, 1], [0, 1])), shape=data.matrix.shape)
    before = model.train_.nnz
    model.partial_fit(extra)
    assert model.partial_fit_summary_["pairs"] == 2
    assert model.train_[0, 0] == 1 and model.train_[1, 1] == 1
    assert model.train_.nnz >= before
    wrmf = WRMF(factors=4, epochs=2, alpha=1.0, random_state=0, n_jobs=1).fit(data)
    wrmf.fold_in(pd.DataFrame({"user": ["new", "new"], "item": ["i1", "i2"], "value": [0.0, 3.0]}))
    row = wrmf.user_indices("new")[0]
    assert sorted(wrmf.item_ids[wrmf.train_[row].indices]) == ["i1", "i2"]
    pairs = slice(wrmf.train_.indptr[row], wrmf.train_.indptr[row + 1])  # confidence_ follows train_'s pairs
    assert sorted(wrmf.confidence_[pairs].tolist()) == [1.0, 4.0]
    items, _ = wrmf.recommend(row, k=N_ITEMS)
    assert not {"i1", "i2"} & set(wrmf.item_ids[items[items >= 0]])


def test_an_exclusion_matrix_excludes_by_its_entries_not_their_values():
    df = rows("mixed", seed=6)
    model = fit("popularity", None, Interactions.from_dataframe(df, value_col="value"))
    exclude = sp.csr_matrix((np.zeros(3, np.float32), ([0, 0, 1], [0, 1, 2])), shape=(N_USERS, N_ITEMS))
    items, _ = model.recommend([0, 1], k=N_ITEMS, exclude=exclude)
    assert not {0, 1} & set(items[0].tolist()) and 2 not in items[1].tolist()
    # folded-in users beyond the matrix, and items added to every row for part files
    sub = _exclusion_rows(exclude, np.array([1, N_USERS + 3, 0]))
    assert [row.indices.tolist() for row in sub] == [[2], [], [0, 1]]
    both = _with_items(exclude, np.eye(1, N_ITEMS, 5, dtype=np.uint8)[0], N_USERS)
    assert both[0].indices.tolist() == [0, 1, 5] and both[1].indices.tolist() == [2, 5]


# -- 2. negative values never train silently ---------------------------------------------------
@pytest.mark.parametrize("family, mode", MODES)
def test_negative_values_are_refused_in_one_line(family, mode):
    X = as_csr(Interactions.from_dataframe(rows("mixed"), value_col="value").matrix).copy()
    X.data[3] = -2.0
    with pytest.raises(InputError, match=r"negative or not (a number|finite)") as info:
        make_model(family, mode).fit(X)
    assert "\n" not in str(info.value)


def test_negative_values_in_partial_fit_and_fold_in_are_refused():
    data = Interactions.from_dataframe(rows("mixed"), value_col="value")
    model = WARP(factors=4, epochs=1, random_state=0, n_jobs=1).fit(data)
    bad = sp.csr_matrix((np.array([-1.0], np.float32), ([0], [0])), shape=data.matrix.shape)
    with pytest.raises(InputError, match="negative or not a number"):
        model.partial_fit(bad)
    with pytest.raises(InputError, match="negative or not a number"):
        model.partial_fit(Interactions(bad, data.user_ids, data.item_ids))
    with pytest.raises(InputError, match="negative or not a number"):
        model.fold_in(bad[:1], user_ids=["new"])


# -- issue 20 item 8: a fit with nothing to learn -----------------------------------------------
@pytest.mark.parametrize("shape, what", [((0, 5), "no users"), ((5, 0), "no items"), ((4, 5), "no stored entries")])
@pytest.mark.parametrize("family", list(SMALL))
def test_a_fit_with_nothing_to_learn_is_refused(family, shape, what):
    with pytest.raises(InputError, match=f"nothing to learn.*has {what}") as info:
        make_model(family, None).fit(sp.csr_matrix(shape, dtype=np.float32))
    assert "\n" not in str(info.value)


def test_an_empty_table_is_refused_at_from_dataframe_and_an_empty_matrix_at_fit():
    with pytest.raises(InputError, match="the table has no rows"):  # as the CLI refuses an empty file
        Interactions.from_dataframe(pd.DataFrame({"user": pd.Series([], dtype=str),
                                                  "item": pd.Series([], dtype=str)}))
    with pytest.raises(InputError, match="nothing to learn"):
        WARP(epochs=1).fit(Interactions(sp.csr_matrix((0, 0), dtype=np.float32), [], []))


# -- 3. nothing changes the matrix it is given ---------------------------------------------------
def frozen(csr: sp.csr_matrix) -> sp.csr_matrix:
    """``csr`` with read-only arrays: any write into them raises."""
    for arr in (csr.data, csr.indices, csr.indptr):
        arr.flags.writeable = False
    return csr


def snapshot(csr: sp.csr_matrix):
    return tuple(a.tobytes() for a in (csr.data, csr.indices, csr.indptr))


@pytest.mark.parametrize("family, mode", MODES)
@pytest.mark.parametrize("layout", ["canonical", "unsorted with duplicates"])
def test_fit_never_changes_its_input(family, mode, layout):
    X = Interactions.from_dataframe(rows("mixed"), value_col="value").matrix.copy()
    if layout != "canonical":  # each row's items in falling order, the first pair twice
        coo = X.tocoo()
        order = np.lexsort((-coo.col, coo.row))
        r, c, d = np.r_[coo.row[0], coo.row[order]], np.r_[coo.col[0], coo.col[order]], np.r_[1.0, coo.data[order]]
        indptr = np.r_[0, np.cumsum(np.bincount(r, minlength=X.shape[0]))]
        X = sp.csr_matrix((d.astype(np.float32), c.astype(np.int32), indptr.astype(np.int32)), shape=X.shape)
        assert not X.has_canonical_format
    before = snapshot(X)
    model = make_model(family, mode)
    model.fit(frozen(X))
    assert snapshot(X) == before
    assert model.train_.nnz == as_csr(X).nnz
    ids = Interactions(X.copy(), [f"u{u}" for u in range(X.shape[0])], [f"i{i}" for i in range(X.shape[1])])
    frozen(ids.matrix)
    before = snapshot(ids.matrix)
    make_model(family, mode).fit(ids)
    assert snapshot(ids.matrix) == before


def test_tune_leaves_its_input_unchanged_and_every_family_trains_on_the_same_pairs(monkeypatch):
    X = frozen(Interactions.from_dataframe(rows("mixed", seed=8), value_col="value").matrix.copy())
    before = snapshot(X)
    trained = []
    original = Recommender.set_training_data

    def counting(self, data):
        csr = original(self, data)
        trained.append((type(self).__name__, csr.nnz))
        return csr

    monkeypatch.setattr(Recommender, "set_training_data", counting)
    points = [{"model": "wrmf", "factors": 2}, {"model": "slim"}, {"model": "ease"}, {"model": "itemknn"},
              {"model": "warp", "factors": 2}]
    tune(X, points, base={"max_epochs": 2, "eval_every": 1}, use_values=True, with_defaults=False)
    assert snapshot(X) == before
    together = dict(trained)
    trained.clear()
    tune(X, [{"model": "slim"}], use_values=False, with_defaults=False)
    assert snapshot(X) == before
    # the fit split of every family holds the zero-valued pairs, as it does for one run alone
    fit, val, _ = _split(X, None, 0.1, DEFAULT_SEED, use_values=True)
    assert fit.nnz + val.nnz == X.nnz
    assert set(together.values()) == {fit.nnz} and trained[0] == ("SLIM", fit.nnz)


def test_evaluation_counts_zero_valued_pairs_as_interactions():
    from mrec_warp.evaluation.roc_auc import _train_keys
    from mrec_warp.evaluation.space import build_space

    zero = sp.csr_matrix((np.array([0.0, 2.0], np.float32), ([0, 1], [0, 1])), shape=(2, 2))
    train = Interactions(zero, ["a", "b"], ["x", "y"])
    test = Interactions(sp.csr_matrix((np.zeros(2, np.float32), ([0, 1], [1, 0])), shape=(2, 2)),
                        ["a", "b"], ["x", "y"])
    space = build_space(train, test)
    assert len(space.train_keys) == 2  # a's zero-valued x is a training pair, excluded from the test
    assert space.n_test.tolist() == [1, 1]  # each user's zero-valued test pair is relevant
    assert len(_train_keys(zero)) == 2


def test_train_says_zero_valued_rows_stay_positives(tmp_path):
    df = rows("mixed", seed=9)
    path = tmp_path / "plays.tsv"
    df.to_csv(path, sep="\t", header=False, index=False)
    zeros = int((Interactions.from_dataframe(df, value_col="value").matrix.data == 0).sum())
    assert zeros > 0
    for opts in (["--confidence", "log"], ["--model", "wrmf"]):
        result = CliRunner().invoke(main, ["train", str(path), "-o", str(tmp_path / "m.npz"), "--epochs", "1",
                                           "--factors", "2", "-v", *opts])
        assert result.exit_code == 0, result.output
        assert f"{zeros} pairs of value 0 are positives of the lowest confidence, 1" in result.output


def test_partial_fit_and_fold_in_never_change_their_input():
    data = Interactions.from_dataframe(rows("mixed", seed=10), value_col="value")
    extra = frozen(sp.csr_matrix((np.array([0.0, 2.0, 0.0], np.float32), ([0, 1, 2], [3, 4, 5])),
                                 shape=data.matrix.shape))
    history = frozen(sp.csr_matrix((np.array([0.0, 1.0], np.float32), ([0, 0], [1, 2])), shape=(1, N_ITEMS)))
    before = snapshot(extra), snapshot(history)
    warp = WARP(factors=4, epochs=1, random_state=0, n_jobs=1, confidence="log").fit(data)
    warp.partial_fit(extra)
    warp.fold_in(history, user_ids=["new"])
    WRMF(factors=4, epochs=1, random_state=0, n_jobs=1).fit(data).fold_in(history, user_ids=["new"])
    assert (snapshot(extra), snapshot(history)) == before
    assert sorted(warp.train_[warp.user_indices("new")[0]].indices.tolist()) == [1, 2]
