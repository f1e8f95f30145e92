"""The stage functions (``mrec_warp.train`` ...) as a Python caller uses them: they do what
the commands do (same model, same rows), and their errors name parameters, which the CLI
alone turns into flags."""
from __future__ import annotations

import io
import json
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

import mrec_warp as mw
from mrec_warp import InputError
from mrec_warp.context import ExecutionContext
from mrec_warp.errors import ParameterError, Reference
from mrec_warp.models import WARP, WRMF, HybridWARP, load
from mrec_warp.stages import UnknownParameterError, cold_start
from mrec_warp.stages.prepare import prepare_outputs

from .conftest import error_line, planted_low_rank, run
from .faults import Fault


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A training file of 120 users x 80 items with counts, and a file of item features."""
    train, _ = planted_low_rank(n_users=120, n_items=80, per_user=15, seed=5)
    coo = train.tocoo()
    d = tmp_path_factory.mktemp("stages")
    rng = np.random.default_rng(0)
    ratings = pd.DataFrame({"user": [f"u{u}" for u in coo.row], "item": [f"i{i}" for i in coo.col],
                            "value": rng.integers(1, 6, coo.nnz)})
    ratings.to_csv(d / "train.tsv", sep="\t", header=False, index=False)
    tags = pd.DataFrame({"item": [f"i{i}" for i in range(80)], "tag": [f"t{i % 7}" for i in range(80)]})
    tags.to_csv(d / "items.tsv", sep="\t", header=False, index=False)
    return SimpleNamespace(folder=d, train=d / "train.tsv", items=d / "items.tsv")



def read_tsv(path_or_text, names):
    source = io.StringIO(path_or_text) if isinstance(path_or_text, str) else path_or_text
    return pd.read_csv(source, sep="\t", header=None, names=names, dtype=str, keep_default_na=False)


# -- recommend --------------------------------------------------------------------------------------
def test_recommend_writes_the_rows_of_the_command(files, tmp_path):
    assert run("train", files.train, "-o", tmp_path / "m.npz", "--factors", "8", "--epochs", "2", "-q").exit_code == 0
    users = tmp_path / "users.txt"
    users.write_text("u3\nu1\nu3\n")
    result = mw.recommend(tmp_path / "m.npz", tmp_path / "lib.tsv", k=500, users=users)
    seen = read_tsv(files.train, ["user", "item", "value"]).groupby("user").size()
    assert (result.rows, result.users) == (2 * 80 - seen["u3"] - seen["u1"], 2)  # k capped, seen items excluded
    assert any("repeated" in n for n in result.notes) and any("`k=500`" in n for n in result.notes)
    cli = run("recommend", tmp_path / "m.npz", "-o", tmp_path / "cli.tsv", "-k", "500", "--users", users)
    assert cli.exit_code == 0 and "--k" not in cli.output
    assert (tmp_path / "lib.tsv").read_bytes() == (tmp_path / "cli.tsv").read_bytes()


def test_recommend_errors_name_parameters(files, tmp_path):
    assert run("train", files.train, "-o", tmp_path / "m.npz", "--model", "popularity", "-q").exit_code == 0
    other = tmp_path / "other.tsv"
    other.write_text("".join(f"x{u}\ty{u}\n" for u in range(20)))
    with pytest.raises(InputError, match="`train` does not match the model"):
        mw.recommend(tmp_path / "m.npz", tmp_path / "r.tsv", train=other)
    cli = run("recommend", tmp_path / "m.npz", "-o", tmp_path / "r.tsv", "--train", other)
    assert cli.exit_code != 0 and "--train does not match the model" in cli.output
    assert not (tmp_path / "r.tsv").exists()


# -- train ------------------------------------------------------------------------------------------
def test_train_returns_the_model_the_cli_writes(files, tmp_path):
    result = mw.train(files.train, tmp_path / "lib.npz", params={"factors": 8, "epochs": 3}, seed=7)
    assert isinstance(result.model, WARP) and result.model_name == "warp"
    assert (result.n_users, result.n_items, result.epochs) == (120, 80, 3)
    assert run("train", files.train, "-o", tmp_path / "cli.npz", "--factors", "8", "--epochs", "3", "--seed", "7",
               "-q").exit_code == 0
    from_cli = load(tmp_path / "cli.npz")
    users = [f"u{u}" for u in range(120)]
    expected = from_cli.recommend_frame(users, k=10)
    pd.testing.assert_frame_equal(result.model.recommend_frame(users, k=10), expected)
    pd.testing.assert_frame_equal(load(tmp_path / "lib.npz").recommend_frame(users, k=10), expected)


def test_train_without_output_writes_nothing(files, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = mw.train(files.train, model="popularity")
    assert result.output is None and list(tmp_path.iterdir()) == []
    assert result.model.recommend_frame(["u1"], k=3)["item"].tolist() == \
        load_popularity_via_cli(files, tmp_path).recommend_frame(["u1"], k=3)["item"].tolist()


def load_popularity_via_cli(files, tmp_path):
    assert run("train", files.train, "-o", tmp_path / "pop.npz", "--model", "popularity", "-q").exit_code == 0
    return load(tmp_path / "pop.npz")


def test_explicit_params_win_over_the_params_file_and_zero_norm_means_no_limit(files, tmp_path):
    params = tmp_path / "best.json"
    params.write_text(json.dumps({"model": "warp", "params": {"factors": 6, "learning_rate": 0.07}}))
    model = mw.train(files.train, params_file=params, params={"learning_rate": 0.03, "epochs": 1,
                                                              "item_max_norm": 0}).model
    assert (model.factors, model.learning_rate, model.epochs, model.item_max_norm) == (6, 0.03, 1, None)


def test_a_params_file_names_the_model(files, tmp_path):
    params = tmp_path / "best.json"
    params.write_text(json.dumps({"model": "wrmf", "params": {"factors": 4, "epochs": 1}}))
    result = mw.train(files.train, params_file=params)
    assert isinstance(result.model, WRMF) and result.model_name == "wrmf"


def test_errors_name_parameters_and_the_cli_shows_flags(files, tmp_path):
    with pytest.raises(InputError) as caught:
        mw.train(files.train, model="popularity", params={"confidence": "log"})
    assert "--" not in str(caught.value)
    assert str(caught.value) == ("`confidence` is used by `model=warp` or wrmf, not `model=popularity` "
                                 "(drop `confidence`, or train `model=warp`)")
    assert caught.value.params == ("confidence", "model")
    assert caught.value.references == (Reference("confidence"), Reference("model", "warp"),
                                       Reference("model", "popularity"))
    assert error_line(caught.value) == ("--confidence is used by --model warp or wrmf, not --model popularity "
                                        "(drop --confidence, or train --model warp)")
    result = run("train", files.train, "-o", tmp_path / "m.npz", "--model", "popularity", "--confidence", "log")
    assert result.exit_code == 2
    assert result.output == f"Error: {error_line(caught.value)}\n"
    with pytest.raises(InputError, match=r"`sub_models` needs `model=warp`, not `model=ease`"):
        mw.train(files.train, model="ease", sub_models=2)
    with pytest.raises(InputError, match=r"`alpha`, `eps` and `confidence_use` only matter with a confidence"):
        mw.train(files.train, params={"alpha": 2.0})
    with pytest.raises(InputError, match="unknown `model=lightfm`"):
        mw.train(files.train, model="lightfm")


def test_a_parameter_of_another_family_lists_the_family_s_own(files, tmp_path):
    with pytest.raises(UnknownParameterError) as caught:
        mw.train(files.train, model="ease", params={"factors": 8})
    exc = caught.value
    assert (exc.parameter, exc.model, exc.source) == ("factors", "ease", None)
    assert exc.accepted == ("dtype", "l2", "max_items", "memory_limit_mb", "select", "topk")  # n_jobs is the context's
    assert str(exc) == ("`factors` does not apply to `model=ease` "
                        "(its options: `dtype`, `l2`, `max_items`, `memory_limit_mb`, `select`, `topk`)")
    # the CLI lists flags, and only the options train has
    result = run("train", files.train, "-o", tmp_path / "m.npz", "--model", "ease", "--factors", "8")
    assert result.output == ("Error: --factors does not apply to --model ease "
                             "(its options: --ease-dtype, --l2, --max-items, --memory-limit-mb, --select, --topk)\n")
    params = tmp_path / "p.json"
    params.write_text(json.dumps({"validation_users": 10}))
    with pytest.raises(UnknownParameterError) as caught:
        mw.train(files.train, model="slim", params_file=params)
    assert caught.value.source == str(params)
    assert str(caught.value).startswith(f"'validation_users' (from {params}) does not apply to `model=slim`")
    assert "`max_iter`" in str(caught.value)  # a parameter the CLI has no option for
    assert "--max-iter" not in error_line(caught.value) and "max_iter" not in error_line(caught.value)


def test_confidence_reads_the_value_column(files):
    weighted = mw.train(files.train, params={"confidence": "log", "factors": 4, "epochs": 1})
    assert weighted.model.confidence == "log"
    ones = files.folder / "pairs.tsv"
    read_tsv(files.train, ["user", "item", "value"])[["user", "item"]].to_csv(ones, sep="\t", header=False,
                                                                                index=False)
    with pytest.raises(InputError, match="`confidence` needs a value column") as caught:
        mw.train(ones, params={"confidence": "log"})
    assert caught.value.path == str(ones)


def test_hybrid_training_reads_feature_files_and_refuses_them_for_other_models(files):
    result = mw.train(files.train, model="hybrid", item_features=files.items, params={"factors": 4, "epochs": 1})
    assert isinstance(result.model, HybridWARP) and "t3" in set(result.model.item_feature_names)
    with pytest.raises(InputError, match=r"feature files need `model=hybrid`, not `model=warp`"):
        mw.train(files.train, item_features=files.items, params={"epochs": 1})


def test_sub_models_run_on_the_context_s_workers(files, tmp_path):
    context = ExecutionContext("threads", n_jobs=2, workdir=tmp_path / "parts")
    log = io.StringIO()
    result = mw.train(files.train, sub_models=2, params={"factors": 8, "epochs": 2}, context=context,
                      progress=mw.Progress(verbose=True, stream=log))
    assert [m["factors"] for m in result.sub_models] == [4, 4]
    assert result.model.user_factors.shape == (120, 8)
    assert f"fit: 2 sub-models of 4, 4 factors in {tmp_path / 'parts'}" in log.getvalue()


def _planted_data():
    from mrec_warp.data.interactions import Interactions

    train, _ = planted_low_rank(n_users=150, n_items=60, per_user=12, seed=2)
    return Interactions(train, [f"u{i}" for i in range(150)], [f"i{j}" for j in range(60)])


def test_default_sub_models_give_the_same_model_on_any_number_of_workers(tmp_path, monkeypatch):
    from mrec_warp.stages.submodels import DEFAULT_SUB_MODELS, fit_submodels

    from mrec_warp.workers import FORCE_N_JOBS_ENV

    monkeypatch.setenv(FORCE_N_JOBS_ENV, "1")  # 3 workers even on a 2-core machine: the count is the point
    data, params = _planted_data(), {"factors": 6, "epochs": 3}
    plain = WARP(**params, random_state=4, n_jobs=1).fit(data)  # one sub-model is the plain fit
    for n in (1, 2, 3):
        model = fit_submodels(data, params, ExecutionContext("processes", n_jobs=n), random_state=4)
        assert len(model.sub_models_) == DEFAULT_SUB_MODELS
        np.testing.assert_array_equal(model.user_factors_, plain.user_factors_)
        np.testing.assert_array_equal(model.item_factors_, plain.item_factors_)
    # a work folder started on 3 workers resumes on 2 (it used to say "differs in: sub_models")
    wd = tmp_path / "work"
    with monkeypatch.context() as patch:
        Fault.at("raise:0", tmp_path / "fault").install(patch)
        with pytest.raises(RuntimeError, match="injected failure"):
            fit_submodels(data, params, ExecutionContext("processes", n_jobs=3, workdir=wd), random_state=4)
    assert (wd / "job.json").exists()
    model = fit_submodels(data, params, ExecutionContext("processes", n_jobs=2, workdir=wd), random_state=4)
    np.testing.assert_array_equal(model.user_factors_, plain.user_factors_)
    assert not wd.exists()


def test_sub_models_on_processes_log_every_epoch_on_the_driver(tmp_path):
    from mrec_warp.stages.submodels import fit_submodels

    log, wd = io.StringIO(), tmp_path / "work"
    fit_submodels(_planted_data(), {"factors": 4, "epochs": 3}, ExecutionContext("processes", n_jobs=2, workdir=wd,
                                                                                 keep_parts=True),
                  n_models=2, progress=mw.Progress(verbose=True, stream=log))
    lines = log.getvalue().splitlines()
    for i in (0, 1):
        epochs = [n for n, line in enumerate(lines) if f"sub-model {i}: fit epoch " in line]
        done = [n for n, line in enumerate(lines) if f"sub-model {i}: 3 epochs" in line]
        assert len(epochs) == 3 and len(done) == 1 and max(epochs) < done[0], log.getvalue()
    assert (wd / "submodel-001.npz").exists() and not list(wd.glob("*.log"))  # parts kept, logs removed
    # a quiet run gives its units no log file at all
    fit_submodels(_planted_data(), {"factors": 4, "epochs": 1}, ExecutionContext("processes", n_jobs=2,
                                                                                 workdir=tmp_path / "quiet",
                                                                                 keep_parts=True), n_models=2)
    assert not list((tmp_path / "quiet").glob("*.log"))


def test_log_relay_shows_lines_while_the_unit_still_runs(tmp_path):
    import time

    from mrec_warp.unit_logs import FileLog, LogRelay

    out, path = io.StringIO(), tmp_path / "u.log"
    path.write_text("sub-model 0: an earlier run's line\n")
    with LogRelay([path, tmp_path / "none-yet.log"], mw.Progress(verbose=True, stream=out), interval=0.02):
        FileLog(path, "sub-model 0: ").log("fit epoch   1")
        with open(path, "a") as fh:
            fh.write("half a li")  # being written: waits for its end of line
        deadline = time.monotonic() + 30
        while "fit epoch   1" not in out.getvalue():  # arrives without the unit finishing
            assert time.monotonic() < deadline, out.getvalue()
            time.sleep(0.02)
        with open(path, "a") as fh:
            fh.write("ne\n")
    lines = [line.split("] ", 1)[1] for line in out.getvalue().splitlines()]
    assert lines == ["sub-model 0: fit epoch   1", "half a line"]
    FileLog(tmp_path / "gone" / "u.log").log("a line nobody can write does not fail the unit")


# -- cold start ---------------------------------------------------------------------------------------
def test_cold_start_folds_in_a_history(files, tmp_path):
    model = mw.train(files.train, params={"factors": 4, "epochs": 2}).model
    history = tmp_path / "history.tsv"
    history.write_text("newcomer\ti3\nnewcomer\ti5\nu1\ti7\n")
    extended = cold_start(model, history=history, fold_in_epochs=2)
    assert extended.changed and extended.users == ["newcomer", "u1"]
    assert "newcomer" in set(extended.model.user_ids)
    with pytest.raises(InputError, match=r"`item_features` needs a hybrid model, this is a WARP") as caught:
        cold_start(model, "m.npz", item_features=files.items)
    assert error_line(caught.value) == ("m.npz: --item-features needs a hybrid model, this is a WARP "
                                        "(train a hybrid model (--model hybrid))")
    assert str(caught.value).endswith("(train a hybrid model (`model=hybrid`))")  # reads as well in Python


def test_featureless_users_are_the_new_users_with_no_known_feature(files, tmp_path):
    users = tmp_path / "users.tsv"
    users.write_text("u1\tstudent\nu2\tretired\n")
    model = mw.train(files.train, model="hybrid", user_features=users, params={"factors": 4, "epochs": 1}).model
    assert not model.featureless_users().any()
    newcomers = pd.DataFrame({"id": ["a", "b"], "feature": ["student", "astronaut"]})
    grown = model.with_new_users(newcomers)
    assert grown.featureless_users()[model.n_users:].tolist() == [False, True]


def test_fold_in_epochs_are_refused_for_a_model_whose_fold_in_has_none(files, tmp_path):
    history = tmp_path / "history.tsv"
    history.write_text("newcomer\ti3\nnewcomer\ti5\n")
    wrmf = mw.train(files.train, model="wrmf", params={"factors": 4, "epochs": 1}).model
    with pytest.raises(InputError) as caught:
        cold_start(wrmf, "w.npz", history=history, fold_in_epochs=5)
    assert error_line(caught.value) == ("w.npz: --fold-in-epochs does not apply to a WRMF, whose fold-in has no "
                                        "epochs (drop --fold-in-epochs: it is for warp and hybrid models)")
    assert cold_start(wrmf, "w.npz", history=history).users == ["newcomer"]  # without it: the exact solve
    wrmf.save(tmp_path / "w.npz")
    result = run("recommend", tmp_path / "w.npz", "-o", tmp_path / "r.tsv", "--history", history,
                 "--fold-in-epochs", 5)
    assert result.exit_code == 2 and "--fold-in-epochs does not apply to a WRMF" in result.output
    assert not (tmp_path / "r.tsv").exists()

# -- tune -------------------------------------------------------------------------------------------
def test_tune_reads_a_path_as_train_does(files, tmp_path):
    from mrec_warp.stages._inputs import load_interactions

    points = [{"model": "itemknn", "neighbours": 5}, {"model": "wrmf", "factors": 4, "max_epochs": 2}]
    from_path = mw.tune(str(files.train), points, k=5)
    from_data = mw.tune(load_interactions(files.train, values=True, required=False), points, k=5)
    cols = ["trial", "model", "precision@5"]
    pd.testing.assert_frame_equal(from_path.table[cols], from_data.table[cols])
    # a path's value column is WRMF's confidence, as `mrec-warp tune` weighs it
    weighed = mw.tune(load_interactions(files.train, values=True, required=False), points, k=5, use_values=True)
    binary = mw.tune(load_interactions(files.train, values=True, required=False), points, k=5, use_values=False)
    pd.testing.assert_frame_equal(from_path.table[cols], weighed.table[cols])
    wrmf = from_path.table["model"] == "wrmf"
    assert not np.allclose(from_path.table.loc[wrmf, "precision@5"], binary.table.loc[wrmf, "precision@5"])
    # the validation file too, as a path (here: the training file itself, so every pair is known)
    with_val = mw.tune(files.train, points[:1], validation=files.train, k=5, with_defaults=False)
    assert with_val.table["precision@5"].notna().all()


# -- similar and explain ------------------------------------------------------------------------------
def test_similar_gives_the_rows_of_the_command(files, tmp_path):
    mw.train(files.train, tmp_path / "m.npz", params={"factors": 8, "epochs": 2})
    result = mw.similar(tmp_path / "m.npz", "i3,i7", k=4)
    assert result.notes == []
    cli = run("similar", tmp_path / "m.npz", "--items", "i3,i7", "-k", "4")
    assert cli.exit_code == 0
    rows = read_tsv(cli.output, ["item", "similar_item", "score", "rank"])
    assert rows[["item", "similar_item"]].values.tolist() == result.frame[["item", "similar_item"]].values.tolist()
    # a model object and a list of ids work too; k is capped with a note
    capped = mw.similar(result.model, ["i3"], k=500)
    assert len(capped.frame) == 79 and capped.notes == ["`k=500` is more than the 79 other items there are; "
                                                        "using `k=79`"]
    cli = run("similar", tmp_path / "m.npz", "--items", "i3", "-k", "500")
    assert cli.stderr == "note: -k 500 is more than the 79 other items there are; using -k 79\n"


def test_similar_errors_name_parameters(files, tmp_path):
    model = mw.train(files.train, params={"factors": 4, "epochs": 1}).model
    with pytest.raises(InputError, match=r"item ' i7' is not in the model") as caught:
        mw.similar(model, "i3, i7")
    assert "`items` takes ids exactly as given between commas" in caught.value.hint
    assert "(did you mean 'i7'?)" in str(caught.value)  # the one place of a did-you-mean: after the id
    assert "write --items 'a,b', not 'a, b')" in error_line(caught.value)
    with pytest.raises(ParameterError, match=r"give exactly one of `items` or `items_file`"):
        mw.similar(model)
    model.save(tmp_path / "m.npz")
    usage = run("similar", tmp_path / "m.npz")  # the CLI shows it as a usage error: one line
    assert usage.exit_code == 2
    assert usage.stderr == "Error: give exactly one of --items or --items-file (see 'mrec-warp similar --help')\n"
    with pytest.raises(InputError, match="no item factors"):
        mw.similar(mw.train(files.train, model="popularity").model, "i3")


def test_explain_gives_the_rows_of_the_command(files, tmp_path):
    mw.train(files.train, tmp_path / "w.npz", model="wrmf", params={"factors": 4, "epochs": 2})
    result = mw.explain(tmp_path / "w.npz", "u3", "i1,i2", k=3)
    cli = run("explain", tmp_path / "w.npz", "--user", "u3", "--items", "i1,i2", "-k", "3")
    assert cli.exit_code == 0
    rows = read_tsv(cli.output, ["user", "item", "score", "history_item", "contribution", "rank"])
    assert rows[["item", "history_item"]].values.tolist() == result.frame[["item", "history_item"]].values.tolist()
    assert set(result.frame["item"]) == {"i1", "i2"}
    with pytest.raises(InputError, match="cannot explain") as caught:
        mw.explain(mw.train(files.train, params={"factors": 4, "epochs": 1}).model, "u3")
    assert error_line(caught.value).endswith("(train a wrmf model (--model wrmf))")
    assert str(caught.value).endswith("(train a wrmf model (`model=wrmf`))")


# -- prepare ----------------------------------------------------------------------------------------
def test_prepare_writes_what_prepare_outputs_lists(files, tmp_path):
    summary = mw.prepare(files.train, tmp_path / "cv", num_splits=2, seed=3)
    written = sorted(p.relative_to(tmp_path) for p in (tmp_path / "cv").rglob("*") if p.is_file())
    assert written == sorted(p.relative_to(tmp_path) for p in prepare_outputs(tmp_path / "cv", num_splits=2))
    assert [s["split"] for s in summary["splits"]] == [0, 1]


def test_the_cli_s_log_lines_name_flags(files, tmp_path):
    result = run("train", files.train, "-o", tmp_path / "m.npz", "--epochs", "1", "--factors", "4",
                 "--backend", "processes", "-v")
    assert result.exit_code == 0, result.output
    assert "value column (3rd) ignored: every row is a positive of weight 1 (--confidence log to weight by it)" \
        in result.stderr
    assert "(use --sub-models K to fit independent sub-models on processes)" in result.stderr
    assert "`" not in result.stderr


def test_similar_takes_a_whole_string_that_is_an_id_as_that_id(tmp_path):
    rows = [(f"u{u}", item) for u in range(30) for item in ("Warhammer 40,000", "Warhammer 40", "000", f"g{u % 5}")]
    pd.DataFrame(rows).to_csv(tmp_path / "t.tsv", sep="\t", header=False, index=False)
    assert run("train", tmp_path / "t.tsv", "-o", tmp_path / "m.npz", "--model", "itemknn", "-q").exit_code == 0
    assert mw.similar(tmp_path / "m.npz", "Warhammer 40,000", k=2).frame["item"].unique().tolist() == \
        ["Warhammer 40,000"]
    # a string that is not an id is still a comma-separated list
    assert mw.similar(tmp_path / "m.npz", "g1,g2", k=2).frame["item"].unique().tolist() == ["g1", "g2"]


def test_recommend_leaves_a_model_it_is_given_as_it_was(files, tmp_path):
    model = mw.train(files.train, params={"factors": 4, "epochs": 1}).model
    history = tmp_path / "h.tsv"
    history.write_text("newcomer\ti1\nnewcomer\ti2\n")
    before = (model.n_users, model.user_factors_.copy())
    result = mw.recommend(model, tmp_path / "r.tsv", k=3, history=history)
    assert result.users == 1 and (tmp_path / "r.tsv").read_text().startswith("newcomer\t")
    assert model.n_users == before[0] and np.array_equal(model.user_factors_, before[1])
