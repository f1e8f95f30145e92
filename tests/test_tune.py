"""Hyper-parameter search: candidates, parallel trials, resumable results, the CLI."""
from __future__ import annotations

import importlib
import json

import numpy as np
import pytest
from click.testing import CliRunner

from mrec_warp.context import ExecutionContext
from mrec_warp.cli import main
from mrec_warp.errors import InputError
from mrec_warp.stages.candidates import check_grid, grid_points, random_points, read_grid
from mrec_warp.stages.tune import tune

from .faults import Fault

BASE = {"max_epochs": 6, "patience": 2}


def test_grid_points_cover_the_product_in_a_stable_order():
    points = grid_points(check_grid({"learning_rate": [0.01, 0.05], "factors": [8, 16, 32]}))
    assert len(points) == 6
    assert points[0] == {"factors": 8, "learning_rate": 0.01}
    assert len({json.dumps(p, sort_keys=True) for p in points}) == 6


def test_random_points_are_reproducible_and_in_range():
    a, b = random_points(20, seed=3), random_points(20, seed=3)
    assert a == b and a != random_points(20, seed=4)
    for p in a:
        assert p["factors"] in (16, 32, 64, 128) and 0.005 <= p["learning_rate"] <= 0.2
        assert p["user_reg"] == 0 or 1e-7 <= p["user_reg"] <= 1e-3


def test_norm_limits_may_be_null_in_grids():
    grid = check_grid({"user_max_norm": [None, 1, 1.5], "item_max_norm": 2})
    assert grid == {"user_max_norm": [None, 1.0, 1.5], "item_max_norm": [2.0]}
    with pytest.raises(InputError, match="not a valid float"):
        check_grid({"learning_rate": [None]})
    assert {p["user_max_norm"] for p in random_points(40, seed=0)} <= {None, 1.0, 1.25, 1.5, 2.0}


def test_bad_grids_are_one_line_errors(tmp_path):
    bad = tmp_path / "grid.json"
    bad.write_text('{"factors": [8,\n 16')
    with pytest.raises(InputError, match=r"grid.json:2: not valid JSON"):
        read_grid(bad)
    with pytest.raises(InputError, match="'epochs' cannot be tuned"):
        check_grid({"epochs": [5, 10]})
    with pytest.raises(InputError, match="not a valid int"):
        check_grid({"factors": [8.5]})


def test_parallel_trials_give_the_serial_table(planted):
    train, _ = planted
    points = grid_points({"factors": [4, 16], "learning_rate": [0.05, 0.1]})
    serial = tune(train, points, base=BASE, seed=1)
    parallel = tune(train, points, base=BASE, seed=1, context=ExecutionContext(n_jobs=2))
    cols = ["trial", "factors", "learning_rate", "precision@10", "epochs"]
    assert serial.table[cols].equals(parallel.table[cols])  # each trial is single-threaded and seeded
    scores = serial.table["precision@10"].to_numpy()
    assert np.all(np.diff(scores) <= 0)  # best first
    best = serial.best_params
    assert best["epochs"] >= 1 and isinstance(best["factors"], int)


def test_finished_trials_are_skipped_on_rerun(planted, tmp_path, monkeypatch):
    train, _ = planted
    points = grid_points({"factors": [4, 8, 16]})
    with monkeypatch.context() as patch:
        Fault.at("raise:2", tmp_path / "fault").install(patch)
        with pytest.raises(RuntimeError, match="injected"):
            tune(train, points, base=BASE, context=ExecutionContext(workdir=tmp_path / "w"), with_defaults=False)
    done = sorted(p.name for p in (tmp_path / "w").glob("trial-*.json"))
    assert done == ["trial-0000.json", "trial-0001.json"]
    # a finished trial's file is what the rerun reports: it is not fitted again
    row = json.loads((tmp_path / "w" / "trial-0000.json").read_text())
    row["seconds"] = 12345.0
    (tmp_path / "w" / "trial-0000.json").write_text(json.dumps(row))
    # the module, not the stage function of the same name that mrec_warp.stages exports
    tune_module = importlib.import_module("mrec_warp.stages.tune")

    ran = []
    real_run_trial = tune_module.run_trial
    monkeypatch.setattr(tune_module, "run_trial", lambda *a: ran.append(a[1]) or real_run_trial(*a))
    result = tune(train, points, base=BASE, context=ExecutionContext(workdir=tmp_path / "w"), with_defaults=False)
    assert ran == [2], "only the unfinished trial goes to a worker"
    assert result.table.set_index("trial").loc[0, "seconds"] == 12345.0
    assert len(result.table) == 3 and not (tmp_path / "w").exists()


