"""The row rules (duplicates, negatives, minimum value) in prepare, train, tune and the API.

One implementation (:mod:`mrec_warp.data.rows`) must give the same merged values whichever
door the rows come in by: ``prepare``'s train.tsv, ``train`` reading the raw export,
``Interactions.from_dataframe`` on the same table.
"""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from mrec_warp.data.interactions import Interactions
from mrec_warp.data.ratings import read_ratings
from mrec_warp.data.rows import DUPLICATES, merge_rows
from mrec_warp.errors import InputError
from mrec_warp.models import load
from mrec_warp.stages._inputs import load_interactions
from mrec_warp.stages.options import RowOptions

from .test_guards import one_line_error, run

# A retail invoice log: repeated invoice lines, returns as negative quantities, customer
# ids as pandas writes a column with gaps is NOT done here (ids are what the file says).
RETAIL = """invoice\titem\tquantity\tcustomer
536365\t85123A\t6\t17850
536365\t71053\t6\t17850
536366\t85123A\t40\t17850
536367\t85123A\t40\t17850
C536368\t85123A\t-80\t17850
536369\t22633\t12\t13047
536369\t22633\t12\t13047
C536370\t22633\t-5\t13047
536371\t71053\t3\t13047
536372\t84879\t32\t12583
536373\t71053\t0\t12583
536374\t85123A\t2\t12583
536375\t99999\t5\t12583
C536376\t99999\t-5\t12583
"""
COLUMNS = "customer,item,quantity"


@pytest.fixture
def retail(tmp_path):
    path = tmp_path / "invoices.tsv"
    path.write_text(RETAIL)
    return path


def pairs(data: Interactions) -> dict:
    """{(user, item): value} of every stored entry, zeros included."""
    coo = data.matrix.tocoo()
    return {(data.user_ids[r], data.item_ids[c]): float(v) for r, c, v in zip(coo.row, coo.col, coo.data)}


def file_pairs(path) -> dict:
    table = pd.read_csv(path, sep="\t", header=None, dtype={0: str, 1: str}, keep_default_na=False)
    return {(u, i): float(v) for u, i, v in zip(table[0], table[1], table[2])}


# -- negatives ----------------------------------------------------------------------------------
def test_returns_are_refused_by_default_naming_the_line_and_the_choices(retail, tmp_path):
    result = run("prepare", retail, "-o", tmp_path / "out", "--columns", COLUMNS)
    one_line_error(result, f"{retail}:6:", "3 negative values", "-80", "user '17850', item '85123A'",
                   "--negatives drop", "--negatives net")
    assert not (tmp_path / "out").exists()
    # train reads the raw export by the same rules, and refuses it the same way
    one_line_error(run("train", retail, "-o", tmp_path / "m.npz", "--columns", COLUMNS, "--model", "popularity"),
                   f"{retail}:6:", "--negatives drop")
    with pytest.raises(InputError, match="negative value") as info:
        Interactions.from_dataframe(pd.read_csv(retail, sep="\t", dtype=str).astype({"quantity": float}),
                                    user_col="customer", item_col="item", value_col="quantity")
    assert "`negatives=drop`" in str(info.value)


def test_net_subtracts_returns_and_drops_pairs_bought_back_whole(retail, tmp_path):
    out = tmp_path / "out"
    result = run("prepare", retail, "-o", out, "--columns", COLUMNS, "--negatives", "net", "--test-fraction", 0)
    assert result.exit_code == 0, result.output
    assert file_pairs(out / "train.tsv") == {
        # 17850 bought 86 of 85123A over three lines and returned 80: 6 net; 71053 untouched
        ("17850", "85123A"): 6.0, ("17850", "71053"): 6.0,
        ("13047", "22633"): 19.0, ("13047", "71053"): 3.0,
        ("12583", "84879"): 32.0, ("12583", "71053"): 0.0, ("12583", "85123A"): 2.0,  # a 0 is kept
    }
    s = json.loads((out / "summary.json").read_text())
    assert (s["rows_read"], s["duplicates_merged"], s["negative_rows"], s["pairs_netted_out"], s["pairs_kept"]) == \
        (14, 6, 3, 1, 7)  # 99999 was bought and returned whole
    assert s["parameters"]["duplicates"] == "sum" and s["parameters"]["negatives"] == "net"
    assert "14 rows read - 6 duplicates merged (sum) = 8 pairs - 1 with net <= 0 (3 negative rows netted) " \
           "= 7 pairs kept" in result.stdout
    assert (out / "test.tsv").read_text() == "" and s["test"]["rows"] == 0
    # train on the raw export: the same pairs, and no column for the item returned whole
    assert run("train", retail, "-o", tmp_path / "m.npz", "--columns", COLUMNS, "--negatives", "net",
               "--model", "popularity").exit_code == 0
    model = load(tmp_path / "m.npz")
    assert sorted(model.item_ids) == sorted({i for _, i in file_pairs(out / "train.tsv")}) and "99999" not in model.item_ids


