"""``mrec-warp convert`` and ``mrec-warp factors``: other tools' matrices and factors in and out,
ids byte for byte, stored zeros kept, hostile files refused in one line."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp

from mrec_warp.errors import InputError
from mrec_warp.models import Factors, load
from .conftest import run

# ids a careless converter breaks: accents, emoji, inner spaces, a comma (quoted in CSV), a
# leading quote, and a stored 0 (an interaction like any other)
MESSY_CSV = ('user,item,rating\n'
             'ané,"Papers, Please",4\n'
             '"john smith",🎮 game,0\n'
             'ané,b,2.5\n'
             'x y,b,1234567891\n'
             'ané,b,1\n'
             'zoë,"""Quoted"" title",3\n')



def ok(*args):
    result = run(*args)
    assert result.exit_code == 0, result.output
    return result


def assert_one_line_error(result, *fragments):
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("Error: ")
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def pairs_of(path: Path, encoding: str = "utf-8"):
    return sorted(tuple(line.split("\t")) for line in path.read_text(encoding=encoding).splitlines())


# -- convert: round trips ---------------------------------------------------------------------------
def test_tsv_mtx_npz_tsv_round_trip_keeps_ids_values_and_zeros(tmp_path):
    src = tmp_path / "r.csv"
    src.write_text(MESSY_CSV, encoding="utf-8")
    ok("convert", src, tmp_path / "direct.tsv", "-q")
    ok("convert", src, tmp_path / "m.mtx", "-q")
    ok("convert", tmp_path / "m.mtx", tmp_path / "m.npz", "-q")
    ok("convert", tmp_path / "m.npz", tmp_path / "back.tsv", "-q")
    assert (tmp_path / "back.tsv").read_bytes() == (tmp_path / "direct.tsv").read_bytes()
    pairs = pairs_of(tmp_path / "back.tsv")
    assert pairs == sorted([("ané", "Papers, Please", "4.0"), ("john smith", "🎮 game", "0.0"),
                            ("ané", "b", "3.5"), ("x y", "b", "1234567891.0"), ("zoë", '"""Quoted"" title"', "3.0")])
    # the id lists are the ids, one per line, as bytes; the matrix keeps the stored zero
    assert (tmp_path / "m.users.txt").read_bytes() == "ané\njohn smith\nx y\nzoë\n".encode()
    assert (tmp_path / "m.items.txt").read_text(encoding="utf-8").splitlines()[0] == "Papers, Please"
    mtx = scipy.io.mmread(str(tmp_path / "m.mtx")).tocsr()
    assert mtx.nnz == 5 and mtx[1, 1] == 0 and mtx[2, 2] == 1234567891
    # the npz is what scipy reads, ids inside
    loaded = sp.load_npz(tmp_path / "m.npz")
    assert loaded.nnz == 5 and loaded.shape == (4, 4)
    with np.load(tmp_path / "m.npz") as z:
        assert z["user_ids"].tolist() == ["ané", "john smith", "x y", "zoë"]


def test_latin1_ids_come_back_as_the_same_bytes(tmp_path):
    src = tmp_path / "r.tsv"
    src.write_bytes("caf\xe9\tna\xefve\t2\nbob\tcaf\xe9\t1\n".encode("latin-1"))
    ok("convert", src, tmp_path / "m.mtx", "-q")
    assert (tmp_path / "m.users.txt").read_bytes() == "caf\xe9\nbob\n".encode("latin-1")
    ok("convert", tmp_path / "m.mtx", tmp_path / "m.npz", "-q")
    ok("convert", tmp_path / "m.npz", tmp_path / "back.tsv", "-q")
    assert (tmp_path / "back.tsv").read_bytes() == src.read_bytes()