def planted_train_file(tmp_path):
    """train.tsv of a planted low-rank set of 200 users x 90 items."""
    from tests.conftest import planted_low_rank

    train, _ = planted_low_rank(n_users=200, n_items=90, per_user=15, seed=2)
    coo = train.tocoo()
    tsv = tmp_path / "train.tsv"
    tsv.write_text("".join(f"u{u}\ti{i}\n" for u, i in zip(coo.row, coo.col)))
    return tsv


def test_cli_tune_writes_params_that_train_accepts(tmp_path):
    tsv = planted_train_file(tmp_path)
    grid = tmp_path / "grid.json"
    grid.write_text(json.dumps({"factors": [4, 8], "max_sampled": [10, 30]}))
    runner = CliRunner()
    res = runner.invoke(main, ["tune", str(tsv), "--grid", str(grid), "-o", str(tmp_path / "best.json"),
                               "--table", str(tmp_path / "trials.tsv"), "--max-epochs", "4", "--n-jobs", "2"])
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert lines[0].split()[:6] == ["trial", "model", "factors", "max_sampled", "precision@10", "vs_defaults_pct"]
    # 4 + the defaults + the popularity baseline, and the summary
    assert len(lines) == 8 and lines[-1].startswith("best: warp, precision@10 ")
    assert sum(line.split()[1] == "popularity" for line in lines[1:-1]) == 1
    best = json.loads((tmp_path / "best.json").read_text())
    assert set(best["params"]) == {"factors", "max_sampled", "epochs"} and best["trials"] == 6
    assert best["model"] == "warp" and best["score"] >= best["defaults_score"]
    res = runner.invoke(main, ["train", str(tsv), "--params", str(tmp_path / "best.json"), "-o", str(tmp_path / "m.npz")])
    assert res.exit_code == 0, res.output
    assert f"{best['params']['epochs']} epochs" in res.stdout
    res = runner.invoke(main, ["tune", str(tsv)])
    assert res.exit_code == 2 and "--grid FILE or --random N" in res.output
    # naming the family, even the default one, asks for its built-in grid
    res = runner.invoke(main, ["tune", str(tsv), "--models", "warp", "--max-epochs", "2", "-q"])
    assert res.exit_code == 0, res.output
    assert res.stdout.splitlines()[-1].startswith("best: warp")


def test_defaults_are_always_a_trial_and_win_over_worse_candidates(planted):
    train, _ = planted
    # one neighbour per item is far worse than the defaults (chosen on the trial's hold-out)
    result = tune(train, [{"model": "itemknn", "neighbours": 1}], seed=1)
    assert len(result.table) == 2
    row = result.table.iloc[0]
    # the row shows what auto chose; best.json keeps auto (train chooses again) and says what it chose
    assert bool(row["defaults"]) and row["neighbours"] > 1 and row["vs_defaults_pct"] == 0
    assert row["chosen"].startswith(f"neighbours={row['neighbours']} similarity=")
    best = result.best_json()
    assert best["params"] == {"neighbours": "auto"} and result.best_model == "itemknn"
    assert best["chosen"] == row["chosen"]
    assert result.table.iloc[1]["vs_defaults_pct"] < 0
    assert "+0.0% vs itemknn defaults" in result.summary()


def test_random_candidates_are_drawn_around_each_familys_defaults():
    from mrec_warp.models.families import FAMILIES, tunable_families

    for fam in tunable_families():
        family = FAMILIES[fam]
        defaults = family.defaults(family.space)
        for name, spec in family.space.items():
            if defaults[name] == "auto":  # chosen from the data at fit (WRMF's alpha): nothing to centre on
                continue
            if isinstance(spec, tuple):
                assert spec[1] <= defaults[name] <= spec[2] or (spec[0] == "log0" and defaults[name] == 0), (fam, name)
            else:
                assert defaults[name] in spec, (fam, name)
        for point in random_points(30, seed=1, family=fam):
            assert set(point) == set(family.space)


