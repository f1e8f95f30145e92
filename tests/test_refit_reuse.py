"""WARP's refit after early stopping that reuses the start of the fit (``refit_reuse``)."""
import numpy as np
import pytest

from mrec_warp import InputError
from mrec_warp.models import WARP, Popularity, load
from mrec_warp.models.hybrid import HybridWARP
from mrec_warp.models import early_stopping
from mrec_warp.models.early_stopping import GRID_RATIO, MOST_STATES, RefitStates, grid_epochs, precision_at_k


def _fit_states(model_cls, train, **params):
    """Fit with a callback recording the whole training state after every fit epoch, and
    the state the refit was given (``set_train_state``)."""
    seen, given = {}, []

    def record(model, logs):
        if logs["phase"] == "fit":
            seen[logs["epoch"]] = model.train_state()

    original = model_cls.set_train_state

    def set_state(self, state, **options):
        # a copy as it was handed over (the refit may train on the state's own arrays)
        given.append({"learned": tuple(a.copy() for a in state["learned"]),
                      **{k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in state.items() if k != "learned"}})
        original(self, state, **options)

    model = model_cls(**params)
    model_cls.set_train_state = set_state
    try:
        model.fit(train, callbacks=[record])
    finally:
        model_cls.set_train_state = original
    return model, seen, given


def _same_state(a, b):
    """Two ``train_state()``s hold the same everything: factors, optimiser, sampler, epoch count."""
    assert a.keys() == b.keys() and len(a) > 2  # the learned arrays, the epoch count and the optimiser's state
    for x, y in zip(a["learned"], b["learned"]):
        np.testing.assert_array_equal(x, y)
    for name in a.keys() - {"learned"}:
        np.testing.assert_array_equal(a[name], b[name])


@pytest.mark.parametrize("model_cls", [WARP, HybridWARP])
def test_refit_starts_from_the_fit_state_at_k_and_trains_the_epochs_after_it(planted, model_cls):
    train, _ = planted
    model, seen, given = _fit_states(model_cls, train, factors=8, random_state=0, refit_reuse=0.5)
    best, k = model.best_epoch_, model.refit_start_
    assert 1 <= k <= round(0.5 * best) and best - k >= 1
    # the refit was handed the fit's whole state after epoch k: factors, biases, adagrad, sampler
    assert len(given) == 1
    _same_state(given[0], seen[k])
    phases = [(h["phase"], h["epoch"]) for h in model.history_]
    n_fit = sum(p == "fit" for p, _ in phases)
    # exactly best - k refit epochs, numbered on from the fit's epoch k
    assert phases[n_fit:] == [("refit", e) for e in range(k + 1, best + 1)]
    assert phases[:n_fit] == [("fit", e) for e in range(1, n_fit + 1)]
    assert model.epochs_done_ == best


def test_refit_from_the_state_differs_from_the_state_and_from_scratch(planted):
    train, test = planted
    reuse = WARP(factors=8, random_state=0, refit_reuse=0.5).fit(train)
    scratch = WARP(factors=8, random_state=0, refit_reuse=0).fit(train)
    # the same fit chose the same epoch count; only the refit differs
    assert reuse.best_epoch_ == scratch.best_epoch_
    fits = [[h for h in m.history_ if h["phase"] == "fit"] for m in (reuse, scratch)]
    assert [h["val_precision@10"] for h in fits[0]] == [h["val_precision@10"] for h in fits[1]]
    assert scratch.refit_start_ == 0
    assert [h["epoch"] for h in scratch.history_ if h["phase"] == "refit"] == list(range(1, scratch.best_epoch_ + 1))
    assert not np.array_equal(reuse.user_factors_, scratch.user_factors_)
    # both learned the planted clusters (popularity is flat within a cluster)
    pop = Popularity().fit(train)
    for m in (reuse, scratch):
        assert precision_at_k(m.score_users, m.n_items, train, test, 10) > \
            1.5 * precision_at_k(pop.score_users, pop.n_items, train, test, 10)


