"""WARP's learning-rate schedule (``late_rate``, ``late_rate_epoch``): the rate each epoch's
kernel calls receive, in the fit, the refit, a warm refit, ``partial_fit``, fold-in and model files."""
import json

import numpy as np
import pandas as pd
import pytest

from mrec_warp import InputError
from mrec_warp.models import WARP, HybridWARP, load
from mrec_warp.models import hybrid as hybrid_module
from mrec_warp.models.warp import rate_factor


def spy_rates(monkeypatch, cls=WARP):
    """Record (phase-free) ``(epoch, learning_rate)`` of every kernel call of ``cls``'s fits."""
    seen = []
    original = cls._fit_shard

    def fit_shard(self, data, start, stop, state, cfg):
        seen.append((self.epochs_done_, cfg["learning_rate"]))
        return original(self, data, start, stop, state, cfg)

    monkeypatch.setattr(cls, "_fit_shard", fit_shard)
    return seen


#: A schedule that switches within the tests' few epochs (the default switches after 15).
ON = dict(late_rate=2.0, late_rate_epoch=3)


def expected(epoch, lr=0.02, late=2.0, late_epoch=3):
    return lr * (late if epoch >= late_epoch else 1.0)


def test_the_factor_is_one_until_the_late_epoch_then_the_late_rate():
    assert [rate_factor(2.0, 15, e) for e in (0, 14, 15, 100)] == [1.0, 1.0, 2.0, 2.0]
    assert rate_factor(1.0, 15, 40) == 1.0
    assert rate_factor(0.5, 0, 0) == 0.5  # below 1 and from the start: a lower rate throughout


def test_the_default_steps_at_learning_rate_for_15_epochs_then_twice_it(planted, monkeypatch):
    train, _ = planted
    seen = spy_rates(monkeypatch)
    WARP(factors=8, epochs=18, random_state=0).fit(train)
    assert [e for e, _ in seen] == list(range(18))  # one kernel call per epoch on this small set
    assert [r for _, r in seen] == [0.02] * 15 + [0.04] * 3


def test_fixed_epochs_step_at_the_scheduled_rate(planted, monkeypatch):
    train, _ = planted
    seen = spy_rates(monkeypatch)
    WARP(factors=8, epochs=5, random_state=0, **ON).fit(train)
    np.testing.assert_allclose([r for _, r in seen], [expected(e) for e in range(5)], rtol=1e-12)


@pytest.mark.parametrize("reuse", [0.0, 0.25])
def test_the_refit_replays_the_fits_rates_from_the_epoch_it_starts_at(planted, monkeypatch, reuse):
    train, _ = planted
    seen = spy_rates(monkeypatch)
    model = WARP(factors=16, refit_reuse=reuse, random_state=0, **ON).fit(train)  # (best epoch 15 here)
    n_fit = sum(h["phase"] == "fit" for h in model.history_)
    best, start = model.best_epoch_, model.refit_start_
    assert (start == 0) == (reuse == 0) and best > 4
    fit, refit = seen[:n_fit], seen[n_fit:]
    # from scratch: epochs 0..best-1 again; reusing the fit's state after epoch k: epochs k..best-1
    assert len(refit) == best - start and refit == fit[start:best]
    np.testing.assert_allclose([r for _, r in fit], [expected(e) for e in range(n_fit)], rtol=1e-12)
    assert {r for _, r in fit} == {0.02, 0.04}  # both rates were used


def test_a_user_set_rate_is_scaled_and_a_late_rate_of_one_keeps_it_constant(planted, monkeypatch):
    train, _ = planted
    seen = spy_rates(monkeypatch)
    WARP(factors=8, epochs=5, learning_rate=0.05, random_state=0, **ON).fit(train)
    np.testing.assert_allclose([r for _, r in seen], [expected(e, lr=0.05) for e in range(5)], rtol=1e-12)
    seen.clear()
    WARP(factors=8, epochs=20, learning_rate=0.05, late_rate=1, random_state=0).fit(train)
    assert [r for _, r in seen] == [0.05] * 20
    seen.clear()
    WARP(factors=8, epochs=3, late_rate=3, late_rate_epoch=1, random_state=0).fit(train)
    np.testing.assert_allclose([r for _, r in seen], [0.02, 0.06, 0.06], rtol=1e-12)