def test_cli_tunes_several_families_and_train_uses_the_winner(tmp_path):
    tsv = planted_train_file(tmp_path)
    grid = tmp_path / "grid.json"
    grid.write_text(json.dumps({"itemknn": {"neighbours": [5, 20]}, "ease": {"l2": [10, 1000]}}))
    runner = CliRunner()
    res = runner.invoke(main, ["tune", str(tsv), "--models", "itemknn,ease", "--grid", str(grid), "--quiet",
                               "-o", str(tmp_path / "best.json")])
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    summary = next(i for i, line in enumerate(lines) if line.startswith("best: "))
    assert lines[0].split()[:3] == ["trial", "model", "l2"] and summary == 8  # 2 defaults + 4 + popularity
    assert "vs itemknn defaults" in lines[summary] and "vs ease defaults" in lines[summary]
    assert all(line.startswith("tie: ") for line in lines[summary + 1:])  # the tie rule says what it did
    best = json.loads((tmp_path / "best.json").read_text())
    assert best["model"] in ("itemknn", "ease") and best["score"] >= best["defaults_score"]
    res = runner.invoke(main, ["train", str(tsv), "--params", str(tmp_path / "best.json"), "-o", str(tmp_path / "m.npz")])
    assert res.exit_code == 0, res.output
    assert res.stdout.startswith(f"wrote {tmp_path / 'm.npz'}: {best['model']} model")
    from mrec_warp.models import load

    model = load(tmp_path / "m.npz")
    assert type(model).__name__.lower() == best["model"]
    assert all(model.get_params()[k] == v for k, v in best["params"].items())
    res = runner.invoke(main, ["tune", str(tsv), "--models", "warp,knn"])
    assert res.exit_code == 2 and "unknown model family 'knn'" in res.output
    flat = tmp_path / "flat.json"
    flat.write_text(json.dumps({"l2": [10]}))
    res = runner.invoke(main, ["tune", str(tsv), "--models", "itemknn,ease", "--grid", str(flat)])
    assert res.exit_code != 0 and "names its family" in res.output


def test_a_damaged_split_file_in_the_work_folder_is_refused_by_the_rerun(planted, tmp_path, monkeypatch):
    from mrec_warp.data.npz import write_npz
    from mrec_warp.jobs import INPUTS_FILE

    train, _ = planted
    points, work = grid_points({"factors": [4, 8]}), tmp_path / "w"
    with monkeypatch.context() as patch:  # trial 0 finishes, trial 1 fails: the folder is kept
        Fault.at("raise:1", tmp_path / "fault").install(patch)
        with pytest.raises(RuntimeError, match="injected failure in part 1"):
            tune(train, points, base=BASE, context=ExecutionContext("processes", n_jobs=1, workdir=work),
                 with_defaults=False)
    staged = dict(np.load(work / INPUTS_FILE))  # the split the trials' processes read
    staged["fit.indptr"][1] = -10**12
    write_npz(work / INPUTS_FILE, staged)
    with pytest.raises(InputError, match="work folder is damaged"):
        tune(train, points, base=BASE, context=ExecutionContext("processes", n_jobs=1, workdir=work),
             with_defaults=False)


def test_values_kept_for_wrmf_never_weigh_the_other_families_or_the_validation():
    from tests.conftest import planted_low_rank

    # with WRMF in the search the fit split keeps play counts; EASE must score as without it,
    # and no precision may pass 1 (held-out counts once counted as that many hits)
    from mrec_warp.stages.tune import tune

    train, _ = planted_low_rank(n_users=120, n_items=60, per_user=10, seed=4)
    counts = train.copy()
    counts.data = np.random.default_rng(0).integers(1, 50, counts.nnz).astype(np.float32)
    ease = [{"model": "ease", "l2": 100.0}]
    both = tune(counts, ease + [{"model": "wrmf", "alpha": 1.0}], base={"max_epochs": 3}, use_values=True,
                with_defaults=False).table.set_index("model")["precision@10"]
    alone = tune(counts, ease, use_values=True, with_defaults=False).table.set_index("model")["precision@10"]
    assert (both <= 1).all() and both["ease"] == alone["ease"]
    binary = tune(train, ease, with_defaults=False).table.set_index("model")["precision@10"]
    assert both["ease"] == binary["ease"]