def test_same_seed_same_factors_with_refit_reuse(planted):
    train, _ = planted
    a, b = (WARP(factors=8, random_state=3, refit_reuse=0.5).fit(train) for _ in range(2))
    assert a.refit_start_ == b.refit_start_ > 0
    for x, y in zip(a.get_arrays().values(), b.get_arrays().values()):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("params, refit_epochs", [
    ({"refit": False}, 0),
    ({"epochs": 4}, 0),
    ({"warm_epochs": 2}, 2),
])
def test_refit_reuse_leaves_the_other_fits_alone(planted, params, refit_epochs, monkeypatch):
    train, _ = planted
    kept = []
    original = WARP.train_state
    monkeypatch.setattr(WARP, "train_state", lambda self: kept.append(1) or original(self))
    a = WARP(factors=8, random_state=1, refit_reuse=0.5, **params).fit(train)
    assert kept == []  # no training state is ever copied when no refit could start from one
    assert a.refit_start_ == 0
    b = WARP(factors=8, random_state=1, refit_reuse=0.0, **params).fit(train)
    assert sum(h["phase"] == "refit" for h in a.history_) == refit_epochs
    if "epochs" in params:
        assert [h["epoch"] for h in a.history_] == [1, 2, 3, 4]
    for x, y in zip(a.get_arrays().values(), b.get_arrays().values()):
        np.testing.assert_array_equal(x, y)


def test_a_given_validation_set_keeps_no_training_state(planted, monkeypatch):
    train, test = planted
    kept = []
    original = WARP.train_state
    monkeypatch.setattr(WARP, "train_state", lambda self: kept.append(1) or original(self))
    model = WARP(factors=8, random_state=1, refit_reuse=0.5).fit(train, validation=test)
    assert kept == [] and model.refit_start_ == 0
    assert all(h["phase"] == "fit" for h in model.history_)  # no refit with the user's own hold-out


def test_model_file_of_a_reusing_fit_loads(planted, tmp_path):
    train, test = planted
    model = WARP(factors=8, random_state=0, refit_reuse=0.25).fit(train)
    model.save(tmp_path / "m.npz")
    loaded = load(tmp_path / "m.npz")
    assert loaded.get_params()["refit_reuse"] == 0.25
    np.testing.assert_array_equal(loaded.user_factors_, model.user_factors_)
    assert precision_at_k(loaded.score_users, loaded.n_items, train, test, 10) == \
        precision_at_k(model.score_users, model.n_items, train, test, 10)


@pytest.mark.parametrize("bad", [-0.1, 0.95, float("nan")])
def test_refit_reuse_out_of_range_is_refused(planted, bad):
    with pytest.raises(InputError, match="refit_reuse"):
        WARP(refit_reuse=bad).fit(planted[0])


class _Counter:
    """Stands for a model: its training state is the epoch it was taken at."""
    epoch = 0

    def train_state(self):
        return self.epoch


def _keep(fraction, best_by_epoch):
    keeper, model, most = RefitStates(fraction), _Counter(), 0
    for epoch, best in enumerate(best_by_epoch, start=1):
        model.epoch = epoch
        keeper.after_epoch(model, epoch, best)
        most = max(most, len(keeper.states))
    return keeper, most


def test_grid_rises_by_at_most_its_ratio():
    grid = list(grid_epochs(300))
    assert grid[:8] == list(range(1, 9))
    assert all(1 < b / a <= GRID_RATIO or b == a + 1 for a, b in zip(grid, grid[1:]))


@pytest.mark.parametrize("fraction", [0.25, 0.5])
@pytest.mark.parametrize("best_final, stop", [(5, 15), (14, 24), (30, 40), (70, 80), (100, 110), (180, 190)])
def test_kept_states_give_a_start_near_the_target_within_the_memory_bound(fraction, best_final, stop):
    # the score rises every epoch up to best_final, then patience runs out
    keeper, most = _keep(fraction, [min(e, best_final) for e in range(1, stop + 1)])
    assert most <= MOST_STATES + 1 and len(keeper.states) <= MOST_STATES
    target = keeper.target(best_final)
    k, state = keeper.start(best_final)
    assert state == k, "the state kept for epoch k is the one taken after epoch k"
    # never later than the target; with the grid's ratio (twice over, for the thinning) behind it
    assert k <= target and k >= target / GRID_RATIO ** 2 - 1