def test_coordinates_stored_twice_merge_by_the_duplicates_rule(tmp_path):
    (tmp_path / "d.mtx").write_text("%%MatrixMarket matrix coordinate real general\n2 2 3\n1 1 2\n1 1 5\n2 2 0\n")
    (tmp_path / "d.users.txt").write_text("a\nb\n")
    (tmp_path / "d.items.txt").write_text("x\ny\n")
    ok("convert", tmp_path / "d.mtx", tmp_path / "sum.tsv", "-q")
    ok("convert", tmp_path / "d.mtx", tmp_path / "max.tsv", "-q", "--duplicates", "max")
    assert pairs_of(tmp_path / "sum.tsv") == [("a", "x", "7"), ("b", "y", "0")]
    assert pairs_of(tmp_path / "max.tsv") == [("a", "x", "5"), ("b", "y", "0")]


def test_rules_that_leave_nothing_write_nothing(tmp_path):
    (tmp_path / "r.tsv").write_text("a\tx\t1\nb\ty\t2\n")
    assert_one_line_error(run("convert", tmp_path / "r.tsv", tmp_path / "o.mtx", "--min-value", "5"),
                          "no interactions left", "2 pairs below", "--min-value")
    assert not (tmp_path / "o.mtx").exists() and not (tmp_path / "o.users.txt").exists()


def test_scipy_csc_and_pattern_matrices_are_read_with_id_lists_beside(tmp_path):
    m = sp.csc_matrix(np.array([[0, 3.0], [1.5, 0]]))
    sp.save_npz(tmp_path / "s.npz", m)
    (tmp_path / "s.users.txt").write_text("u 1\nu 2\n")
    (tmp_path / "s.items.txt").write_text("i,1\ni,2\n")
    ok("convert", tmp_path / "s.npz", tmp_path / "s.tsv", "-q")
    assert pairs_of(tmp_path / "s.tsv") == [("u 1", "i,2", "3.0"), ("u 2", "i,1", "1.5")]
    (tmp_path / "p.mtx").write_text("%%MatrixMarket matrix coordinate pattern general\n%c\n2 2 1\n2 1\n")
    (tmp_path / "p.users.txt").write_text("a\nb\n")
    (tmp_path / "p.items.txt").write_text("x\ny\n")
    ok("convert", tmp_path / "p.mtx", tmp_path / "p.tsv", "-q")
    assert pairs_of(tmp_path / "p.tsv") == [("b", "x", "1")]


# -- convert: hostile and broken inputs ---------------------------------------------------------------
def _mtx(tmp_path, body: str, users="a\nb\n", items="x\ny\n") -> Path:
    (tmp_path / "h.mtx").write_text(body)
    (tmp_path / "h.users.txt").write_text(users)
    (tmp_path / "h.items.txt").write_text(items)
    return tmp_path / "h.mtx"


@pytest.mark.parametrize("body, users, fragments", [
    ("%%MatrixMarket matrix coordinate real general\n2 2 1\n3 1 1\n", "a\nb\n", ["h.mtx:3:", "index out of bounds"]),
    ("%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1 nan\n", "a\nb\n", ["NaN"]),
    ("%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1 -2\n", "a\nb\n", ["negative", "--negatives"]),
    ("%%MatrixMarket matrix coordinate real general\n3 2 1\n1 1 1\n", "a\nb\n", ["declares 3 x 2", "2 users"]),
    ("%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1 1\n", "a\na\n", ["'a' appears twice", "lines 1 and 2"]),
    ("%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1 1\n", "a\n\n", ["line 2 is blank"]),
    ("%%MatrixMarket matrix coordinate real symmetric\n2 2 1\n1 1 1\n", "a\nb\n", ["symmetry"]),
    ("%%MatrixMarket matrix array real general\n2 2\n1\n2\n3\n4\n", "a\nb\n", ["dense"]),
    ("%%MatrixMarket matrix coordinate real general\n2 2 900\n1 1 1\n", "a\nb\n", ["900 entries"]),
    ("%%MatrixMarket matrix coordinate real general\n2 2 3\n1 1 1\n", "a\nb\n", ["h.mtx"]),
    ("hello\n", "a\nb\n", ["not a Matrix Market file"]),
])
def test_a_broken_matrix_market_file_is_one_line_and_writes_nothing(tmp_path, body, users, fragments):
    src = _mtx(tmp_path, body, users=users)
    result = run("convert", src, tmp_path / "out.npz")
    assert_one_line_error(result, *fragments)
    assert not (tmp_path / "out.npz").exists()


