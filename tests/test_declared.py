"""Declared parameters: one declaration per model class, and what is generated from it."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import click
import numpy as np
import pytest
import scipy.sparse as sp

from mrec_warp.cli._flags import flags_of
from mrec_warp.cli._model_options import option_parameters
from mrec_warp.cli.train import train as train_command
from mrec_warp.errors import InputError
from mrec_warp.models import EASE, load
from mrec_warp.models.declared import Param, declared, hyper_parameters, parameter_tables, signature_mismatches
from mrec_warp.models.families import FAMILIES, REGISTRY, epoch_families, tunable_families

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("cls", sorted(REGISTRY.values(), key=lambda c: c.__name__), ids=lambda c: c.__name__)
def test_each_declaration_matches_its_constructor(cls):
    assert signature_mismatches(cls) == []


def test_a_drifted_declaration_is_caught():
    class Drifted(EASE):
        PARAMETERS = EASE.PARAMETERS[:1] + (EASE.PARAMETERS[1].replace(default="float64"),) + EASE.PARAMETERS[2:]

    assert signature_mismatches(Drifted) == ["Drifted.dtype: declared default 'float64', __init__ has 'float32'"]


def test_the_committed_parameter_table_is_the_generated_one():
    committed = (ROOT / "docs" / "reference" / "parameters.rst").read_text(encoding="utf-8")
    assert committed == parameter_tables(FAMILIES), "run: python scripts/write_parameter_table.py"


def test_the_table_script_writes_the_same_text(tmp_path):
    spec = importlib.util.spec_from_file_location("write_parameter_table", ROOT / "scripts" / "write_parameter_table.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    api = ROOT / "docs" / "reference" / "api.rst"
    (tmp_path / "api.rst").write_text(api.read_text(encoding="utf-8"), encoding="utf-8")
    assert script.main(["x", str(tmp_path / "p.rst"), "--api", str(tmp_path / "api.rst")]) == 0
    assert (tmp_path / "p.rst").read_text(encoding="utf-8") == parameter_tables(FAMILIES)
    assert (tmp_path / "api.rst").read_text(encoding="utf-8") == api.read_text(encoding="utf-8")


def test_placement_settings_are_neither_tuned_nor_tabled():
    table = parameter_tables(FAMILIES)
    for name in ("n_jobs", "verbose", "backend", "scheduler"):
        assert f"``{name}``" not in table
        assert all(name not in fam.tunable and name not in fam.space for fam in FAMILIES.values())
    assert {p.name for p in declared(FAMILIES["slim"].cls) if p.placement} == {"n_jobs", "backend", "scheduler"}


# what train had before its options were generated: each flag and its choices (None: no choice)
OLD_OPTIONS = {
    "--factors": None, "--loss": ["warp", "bpr", "warp-kos"], "--kos-k": None, "--kos-n": None,
    "--learning-rate": None, "--learning-schedule": ["adagrad", "sgd"], "--user-reg": None, "--item-reg": None,
    "--max-sampled": None, "--user-max-norm": None, "--item-max-norm": None, "--item-bias": "bool",
    "--epochs": None, "--max-epochs": None, "--patience": None, "--eval-every": None, "--min-improvement": None,
    "--validation-fraction": None, "--refit": "bool", "--warm-epochs": None, "--identity": "bool",
    "--identity-weight": None, "--normalize": "bool", "--neighbours": None,
    "--similarity": ["cosine", "tfidf", "bm25", "auto"], "--shrink": None, "--l1": None, "--l2": None, "--topk": None,
    "--ease-dtype": ["float64", "float32"], "--max-items": None, "--memory-limit-mb": None,
    "--confidence": ["none", "linear", "log"], "--alpha": None, "--eps": None,
    "--confidence-use": ["sample", "weight"], "--regularization": None,
}


def test_train_keeps_every_model_option_and_its_choices():
    options = {opt: p for p in train_command.params if isinstance(p, click.Option) for opt in p.opts}
    for name, choices in OLD_OPTIONS.items():
        assert name in options, name
        param = options[name]
        if choices == "bool":
            assert param.is_flag and param.secondary_opts == ["--no-" + name[2:]] and param.default is None
        elif choices is not None:
            assert sorted(param.type.choices) == sorted(choices), name
    assert "--beta" in options  # rp3beta's, from its declaration alone


def test_model_options_are_the_declared_ones_and_the_flags_follow_the_declarations():
    declared_names = {p.name for fam in FAMILIES.values() for p in hyper_parameters(fam.cls) if p.option}
    assert set(option_parameters().values()) == declared_names
    assert option_parameters()["ease_dtype"] == "dtype"
    flags = flags_of(train_command)
    assert {"decay", "eval_k", "cg_steps"}.isdisjoint(flags)  # no option: messages keep their names
    assert (flags["dtype"], flags["random_state"], flags["beta"]) == ("--ease-dtype", "--seed", "--beta")


def test_a_shared_name_says_each_familys_default():
    options = {p.name: p for p in train_command.params}
    assert options["l2"].help == ("slim: L2 penalty (auto: chosen on the hold-out among 30, 100, 300; 100 with "
                                  "--no-select) [auto]; ease: lambda, the L2 penalty on the weights (auto: chosen "
                                  "on the hold-out among 25-3200; 200 with --no-select) [auto].")
    assert options["factors"].help == ("warp, hybrid: Latent dimensions [64]; wrmf: Latent dimensions; auto: chosen on "
                                       "the hold-out (--select), else 64 [auto].")


# tune's families as they were written by hand before the declarations (with the search
# ranges moved around the suite's new defaults: itemknn 800 neighbours, wrmf alpha auto)
OLD_FAMILIES = {
    "warp": ({"factors": int, "learning_rate": float, "user_reg": float, "item_reg": float, "max_sampled": int,
              "loss": str, "learning_schedule": str, "item_bias": bool, "user_max_norm": float,
              "item_max_norm": float, "kos_k": int, "kos_n": int},
             {"factors": [32, 64, 128], "learning_rate": ("log", 0.007, 0.06), "user_reg": ("log0", 1e-7, 1e-4),
              "item_reg": ("log0", 1e-7, 1e-4), "max_sampled": [20, 50, 100], "user_max_norm": [None, 1.0, 1.25, 1.5]},
             {"factors": [32, 128]}, {"user_max_norm", "item_max_norm"}),
    "itemknn": ({"neighbours": int, "similarity": str, "shrink": float, "bm25_k1": float, "bm25_b": float},
                {"neighbours": ("logint", 100, 1600), "similarity": ["cosine", "tfidf", "bm25"],
                 "shrink": ("log0", 1.0, 100.0)},
                {"neighbours": [200, 800, 1600], "similarity": ["cosine", "tfidf", "bm25"]}, set()),
    "slim": ({"l1": float, "l2": float, "topk": int}, {"l1": ("log", 0.5, 10.0), "l2": ("log", 50.0, 800.0)},
             {"l1": [1.0, 2.0, 5.0], "l2": [100.0, 200.0, 500.0]}, set()),
    "ease": ({"l2": float}, {"l2": ("log", 100.0, 1600.0)}, {"l2": [100.0, 200.0, 400.0, 800.0, 1600.0]}, set()),
    "wrmf": ({"factors": int, "alpha": float, "regularization": float, "confidence": str, "cg_steps": int},
             {"factors": [32, 64, 128], "alpha": ("log", 0.3, 30.0), "regularization": ("log", 1.0, 200.0),
              "confidence": ["linear", "log"]},
             {"factors": [32, 64, 128]}, set()),  # alpha and regularization: each trial chooses them
}


@pytest.mark.parametrize("name", sorted(OLD_FAMILIES))
def test_tunes_space_is_generated_unchanged(name):
    tunable, space, grid, nullable = OLD_FAMILIES[name]
    fam = FAMILIES[name]
    assert (fam.tunable, fam.space, fam.grid, set(fam.nullable)) == (tunable, space, grid, nullable)


def test_tunable_and_epoch_families_follow_the_registry():
    # derived from the registry (a new family joins without editing this test)
    assert tunable_families() == tuple(name for name, fam in FAMILIES.items() if fam.searchable)
    assert {"warp", "itemknn", "slim", "ease", "wrmf", "rp3beta"} <= set(tunable_families())
    assert epoch_families() == tuple(name for name in tunable_families() if FAMILIES[name].cls.early_stopping)
    assert {"warp", "wrmf"} <= set(epoch_families())
    assert not FAMILIES["hybrid"].searchable and not FAMILIES["popularity"].searchable


def _bad_value(param: Param):
    if param.type is bool:
        return 2
    if param.type is str:
        return "nope"
    return "a"


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_checked_parameter_is_refused_by_name(family):
    cls = FAMILIES[family].cls
    for param in declared(cls):
        if not param.check or (param.type is str and not param.choices):
            continue
        with pytest.raises(InputError, match=f"{param.name}"):
            cls(**{param.name: _bad_value(param)}).check_params()
    cls().check_params()  # the defaults pass


def test_constructors_take_n_jobs_and_an_old_file_with_it_loads(tmp_path):
    X = sp.csr_matrix(np.array([[1, 1, 0], [0, 1, 1], [1, 0, 1]], dtype=np.float32))
    model = EASE(l2=1.0, n_jobs=2).fit(X)
    model.save(tmp_path / "e.npz")
    back = load(tmp_path / "e.npz")
    assert back.n_jobs == 2 and back.l2 == 1.0
