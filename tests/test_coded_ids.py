"""Ids as codes (prepare's memory on big files): the fast reader's ``Categorical`` ids, the row
rules and the writers give the same ids, rows and bytes as ids held as one string per row."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from mrec_warp import prepare
from mrec_warp.data.interactions import Interactions
from mrec_warp.data.id_text import text_rows
from mrec_warp.data.ratings import read_ratings
from mrec_warp.data.rows import binarise, factorize_ids, merge_rows
from mrec_warp.data.split import iter_splits
from mrec_warp.data.tsv import write_interactions
from mrec_warp.errors import InputError
from mrec_warp.stages._inputs import load_interactions
from mrec_warp.tables import delimited_bytes

#: Ids that differ only in ways a careless reader loses: numbers' spellings, spaces, case, accents, emoji.
IDS = ["007", "7", " 7", "7 ", "07.0", "José", "Jose\u0301", "😀 u", "u\u00a0x", "U1", "u1", "nan", "NULL", "-1", "a;b"]


def _rows(n=400, seed=0):
    rng = np.random.default_rng(seed)
    return [(IDS[rng.integers(len(IDS))], IDS[rng.integers(len(IDS))][::-1] + "i", int(rng.integers(1, 6)),
             1_600_000_000 + int(rng.integers(0, 10**6))) for _ in range(n)]


def _write(path, rows, newline="\n", trailing=""):
    path.write_bytes("".join(f"{u}\t{i}\t{v}\t{t}{trailing}{newline}" for u, i, v, t in rows).encode("utf-8"))
    return path


@pytest.mark.parametrize("newline,trailing", [("\n", ""), ("\r\n", ""), ("\n", "\t\t")])
def test_coded_read_gives_the_same_ids_in_first_appearance_order(tmp_path, newline, trailing):
    path = _write(tmp_path / "r.tsv", _rows(), newline, trailing)
    plain = read_ratings(path, columns="0,1,2,3")
    coded = read_ratings(path, columns="0,1,2,3", coded_ids=True)
    for role in ("user", "item"):
        assert isinstance(coded[role].dtype, pd.CategoricalDtype)
        assert coded[role].astype(str).tolist() == plain[role].tolist()
        codes, uniques = pd.factorize(plain[role], sort=False)
        assert list(coded[role].cat.categories) == list(uniques)  # every category used, first seen first
        np.testing.assert_array_equal(coded[role].cat.codes.to_numpy(), codes)
    pd.testing.assert_series_equal(coded["value"], plain["value"])
    pd.testing.assert_series_equal(coded["timestamp"], plain["timestamp"])
    assert coded.attrs["reading"] == plain.attrs["reading"]


def test_a_quoted_file_is_read_as_text_whatever_coded_ids_says(tmp_path):
    path = tmp_path / "q.csv"
    path.write_text('u1,"a, b",1\nu2,c,2\n"u1",c,3\n', encoding="utf-8")
    coded = read_ratings(path, coded_ids=True)
    assert coded["user"].tolist() == ["u1", "u2", "u1"] and coded["item"].tolist() == ["a, b", "c", "c"]


def test_coded_read_refuses_empty_ids_and_names_the_line(tmp_path):
    path = tmp_path / "e.tsv"
    path.write_text("u1\ti1\t1\nu2\t \t1\n\ti3\t1\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"2 rows have an empty \(only spaces\) user or item id") as err:
        read_ratings(path, coded_ids=True)
    assert err.value.line == 2


def test_text_rows_of_a_categorical_are_those_of_its_texts():
    texts = pd.Series(["a", " ", "", "bb", "a", ""], dtype=str)
    coded = texts.astype("category")
    for test in (lambda t: t.str.strip() == "", lambda t: t.str.len() > 1):
        np.testing.assert_array_equal(text_rows(coded, test), text_rows(texts, test))
    with_missing = pd.Series(pd.Categorical(["a", None, ""]))
    np.testing.assert_array_equal(text_rows(with_missing, lambda t: t == ""), [False, False, True])


def test_factorize_ids_takes_the_codes_only_when_they_are_already_in_order():
    values = ["b", "a", "b", "c", "a"]
    in_order = pd.Series(pd.Categorical(values, categories=["b", "a", "c"]))
    codes, ids = factorize_ids(in_order)
    np.testing.assert_array_equal(codes, [0, 1, 0, 2, 1])
    assert list(ids) == ["b", "a", "c"]
    for other in (pd.Categorical(values, categories=["a", "b", "c"]),  # not first seen first
                  pd.Categorical(values, categories=["b", "a", "c", "d"]),  # one unused
                  pd.Categorical(["b", None, "a"], categories=["b", "a"])):  # a missing id
        codes, ids = factorize_ids(pd.Series(other))
        expected_codes, expected_ids = pd.factorize(pd.Series(other), sort=False)
        np.testing.assert_array_equal(codes, expected_codes)
        assert list(ids) == list(expected_ids)


def _rules_file(tmp_path, options):
    """A file of rows every row rule acts on (empty ids, a negative, a repeated pair), less
    the rows a refusal would stop at unless ``options`` drops them: (path, empty_ids)."""
    rows = _rows(600, seed=3) + [("", "x", 2, 5), ("only-here", "", 1, 6), ("u1", "i", -2, 7), ("u1", "i", 3, 8)]
    empty_ids = options.pop("empty_ids", "refuse")
    if empty_ids == "refuse":
        rows = [r for r in rows if r[0] and r[1] and r[2] > 0]
    return _write(tmp_path / "r.tsv", rows), empty_ids


@pytest.mark.parametrize("options", [
    {}, {"duplicates": "last", "min_rating": 3}, {"duplicates": "count"}, {"duplicates": "first"},
    {"negatives": "drop", "empty_ids": "drop"}, {"negatives": "net", "empty_ids": "drop"},
])
def test_the_row_rules_give_the_same_positives_from_codes(tmp_path, options):
    path, empty_ids = _rules_file(tmp_path, options)
    plain = binarise(read_ratings(path, empty_ids=empty_ids), empty_ids=empty_ids, **options)
    coded = binarise(read_ratings(path, empty_ids=empty_ids, coded_ids=True), empty_ids=empty_ids, **options)
    for name in ("user", "item", "value", "timestamp"):
        np.testing.assert_array_equal(getattr(coded, name), getattr(plain, name))
    assert list(coded.user_ids) == list(plain.user_ids) and list(coded.item_ids) == list(plain.item_ids)
    assert coded.counts == plain.counts


def test_merge_rows_takes_int32_codes():
    rng = np.random.default_rng(1)
    user, item = rng.integers(0, 50, 2000), rng.integers(0, 70, 2000)
    value, stamp = rng.integers(-2, 5, 2000).astype(float), rng.integers(0, 100, 2000)
    for rule in ("sum", "max", "first", "last", "count"):
        wide = merge_rows(user, item, value, stamp, 70, duplicates=rule, negatives="drop")
        narrow = merge_rows(user.astype(np.int32), item.astype(np.int32), value, stamp, 70, duplicates=rule,
                            negatives="drop")
        for name in ("user", "item", "value", "timestamp"):
            np.testing.assert_array_equal(getattr(narrow, name), getattr(wide, name))
        assert narrow.counts == wide.counts


def test_coded_splits_write_the_same_bytes(tmp_path):
    path = _write(tmp_path / "r.tsv", _rows(3000, seed=5))
    df = read_ratings(path, coded_ids=True)
    for (train, test, _), (train_c, test_c, _) in zip(iter_splits(read_ratings(path), num_splits=2, seed=4),
                                                      iter_splits(df, num_splits=2, seed=4, coded=True)):
        assert isinstance(train_c["user"].dtype, pd.CategoricalDtype)
        for a, b in ((train, train_c), (test, test_c)):
            write_interactions(a, tmp_path / "a.tsv")
            write_interactions(b, tmp_path / "b.tsv")
            assert (tmp_path / "a.tsv").read_bytes() == (tmp_path / "b.tsv").read_bytes()


def test_delimited_bytes_formats_categories_once_with_the_same_bytes(monkeypatch):
    frame = pd.DataFrame({"user": pd.Categorical(["b", "a", "b", "c"], categories=["c", "b", "a", "unused"]),
                          "value": [1, 2, 3, 4]})
    plain = frame.assign(user=frame["user"].astype(str))
    cache = {}
    chunks = [delimited_bytes(frame.iloc[i:i + 2], "utf-8", categories=cache) for i in (0, 2)]
    assert b"".join(chunks) == delimited_bytes(plain, "utf-8") == b"b\t1\na\t2\nb\t3\nc\t4\n"
    assert list(cache) == ["user"]
    missing = pd.DataFrame({"user": pd.Categorical(["a", None]), "value": [1, 2]})
    assert delimited_bytes(missing, "utf-8", categories={}) == delimited_bytes(missing, "utf-8")


def test_prepare_writes_the_ids_as_they_are(tmp_path):
    rows = [(u, i, 1, 0) for u in IDS for i in ("x", "y")]
    path = _write(tmp_path / "r.tsv", rows)
    prepare(path, tmp_path / "out", columns="0,1,2", test_fraction=0)
    lines = (tmp_path / "out" / "train.tsv").read_bytes().decode("utf-8").split("\n")[:-1]
    assert sorted(line.split("\t")[0] for line in lines) == sorted(u for u in IDS for _ in "xy")


@pytest.mark.parametrize("rule", ["sum", "max", "first", "last", "count"])
def test_merge_rows_block_by_block_is_one_merge(monkeypatch, rule):
    from mrec_warp.data import rows as row_rules

    rng = np.random.default_rng(7)
    user, item = rng.integers(0, 30, 3000), rng.integers(0, 40, 3000)
    value, stamp = rng.integers(-3, 5, 3000).astype(float), rng.integers(0, 10**6, 3000)
    negatives = "net" if rule == "sum" else "drop"
    whole = merge_rows(user, item, value, stamp, 40, duplicates=rule, negatives=negatives)
    monkeypatch.setattr(row_rules, "MERGE_BLOCK_PAIRS", 7)
    blocks = merge_rows(user, item, value, stamp, 40, duplicates=rule, negatives=negatives)
    for name in ("user", "item", "value", "timestamp"):
        np.testing.assert_array_equal(getattr(blocks, name), getattr(whole, name))
    assert blocks.counts == whole.counts
    # the reference: each pair's rows in table order, merged by the rule
    frame = pd.DataFrame({"key": user * 40 + item, "value": value, "stamp": stamp})
    if negatives == "drop":
        frame = frame[frame["value"] >= 0]
    grouped = frame.groupby("key", sort=True)
    expected = {"sum": grouped["value"].sum(), "max": grouped["value"].max(), "first": grouped["value"].first(),
                "last": grouped["value"].last(), "count": grouped["value"].size().astype(float)}[rule]
    if negatives == "net":
        moved = grouped["value"].apply(lambda v: v.abs().sum())
        had_negative = grouped["value"].min() < 0
        expected = expected[~(had_negative & (expected <= 1e-9 * moved))]
    np.testing.assert_array_equal(blocks.user * 40 + blocks.item, expected.index.to_numpy())
    np.testing.assert_allclose(blocks.value, expected.to_numpy())
    np.testing.assert_array_equal(blocks.timestamp, grouped["stamp"].min().loc[expected.index].to_numpy())


def test_an_unwritable_unused_category_leaves_the_rows_written():
    import csv

    from mrec_warp.tables import UnwritableText

    frame = pd.DataFrame({"user": pd.Categorical(["a", "b"], categories=["a", "b", "x\ty"]), "value": [1, 2]})
    assert delimited_bytes(frame, "utf-8", categories={}) == b"a\t1\nb\t2\n"
    with pytest.raises((UnwritableText, csv.Error)):
        delimited_bytes(frame.assign(user=pd.Categorical(["x\ty", "a"])), "utf-8", categories={})


def _same_interactions(a, b):
    assert (a.matrix != b.matrix).nnz == 0 and a.matrix.shape == b.matrix.shape
    assert a.matrix.dtype == b.matrix.dtype
    np.testing.assert_array_equal(a.matrix.indptr, b.matrix.indptr)
    np.testing.assert_array_equal(a.matrix.indices, b.matrix.indices)
    np.testing.assert_array_equal(a.matrix.data, b.matrix.data)
    assert a.user_ids.tolist() == b.user_ids.tolist() and a.item_ids.tolist() == b.item_ids.tolist()
    assert a.user_ids.dtype == b.user_ids.dtype and a.item_ids.dtype == b.item_ids.dtype
    assert a.row_counts == b.row_counts


@pytest.mark.parametrize("options", [
    {}, {"duplicates": "last", "min_value": 3}, {"duplicates": "count"}, {"duplicates": "first"},
    {"negatives": "drop", "empty_ids": "drop"}, {"negatives": "net", "empty_ids": "drop"},
    {"user_ids": ["7", "U1", "not-there", "😀 u"], "item_ids": list({r[1] for r in _rows(600, seed=3)})[:6]},
])
def test_interactions_from_codes_are_those_from_text(tmp_path, options):
    path, empty_ids = _rules_file(tmp_path, options)
    plain = read_ratings(path, empty_ids=empty_ids)
    coded = read_ratings(path, empty_ids=empty_ids, coded_ids=True)
    assert isinstance(coded["user"].dtype, pd.CategoricalDtype)
    made = [Interactions.from_dataframe(df, value_col="value", empty_ids=empty_ids, **options) for df in (plain, coded)]
    _same_interactions(*made)


def test_a_coded_file_is_refused_with_the_same_words_and_line(tmp_path):
    path = _write(tmp_path / "r.tsv", _rows(200, seed=2) + [("u1", "i", -2, 7)])
    refusals = []
    for coded_ids in (False, True):
        with pytest.raises(InputError) as err:
            Interactions.from_dataframe(read_ratings(path, coded_ids=coded_ids), value_col="value")
        refusals.append((str(err.value), err.value.line))
    assert refusals[0] == refusals[1] and refusals[0][1] == 201


@pytest.mark.parametrize("values", [
    [3, 1, 3, None, 2], [3.0, 1.5, 3.0, 2.0, -0.0], ["007", 7, "7 ", "007", 7.0],  # 7 and 7.0: one id '7'
])
def test_a_category_column_gives_the_ids_of_its_values(values):
    cat = pd.DataFrame({"user": pd.Series(values, dtype="category"), "item": ["a", "b", "a", "c", "b"]})
    obj = pd.DataFrame({"user": pd.Series(values, dtype=object), "item": ["a", "b", "a", "c", "b"]})
    made = [Interactions.from_dataframe(df, empty_ids="drop") for df in (obj, cat)]
    _same_interactions(*made)


def test_load_interactions_reads_a_messy_file_as_before(tmp_path):
    path = tmp_path / "m.tsv"
    path.write_bytes("\ufeffJosé\t😀 i\t2\r\n007\ta b\t1\r\n7\ta b\t3\r\nJosé\t😀 i\t1\r\n".encode("utf-8"))
    data = load_interactions(path, values=True)
    assert data.user_ids.tolist() == ["José", "007", "7"] and data.item_ids.tolist() == ["😀 i", "a b"]
    assert data.matrix.toarray().tolist() == [[3.0, 0.0], [0.0, 1.0], [0.0, 3.0]]


def test_recommend_excludes_a_coded_train_file_as_the_model_holds_it(tmp_path):
    from mrec_warp.models.popularity import Popularity
    from mrec_warp.progress import SILENT
    from mrec_warp.stages.recommend_inputs import train_exclusion

    path = _write(tmp_path / "r.tsv", _rows(500, seed=7))
    model = Popularity().fit(load_interactions(path))
    assert isinstance(read_ratings(path, coded_ids=True)["user"].dtype, pd.CategoricalDtype)
    exclusion = train_exclusion(model, str(path), SILENT)
    expected = load_interactions(path).matrix
    assert (exclusion != expected).nnz == 0 and exclusion.shape == expected.shape
    other = _write(tmp_path / "o.tsv", [("someone", "new-item", 1, 0), ("7", "x", 1, 0)] + _rows(20, seed=8))
    with pytest.raises(InputError, match=r"does not match the model: 2 of 22 rows .*\(1 users, 2 items\), e.g. 'someone'"):
        train_exclusion(model, str(other), SILENT)


def _recs_file(path, rows, seed=0):
    """Ten items per test user, ranked at random among the rows' items (user, item, score, rank)."""
    rng = np.random.default_rng(seed)
    items = list(dict.fromkeys(i for _, i, _, _ in rows))
    lines = [f"{u}\t{items[j]}\t{1 / r:.4f}\t{r}\n" for u in dict.fromkeys(u for u, _, _, _ in rows)
             for r, j in enumerate(rng.permutation(len(items))[:10], 1)]
    path.write_bytes("".join(lines).encode("utf-8"))
    return path