def test_a_pair_returned_whole_is_dropped_by_net_and_drop_removes_only_the_returns():
    user = np.array([0, 0, 0, 1])
    item = np.array([0, 0, 1, 0])
    value = np.array([5.0, -5.0, -2.0, 0.0])
    netted = merge_rows(user, item, value, None, 2, negatives="net")
    assert list(zip(netted.user, netted.item, netted.value)) == [(1, 0, 0.0)]  # the 0 without a return stays
    assert netted.counts["pairs_netted_out"] == 2
    dropped = merge_rows(user, item, value, None, 2, negatives="drop")
    assert list(zip(dropped.user, dropped.item, dropped.value)) == [(0, 0, 5.0), (1, 0, 0.0)]
    assert dropped.counts["negative_rows_dropped"] == 2


def test_net_with_another_merge_is_refused_in_one_line(retail, tmp_path):
    one_line_error(run("prepare", retail, "-o", tmp_path / "o", "--columns", COLUMNS, "--negatives", "net",
                       "--duplicates", "max"), "--negatives net", "--duplicates max", "--duplicates sum")
    with pytest.raises(InputError, match="`negatives=net`"):
        Interactions.from_dataframe(pd.DataFrame({"user": ["a"], "item": ["x"]}), duplicates="max", negatives="net")


# -- duplicates: CLI and API agree --------------------------------------------------------------
@pytest.mark.parametrize("rule", DUPLICATES)
def test_cli_and_api_merge_the_same_values_and_train_the_same_matrix(retail, tmp_path, rule):
    out = tmp_path / "out"
    result = run("prepare", retail, "-o", out, "--columns", COLUMNS, "--negatives", "drop", "--duplicates", rule,
                 "--test-fraction", 0)
    assert result.exit_code == 0, result.output
    table = pd.read_csv(retail, sep="\t", dtype={"customer": str, "item": str})
    api = Interactions.from_dataframe(table, user_col="customer", item_col="item", value_col="quantity",
                                      duplicates=rule, negatives="drop")
    raw = load_interactions(retail, values=True, rows=RowOptions(columns=COLUMNS, duplicates=rule, negatives="drop"))
    assert pairs(api) == file_pairs(out / "train.tsv") == pairs(raw)
    expected = {"sum": 86.0, "max": 40.0, "first": 6.0, "last": 40.0, "count": 3.0}[rule]
    assert pairs(api)[("17850", "85123A")] == expected
    assert api.row_counts["duplicates_merged"] == json.loads((out / "summary.json").read_text())["duplicates_merged"]
    # train on the raw export and on prepare's all-data file: the same model data
    for source, extra in ((retail, ["--columns", COLUMNS, "--negatives", "drop", "--duplicates", rule]),
                          (out / "train.tsv", [])):
        model_path = tmp_path / f"{rule}-{source.name}.npz"
        result = run("train", source, "-o", model_path, "--model", "popularity", *extra)
        assert result.exit_code == 0, result.output
        model = load(model_path)
        assert (model.n_users, model.n_items) == (api.n_users, api.n_items) == (3, 5)
        assert sorted(model.item_ids) == sorted(api.item_ids)


