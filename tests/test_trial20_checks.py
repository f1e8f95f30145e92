"""Issue 20, hostile trial: usage errors in one line, model files checked as training checks
parameters, fits refusing infinite values or no matrix."""
from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.sparse as sp

from mrec_warp.data.npz import write_npz
from mrec_warp.errors import InputError
from mrec_warp.models import EASE, SLIM, WARP, WRMF, HybridWARP, ItemKNN, Popularity
from mrec_warp.models.base import load
from .conftest import run_strict as run



def usage_line(result, command):
    """One line, click's message, a pointer to the command's help, exit 2."""
    assert result.exit_code == 2, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("Error: ") and lines[0].endswith(f" (see 'mrec-warp {command} --help')"), lines[0]
    return lines[0]


def test_usage_errors_are_one_line_for_every_command(tmp_path):
    folder = tmp_path / "data"
    folder.mkdir()
    afile = tmp_path / "afile"
    afile.write_text("u\ti\n")
    assert "data' is a directory" in usage_line(run("train", folder, "-o", tmp_path / "x.npz"), "train")
    assert "--factors" in usage_line(run("train", afile, "-o", tmp_path / "x.npz", "--factors", "1e9"), "train")
    assert "-k" in usage_line(run("recommend", afile, "-o", tmp_path / "r.tsv", "-k", "1e12"), "recommend")
    assert "Missing argument" in usage_line(run("train"), "train")
    assert run("--bogus").stderr == "Error: No such option '--bogus'. (see 'mrec-warp --help')\n"
    assert run("nosuch").stderr == "Error: No such command 'nosuch'. (see 'mrec-warp --help')\n"


# -- model files: the parameter checks of training, attributes in range, float32 factors ----
def _small_matrix():
    rng = np.random.default_rng(0)
    dense = (rng.random((20, 15)) < 0.3).astype(np.float32)
    dense[np.arange(20), np.arange(20) % 15] = 1.0
    return sp.csr_matrix(dense)


def _tampered(model, tmp_path, params=None, attrs=None, arrays=None):
    """``model`` saved, its header's params/attrs or arrays replaced, as a crafted file would."""
    path = tmp_path / "m.npz"
    model.save(path)
    with np.load(path) as z:
        members = {k: z[k] for k in z.files}
    meta = json.loads(str(members["__meta__"]))
    meta["params"].update(params or {})
    meta["attrs"].update(attrs or {})
    members["__meta__"] = np.array(json.dumps(meta))
    members.update({f"arr_{k}": v for k, v in (arrays or {}).items()})
    out = tmp_path / "crafted.npz"
    with open(out, "wb") as fh:
        write_npz(fh, members)
    return out


def _refused(path, *needles):
    with pytest.raises(InputError) as info:
        load(path)
    text = str(info.value)
    assert "\n" not in text and "train the model again" in text, text
    for needle in needles:
        assert needle in text, text
    return text


@pytest.mark.parametrize("confidence", ["linear", "log"])
def test_a_model_file_with_an_alpha_training_refuses_is_refused(tmp_path, confidence):
    model = WRMF(factors=2, epochs=1, random_state=0, confidence=confidence).fit(_small_matrix())
    _refused(_tampered(model, tmp_path, params={"alpha": 1e300}), "alpha", "1e+300")
    warp = WARP(factors=2, epochs=1, random_state=0).fit(_small_matrix())
    _refused(_tampered(warp, tmp_path, params={"alpha": 1e300, "confidence": confidence}), "alpha")
    _refused(_tampered(warp, tmp_path, params={"max_sampled": 10**12}), "max_sampled")
    assert load(_tampered(model, tmp_path, params={"alpha": 2.0})).alpha == 2.0  # a sane one still loads


def test_a_model_file_attribute_out_of_range_is_refused(tmp_path):
    model = WRMF(factors=2, epochs=1, random_state=0).fit(_small_matrix())
    _refused(_tampered(model, tmp_path, attrs={"best_epoch_": 10**30}), "best_epoch_")
    _refused(_tampered(model, tmp_path, attrs={"epochs_done_": -1}), "epochs_done_")
    _refused(_tampered(model, tmp_path, attrs={"best_epoch_": 1e30}), "best_epoch_")


