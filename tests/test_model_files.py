"""Model files and work-folder part files as untrusted input (issue 10).

Every crafted file is made here, in tmp_path, from a small model saved by the package. Each
row of :data:`CASES` damages one thing; loading must then be a one-line ``InputError``
naming the file and the defect, and ``recommend`` / ``similar`` must exit 2 with that line
(never a traceback, never a signal, never a plausible list).
"""
from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from mrec_warp.cli import main
from mrec_warp.context import ExecutionContext
from mrec_warp.data.interactions import Interactions
from mrec_warp.errors import InputError
from mrec_warp.models import WARP, HybridWARP, Popularity, load

from .conftest import planted_low_rank

N_USERS, N_ITEMS, FACTORS = 60, 40, 4


@pytest.fixture(scope="module")
def data():
    train, _ = planted_low_rank(n_users=N_USERS, n_items=N_ITEMS, per_user=8, seed=3)
    return Interactions(train, [f"user {u}" for u in range(N_USERS)], [f"item {i}" for i in range(N_ITEMS)])


@pytest.fixture(scope="module")
def model_files(data, tmp_path_factory):
    """One saved model of each class: {"WARP": path, "Popularity": path, "HybridWARP": path}."""
    d = tmp_path_factory.mktemp("models")
    feats = pd.DataFrame({"id": [f"item {i}" for i in range(N_ITEMS)], "feature": [f"g{i % 3}" for i in range(N_ITEMS)]})
    models = {
        "WARP": WARP(factors=FACTORS, epochs=1, random_state=0).fit(data),
        "Popularity": Popularity().fit(data),
        "HybridWARP": HybridWARP(factors=FACTORS, epochs=1, random_state=0).fit(data, item_features=feats),
    }
    paths = {}
    for name, model in models.items():
        paths[name] = d / f"{name}.npz"
        model.save(paths[name])
    return paths


def members(path: Path) -> dict:
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def get_meta(m: dict) -> dict:
    return json.loads(str(m["__meta__"]))


def with_meta(**changes):
    """A mutation of the JSON header: each key set (or removed when the value is ``DROP``)."""
    def mutate(m):
        meta = get_meta(m)
        for dotted, value in changes.items():
            *parents, key = dotted.split("__")
            node = meta
            for p in parents:
                node = node[p]
            if value is DROP:
                node.pop(key)
            else:
                node[key] = value
        m["__meta__"] = np.array(json.dumps(meta))
    return mutate


DROP = object()


def setter(key, fn):
    def mutate(m):
        m[key] = fn(m[key].copy(), m)
    return mutate


def reverse_rows(indices, m):
    indptr = m["train_indptr"]
    return np.concatenate([indices[a:b][::-1] for a, b in zip(indptr[:-1], indptr[1:])]).astype(indices.dtype)


def put(i, v):
    def fn(a, m):
        a[i] = v
        return a
    return fn


def nan_all(a, m):
    a[...] = np.nan
    return a


def pickled_ids(a, m):
    return np.array([object()] + list(a[1:]), dtype=object)


def replace_meta(value):
    def mutate(m):
        m["__meta__"] = value
    return mutate