def test_default_merge_is_sum_in_prepare_and_the_api_and_the_help_says_so(tmp_path):
    path = tmp_path / "plays.tsv"
    path.write_text("u1\ta\t2\nu1\ta\t3\nu2\ta\t1\nu2\tb\t1\n")
    result = run("prepare", path, "-o", tmp_path / "o", "--test-fraction", 0)
    assert result.exit_code == 0, result.output
    assert file_pairs(tmp_path / "o" / "train.tsv")[("u1", "a")] == 5.0
    assert pairs(Interactions.from_dataframe(read_ratings(path), value_col="value"))[("u1", "a")] == 5.0
    for command in ("prepare", "train", "tune"):
        text = " ".join(run(command, "--help").output.split())
        assert "--duplicates [sum|max|first|last|count]" in text and "[default: sum]" in text, command
        assert "--negatives [refuse|drop|net]" in text and "[default: refuse]" in text, command
        assert "--sep" in text and "--columns" in text and "--min-value, --min-rating" in text, command


# -- zero values and --min-value ------------------------------------------------------------------
def test_zero_ratings_are_kept_unless_min_value_removes_them(tmp_path):
    path = tmp_path / "books.tsv"
    path.write_text("user\tisbn\trating\n"
                    "276725\t034545104X\t0\n276726\t0155061224\t5\n276727\t0446520802\t0\n"
                    "276726\t034545104X\t8\n276727\t0155061224\t7\n276725\t0446520802\t9\n")
    result = run("prepare", path, "-o", tmp_path / "all", "--test-fraction", 0)
    assert result.exit_code == 0, result.output
    kept = file_pairs(tmp_path / "all" / "train.tsv")
    assert len(kept) == 6 and kept[("276725", "034545104X")] == 0.0
    api = Interactions.from_dataframe(read_ratings(path), value_col="value")
    assert api.nnz == 6 and pairs(api)[("276727", "0446520802")] == 0.0  # a stored 0: an interaction
    result = run("prepare", path, "-o", tmp_path / "rated", "--test-fraction", 0, "--min-value", 1)
    assert result.exit_code == 0, result.output
    s = json.loads((tmp_path / "rated" / "summary.json").read_text())
    assert s["rows_below_min_rating"] == 2 and s["pairs_kept"] == 4 and s["train"]["rows"] == 4
    assert "6 rows read = 6 pairs - 2 below --min-value = 4 pairs kept" in result.stdout
    api = Interactions.from_dataframe(read_ratings(path), value_col="value", min_value=1)
    assert pairs(api) == file_pairs(tmp_path / "rated" / "train.tsv")
    assert api.row_counts["rows_below_min_value"] == 2


# -- the API refuses what the CLI refuses -------------------------------------------------------
@pytest.mark.parametrize("frame, kwargs, words", [
    (pd.DataFrame({"user": ["a", ""], "item": ["x", "y"]}), {}, "1 row has an empty user id (column 'user'), the first in data row 2 (user '', item 'y')"),
    (pd.DataFrame({"user": ["a", "b"], "item": ["x", "  "]}), {}, "1 row has an empty (only spaces) item id"),
    (pd.DataFrame({"customer": ["a"], "product": ["x"]}), {},
     "no column 'user' for the user ids; the table has 'customer', 'product' (name the columns with user_col="),
    (pd.DataFrame({"user": ["a"], "item": ["x"]}), {"value_col": "qty"}, "no column 'qty' for the values"),
    (pd.DataFrame({"user": ["a", None], "item": ["x", "y"]}), {}, "1 row has a missing (NA) user id (column 'user'), the first in data row 2 (user '', item 'y')"),
    (pd.DataFrame({"user": [None, None], "item": [None, None]}), {}, "2 rows have a missing (NA) user id"),
    (pd.DataFrame({"user": ["a", "b"], "item": ["x", "y"], "v": ["3", "lots"]}), {"value_col": "v"},
     "value 'lots' in column 'v' is not a finite number (1 such row), the first in data row 2 (user 'b', item 'y')"),
    (pd.DataFrame({"user": ["a", "b"], "item": ["x", "y"], "v": [1.0, np.inf]}), {"value_col": "v"},
     "is not a finite number"),
])
def test_from_dataframe_refuses_bad_tables_with_an_input_error(frame, kwargs, words):
    with pytest.raises(InputError) as info:
        Interactions.from_dataframe(frame, **kwargs)
    assert isinstance(info.value, ValueError) and words in str(info.value)
    assert len(str(info.value).splitlines()) == 1