def test_missing_id_list_and_crafted_npz_are_refused(tmp_path):
    (tmp_path / "n.mtx").write_text("%%MatrixMarket matrix coordinate real general\n1 1 1\n1 1 1\n")
    assert_one_line_error(run("convert", tmp_path / "n.mtx", tmp_path / "o.tsv"), "n.users.txt is missing")
    # shape that disagrees with the ids
    np.savez(tmp_path / "bad.npz", format=np.array("csr"), shape=np.array([3, 1]), indptr=np.array([0, 1, 1, 1]),
             indices=np.array([0]), data=np.array([1.0]), user_ids=np.array(["a", "b"]), item_ids=np.array(["x"]))
    assert_one_line_error(run("convert", tmp_path / "bad.npz", tmp_path / "o.tsv"), "shape (3, 1)", "2 users")
    # a column index past the end
    np.savez(tmp_path / "idx.npz", format=np.array("csr"), shape=np.array([1, 1]), indptr=np.array([0, 1]),
             indices=np.array([5]), data=np.array([1.0]), user_ids=np.array(["a"]), item_ids=np.array(["x"]))
    assert_one_line_error(run("convert", tmp_path / "idx.npz", tmp_path / "o.tsv"), "column index 5")
    # pickled ids are never loaded
    np.savez(tmp_path / "obj.npz", format=np.array("csr"), shape=np.array([1, 1]), indptr=np.array([0, 1]),
             indices=np.array([0]), data=np.array([1.0]), user_ids=np.array(["a"], dtype=object),
             item_ids=np.array(["x"]))
    assert_one_line_error(run("convert", tmp_path / "obj.npz", tmp_path / "o.tsv"), "pickled")
    assert not (tmp_path / "o.tsv").exists()


def test_devices_and_missing_files_are_refused_before_reading(tmp_path):
    for name in ("z.mtx", "z.npz"):
        (tmp_path / name).symlink_to("/dev/zero")
        (tmp_path / "z.users.txt").write_text("a\n")
        (tmp_path / "z.items.txt").write_text("x\n")
        assert_one_line_error(run("convert", tmp_path / name, tmp_path / "o.tsv"), "character device")
    assert_one_line_error(run("convert", tmp_path / "gone.mtx", tmp_path / "o.tsv"), "gone.mtx", "does not exist")
    assert_one_line_error(run("factors", "-o", tmp_path / "m.npz", "--npz", tmp_path / "z.npz"), "character device")


def test_convert_never_overwrites_its_input_or_id_lists(tmp_path):
    src = tmp_path / "r.tsv"
    src.write_text("a\tx\t1\n")
    assert_one_line_error(run("convert", src, src), "overwrite an input")
    ok("convert", src, tmp_path / "m.mtx", "-q")
    before = (tmp_path / "m.users.txt").read_bytes()
    assert_one_line_error(run("convert", tmp_path / "m.mtx", tmp_path / "m.users.txt"), "overwrite an input")
    assert (tmp_path / "m.users.txt").read_bytes() == before


# -- factors ----------------------------------------------------------------------------------------
TRAIN = "".join(f"u{u} é\ti{i} 🎮\t1\n" for u in range(30) for i in range(40) if (u * 7 + i * 3) % 5 == 0)


@pytest.fixture(scope="module")
def warp_model(tmp_path_factory):
    folder = tmp_path_factory.mktemp("warp")
    (folder / "train.tsv").write_text(TRAIN, encoding="utf-8")
    ok("train", folder / "train.tsv", "-o", folder / "warp.npz", "--epochs", "3", "--factors", "8", "-q")
    ok("factors", "--export", folder / "warp.npz", folder / "ex", "-q")
    ok("recommend", folder / "warp.npz", "-o", folder / "warp_recs.tsv", "-k", "5", "--n-jobs", "1", "-q")
    return folder