# (id, model class, mutation of the archive's members, words the one-line error must contain)
CASES = [
    # the training matrix (CSR structure) used to exclude seen items
    # (new files hold the smallest unsigned types; signed ones, as format 1 wrote, may be negative)
    ("indptr_huge_negative", "WARP", setter("train_indptr", lambda a, m: put(-2, -10**12)(a.astype(np.int64), m)), "index pointer"),
    ("indptr_huge_unsigned", "WARP", setter("train_indptr", lambda a, m: put(-2, 2**64 - 5)(a.astype(np.uint64), m)), "index pointer"),
    ("indptr_starts_at_1", "WARP", setter("train_indptr", put(0, 1)), "index pointer runs from 1"),
    ("indptr_decreasing", "WARP", setter("train_indptr", put(5, 0)), "decreases at row"),
    ("indptr_zeroed_rows", "WARP", setter("train_indptr", lambda a, m: np.where(np.arange(len(a)) < len(a) - 1, 0, a[-1])), "not sorted"),
    ("indptr_wrong_length", "WARP", setter("train_indptr", lambda a, m: a[:-3]), "train_indptr"),
    ("indptr_2d", "WARP", setter("train_indptr", lambda a, m: a.reshape(1, -1)), "train_indptr"),
    ("indptr_float", "WARP", setter("train_indptr", lambda a, m: a.astype(np.float64)), "has type"),
    ("indices_reversed_rows", "WARP", setter("train_indices", reverse_rows), "not sorted"),
    ("indices_duplicate", "WARP", setter("train_indices", lambda a, m: np.where(np.arange(len(a)) == 1, a[0], a)), "not sorted"),
    ("indices_out_of_range", "WARP", setter("train_indices", put(3, N_ITEMS + 7)), "outside"),
    ("indices_negative", "WARP", setter("train_indices", lambda a, m: put(3, -1)(a.astype(np.int32), m)), "outside"),
    # ids
    ("user_ids_duplicate", "WARP", setter("user_ids", lambda a, m: np.where(np.arange(len(a)) == 1, a[0], a)), "more than once"),
    ("item_ids_numbers", "WARP", setter("item_ids", lambda a, m: np.arange(len(a))), "has type"),
    ("user_ids_2d", "WARP", setter("user_ids", lambda a, m: a.reshape(2, -1)), "user_ids"),
    ("item_ids_pickled_objects", "WARP", setter("item_ids", pickled_ids), "Python objects"),
    ("item_ids_missing", "WARP", lambda m: m.pop("item_ids"), "lacks"),
    # the model's own arrays
    ("factors_all_nan", "WARP", setter("arr_item_factors", nan_all), "NaN"),
    ("factors_inf", "WARP", setter("arr_user_factors", put((2, 1), np.inf)), "infinite"),
    ("factors_1d", "WARP", setter("arr_user_factors", lambda a, m: a.ravel()), "user_factors"),
    ("factors_wrong_width", "WARP", setter("arr_item_factors", lambda a, m: np.hstack([a, a])), "item_factors"),
    ("factors_wrong_rows", "WARP", setter("arr_user_factors", lambda a, m: a[:-1]), "user_factors"),
    ("factors_integers", "WARP", setter("arr_user_factors", lambda a, m: a.astype(np.int32)), "has type"),
    ("bias_wrong_length", "WARP", setter("arr_item_bias", lambda a, m: a[:-1]), "item_bias"),
    ("bias_missing", "WARP", lambda m: m.pop("arr_item_bias"), "lacks"),
    ("popularity_nan_counts", "Popularity", setter("arr_item_counts", nan_all), "NaN"),
    ("popularity_negative_counts", "Popularity", setter("arr_item_counts", put(0, -5)), "negative"),
    ("popularity_counts_2d", "Popularity", setter("arr_item_counts", lambda a, m: a.reshape(1, -1)), "item_counts"),
    ("hybrid_raw_indptr_negative", "HybridWARP", setter("arr_item_raw_indptr", put(-2, -10**12)), "index pointer"),
    ("hybrid_raw_indices_out_of_range", "HybridWARP", setter("arr_item_raw_indices", put(0, 99)), "outside"),
    ("hybrid_raw_weights_nan", "HybridWARP", setter("arr_item_raw_data", put(0, np.nan)), "NaN"),
    ("hybrid_identity_beyond_embeddings", "HybridWARP", setter("arr_item_identity", put(0, 10**6)), "identity"),
    ("hybrid_identity_negative", "HybridWARP", setter("arr_user_identity", put(0, -7)), "identity"),
    ("hybrid_feature_names_duplicate", "HybridWARP", setter("arr_item_feature_names", lambda a, m: np.array([a[0]] * len(a))), "more than once"),
    ("hybrid_new_id_too_long", "HybridWARP", setter("arr_new_item_ids", lambda a, m: np.array(["x" * 70_000])), "the limit is 65,536"),
    ("hybrid_embeddings_nan", "HybridWARP", setter("arr_user_embeddings", nan_all), "NaN"),
    ("hybrid_bias_wrong_length", "HybridWARP", setter("arr_item_feature_bias", lambda a, m: a[:-1]), "item feature biases"),
    # the JSON header
    ("version_text", "WARP", with_meta(format_version="abc"), "format_version"),
    ("version_fraction", "WARP", with_meta(format_version=1.9), "format_version"),
    ("version_negative", "WARP", with_meta(format_version=-5), "format_version"),
    ("version_missing", "WARP", with_meta(format_version=DROP), "format_version"),
    ("version_newer", "WARP", with_meta(format_version=99), "newer"),
    ("class_unknown", "WARP", with_meta(**{"class": "EvilModel"}), "unknown model class"),
    ("class_not_text", "WARP", with_meta(**{"class": ["WARP"]}), "unknown model class"),
    ("format_other", "WARP", with_meta(format="something-else"), "not an mrec-warp model file"),
    ("params_not_object", "WARP", with_meta(params=[1, 2]), "'params' is not an object"),
    ("param_factors_text", "WARP", with_meta(params__factors="x"), "factors"),
    ("param_factors_negative", "WARP", with_meta(params__factors=-3), "factors"),
    ("param_factors_mismatch", "WARP", with_meta(params__factors=FACTORS + 1), "user_factors"),
    ("param_learning_rate_text", "WARP", with_meta(params__learning_rate="fast"), "learning_rate"),
    ("param_loss_unknown", "WARP", with_meta(params__loss="nope"), "loss must be one of"),
    ("param_identity_weight_zero", "HybridWARP", with_meta(params__identity_weight=0.0), "identity_weight"),
    ("attrs_not_object", "WARP", with_meta(attrs="x"), "'attrs' is not an object"),
    ("attr_epochs_text", "WARP", with_meta(attrs__epochs_done_="x"), "epochs_done_"),
    ("meta_not_json", "WARP", replace_meta(np.array("{not json")), "not valid JSON"),
    ("meta_not_object", "WARP", replace_meta(np.array("[1, 2, 3]")), "expected an object"),
    ("meta_number", "WARP", replace_meta(np.array(5)), "__meta__"),
    ("meta_missing", "WARP", lambda m: m.pop("__meta__"), "not an mrec-warp model file"),
    ("meta_pickled", "WARP", replace_meta(np.array([{"format": "mrec-warp-model"}], dtype=object)), "Python objects"),
]