def test_rules_that_leave_nothing_are_refused_not_a_0x0_matrix():
    returns = pd.DataFrame({"user": ["a", "b"], "item": ["x", "x"], "qty": [-1.0, -2.0]})
    with pytest.raises(InputError, match="no interactions left: 2 negative rows dropped"):
        Interactions.from_dataframe(returns, value_col="qty", negatives="drop")
    with pytest.raises(InputError, match="no interactions left: 2 pairs below the minimum value"):
        Interactions.from_dataframe(returns.assign(qty=[1.0, 2.0]), value_col="qty", min_value=5)


def test_empty_id_gets_the_same_words_from_the_cli(tmp_path):
    path = tmp_path / "r.tsv"
    path.write_text("a\tx\t1\n\ty\t2\n")
    one_line_error(run("prepare", path, "-o", tmp_path / "o"), "r.tsv:2: 1 row has an empty user id (column 0)",
                   "fill in the user ids; or leave those rows out with --empty-ids drop")


# -- a raw export to a model on all of it -------------------------------------------------------
def test_train_reads_a_raw_export_with_prepares_reader_options(tmp_path):
    path = tmp_path / "export.txt"
    path.write_text("".join(f"c{u};p{(u * 7 + k) % 9};{k + 1}\n" for u in range(12) for k in range(4)))
    # the hint names --sep, which train now has
    one_line_error(run("train", path, "-o", tmp_path / "m.npz", "--format", "tsv"), "--sep")
    result = run("train", path, "-o", tmp_path / "m.npz", "--sep", ";", "--no-header", "--columns", "0,1,2",
                 "--model", "itemknn")
    assert result.exit_code == 0, result.output
    model = load(tmp_path / "m.npz")
    assert model.n_users == 12 and set(model.item_ids) == {f"p{i}" for i in range(9)}
    # prepare --test-fraction 0 writes the same data to train on
    result = run("prepare", path, "-o", tmp_path / "all", "--sep", ";", "--test-fraction", 0)
    assert result.exit_code == 0, result.output
    assert len(file_pairs(tmp_path / "all" / "train.tsv")) == model.train_.nnz


def test_test_fraction_zero_is_refused_with_options_that_need_a_test_set(retail, tmp_path):
    for extra, words in ((["--split", "cold-items"], "--test-fraction 0"), (["--num-splits", 2], "--num-splits 1")):
        one_line_error(run("prepare", retail, "-o", tmp_path / "o", "--columns", COLUMNS, "--negatives", "drop",
                           "--test-fraction", 0, *extra), words)


def test_tune_reads_a_raw_export_by_the_same_rules(retail, tmp_path):
    result = run("tune", retail, "--models", "itemknn", "--columns", COLUMNS, "--negatives", "net",
                 "--validation-fraction", 0.5)
    assert result.exit_code == 0, result.output
    one_line_error(run("tune", retail, "--models", "itemknn", "--columns", COLUMNS), "--negatives drop")


# -- did you mean ---------------------------------------------------------------------------------
@pytest.mark.parametrize("asked, meant", [("17850.0", "17850"), (" 17850", "17850"), ("ABC", "abc"),
                                          ("12583", "12583.0")])
def test_an_unknown_id_close_to_a_known_one_gets_a_did_you_mean(asked, meant):
    data = Interactions.from_dataframe(pd.DataFrame({"user": ["17850", "abc", "12583.0"], "item": ["x", "y", "z"]}))
    with pytest.raises(InputError, match=f"did you mean {meant!r}"):
        data.user_indices([asked])
    with pytest.raises(InputError) as info:
        data.user_indices(["nobody"])
    assert "did you mean" not in str(info.value)


def test_recommend_and_similar_say_did_you_mean_for_a_float_spelled_id(tmp_path):
    path = tmp_path / "r.tsv"
    path.write_text("".join(f"{17850 + u}\t{100 + (u + k) % 5}\n" for u in range(6) for k in range(3)))
    assert run("train", path, "-o", tmp_path / "m.npz", "--model", "itemknn").exit_code == 0
    (tmp_path / "users.txt").write_text("17851.0\n")
    one_line_error(run("recommend", tmp_path / "m.npz", "--users", tmp_path / "users.txt", "--train", path,
                       "-o", tmp_path / "recs.tsv"), "did you mean '17851'")
    one_line_error(run("similar", tmp_path / "m.npz", "--items", "101.0"), "did you mean '101'")