@pytest.mark.parametrize("inputs", [
    ["--npz", "ex/factors.npz"],
    ["--user-factors", "ex/user_factors.npy", "--user-ids", "ex/user_ids.txt", "--item-factors",
     "ex/item_factors.npy", "--item-ids", "ex/item_ids.txt", "--item-bias", "ex/item_bias.npy"],
    ["--user-factors", "ex/user_factors.tsv", "--item-factors", "ex/item_factors.tsv", "--item-bias",
     "ex/item_bias.tsv"],
])
def test_exported_warp_factors_imported_again_recommend_the_same_bytes(warp_model, tmp_path, inputs):
    args = [warp_model / a if a.startswith("ex/") else a for a in inputs]
    ok("factors", "-o", tmp_path / "imp.npz", *args, "--train", warp_model / "train.tsv", "-q")
    ok("recommend", tmp_path / "imp.npz", "-o", tmp_path / "recs.tsv", "-k", "5", "--n-jobs", "1", "-q")
    assert (tmp_path / "recs.tsv").read_bytes() == (warp_model / "warp_recs.tsv").read_bytes()
    similar = [run("similar", m, "--items", "i3 🎮", "-k", "4").stdout for m in (tmp_path / "imp.npz",
                                                                               warp_model / "warp.npz")]
    assert similar[0] == similar[1] and similar[0].count("\n") == 4
    assert type(load(tmp_path / "imp.npz")).__name__ == "Factors"


def test_text_vectors_in_csv_and_word2vec_forms(tmp_path):
    (tmp_path / "users.csv").write_text('"Smith, J",1,0\nzoë,0,1\n', encoding="utf-8")
    (tmp_path / "items.vec").write_text("3 2\nbook 1 0\n🎮 0 2\nmug 0.5 0.5\n", encoding="utf-8")
    (tmp_path / "train.tsv").write_text("zoë\tmug\n", encoding="utf-8")
    ok("factors", "-o", tmp_path / "m.npz", "--user-factors", tmp_path / "users.csv", "--item-factors",
       tmp_path / "items.vec", "--train", tmp_path / "train.tsv", "-q")
    model = load(tmp_path / "m.npz")
    assert model.user_ids.tolist() == ["Smith, J", "zoë"] and model.item_ids.tolist() == ["book", "🎮", "mug"]
    ok("recommend", tmp_path / "m.npz", "-o", tmp_path / "recs.tsv", "-k", "2", "-q")
    assert (tmp_path / "recs.tsv").read_text(encoding="utf-8").splitlines() == [
        "Smith, J\tbook\t1\t1", "Smith, J\tmug\t0.5\t2", "zoë\t🎮\t2\t1", "zoë\tbook\t0\t2"]


def test_without_train_nothing_is_excluded_until_recommend_gets_one(tmp_path):
    np.save(tmp_path / "u.npy", np.array([[1.0, 0.0]]))
    np.save(tmp_path / "v.npy", np.array([[1.0, 0.0], [0.5, 0.0]]))
    (tmp_path / "u.txt").write_text("alice\n")
    (tmp_path / "v.txt").write_text("x\ny\n")
    result = ok("factors", "-o", tmp_path / "m.npz", "--user-factors", tmp_path / "u.npy", "--user-ids",
                tmp_path / "u.txt", "--item-factors", tmp_path / "v.npy", "--item-ids", tmp_path / "v.txt")
    assert "excludes nothing unless given --train" in result.stderr
    result = ok("recommend", tmp_path / "m.npz", "-o", tmp_path / "all.tsv")
    assert "stores no training interactions, so nothing is excluded: give --train" in result.stderr
    assert [line.split("\t")[1] for line in (tmp_path / "all.tsv").read_text().splitlines()] == ["x", "y"]
    (tmp_path / "seen.tsv").write_text("alice\tx\n")
    ok("recommend", tmp_path / "m.npz", "-o", tmp_path / "unseen.tsv", "--train", tmp_path / "seen.tsv", "-q")
    assert [line.split("\t")[1] for line in (tmp_path / "unseen.tsv").read_text().splitlines()] == ["y"]


