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
from mrec_warp.stages._inputs import RowOptions, load_interactions

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
    assert "14 rows read; 6 duplicates merged (sum), 3 negative rows netted, 1 pair with net <= 0 dropped; " \
           "7 pairs kept" in result.stdout
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
    assert "2 pairs below --min-value" in result.stdout
    api = Interactions.from_dataframe(read_ratings(path), value_col="value", min_value=1)
    assert pairs(api) == file_pairs(tmp_path / "rated" / "train.tsv")
    assert api.row_counts["rows_below_min_value"] == 2


# -- the API refuses what the CLI refuses -------------------------------------------------------
@pytest.mark.parametrize("frame, kwargs, words", [
    (pd.DataFrame({"user": ["a", ""], "item": ["x", "y"]}), {}, "column 'user' (user) is empty in row 1"),
    (pd.DataFrame({"user": ["a", "b"], "item": ["x", "  "]}), {}, "(item) is empty (only spaces)"),
    (pd.DataFrame({"customer": ["a"], "product": ["x"]}), {},
     "no column 'user' for the user ids; the table has 'customer', 'product' (name the columns with user_col="),
    (pd.DataFrame({"user": ["a"], "item": ["x"]}), {"value_col": "qty"}, "no column 'qty' for the values"),
    (pd.DataFrame({"user": ["a", None], "item": ["x", "y"]}), {}, "1 row(s) have no user id (NA in column 'user')"),
    (pd.DataFrame({"user": [None, None], "item": [None, None]}), {}, "2 row(s) have no user id"),
    (pd.DataFrame({"user": ["a", "b"], "item": ["x", "y"], "v": ["3", "lots"]}), {"value_col": "v"},
     "value 'lots' of row 1 in column 'v' is not a finite number"),
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
    one_line_error(run("prepare", path, "-o", tmp_path / "o"), "(user) is empty", "fill in the user")


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