# -- review of the row rules: validation files, merges under a minimum, rounding, signed scales ----
def _book_export(path, n_users=16):
    """item;user;rating with a header (the raw layout), two taste groups of 6 items each."""
    rows = ["isbn;user;rating"]
    for u in range(n_users):
        group = u % 2
        rows += [f"g{group}b{(u + k) % 6};r{u};{1 + (u + k) % 5}" for k in range(5)]
    path.write_text("\n".join(rows) + "\n")
    return path


def test_validation_file_is_read_with_its_own_layout_not_trains(tmp_path):
    raw = _book_export(tmp_path / "export.txt")
    reader = ["--sep", ";", "--header", "--columns", "1,0,2"]
    result = run("prepare", raw, "-o", tmp_path / "split", *reader, "--test-fraction", 0.2)
    assert result.exit_code == 0, result.output
    test = tmp_path / "split" / "test.tsv"
    # TRAIN in the export's layout (item;user;rating, a header), the validation file as prepare wrote it
    raw = tmp_path / "export-train.txt"
    raw.write_text("isbn;user;rating\n" + "".join(f"{i};{u};{v}\n" for (u, i), v in
                                                  file_pairs(tmp_path / "split" / "train.tsv").items()))
    # the raw export's --sep/--header/--columns 1,0,2 describe TRAIN only: test.tsv is user, item, value
    result = run("tune", raw, *reader, "--models", "itemknn", "--validation", test, "--table", tmp_path / "t.tsv")
    assert result.exit_code == 0, result.output
    scores = pd.read_csv(tmp_path / "t.tsv", sep="\t")["precision@10"]
    assert scores.notna().all() and (scores > 0).all()
    data = load_interactions(raw, rows=RowOptions(sep=";", header=True, columns="1,0,2"))
    from mrec_warp.stages._inputs import load_validation
    val = load_validation(test, data)
    assert set(val.user_ids) <= set(data.user_ids) and set(val.item_ids) <= set(data.item_ids)


def test_a_validation_file_sharing_nothing_with_train_is_refused(tmp_path):
    train = tmp_path / "train.tsv"
    train.write_text("".join(f"u{u}\ti{(u + k) % 6}\t1\n" for u in range(8) for k in range(3)))
    other = tmp_path / "other.tsv"
    other.write_text("x1\ty1\t1\nx2\ty2\t1\n")  # another data set's file: it would score every model 0
    for command, extra in (("train", ["-o", tmp_path / "m.npz", "--model", "wrmf", "--factors", 2]),
                           ("tune", ["--models", "itemknn"])):
        one_line_error(run(command, train, "--validation", other, *extra),
                       str(other), "no validation pair has a user and an item of the training data",
                       "0 of 2 users")
    assert not (tmp_path / "m.npz").exists()


RERATED = "u1\tm10\t2.0\nu1\tm10\t2.5\nu1\tm11\t5\nu2\tm10\t4\nu2\tm11\t5\n"


def test_min_value_with_repeated_pairs_needs_the_merge_chosen(tmp_path):
    path = tmp_path / "rerated.tsv"
    path.write_text(RERATED)
    # summed, two ratings of 2 and 2.5 would pass --min-rating 4 as a 4.5
    for command, extra in (("prepare", ["-o", tmp_path / "o", "--test-fraction", 0]),
                           ("train", ["-o", tmp_path / "m.npz", "--model", "popularity"])):
        one_line_error(run(command, path, "--min-rating", 4, *extra), f"{path}:2:", "1 repeated row of the same user and item",
                       "user 'u1', item 'm10'", "--duplicates last", "--duplicates max", "--duplicates sum")
    with pytest.raises(InputError, match="`duplicates=last`"):
        Interactions.from_dataframe(read_ratings(path), value_col="value", min_value=4)
    result = run("prepare", path, "-o", tmp_path / "o", "--test-fraction", 0, "--min-rating", 4,
                 "--duplicates", "max")
    assert result.exit_code == 0, result.output
    assert file_pairs(tmp_path / "o" / "train.tsv") == {("u1", "m11"): 5.0, ("u2", "m10"): 4.0, ("u2", "m11"): 5.0}
    api = Interactions.from_dataframe(read_ratings(path), value_col="value", min_value=4, duplicates="max")
    assert pairs(api) == file_pairs(tmp_path / "o" / "train.tsv")
    # chosen sum (counts), or no minimum: as before
    assert pairs(Interactions.from_dataframe(read_ratings(path), value_col="value", min_value=4,
                                             duplicates="sum"))[("u1", "m10")] == 4.5
    assert pairs(Interactions.from_dataframe(read_ratings(path), value_col="value"))[("u1", "m10")] == 4.5