@pytest.mark.parametrize("newline,trailing", [("\n", ""), ("\r\n", "\t\t")])
def test_evaluate_scores_a_coded_file_as_the_same_ids(tmp_path, newline, trailing):
    from mrec_warp.evaluation.report import write_reports
    from mrec_warp.stages.evaluate import evaluate_here

    train = _write(tmp_path / "train.tsv", _rows(600, seed=11), newline, trailing)
    test = _write(tmp_path / "test.tsv", _rows(150, seed=12), newline, trailing)
    recs = _recs_file(tmp_path / "recs.tsv", _rows(150, seed=12))
    assert isinstance(read_ratings(train, coded_ids=True)["user"].dtype, pd.CategoricalDtype)
    as_text = [read_ratings(p)[["user", "item"]] for p in (train, test)]  # one string per row
    outputs = []
    for name, (tr, te) in {"coded": (train, test), "text": as_text}.items():
        study = evaluate_here(tr, te, [recs], groups="user-activity", beyond=True)
        write_reports(study, json_path=tmp_path / f"{name}.json", per_user=tmp_path / f"{name}.csv")
        outputs.append(((tmp_path / f"{name}.csv").read_bytes(), study.to_frame(), study))
    (coded_csv, coded_frame, study), (text_csv, text_frame, _) = outputs
    assert coded_csv == text_csv
    pd.testing.assert_frame_equal(coded_frame, text_frame)
    users = set(study.evaluations[0][0].per_user.index)
    assert users <= set(IDS) and len(users & {"007", "7", " 7", "7 ", "07.0"}) >= 3  # as written, no number made