def craft(model_files, tmp_path, cls, mutate) -> Path:
    m = members(model_files[cls])
    mutate(m)
    out = tmp_path / "crafted.npz"
    np.savez(out, **m)  # (object arrays are pickled by savez: the loader must refuse them)
    return out


def check_one_line(exc: InputError, path: Path, needle: str) -> None:
    text = str(exc)
    assert "\n" not in text and text.startswith(str(path)), text
    assert needle in text, text


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_damaged_model_file_is_a_one_line_error(model_files, tmp_path, case):
    _, cls, mutate, needle = case
    path = craft(model_files, tmp_path, cls, mutate)
    with pytest.raises(InputError) as info:
        load(path)
    check_one_line(info.value, path, needle)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_damaged_model_file_on_the_command_line(model_files, tmp_path, case):
    # in-process for speed; the subprocess tests below run the real entry point
    _, cls, mutate, needle = case
    path = craft(model_files, tmp_path, cls, mutate)
    runner = CliRunner()
    for args in (["recommend", path, "-o", tmp_path / "recs.tsv"], ["similar", path, "-o", tmp_path / "sim.tsv"]):
        result = runner.invoke(main, [str(a) for a in args])
        assert result.exit_code == 2, (result.output, result.exception)
        lines = [ln for ln in result.output.splitlines() if ln.strip()]
        assert len(lines) == 1 and lines[0].startswith(f"Error: {path}") and needle in lines[0], result.output
    assert not (tmp_path / "recs.tsv").exists() and not (tmp_path / "sim.tsv").exists()


# the real console entry point, in a subprocess: one case of each kind, and both commands
# on the cases that crashed the kernels (exit 139) or printed tracebacks
SUBPROCESS_CASES = [
    ("indptr_huge_negative", "recommend"), ("indptr_huge_negative", "similar"),
    ("indices_reversed_rows", "recommend"), ("factors_all_nan", "similar"),
    ("factors_1d", "recommend"), ("indptr_starts_at_1", "similar"), ("version_text", "recommend"),
    ("param_factors_text", "similar"), ("item_ids_pickled_objects", "recommend"),
    ("hybrid_raw_indptr_negative", "recommend"),
]


