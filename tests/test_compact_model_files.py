"""Compact model files of the item-item models: column indices in the smallest unsigned type,
EASE's kept weights as float16 (rounded at fit, so a loaded model scores bit for bit as the
fitted one), index and id members deflated; hostile compact files refused in one line, and
files laid out as before (int32 indices, float32 values, stored) still load."""
from __future__ import annotations

import io
import zipfile

import numpy as np
import pytest

from mrec_warp.data.npz import RATIO_SLACK, NpzArchive, write_npz
from mrec_warp.errors import InputError
from mrec_warp.models import EASE, SLIM, ItemKNN, load
from mrec_warp.models import ease as ease_module
from tests.test_ease_means import long_tail

N_ITEMS = 1000


@pytest.fixture(scope="module")
def train():
    return long_tail(n_users=300, n_items=N_ITEMS)


@pytest.fixture(scope="module")
def models(train):
    return {
        "ease": EASE(l2=20.0, topk=10).fit(train),
        "slim": SLIM(topk=10, max_iter=20).fit(train),
        "itemknn": ItemKNN(neighbours=10).fit(train),
    }


def _saved(model, path):
    model.save(path)
    with zipfile.ZipFile(path) as z:
        infos = {i.filename[:-4]: i for i in z.infolist()}
        arrays = {name: np.load(io.BytesIO(z.read(i))) for name, i in infos.items()}
    return arrays, infos


def _rewrite(path, arrays, deflate=()):
    with open(path, "wb") as fh:
        write_npz(fh, arrays, deflate)


@pytest.mark.parametrize("family", ["ease", "slim", "itemknn"])
def test_the_file_holds_compact_types_and_loads_bit_for_bit(models, family, tmp_path):
    model = models[family]
    arrays, infos = _saved(model, tmp_path / "m.npz")
    assert arrays["arr_weights_indices"].dtype == np.uint16  # 1,000 items
    assert arrays["train_indices"].dtype == np.uint16 and arrays["train_indptr"].dtype == np.uint16  # 3,600
    assert arrays["arr_weights_indptr"].dtype.kind == "u"
    # EASE's weights were rounded to float16 precision at fit: float16 on disk, deflated;
    # SLIM's and item-kNN's were not: float32, stored as they are
    half = family == "ease"
    assert arrays["arr_weights_data"].dtype == (np.float16 if half else np.float32)
    assert infos["arr_weights_data"].compress_type == (zipfile.ZIP_DEFLATED if half else zipfile.ZIP_STORED)
    if half:
        assert np.array_equal(model.weights_.data.astype(np.float16).astype(np.float32), model.weights_.data)
    for name in ("arr_weights_indices", "train_indices", "item_ids"):
        assert infos[name].compress_type == zipfile.ZIP_DEFLATED, name
    assert infos["arr_item_counts"].compress_type == zipfile.ZIP_STORED  # float32: barely shrinks
    back = load(tmp_path / "m.npz")
    assert back.weights_.dtype == np.float32 and back.weights_.indices.dtype.kind == "i"
    users = np.arange(model.n_users)
    np.testing.assert_array_equal(back.score_users(users), model.score_users(users))
    np.testing.assert_array_equal(back.recommend(users, k=10)[0], model.recommend(users, k=10)[0])


@pytest.mark.parametrize("family", ["ease", "slim", "itemknn"])
def test_only_files_with_float16_say_format_2(models, family, tmp_path):
    # a reader of format 1 cannot read float16 (scipy refuses it): it must say "upgrade" for
    # those files, and keep reading the others (unsigned indices and deflated members it reads)
    import json
    arrays, _ = _saved(models[family], tmp_path / "m.npz")
    assert json.loads(str(arrays["__meta__"]))["format_version"] == (2 if family == "ease" else 1)
    assert load(tmp_path / "m.npz").n_items == N_ITEMS


def _as_format_1(arrays):
    """The same model laid out as files of format 1 before compact storage held it."""
    import json
    old = dict(arrays)
    meta = json.loads(str(arrays["__meta__"]))
    meta["format_version"] = 1
    old["__meta__"] = np.array(json.dumps(meta))
    old["train_indptr"] = arrays["train_indptr"].astype(np.int64)
    old["train_indices"] = arrays["train_indices"].astype(np.int32)
    old["arr_weights_indptr"] = arrays["arr_weights_indptr"].astype(np.int64)
    old["arr_weights_indices"] = arrays["arr_weights_indices"].astype(np.int32)
    old["arr_weights_data"] = arrays["arr_weights_data"].astype(np.float32)
    if "arr_kept_items" in old:
        old["arr_kept_items"] = arrays["arr_kept_items"].astype(np.int64)
    return old