def test_no_state_before_the_target_means_a_refit_from_scratch():
    keeper, _ = _keep(0.25, [1, 1, 1])
    assert keeper.target(1) == 0 and keeper.start(1) is None


def test_memory_check_never_refuses_a_fit_for_the_kept_states(monkeypatch):
    asked = {}
    monkeypatch.setattr(early_stopping, "check_memory", lambda need, what, param: asked.setdefault(len(asked), need))
    for reuse in (0.0, 0.25):
        early_stopping.check_factor_memory(WARP(factors=16, refit_reuse=reuse), 1000, 500)
    # factors + adagrad + the best snapshot, with or without reuse
    assert asked[0] == asked[1] == 3 * 4.0 * 16 * 1500


def test_short_memory_drops_the_kept_states_and_refits_from_scratch(planted, monkeypatch):
    X, _ = planted
    plenty = WARP(factors=8, refit_reuse=0.25, random_state=0).fit(X)
    assert plenty.refit_start_ > 0
    # the states need (MOST_STATES + 1) x 2 copies: more than half of what is left here
    one_copy = 4.0 * 8 * sum(X.shape)  # one float32 copy of the user and item factors
    monkeypatch.setattr(early_stopping, "available_bytes", lambda: int(2 * (MOST_STATES + 1) * 2 * one_copy) - 1)
    short = WARP(factors=8, refit_reuse=0.25, random_state=0).fit(X)
    scratch = WARP(factors=8, refit_reuse=0.0, random_state=0).fit(X)
    assert short.refit_start_ == 0
    np.testing.assert_array_equal(short.item_factors_, scratch.item_factors_)


def test_refit_reuse_on_the_command_line(tmp_path):
    from .conftest import run_ok

    rows = [f"u{u}\ti{(u * 7 + j * 3) % 40}" for u in range(60) for j in range(8)]
    (tmp_path / "r.tsv").write_text("\n".join(rows) + "\n")
    run_ok("train", str(tmp_path / "r.tsv"), "-o", str(tmp_path / "m.npz"), "--model", "warp", "--factors", "4",
           "--refit-reuse", "0.5", "--seed", "0", "-q")
    model = load(tmp_path / "m.npz")
    assert model.get_params()["refit_reuse"] == 0.5


def test_no_refit_says_the_model_is_the_one_fitted_on_the_hold_out_s_rest(tmp_path):
    """``--no-refit`` keeps the best epoch's model of the fit on the pairs left after the
    hold-out: the log says so in one line, with the pairs it was fitted on."""
    from .conftest import run
    path = tmp_path / "pairs.tsv"
    path.write_text("".join(f"u{u} i{(u * 7 + j) % 23}\n" for u in range(60) for j in range(10)))  # 600 pairs
    result = run("train", path, "-o", tmp_path / "m.npz", "--factors", "4", "--max-epochs", "3", "--no-refit", "-v")
    assert result.exit_code == 0, result.output
    lines = [ln for ln in result.stderr.splitlines() if "no refit" in ln]
    assert len(lines) == 1, result.stderr
    model = load(tmp_path / "m.npz")
    assert f"no refit: keeping the best epoch's model (epoch {model.best_epoch_}), fitted on " in lines[0], lines[0]
    assert " of the 600 pairs (the other 10% held out for validation)" in lines[0], lines[0]
    assert "refitting" not in result.stderr
    refit = run("train", path, "-o", tmp_path / "r.npz", "--factors", "4", "--max-epochs", "3", "-v")
    assert refit.exit_code == 0 and "no refit" not in refit.stderr and "refitting on all training data" in refit.stderr