def test_evaluate_refuses_a_coded_recommendations_file_given_as_test(tmp_path):
    from mrec_warp.stages.evaluate import evaluate_here

    train = _write(tmp_path / "train.tsv", _rows(600, seed=11))
    recs = _recs_file(tmp_path / "recs.tsv", _rows(150, seed=12))
    assert isinstance(read_ratings(recs, coded_ids=True)["user"].dtype, pd.CategoricalDtype)
    with pytest.raises(InputError, match="the test file looks like a recommendations file"):
        evaluate_here(train, recs, [recs])
    with pytest.raises(InputError, match="the training file looks like a recommendations file"):
        evaluate_here(recs, train, [recs])


@pytest.mark.parametrize("options", [{}, {"duplicates": "max", "empty_ids": "drop"}])
def test_read_matrix_of_a_coded_file_keeps_the_ids_and_pairs(tmp_path, options):
    from mrec_warp.data.matrix_files import read_matrix, write_matrix

    path, empty_ids = _rules_file(tmp_path, dict(options))
    rules = {k: v for k, v in options.items() if k != "empty_ids"}
    m = read_matrix(path, reader={"empty_ids": empty_ids}, negatives="drop", **rules)
    plain = read_ratings(path, empty_ids=empty_ids)
    kept = plain[(plain["user"].str.strip() != "") & (plain["item"].str.strip() != "") & (plain["value"] >= 0)]
    expected = binarise(kept, duplicates=options.get("duplicates"))
    assert m.user_ids.tolist() == list(expected.user_ids) and m.item_ids.tolist() == list(expected.item_ids)
    np.testing.assert_array_equal(m.matrix.tocoo().row, expected.user)
    np.testing.assert_array_equal(m.matrix.tocoo().col, expected.item)
    np.testing.assert_array_equal(m.matrix.tocoo().data, expected.value)
    write_matrix(m, tmp_path / "out.tsv")
    lines = (tmp_path / "out.tsv").read_bytes().decode("utf-8").splitlines()
    assert {line.split("\t")[0] for line in lines} == set(expected.user_ids)  # the ids' own bytes