def test_sgd_decay_and_the_late_rate_multiply(planted, monkeypatch):
    train, _ = planted
    seen = spy_rates(monkeypatch)
    WARP(factors=8, epochs=5, learning_schedule="sgd", decay=1.0, random_state=0, **ON).fit(train)
    np.testing.assert_allclose([r for _, r in seen], [expected(e) / (1 + e) for e in range(5)], rtol=1e-12)


def test_a_warm_refit_restarts_adagrad_and_steps_at_the_learning_rate(planted, monkeypatch):
    train, _ = planted
    seen = spy_rates(monkeypatch)
    model = WARP(factors=8, warm_epochs=3, random_state=0, **ON).fit(train)
    best = model.best_epoch_
    assert best > ON["late_rate_epoch"]
    # epochs numbered on, but fresh accumulators on trained factors take no late rate
    assert seen[-3:] == [(best + k, 0.02) for k in range(3)]


def test_partial_fit_of_a_loaded_model_steps_at_the_learning_rate(planted, monkeypatch, tmp_path):
    train, _ = planted
    WARP(factors=8, epochs=5, random_state=0, **ON).fit(train).save(tmp_path / "m.npz")
    loaded = load(tmp_path / "m.npz")  # its adagrad accumulators are not in the file
    seen = spy_rates(monkeypatch)
    loaded.partial_fit(train, epochs=2)
    assert seen == [(5, 0.02), (6, 0.02)]


def test_partial_fit_goes_on_from_the_epoch_the_model_is_at(planted, monkeypatch):
    train, _ = planted
    model = WARP(factors=8, epochs=4, random_state=0, **ON).fit(train)
    seen = spy_rates(monkeypatch)
    model.partial_fit(train, epochs=2)
    assert [e for e, _ in seen] == [4, 5]
    np.testing.assert_allclose([r for _, r in seen], [expected(4), expected(5)], rtol=1e-12)


@pytest.mark.parametrize("cls", [WARP, HybridWARP])
def test_fold_in_steps_at_the_learning_rate_without_the_late_rate(planted, cls):
    train, _ = planted
    ids = np.array([f"u{u}" for u in range(train.shape[0])])
    items = np.array([f"i{i}" for i in range(train.shape[1])])
    history = pd.DataFrame({"user": ["new"] * 5, "item": items[train[0].indices[:5]]})

    def folded(late):
        model = cls(factors=8, epochs=3, random_state=0, late_rate=2.0, late_rate_epoch=0).fit(
            train, user_ids=ids, item_ids=items)
        model.set_params(late_rate=late)  # after the fit: only fold-in can tell the two apart
        model.fold_in(history, epochs=4)
        return model.user_factors_[-1]

    np.testing.assert_array_equal(folded(2.0), folded(1.0))
    np.testing.assert_array_equal(folded(4.0), folded(1.0))


def test_the_hybrid_takes_warps_schedule_without_features_and_a_constant_rate_with_them(planted, monkeypatch):
    train, _ = planted
    assert HybridWARP().late_rate is None
    plain = HybridWARP(factors=8, epochs=1, random_state=0).fit(train)
    assert plain._rates()[1] == WARP().late_rate == 2.0  # WARP's default

    class Other(WARP):  # WARP were its default another late rate
        def __init__(self, **params):
            super().__init__(**{"late_rate": 1.5, **params})

    monkeypatch.setattr(hybrid_module, "WARP", Other)
    assert plain._rates()[1] == 1.5  # it follows WARP's default, whatever that is
    n_items = train.shape[1]
    features = pd.DataFrame({"id": [str(i) for i in range(n_items)], "feature": [f"f{i % 7}" for i in range(n_items)]})
    with_features = HybridWARP(factors=8, epochs=1, random_state=0).fit(train, item_features=features)
    assert with_features._rates()[1] == 1.0
    assert with_features._step_settings(40)["learning_rate"] == HybridWARP.FEATURE_LEARNING_RATE
    assert HybridWARP(late_rate=3.0)._rates()[1] == 3.0