def test_the_table_keeps_counts_whole_beside_families_without_them(tmp_path):
    tsv = planted_train_file(tmp_path)
    grid = tmp_path / "grid.json"
    grid.write_text(json.dumps({"warp": {"factors": [4]}, "itemknn": {"neighbours": [5]}}))
    table = tmp_path / "trials.tsv"
    res = CliRunner().invoke(main, ["tune", str(tsv), "--models", "warp,itemknn", "--grid", str(grid), "--quiet",
                                    "--max-epochs", "4", "--table", str(table), "-o", str(tmp_path / "best.json")])
    assert res.exit_code == 0, res.output
    rows = [line.split("\t") for line in table.read_text().splitlines()]
    header, body = rows[0], rows[1:]
    for name in ("epochs", "factors", "neighbours"):
        cells = [r[header.index(name)] for r in body]
        # a count (item-kNN's defaults row: the count its auto chose), never the word auto
        assert any(cells) and all(c == "" or c.isdigit() for c in cells), (name, cells)
    chosen = [r[header.index("chosen")] for r in body]
    assert any(c.startswith("neighbours=") for c in chosen)  # item-kNN's defaults: what they chose
    assert "auto" not in res.stdout


def test_rows_show_what_auto_chose_and_name_a_setting_two_trials_ran(planted, tmp_path):
    """EASE's defaults (l2 auto) beside a grid of every l2 the choice walks: the defaults row
    shows the chosen l2, not the word auto; the grid's trial of that value is the same setting,
    and a note says so; the table file and best.json say the same as the printed table."""
    from mrec_warp.models.ease import L2_GRID

    train, _ = planted
    result = tune(train, [{"model": "ease", "l2": v} for v in L2_GRID], seed=1)
    table = result.table
    assert "auto" not in set(table["l2"].astype(str)) and "auto" not in result.format_table()
    defaults = table[table["defaults"]].iloc[0]
    assert defaults["chosen"] == f"l2={defaults['l2']:.4g}" and defaults["l2"] in L2_GRID
    twin = table[(table["l2"] == defaults["l2"]) & ~table["defaults"]]
    assert len(twin) == 1 and twin["chosen"].isna().all()  # the given value: nothing chosen
    note = f"same setting: ease trials 0 and {int(twin['trial'].iloc[0])} both ran l2={defaults['l2']:.4g} " \
           f"(trial 0 chose l2 on the hold-out)"
    assert note in result.notes and note in result.summary()
    path = tmp_path / "trials.tsv"
    table.to_csv(path, sep="\t", index=False)
    again = __import__("pandas").read_csv(path, sep="\t")
    assert list(again["l2"]) == list(table["l2"]) and list(again["chosen"].fillna("")) == list(table["chosen"].fillna(""))
    if result.best_json()["params"] == {"l2": "auto"}:  # the defaults' row won: what it chose is in best.json
        assert result.best_json()["chosen"] == defaults["chosen"]


def test_a_wrmf_grid_over_factors_shows_the_factors_auto_chose(planted):
    """WRMF's defaults (factors, alpha and regularization auto) beside factors=64: the
    defaults row shows the factors chosen, and 'chosen' tells it from the trial given 64."""
    train, _ = planted
    result = tune(train, [{"model": "wrmf", "factors": 64}], seed=1)
    rows = result.table.set_index("trial")
    assert rows.loc[0, "factors"] in (64, 128) and str(rows.loc[0, "factors"]) != "auto"
    assert rows.loc[0, "chosen"].split()[0] == f"factors={rows.loc[0, 'factors']}"
    assert {p.split("=")[0] for p in rows.loc[0, "chosen"].split()} == {"factors", "alpha", "regularization"}
    assert {p.split("=")[0] for p in rows.loc[1, "chosen"].split()} == {"alpha", "regularization"}
    assert rows.loc[1, "factors"] == 64