@pytest.mark.parametrize("dtype", [np.float64, np.float16])
def test_factor_arrays_of_another_float_type_are_refused(tmp_path, dtype):
    warp = WARP(factors=2, epochs=1, random_state=0).fit(_small_matrix())
    _refused(_tampered(warp, tmp_path, arrays={"user_factors": warp.user_factors_.astype(dtype)}),
             "'arr_user_factors'", "expected float32")
    wrmf = WRMF(factors=2, epochs=1, random_state=0).fit(_small_matrix())
    _refused(_tampered(wrmf, tmp_path, arrays={"item_factors": wrmf.item_factors_.astype(dtype)}),
             "'arr_item_factors'", "expected float32")


def test_a_crafted_model_is_refused_by_recommend_in_one_line(tmp_path):
    model = WRMF(factors=2, epochs=1, random_state=0).fit(_small_matrix())
    crafted = _tampered(model, tmp_path, params={"alpha": 1e300})
    result = run("recommend", crafted, "-o", tmp_path / "r.tsv")
    assert result.exit_code == 2 and len(result.stderr.splitlines()) == 1, result.stderr
    assert "alpha" in result.stderr and not (tmp_path / "r.tsv").exists()


# -- fit: infinite values and no matrix are refused by every family ------------------------
_FAMILIES = [(WARP, {"factors": 2, "epochs": 1}), (WRMF, {"factors": 2, "epochs": 1}), (Popularity, {}),
             (ItemKNN, {}), (SLIM, {}), (EASE, {}), (HybridWARP, {"factors": 2, "epochs": 1})]


@pytest.mark.parametrize("cls, params", _FAMILIES, ids=[c.__name__ for c, _ in _FAMILIES])
def test_fit_refuses_an_infinite_value(cls, params):
    X = _small_matrix()
    X.data[3] = np.inf
    with pytest.raises(InputError, match=r"1 stored value is negative or not a number, or infinite \(the first in row"):
        cls(**params).fit(X)


@pytest.mark.parametrize("cls, params", _FAMILIES, ids=[c.__name__ for c, _ in _FAMILIES])
@pytest.mark.parametrize("bad", [None, 5, [1.0, 2.0]], ids=["None", "number", "1-D"])
def test_fit_refuses_what_is_no_matrix(cls, params, bad):
    with pytest.raises(InputError, match="must be a users x items matrix") as info:
        cls(**params).fit(bad)
    assert "\n" not in str(info.value)


# -- hints that name the parameter at fault ------------------------------------------------
def _ratings(tmp_path):
    path = tmp_path / "t.tsv"
    path.write_text("".join(f"u{u}\ti{(u * 7 + j) % 13}\t{j + 1}\n" for u in range(20) for j in range(4)))
    return path


def test_wrmf_with_a_huge_regularization_is_told_to_lower_it(tmp_path):
    result = run("train", _ratings(tmp_path), "-o", tmp_path / "m.npz", "--model", "wrmf",
                 "--regularization", "3e38", "--epochs", "2")
    line = usage_free_line(result)
    assert "lower --regularization from 3e+38" in line and "raise" not in line
    assert not (tmp_path / "m.npz").exists()


def test_hybrid_with_a_huge_unnormalised_identity_weight_is_told_to_lower_it(tmp_path):
    features = tmp_path / "f.tsv"
    features.write_text("i1\tgenre:a\n")
    result = run("train", _ratings(tmp_path), "-o", tmp_path / "h.npz", "--model", "hybrid", "--item-features",
                 features, "--identity-weight", "1e30", "--no-normalize", "--epochs", "2")
    line = usage_free_line(result)
    assert line.index("lower --identity-weight from 1e+30") < line.index("learning rate"), line


def test_tune_names_k_as_the_user_gave_it(tmp_path):
    result = run("tune", _ratings(tmp_path), "-o", tmp_path / "tune", "--models", "warp", "-k", "1000000000000")
    line = usage_free_line(result)
    assert "-k must be an integer >= 1" in line and "eval" not in line


def usage_free_line(result):
    assert result.exit_code == 2, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    return lines[0]


def test_a_model_file_with_an_unknown_id_encoding_is_refused(tmp_path):
    model = WARP(factors=2, epochs=1, random_state=0).fit(_small_matrix())
    _refused(_tampered(model, tmp_path, attrs={"id_encoding_": "utf-16"}), "id encoding 'utf-16'")
    assert load(_tampered(model, tmp_path, attrs={"id_encoding_": "latin-1"})).id_encoding_ == "latin-1"