def test_net_counts_a_pair_returned_whole_as_netted_out_whatever_the_rounding(tmp_path):
    netted = merge_rows(np.array([0, 0, 0, 1]), np.array([0, 0, 0, 0]), np.array([0.1, 0.2, -0.3, 0.7]), None, 1,
                        negatives="net")
    assert netted.counts["pairs_netted_out"] == 1 and list(netted.user) == [1]
    path = tmp_path / "kg.tsv"
    path.write_text("c1\tflour\t0.1\nc1\tflour\t0.2\nc1\tflour\t-0.3\nc1\tsugar\t1.5\nc2\tflour\t2\n")
    result = run("prepare", path, "-o", tmp_path / "o", "--negatives", "net", "--test-fraction", 0)
    assert result.exit_code == 0, result.output
    assert ("c1", "flour") not in file_pairs(tmp_path / "o" / "train.tsv")
    # a small net that is more than rounding stays
    kept = merge_rows(np.array([0, 0]), np.array([0, 0]), np.array([0.3, -0.2999]), None, 1, negatives="net")
    assert kept.counts["pairs_kept"] == 1 and kept.value[0] == pytest.approx(1e-4)


JESTER = "u1\tj1\t-9.5\nu1\tj2\t7.2\nu2\tj1\t8\nu2\tj2\t-3\nu3\tj1\t6\nu3\tj3\t5.5\nu3\tj2\t2\n"


def test_signed_ratings_below_a_minimum_are_dropped_with_it_not_refused(tmp_path):
    path = tmp_path / "jester.tsv"
    path.write_text(JESTER)
    one_line_error(run("prepare", path, "-o", tmp_path / "o"), "2 negative values", "signed ratings",
                   "--min-value", "--negatives drop")
    result = run("prepare", path, "-o", tmp_path / "o", "--min-value", 5, "--test-fraction", 0)
    assert result.exit_code == 0, result.output
    assert file_pairs(tmp_path / "o" / "train.tsv") == {("u1", "j2"): 7.2, ("u2", "j1"): 8.0, ("u3", "j1"): 6.0,
                                                        ("u3", "j3"): 5.5}
    expected = file_pairs(tmp_path / "o" / "train.tsv")
    s = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert (s["negative_rows"], s["rows_below_min_value"], s["pairs_kept"]) == (2, 3, 4)
    # the negative ratings are among the pairs below the minimum, not a count beside them
    assert s["negative_pairs_below_min_value"] == 2
    assert "7 rows read = 7 pairs - 3 below --min-value (2 of them negative) = 4 pairs kept" in result.stdout
    api = Interactions.from_dataframe(read_ratings(path), value_col="value", min_value=5)
    assert pairs(api) == pytest.approx(expected)  # float32 in the matrix
    # a minimum below 0 keeps negative values: those are still refused
    with pytest.raises(InputError, match="2 negative values"):
        Interactions.from_dataframe(read_ratings(path), value_col="value", min_value=-5)


def test_min_value_needs_a_value_column_or_count_in_the_api_as_in_the_cli(tmp_path):
    table = pd.DataFrame({"user": ["a", "a", "a", "b"], "item": ["x", "x", "y", "x"]})
    with pytest.raises(InputError, match="`min_value` compares each pair's value, and the table has only user"):
        Interactions.from_dataframe(table, min_value=2)
    counted = Interactions.from_dataframe(table, min_value=2, duplicates="count")
    assert pairs(counted) == {("a", "x"): 2.0}
    path = tmp_path / "pairs.tsv"
    path.write_text("a\tx\na\tx\na\ty\nb\tx\nb\ty\nb\ty\n")
    one_line_error(run("prepare", path, "-o", tmp_path / "no", "--min-value", 2), "--min-value compares",
                   "--duplicates count")
    result = run("prepare", path, "-o", tmp_path / "o", "--min-value", 2, "--duplicates", "count",
                 "--test-fraction", 0)
    assert result.exit_code == 0, result.output
    assert file_pairs(tmp_path / "o" / "train.tsv") == {("a", "x"): 2.0, ("b", "y"): 2.0}