def run_cli(*args):
    proc = subprocess.run([sys.executable, "-m", "mrec_warp", *map(str, args)], capture_output=True, text=True,
                          timeout=300)
    return proc


def assert_one_line_exit_2(proc, path, needle=""):
    assert proc.returncode == 2, (proc.returncode, proc.stderr)  # not a signal (negative), not 1
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"Error: {path}") and needle in lines[0], proc.stderr


@pytest.mark.parametrize("name,command", SUBPROCESS_CASES, ids=[f"{n}-{c}" for n, c in SUBPROCESS_CASES])
def test_damaged_model_file_in_a_subprocess(model_files, tmp_path, name, command):
    _, cls, mutate, needle = next(c for c in CASES if c[0] == name)
    path = craft(model_files, tmp_path, cls, mutate)
    out = tmp_path / "out.tsv"
    assert_one_line_exit_2(run_cli(command, path, "-o", out), path, needle)
    assert not out.exists()


# -- files that are not model files at all --------------------------------------------------------
NOT_MODELS = [
    ("tsv", b"user 1\titem 1\nuser 2\titem 2\n"),
    ("empty", b""),
    ("npy", None),  # a plain .npy array
    ("truncated", "half"),
]


@pytest.mark.parametrize("kind,content", NOT_MODELS, ids=[k for k, _ in NOT_MODELS])
def test_other_files_are_not_model_files(model_files, tmp_path, kind, content):
    path = tmp_path / "model.npz"
    if content is None:
        np.save(tmp_path / "a.npy", np.arange(10))
        (tmp_path / "a.npy").rename(path)
    elif content == "half":
        raw = model_files["WARP"].read_bytes()
        path.write_bytes(raw[: len(raw) // 2])
    else:
        path.write_bytes(content)
    with pytest.raises(InputError) as info:
        load(path)
    # an empty file is refused by the check every model read makes first, as the commands say it
    check_one_line(info.value, path, "model file is empty" if kind == "empty" else "not an mrec-warp model file")
    assert "pickled" not in str(info.value)


def test_tsv_given_as_model_in_a_subprocess(tmp_path):
    path = tmp_path / "train.tsv"
    path.write_text("user 1\titem 1\n")
    assert_one_line_exit_2(run_cli("recommend", path, "-o", tmp_path / "out.tsv"), path,
                           "not an mrec-warp model file")


# -- decompression bombs --------------------------------------------------------------------------
BOMB_BYTES = 40 * 2**20  # 40 MB of zeros deflate to about 40 KB


def add_member(path: Path, name: str, payload_chunks, compress=zipfile.ZIP_DEFLATED) -> None:
    with zipfile.ZipFile(path, "a", compression=compress, allowZip64=True) as zf:
        info = zipfile.ZipInfo(name)
        info.compress_type = compress
        with zf.open(info, "w", force_zip64=True) as fh:
            for chunk in payload_chunks:
                fh.write(chunk)


def zeros(n: int, chunk: int = 4 * 2**20):
    block = bytes(chunk)
    for start in range(0, n, chunk):
        yield block[: min(chunk, n - start)]


def npy_header(shape, dtype) -> bytes:
    import io

    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)),
                                               "fortran_order": False, "shape": shape})
    return buf.getvalue()


def opened_members(monkeypatch):
    """Record the names of the zip members opened while loading."""
    names = []
    real_open = zipfile.ZipFile.open

    def spy(self, name, *args, **kwargs):
        names.append(name.filename if isinstance(name, zipfile.ZipInfo) else name)
        return real_open(self, name, *args, **kwargs)

    monkeypatch.setattr(zipfile.ZipFile, "open", spy)
    return names


def test_unknown_member_is_never_decompressed(model_files, tmp_path, monkeypatch):
    path = tmp_path / "model.npz"
    path.write_bytes(model_files["WARP"].read_bytes())
    add_member(path, "junk.npy", [npy_header((BOMB_BYTES,), np.uint8), *zeros(BOMB_BYTES)])
    assert path.stat().st_size < 2 * 2**20
    names = opened_members(monkeypatch)
    model = load(path)
    assert "junk.npy" not in names
    ref = load(model_files["WARP"])
    np.testing.assert_array_equal(model.recommend(k=5)[0], ref.recommend(k=5)[0])