def test_history_folds_new_users_in_by_least_squares(warp_model, tmp_path):
    ok("factors", "-o", tmp_path / "imp.npz", "--npz", warp_model / "ex" / "factors.npz",
       "--train", warp_model / "train.tsv", "-q")
    (tmp_path / "h.tsv").write_text("newcomer\ti0 🎮\nnewcomer\ti5 🎮\n", encoding="utf-8")
    ok("recommend", tmp_path / "imp.npz", "-o", tmp_path / "r.tsv", "--history", tmp_path / "h.tsv", "-k", "3", "-q")
    rows = [line.split("\t") for line in (tmp_path / "r.tsv").read_text(encoding="utf-8").splitlines()]
    assert [r[0] for r in rows] == ["newcomer"] * 3
    assert not {"i0 🎮", "i5 🎮"} & {r[1] for r in rows}  # its history is excluded like training items


def _write_pair(tmp_path, users_text: str, items_text: str):
    (tmp_path / "u.tsv").write_text(users_text, encoding="utf-8")
    (tmp_path / "v.tsv").write_text(items_text, encoding="utf-8")
    return ["--user-factors", tmp_path / "u.tsv", "--item-factors", tmp_path / "v.tsv"]


@pytest.mark.parametrize("users, items, fragments", [
    ("a\t1 2\nb\t1 nan\n", "x\t1 1\n", ["not finite", "u.tsv:2"]),
    ("a\t1 2\nb\t1\n", "x\t1 1\n", ["1 values where line 1 has 2", "u.tsv:2"]),
    ("a\t1 2\na\t3 4\n", "x\t1 1\n", ["'a' appears twice"]),
    ("a\t1 2\n", "x\t1 1 1\n", ["same width"]),
    ("a\t1 two\n", "x\t1 1\n", ["'two' is not a number", "u.tsv:1"]),
    ("a\t1e400 2\n", "x\t1 1\n", ["not finite"]),
    ("\t1 2\n", "x\t1 1\n", ["empty id"]),
])
def test_bad_text_factors_are_refused_in_one_line(tmp_path, users, items, fragments):
    result = run("factors", "-o", tmp_path / "m.npz", *_write_pair(tmp_path, users, items))
    assert_one_line_error(result, *fragments)
    assert not (tmp_path / "m.npz").exists()


def test_bad_npy_inputs_and_foreign_train_are_refused(tmp_path):
    np.save(tmp_path / "u.npy", np.ones((2, 3)))
    np.save(tmp_path / "v.npy", np.ones((2, 3)))
    (tmp_path / "u.txt").write_text("a\nb\nc\n")
    (tmp_path / "v.txt").write_text("x\ny\n")
    base = ["--user-factors", tmp_path / "u.npy", "--item-factors", tmp_path / "v.npy", "--item-ids", tmp_path / "v.txt"]
    assert_one_line_error(run("factors", "-o", tmp_path / "m.npz", *base, "--user-ids", tmp_path / "u.txt"),
                          "3 user ids for 2 rows")
    (tmp_path / "u.txt").write_text("a\nb\n")
    # a header declaring more rows than the file holds
    data = (tmp_path / "u.npy").read_bytes()
    (tmp_path / "cut.npy").write_bytes(data[:-8])
    cut = ["--user-factors", tmp_path / "cut.npy", *base[2:], "--user-ids", tmp_path / "u.txt"]
    assert_one_line_error(run("factors", "-o", tmp_path / "m.npz", *cut), "truncated")
    np.save(tmp_path / "obj.npy", np.array([[1, "a"]], dtype=object), allow_pickle=True)
    obj = ["--user-factors", tmp_path / "obj.npy", *base[2:], "--user-ids", tmp_path / "u.txt"]
    assert_one_line_error(run("factors", "-o", tmp_path / "m.npz", *obj), "expected numbers")
    (tmp_path / "t.tsv").write_text("a\tx\nstranger\ty\n")
    result = run("factors", "-o", tmp_path / "m.npz", *base, "--user-ids", tmp_path / "u.txt",
                 "--train", tmp_path / "t.tsv")
    assert_one_line_error(result, "--train names 1 user(s) without factors", "'stranger'")
    np.save(tmp_path / "b.npy", np.ones(3))
    result = run("factors", "-o", tmp_path / "m.npz", *base, "--user-ids", tmp_path / "u.txt",
                 "--item-bias", tmp_path / "b.npy")
    assert_one_line_error(result, "3 item biases for 2 items")
    assert not (tmp_path / "m.npz").exists()