def test_refusals_name_the_line_of_the_row_also_after_filtering_or_reordering(tmp_path):
    path = tmp_path / "r.tsv"
    path.write_text("a\tx\t1\nb\ty\t2\nc\tx\t3\nd\ty\t-4\ne\tx\t5\n")  # the return is on line 4
    df = read_ratings(path)
    for table, kwargs in ((df, {}), (df.iloc[::-1], {}), (df[df["user"] != "a"], {}),
                          (df, {"user_ids": ["c", "d", "e"]}), (df.sample(frac=1, random_state=3), {})):
        with pytest.raises(InputError) as info:
            Interactions.from_dataframe(table, value_col="value", source=str(path), **kwargs)
        assert str(info.value).startswith(f"{path}:4: 1 negative value") and "user 'd', item 'y'" in str(info.value)
    # after reset_index the labels are positions, no longer the file's rows: no line rather than a wrong one
    with pytest.raises(InputError) as info:
        Interactions.from_dataframe(df[df["user"] != "a"].reset_index(drop=True), value_col="value",
                                    source=str(path))
    assert str(info.value).startswith(f"{path}: 1 negative value") and "row 2 (user 'd', item 'y')" in str(info.value)


def test_evaluate_and_recommend_refuse_returns_in_the_files_they_read(tmp_path):
    train = tmp_path / "train.tsv"
    train.write_text("".join(f"u{u}\ti{(u + k) % 6}\t1\n" for u in range(8) for k in range(3)))
    assert run("train", train, "-o", tmp_path / "m.npz", "--model", "popularity").exit_code == 0
    assert run("recommend", tmp_path / "m.npz", "-o", tmp_path / "recs.tsv", "-k", 3).exit_code == 0
    test = tmp_path / "test.tsv"
    test.write_text("u0\ti4\t1\nu1\ti5\t-1\n")  # a return is no hit
    one_line_error(run("evaluate", "--train", train, "--test", test, "--recs", tmp_path / "recs.tsv"),
                   f"{test}:2:", "1 negative value", "drop or net those rows first")
    returns = tmp_path / "train-returns.tsv"
    returns.write_text(train.read_text() + "u2\ti0\t-1\n")
    result = run("recommend", tmp_path / "m.npz", "-o", tmp_path / "r2.tsv", "--train", returns)
    one_line_error(result, f"{returns}:25:", "1 negative value")
    assert "--negatives" not in result.output  # recommend has no such flag
    one_line_error(run("evaluate", "--train", returns, "--test", test.with_name("t2.tsv"), "--recs",
                       tmp_path / "recs.tsv"), "")  # any one-line refusal (the test file is missing)


def test_hints_name_only_the_flags_the_command_has(tmp_path):
    train = tmp_path / "train.tsv"
    train.write_text("".join(f"u{u}\ti{(u + k) % 6}\n" for u in range(8) for k in range(3)))
    assert run("train", train, "-o", tmp_path / "m.npz", "--model", "popularity").exit_code == 0
    semi = tmp_path / "semi.txt"
    semi.write_text("u0;i1;1\nu1;i2\n")  # ';' splits its lines unalike: not guessed
    for args in (["recommend", tmp_path / "m.npz", "-o", tmp_path / "r.tsv", "--train", semi],
                 ["evaluate", "--train", semi, "--test", semi, "--recs", train]):
        result = run(*args)
        one_line_error(result, f"{semi}:1:", "';' as delimiter", "prepare reads any layout")
        assert "--sep" not in result.output and "`" not in result.output
    # prepare has the flag: its hint names it
    one_line_error(run("prepare", semi, "-o", tmp_path / "o", "--format", "tsv"), "--sep ';'")


def test_prepare_takes_min_value_and_says_so_in_its_words(tmp_path):
    import mrec_warp as mw

    path = tmp_path / "r.tsv"
    path.write_text("".join(f"u{u}\ti{k}\t{1 + (u + k) % 5}\n" for u in range(6) for k in range(5)))
    summary = mw.prepare(path, tmp_path / "o", min_value=3, test_fraction=0)
    assert summary["rows_below_min_value"] == summary["rows_below_min_rating"] == 12
    assert summary["parameters"]["min_value"] == summary["parameters"]["min_rating"] == 3
    assert mw.prepare(path, tmp_path / "o2", min_rating=3, test_fraction=0)["pairs_kept"] == summary["pairs_kept"]
    with pytest.raises(InputError, match="one option under two names"):
        mw.prepare(path, tmp_path / "o3", min_value=3, min_rating=4)
    result = run("prepare", path, "-o", tmp_path / "o4", "--min-rating", 9)
    one_line_error(result, "no interactions left: 30 pairs below the minimum value", "lower --min-value")