def test_bomb_in_a_known_member_is_refused_before_decompressing(model_files, tmp_path, monkeypatch):
    # user_ids replaced by 10M one-character ids: 40 MB declared, 40 KB stored
    m = members(model_files["WARP"])
    m.pop("user_ids")
    path = tmp_path / "model.npz"
    np.savez(path, **m)
    n = BOMB_BYTES // 4
    add_member(path, "user_ids.npy", [npy_header((n,), "<U1"), *zeros(BOMB_BYTES)])
    with pytest.raises(InputError) as info:
        load(path)
    check_one_line(info.value, path, "decompression bomb")


def test_forged_npy_shape_is_refused_without_allocating(model_files, tmp_path):
    # the header claims a 4 TB array; the member holds a few bytes
    m = members(model_files["WARP"])
    m.pop("arr_user_factors")
    path = tmp_path / "model.npz"
    np.savez(path, **m)
    add_member(path, "arr_user_factors.npy", [npy_header((10**12, FACTORS), np.float32), bytes(64)])
    for load_it in (lambda: load(path),):
        with pytest.raises(InputError) as info:
            load_it()
        check_one_line(info.value, path, "user_factors")
    proc = run_cli("similar", path, "-o", tmp_path / "out.tsv")
    assert_one_line_exit_2(proc, path, "user_factors")


def test_forged_member_sizes_are_checked_against_the_npy_header(model_files, tmp_path):
    # a consistent shape but more bytes than the shape needs: refused, not truncated or padded
    m = members(model_files["WARP"])
    bias = m.pop("arr_item_bias")
    path = tmp_path / "model.npz"
    np.savez(path, **m)
    add_member(path, "arr_item_bias.npy", [npy_header(bias.shape, bias.dtype), bias.tobytes(), bytes(10**6)])
    with pytest.raises(InputError) as info:
        load(path)
    check_one_line(info.value, path, "item_bias")


# -- valid files still load, fast paths unchanged ---------------------------------------------------
def test_unknown_header_entries_are_ignored_not_applied(model_files, tmp_path):
    # an attribute the class does not save must not overwrite fitted state on load;
    # a negative n_jobs (all cores but ...) is a valid parameter
    path = craft(model_files, tmp_path, "WARP", with_meta(attrs__user_factors_=5, attrs__train_="x",
                                                          params__no_such_param=1, params__n_jobs=-1))
    model = load(path)
    assert model.n_jobs == -1
    ref = load(model_files["WARP"])
    np.testing.assert_array_equal(model.recommend(k=5)[0], ref.recommend(k=5)[0])


def test_fortran_ordered_arrays_load_as_contiguous(model_files, tmp_path):
    path = craft(model_files, tmp_path, "WARP", setter("arr_item_factors", lambda a, m: np.asfortranarray(a)))
    model = load(path)
    assert model.item_factors_.flags.c_contiguous
    np.testing.assert_array_equal(model.item_factors_, load(model_files["WARP"]).item_factors_)


# -- work-folder part files -----------------------------------------------------------------------
SUBMODEL_DAMAGE = [
    ("nan_factors", lambda m: m.__setitem__("user_factors", np.full_like(m["user_factors"], np.nan)), "NaN"),
    ("short_item_factors", lambda m: m.__setitem__("item_factors", m["item_factors"][:-1]), "item_factors"),
    ("pickled_bias", lambda m: m.__setitem__("item_bias", np.array([object()] * N_ITEMS)), "Python objects"),
    ("text", None, "not a work-folder file"),
]


@pytest.mark.parametrize("name,damage,needle", SUBMODEL_DAMAGE, ids=[d[0] for d in SUBMODEL_DAMAGE])
def test_tampered_submodel_part_is_a_one_line_error(data, tmp_path, name, damage, needle):
    from mrec_warp.stages.submodels import fit_submodels

    wd = tmp_path / "work"
    params = {"factors": FACTORS, "epochs": 1}
    fit_submodels(data, params, ExecutionContext(workdir=wd, keep_parts=True), n_models=2)
    part = wd / "submodel-001.npz"
    if damage is None:
        part.write_text("not an archive\n")
    else:
        m = members(part) if name != "pickled_bias" else dict(np.load(part))
        damage(m)
        np.savez(part, **m)
    with pytest.raises(InputError) as info:
        fit_submodels(data, params, ExecutionContext(workdir=wd, keep_parts=True), n_models=2)
    check_one_line(info.value, part, needle)
    assert "delete" in str(info.value)