@pytest.mark.parametrize("bad", [{"late_rate": 0}, {"late_rate": -1.5}, {"late_rate": float("nan")},
                                 {"late_rate_epoch": -1}, {"late_rate_epoch": 2.5}])
def test_a_schedule_that_is_no_rate_is_refused(planted, bad):
    with pytest.raises(InputError, match=next(iter(bad))):
        WARP(factors=8, epochs=1, **bad).fit(planted[0])


def test_a_model_file_saved_before_the_schedule_loads_with_a_constant_rate(planted, tmp_path):
    train, _ = planted
    path = tmp_path / "m.npz"
    model = WARP(factors=8, epochs=2, random_state=0, **ON).fit(train)
    model.save(path)
    assert load(path).late_rate_epoch == 3  # a file that holds the parameter keeps it
    with np.load(path, allow_pickle=False) as z:
        members = {k: z[k] for k in z.files}
    meta = json.loads(str(members["__meta__"]))
    del meta["params"]["late_rate"], meta["params"]["late_rate_epoch"]  # as files were written before
    members["__meta__"] = np.array(json.dumps(meta))
    old = tmp_path / "old.npz"
    np.savez(old, **members)
    loaded = load(old)
    assert loaded.late_rate == 1.0  # trained with a constant rate
    assert [loaded._step_settings(e)["learning_rate"] for e in (0, 40)] == [0.02, 0.02]
    np.testing.assert_array_equal(loaded.item_factors_, model.item_factors_)
    assert loaded._step_settings(loaded.epochs_done_)["learning_rate"] == 0.02


def test_each_epoch_s_rate_is_in_history_and_in_the_log(planted, monkeypatch, tmp_path):
    """The late rate is visible: every epoch's ``history_`` entry holds the rate its steps
    took, and train's line of each epoch shows it."""
    train, _ = planted
    seen = spy_rates(monkeypatch)
    model = WARP(factors=8, epochs=5, random_state=0, **ON).fit(train)
    assert [h["learning_rate"] for h in model.history_] == [r for _, r in seen]
    np.testing.assert_allclose([h["learning_rate"] for h in model.history_], [expected(e) for e in range(5)])

    from .conftest import run
    path = tmp_path / "pairs.tsv"
    path.write_text("".join(f"u{u}\ti{(u * 5 + j) % 13}\n" for u in range(30) for j in range(4)))
    result = run("train", path, "-o", tmp_path / "m.npz", "--epochs", "5", "--factors", "4",
                 "--late-rate", "2", "--late-rate-epoch", "3", "-v")
    assert result.exit_code == 0, result.output
    epochs = [ln for ln in result.stderr.splitlines() if "fit epoch" in ln]
    assert len(epochs) == 5, result.stderr  # still one line per epoch
    assert [ln.rsplit("lr ", 1)[1] for ln in epochs] == ["0.02"] * 3 + ["0.04"] * 2, epochs


def test_a_divergence_at_the_late_rate_names_it_in_the_hint(planted):
    from mrec_warp.errors import TrainingDivergedError

    train, _ = planted
    huge = dict(factors=8, epochs=3, learning_schedule="sgd", learning_rate=1e6, user_max_norm=0, random_state=0)
    with np.errstate(all="ignore"), pytest.raises(TrainingDivergedError) as late:
        WARP(late_rate=3, late_rate_epoch=0, **huge).fit(train)
    assert "`late_rate` from 3" in str(late.value)
    with np.errstate(all="ignore"), pytest.raises(TrainingDivergedError) as constant:
        WARP(late_rate=1, **huge).fit(train)
    assert "late_rate" not in str(constant.value)