@pytest.mark.parametrize("family", ["ease", "slim", "itemknn"])
def test_files_laid_out_as_before_load_with_the_same_scores_and_are_larger(models, family, tmp_path):
    model = models[family]
    arrays, _ = _saved(model, tmp_path / "new.npz")
    _rewrite(tmp_path / "old.npz", _as_format_1(arrays))  # int32 / int64 / float32, nothing deflated
    old = load(tmp_path / "old.npz")
    users = np.arange(model.n_users)
    np.testing.assert_array_equal(old.score_users(users), model.score_users(users))
    new_size, old_size = (tmp_path / "new.npz").stat().st_size, (tmp_path / "old.npz").stat().st_size
    # EASE: 2-byte indices and values, deflated, against 8 bytes a weight; others: the indices
    assert new_size <= (0.5 if family == "ease" else 0.8) * old_size, (new_size, old_size)


def test_ease_weights_are_float16_exact_and_a_tenth_of_dense(models, train, tmp_path):
    sparse = models["ease"]
    assert np.array_equal(sparse.weights_.data.astype(np.float16).astype(np.float32), sparse.weights_.data)
    dense = EASE(l2=20.0, topk=0).fit(train)
    dense.save(tmp_path / "dense.npz")
    sparse.save(tmp_path / "sparse.npz")
    # 10 of 1,000 weights per item: the file is the training rows and ids, and about 2% of the matrix
    assert (tmp_path / "sparse.npz").stat().st_size <= 0.05 * (tmp_path / "dense.npz").stat().st_size


def test_the_estimated_file_size_is_an_upper_bound_close_to_the_file(models, train, tmp_path):
    model = models["ease"]
    model.save(tmp_path / "m.npz")
    size = (tmp_path / "m.npz").stat().st_size
    cost = ease_module.estimate(train, "float32", 10)
    assert size <= cost.file_bytes <= 2 * size, (size, cost.file_bytes)
    assert cost.file_bytes <= 0.05 * cost.dense_file_bytes


def _crafted(models, family, tmp_path, **changes):
    arrays, _ = _saved(models[family], tmp_path / "good.npz")
    for name, change in changes.items():
        arrays[name] = change(arrays[name].copy())
    _rewrite(tmp_path / "bad.npz", arrays, deflate=[n for n, a in arrays.items() if a.dtype.kind in "uU"])
    return tmp_path / "bad.npz"


def _put(i, value):
    def change(a):
        a[i] = value
        return a
    return change


@pytest.mark.parametrize("family,changes,needle", [
    ("ease", {"arr_weights_indices": _put(3, N_ITEMS)}, "column index 1000 is outside 0..999"),
    ("ease", {"arr_weights_indices": _put(3, 65535)}, "column index 65535 is outside"),
    ("slim", {"arr_weights_indices": _put(0, 60000)}, "outside"),
    ("ease", {"train_indices": _put(5, N_ITEMS + 1)}, "outside"),
    ("ease", {"arr_weights_data": _put(7, np.float16("nan"))}, "NaN"),
    ("ease", {"arr_weights_data": _put(7, np.float16("inf"))}, "infinite"),
    ("itemknn", {"arr_weights_indptr": _put(4, 0)}, "decreases"),
    ("ease", {"arr_weights_indices": lambda a: a[:-1]}, "weights"),
    # a narrow type's differences wrap around: an unsorted row must still be seen
    ("ease", {"arr_weights_indices": lambda a: np.concatenate([a[:2][::-1], a[2:]])}, "not sorted"),
])
def test_a_hostile_compact_file_is_one_line(models, family, changes, needle, tmp_path):
    path = _crafted(models, family, tmp_path, **changes)
    with pytest.raises(InputError) as info:
        load(path)
    text = str(info.value)
    assert "\n" not in text and text.startswith(str(path)) and needle in text, text


def test_a_member_that_would_look_like_a_bomb_is_stored_not_deflated(tmp_path):
    # identical rows deflate a thousandfold: the reader would refuse its own file
    repetitive = np.zeros(2 * RATIO_SLACK, dtype=np.uint16)
    varied = np.random.default_rng(0).integers(0, 1000, RATIO_SLACK, dtype=np.uint16)
    small = np.zeros(1000, dtype=np.uint16)
    path = tmp_path / "a.npz"
    members = {"repetitive": repetitive, "varied": varied, "small": small}
    _rewrite(path, members, deflate=list(members))
    with zipfile.ZipFile(path) as z:
        kinds = {i.filename: i.compress_type for i in z.infolist()}
    assert kinds == {"repetitive.npy": zipfile.ZIP_STORED, "varied.npy": zipfile.ZIP_DEFLATED,
                     "small.npy": zipfile.ZIP_DEFLATED}
    with NpzArchive(path, "a test archive", "rewrite it") as archive:
        for name, arr in (("repetitive", repetitive), ("varied", varied), ("small", small)):
            np.testing.assert_array_equal(archive.read(name, "u", (None,)), arr)