def test_tampered_train_part_is_a_one_line_error(data, tmp_path):
    from mrec_warp.stages.submodels import read_training_inputs, write_training_inputs

    path = tmp_path / "inputs.npz"
    write_training_inputs(data, path)
    m = members(path)
    m["train.indices"] = reverse_rows(m["train.indices"], {"train_indptr": m["train.indptr"]})
    np.savez(path, **m)
    with pytest.raises(InputError) as info:
        read_training_inputs(path)
    check_one_line(info.value, path, "not sorted")


@pytest.mark.parametrize("which", ["users_out_of_range", "exclude_unsorted", "exclude_wrong_width"])
def test_tampered_recommend_inputs_are_one_line_errors(model_files, tmp_path, which):
    from mrec_warp.stages.recommend import _recommend_part

    model = load(model_files["WARP"])
    excl = model.train_
    users = np.arange(10)
    shape, indices = np.array(excl.shape, np.int64), excl.indices.copy()
    if which == "users_out_of_range":
        users[3] = 10**6
    elif which == "exclude_unsorted":
        indices = reverse_rows(indices, {"train_indptr": excl.indptr})
    else:
        shape[1] += 5
    inputs = tmp_path / "inputs.npz"  # one staged file holds a job's users and exclusions
    np.savez(inputs, **{"users": users, "exclude.indptr": excl.indptr.astype(np.int64), "exclude.indices": indices,
                        "exclude.shape": shape})
    with pytest.raises(InputError) as info:
        _recommend_part(model, str(tmp_path), 0, 0, 10, str(inputs), "staged", "staged", 5, "tsv", None)
    assert str(info.value).startswith(str(inputs)) and "\n" not in str(info.value)
    assert not list(tmp_path.glob("part-*"))


def test_saving_the_same_model_twice_gives_the_same_bytes(tmp_path):
    # members carry a fixed date (np.savez stamps the time), so equal models are equal files
    import time

    train, _ = planted_low_rank(n_users=40, n_items=60, per_user=8)
    model = WARP(factors=4, epochs=1, random_state=0).fit(train)
    model.save(tmp_path / "a.npz")
    time.sleep(2.1)  # zip dates have a 2-second resolution
    model.save(tmp_path / "b.npz")
    assert (tmp_path / "a.npz").read_bytes() == (tmp_path / "b.npz").read_bytes()
    np.testing.assert_array_equal(load(tmp_path / "b.npz").user_factors_, model.user_factors_)


def test_an_empty_model_file_gets_the_hint_of_a_model_file(tmp_path):
    path = tmp_path / "empty.npz"
    path.write_bytes(b"")
    proc = run_cli("recommend", path, "-o", tmp_path / "out.tsv")
    assert_one_line_exit_2(proc, path, "model file is empty")
    assert "train the model again" in proc.stderr and "interaction" not in proc.stderr


@pytest.mark.parametrize("where", ["before", "between", "after"])
def test_a_model_file_larger_than_its_archive_is_refused_before_it_is_read(model_files, tmp_path, where):
    """Gigabytes of zeros in front of a valid model (a sparse hole here), or junk between its
    members or after its directory: refused from the zip directory alone, by load and by the
    server's reader (which would otherwise read the whole file and copy it)."""
    import resource

    from mrec_warp.serving.holder import read_model

    good = model_files["WARP"].read_bytes()
    path = tmp_path / "grown.npz"
    with zipfile.ZipFile(model_files["WARP"]) as archive:
        second = sorted(archive.infolist(), key=lambda info: info.header_offset)[1].header_offset
    if where == "before":
        with open(path, "wb") as fh:
            fh.seek(2 << 30)
            fh.write(good)
    elif where == "between":
        path.write_bytes(good[:second] + b"\0" * 100_000 + good[second:])
    else:
        path.write_bytes(good + b"\0" * 5_000)
    with pytest.raises(InputError) as info:
        load(path)
    check_one_line(info.value, path, "belong to no zip member")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(InputError, match="belong to no zip member") as info:
        read_model(str(path))
    assert str(path) in str(info.value)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak < 512 * 1024  # KiB: the file was not read