def test_export_writes_every_file_or_none(warp_model, tmp_path):
    (tmp_path / "out" / "item_factors.tsv").mkdir(parents=True)
    assert_one_line_error(run("factors", "--export", warp_model / "warp.npz", tmp_path / "out"), "is a folder")
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["item_factors.tsv"]


def test_export_refuses_a_model_without_factors(tmp_path):
    (tmp_path / "t.tsv").write_text("a\tx\nb\ty\na\ty\n")
    ok("train", tmp_path / "t.tsv", "-o", tmp_path / "pop.npz", "--model", "popularity", "-q")
    assert_one_line_error(run("factors", "--export", tmp_path / "pop.npz", tmp_path / "out"), "no factors to export")
    assert not (tmp_path / "out").exists()


def test_factors_api_checks_its_arrays():
    u, v = np.ones((2, 3), np.float32), np.ones((4, 3), np.float32)
    model = Factors.from_arrays(u, v, ["a", "b"], ["w", "x", "y", "z"], item_bias=np.arange(4.0))
    assert model.recommend(0, k=2)[0].tolist() == [3, 2]
    with pytest.raises(InputError, match="item factors has shape"):
        Factors.from_arrays(u, np.ones((4, 2)), ["a", "b"], ["w", "x", "y", "z"])
    with pytest.raises(InputError, match="appears more than once"):
        Factors.from_arrays(u, v, ["a", "a"], ["w", "x", "y", "z"])
    with pytest.raises(InputError, match="not trained here"):
        model.fit(None)


def test_factors_api_keeps_ids_as_given(tmp_path):
    # spaces are part of an id (as Interactions keeps them): " a", "a " and "  " are three users
    users, items = [" a", "a ", "  "], ["x", " x"]
    u = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], np.float32)
    model = Factors.from_arrays(u, np.eye(2, dtype=np.float32), users, items)
    assert model.user_ids.tolist() == users and model.item_ids.tolist() == items
    model.save(tmp_path / "f.npz")
    frame = load(tmp_path / "f.npz").recommend_frame(k=1)
    assert frame["user"].tolist() == users and frame["item"].tolist() == ["x", " x", "x"]
    with pytest.raises(InputError, match="user id 2 is empty"):
        Factors.from_arrays(u, np.eye(2), ["a", "", "b"], items)
    # numpy's text arrays would drop a trailing NUL, making "a\0" the id "a": refused instead
    with pytest.raises(InputError, match="item id 1 .* ends in a NUL"):
        Factors.from_arrays(u, np.eye(2), users, ["x\0", "x"])