class _Stream(io.RawIOBase):
    """A pipe's end: written in order, never rewound."""

    def __init__(self) -> None:
        self.chunks = []

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def write(self, data) -> int:
        self.chunks.append(bytes(data))
        return len(data)


@pytest.mark.parametrize("where", ["a file", "a stream", "a buffer after other bytes"])
def test_the_bomb_rule_holds_wherever_the_archive_goes(tmp_path, where):
    repetitive = np.zeros(2 * RATIO_SLACK, dtype=np.uint16)
    varied = np.random.default_rng(1).integers(0, 1000, RATIO_SLACK, dtype=np.uint16)
    members = {"varied": varied, "repetitive": repetitive}
    if where == "a file":
        _rewrite(tmp_path / "a.npz", members, deflate=list(members))
        data = (tmp_path / "a.npz").read_bytes()
    elif where == "a stream":
        stream = _Stream()
        write_npz(stream, members, deflate=list(members))
        data = b"".join(stream.chunks)
    else:  # written again from where it began, the bytes before it kept
        buffer = io.BytesIO()
        buffer.write(b"prefix")
        write_npz(buffer, members, deflate=list(members))
        assert buffer.getvalue().startswith(b"prefix")
        data = buffer.getvalue()[len(b"prefix"):]
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        kinds = {i.filename: i.compress_type for i in z.infolist()}
        assert np.array_equal(np.load(io.BytesIO(z.read("repetitive.npy"))), repetitive)
    assert kinds == {"varied.npy": zipfile.ZIP_DEFLATED, "repetitive.npy": zipfile.ZIP_STORED}


def test_float16_rounding_is_all_or_nothing():
    from mrec_warp.data.npz import compact_values, round_to_float16
    values = np.array([0.1, -3.0e-3, 0.0, 2.5], dtype=np.float32)
    rounded = round_to_float16(values)
    assert rounded.dtype == np.float32 and rounded[0] == np.float32(np.float16(0.1)) and rounded[0] != values[0]
    assert compact_values(rounded).dtype == np.float16  # exact: the file holds float16
    # one value beyond float16's largest: nothing is rounded, and the file keeps float32
    mixed = np.append(values, np.float32(70000.0))
    np.testing.assert_array_equal(round_to_float16(mixed), mixed)
    assert compact_values(mixed).dtype == np.float32
    # a tiny weight (below float16's normal range) is rounded too, within 2^-25 of itself
    tiny = round_to_float16(np.append(values, np.float32(1e-6)))
    assert abs(float(tiny[-1]) - 1e-6) <= 2.0 ** -25 and compact_values(tiny).dtype == np.float16


def test_weights_float16_cannot_hold_are_kept_and_saved_as_float32(models, tmp_path):
    model = models["ease"]
    copy = load(_saved_path(model, tmp_path / "a.npz"))
    copy.weights_.data[0] = np.float32(1e-6)  # below float16's normal range: not exact in float16
    copy.save(tmp_path / "b.npz")
    with zipfile.ZipFile(tmp_path / "b.npz") as z:
        assert np.load(io.BytesIO(z.read("arr_weights_data.npy"))).dtype == np.float32
    back = load(tmp_path / "b.npz")
    users = np.arange(model.n_users)
    np.testing.assert_array_equal(back.score_users(users), copy.score_users(users))


def _saved_path(model, path):
    model.save(path)
    return path


def test_a_hostile_compact_file_on_the_command_line_is_one_line(models, tmp_path):
    from click.testing import CliRunner

    from mrec_warp.cli import main
    path = _crafted(models, "ease", tmp_path, arr_weights_indices=_put(3, 65535))
    for command in ("recommend", "similar"):
        out = tmp_path / f"{command}.tsv"
        result = CliRunner().invoke(main, [command, str(path), "-o", str(out)])
        lines = [line for line in result.output.splitlines() if line.strip()]
        assert result.exit_code == 2 and len(lines) == 1, result.output
        assert lines[0].startswith(f"Error: {path}") and "column index 65535 is outside 0..999" in lines[0], lines
        assert not out.exists()