def test_messages_say_numbers_plainly_and_skip_steps_that_did_nothing(tmp_path):
    with pytest.raises(InputError) as info:
        Interactions.from_dataframe(pd.DataFrame({"user": ["a", "b"], "item": ["x", "y"], "v": [1.0, np.inf]}),
                                    value_col="v")
    assert "value inf in column 'v'" in str(info.value) and "(1 such row), the first in data row 2 (" in str(info.value)
    path = tmp_path / "r.tsv"
    path.write_text("".join(f"u{u}\ti{k}\t1\n" for u in range(4) for k in range(3)))
    result = run("prepare", path, "-o", tmp_path / "o")
    assert result.exit_code == 0, result.output
    assert "duplicates merged" not in result.stdout and "  12 rows read = 12 pairs kept = " in result.stdout


def test_a_popularity_model_refuses_an_id_that_is_a_known_one_written_otherwise(tmp_path):
    train = tmp_path / "train.tsv"
    train.write_text("".join(f"{17850 + u}\ti{(u + k) % 6}\n" for u in range(6) for k in range(3)))
    assert run("train", train, "-o", tmp_path / "m.npz", "--model", "popularity").exit_code == 0
    (tmp_path / "users.txt").write_text("17851\n17850.0\n")
    one_line_error(run("recommend", tmp_path / "m.npz", "--users", tmp_path / "users.txt", "-o",
                       tmp_path / "r.tsv"), "users.txt:2:", "user '17850.0' is not in the model (did you mean '17850'?)")
    (tmp_path / "users.txt").write_text("17851\nnewcomer\n")  # a new user still gets the popular items, said
    result = run("recommend", tmp_path / "m.npz", "--users", tmp_path / "users.txt", "-o", tmp_path / "r.tsv")
    assert result.exit_code == 0
    assert "note: 1 user of 2 is not in the model: it gets the most popular items" in result.stderr


def test_a_table_with_two_columns_of_one_name_is_refused_in_one_line():
    table = pd.DataFrame([["a", "x", 1.0, 2.0]], columns=["user", "item", "value", "value"])
    with pytest.raises(InputError, match="the table has 2 columns named 'value'"):
        Interactions.from_dataframe(table, value_col="value")


def test_leave_out_zero_puts_every_row_in_train_as_test_fraction_zero(retail, tmp_path):
    for flag in ("--leave-out", "--test-fraction"):
        result = run("prepare", retail, "-o", tmp_path / flag, "--columns", COLUMNS, "--negatives", "drop", flag, 0)
        assert result.exit_code == 0, result.output
    assert (tmp_path / "--leave-out" / "train.tsv").read_bytes() == (tmp_path / "--test-fraction" / "train.tsv").read_bytes()
    assert (tmp_path / "--leave-out" / "test.tsv").read_text() == ""


def test_row_counts_is_part_of_interactions():
    data = Interactions(np.eye(2), ["a", "b"], ["x", "y"])
    assert data.row_counts is None
    built = Interactions.from_dataframe(pd.DataFrame({"user": ["a"], "item": ["x"]}))
    assert built.row_counts["pairs_kept"] == 1


def test_a_validation_file_in_another_layout_gets_a_hint_without_trains_flags(tmp_path):
    train = tmp_path / "train.tsv"
    train.write_text("".join(f"u{u}\ti{(u + k) % 6}\t1\n" for u in range(8) for k in range(3)))
    semi = tmp_path / "val.txt"
    semi.write_text("u0;i4;1\nu1;i5\n")  # ';' splits its lines unalike: not guessed
    result = run("train", train, "-o", tmp_path / "m.npz", "--model", "wrmf", "--validation", semi)
    one_line_error(result, f"{semi}:1:", "';' as delimiter")
    assert "--sep" not in result.output  # --sep would describe TRAIN, not this file