def test_python_api_reads_writes_and_saves(tmp_path):
    import mrec_warp as mw

    (tmp_path / "r.tsv").write_text("a\tx\t0\nb\ty\t2.5\n")
    m = mw.read_matrix(tmp_path / "r.tsv")
    assert m.matrix.nnz == 2 and m.matrix.dtype == np.float64 and m.matrix[0, 0] == 0
    mw.write_matrix(m, tmp_path / "r.npz")
    assert mw.read_matrix(tmp_path / "r.npz").matrix.toarray().tolist() == [[0.0, 0.0], [0.0, 2.5]]
    model = mw.Factors.from_arrays(np.eye(2), np.eye(2), m.user_ids, m.item_ids, train=m.matrix)
    model.save(tmp_path / "f.npz")
    again = load(tmp_path / "f.npz")
    assert again.train_.nnz == 2  # the stored 0 is an interaction: excluded like the others
    assert again.recommend_frame(k=2)["item"].tolist() == ["y", "x"]


def test_convert_honours_empty_ids_drop_and_names_the_files_own_column(tmp_path):
    (tmp_path / "e.tsv").write_text("user\titem\tv\na\tx\t1\n\ty\t2\nb\tz\t1\n")
    assert_one_line_error(run("convert", tmp_path / "e.tsv", tmp_path / "e.mtx"), "e.tsv:3: 1 row has an empty user id",
                          "--empty-ids drop")
    result = ok("convert", tmp_path / "e.tsv", tmp_path / "e.mtx", "--empty-ids", "drop")
    assert "3 rows read - 1 row with an empty id = 2 pairs kept" in result.output
    assert (tmp_path / "e.users.txt").read_text() == "a\nb\n"
    assert scipy.io.mmread(tmp_path / "e.mtx").toarray().tolist() == [[1, 0], [0, 1]]
    (tmp_path / "all.tsv").write_text("\tx\n\ty\n")
    assert_one_line_error(run("convert", tmp_path / "all.tsv", tmp_path / "all.mtx", "--empty-ids", "drop"),
                          "no interactions left: 2 rows with an empty id dropped")
    assert not (tmp_path / "all.mtx").exists()
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"customer": ["a", None, "b"], "product": ["x", "y", "z"], "qty": [1.0, 2.0, 3.0]}),
                   tmp_path / "e.parquet")
    for extra in ((), ("--empty-ids", "refuse")):
        result = run("convert", tmp_path / "e.parquet", tmp_path / "p.mtx", "--columns", "customer,product,qty", *extra)
        assert_one_line_error(result, "column 0 'customer'", "data row 2")
        assert "'user'" not in result.output
    result = ok("convert", tmp_path / "e.parquet", tmp_path / "p.mtx", "--columns", "customer,product,qty",
                "--empty-ids", "drop")
    assert "3 rows read - 1 row with an empty id = 2 pairs kept" in result.output and (tmp_path / "p.users.txt").read_text() == "a\nb\n"


def test_export_never_overwrites_an_earlier_export_unless_forced(warp_model, tmp_path):
    """A second export into a folder of factors is refused, files untouched; --force replaces
    the earlier export whole (an item_bias the new model has not is removed, not left to mix)."""
    out = tmp_path / "ex"
    ok("factors", "--export", warp_model / "warp.npz", out, "-q")
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert "item_bias.npy" in before
    wrmf = tmp_path / "wrmf.npz"
    ok("train", warp_model / "train.tsv", "-o", wrmf, "--model", "wrmf", "--factors", "4", "--epochs", "2", "-q")
    assert_one_line_error(run("factors", "--export", wrmf, out), "already holds factors.npz", "--force")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    (tmp_path / "lone").mkdir()
    (tmp_path / "lone" / "user_ids.txt").write_text("mine\n")  # one file of an export's names is enough
    assert_one_line_error(run("factors", "--export", wrmf, tmp_path / "lone"), "already holds user_ids.txt")
    assert (tmp_path / "lone" / "user_ids.txt").read_text() == "mine\n"
    ok("factors", "--export", wrmf, out, "--force", "-q")
    names = {p.name for p in out.iterdir()}
    assert "factors.npz" in names and not {"item_bias.npy", "item_bias.tsv"} & names
    assert np.load(out / "factors.npz")["user_factors"].shape[1] == 4
