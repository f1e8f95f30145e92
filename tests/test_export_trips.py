"""A new user's trips on files made like real exports (issue 19, trial 19): a quoted ``;``
book dump, a retail invoice log with anonymous rows and trailing empty columns, a play
log read through pandas. Each test is one trip, on a small file it writes."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from mrec_warp.data.interactions import Interactions
from mrec_warp.data.near_ids import close_id, spelled_otherwise
from mrec_warp.data.ratings import read_ratings
from mrec_warp.data.ratings import describe_reading
from mrec_warp.errors import InputError

from .test_guards import one_line_error, run

# An invoice log as a spreadsheet exports it: 5 columns, some lines with two empty
# trailing fields, an anonymous line (no customer), a return.
INVOICES = ("InvoiceNo,StockCode,Quantity,CustomerID,Country\n"
            "536365,85123A,6,17850,United Kingdom,,\n"       # line 2: the first data line is the wider one
            "536365,71053,6,17850,United Kingdom\n"
            "536366,85123A,4,13047,France,,\n"
            "536367,22633,12,,United Kingdom\n"              # line 5: anonymous
            "536368,22633,3,13047,France\n"
            "536369,84879,2,,United Kingdom,,\n"             # line 7: anonymous, trailing fields
            "536370,84879,5,12583,France\n"
            "536371,71053,1,12583,France\n")


def write(tmp_path, name, text, newline=None):
    path = tmp_path / name
    with open(path, "w", encoding="utf-8", newline=newline) as fh:
        fh.write(text)
    return path


# -- 1. one column for two roles ---------------------------------------------------------------------
@pytest.mark.parametrize("kwargs, words", [
    ({"user_col": "user", "item_col": "user"}, "column 'user' is chosen twice (`user_col` and `item_col`)"),
    ({"value_col": "item"}, "column 'item' is chosen twice (`item_col` and `value_col`)"),
])
def test_one_column_named_for_two_roles_is_refused_as_the_cli_refuses_it(tmp_path, kwargs, words):
    table = pd.DataFrame({"user": ["a", "a", "b"], "item": ["x", "y", "x"]})
    with pytest.raises(InputError) as info:
        Interactions.from_dataframe(table, **kwargs)
    assert words in str(info.value) and "give each column once" in str(info.value)
    path = write(tmp_path, "r.tsv", "a\tx\nb\ty\n")
    one_line_error(run("prepare", path, "-o", tmp_path / "o", "--columns", "0,0"), "column '0' is chosen twice")


# -- 2. trailing empty columns -----------------------------------------------------------------------
def test_lines_with_empty_trailing_fields_are_read_and_counted_on_both_parser_paths(tmp_path):
    path = write(tmp_path, "inv.csv", INVOICES.replace(",,\n536366", "\n536366"))  # first data line plain
    for text in (INVOICES, path.read_text()):
        path.write_text(text)
        df = read_ratings(path, columns="CustomerID,StockCode,Quantity", empty_ids="drop")
        wide = text.count(",,\n")
        assert df.attrs["reading"]["empty_trailing_lines"] == wide
        assert f"{wide} lines had empty trailing fields (beyond the 5 columns of the first line), ignored" in \
            describe_reading(df.attrs["reading"])
        assert df["item"].tolist()[:3] == ["85123A", "71053", "85123A"] and df["value"].sum() == 39
    # the text path (a value that is no number) names the right line past the wider ones
    write(tmp_path, "bad.csv", INVOICES.replace("536371,71053,1,", "536371,71053,lots,"))
    with pytest.raises(InputError, match=r"bad\.csv:9: rating 'lots' is not a finite number"):
        read_ratings(tmp_path / "bad.csv", columns="CustomerID,StockCode,Quantity", empty_ids="drop")


@pytest.mark.parametrize("text, line", [
    (INVOICES.replace("France,,\n", "France,,x\n"), 4),      # past the first data line: the parser's path
    (INVOICES.replace("Kingdom,,\n536365", "Kingdom,x,\n536365"), 2),  # the first data line itself
    ("u1,i1,1\nu2,i2,2,,\nu3,i3,3,4,\n", 3),                # no header: wider than line 1
])
def test_extra_fields_that_hold_something_are_still_refused_with_their_line(tmp_path, text, line):
    path = write(tmp_path, "x.csv", text)
    with pytest.raises(InputError) as info:
        read_ratings(path, empty_ids="drop")
    assert str(info.value).startswith(f"{path}:{line}: expected ")
    assert "(the extra ones not empty)" in str(info.value)


def test_prepare_says_once_how_many_lines_had_empty_trailing_fields(tmp_path):
    path = write(tmp_path, "inv.csv", INVOICES)
    result = run("prepare", path, "-o", tmp_path / "o", "--columns", "CustomerID,StockCode,Quantity",
                 "--empty-ids", "drop", "--test-fraction", 0)
    assert result.exit_code == 0, result.output
    assert result.stdout.count("3 lines had empty trailing fields (beyond the 5 columns of the first line), ignored") == 1
    reading = json.loads((tmp_path / "o" / "summary.json").read_text())["reading"]
    assert reading["empty_trailing_lines"] == 3


# -- 3. empty ids: refused with a count and the option, or dropped and counted -------------------------
def test_anonymous_rows_are_refused_with_their_count_and_the_option(tmp_path):
    path = write(tmp_path, "inv.csv", INVOICES)
    result = run("prepare", path, "-o", tmp_path / "o", "--columns", "CustomerID,StockCode,Quantity")
    one_line_error(result, f"{path}:5: 2 rows have an empty user id (column 3), the first on this line",
                   "--empty-ids drop")
    both = write(tmp_path, "both.csv", "u1,i1,1\n,i2,1\nu3,,1\n")  # the count covers both id columns
    with pytest.raises(InputError, match=r"both\.csv:2: 2 rows have an empty user or item id \(columns 0 and 1"):
        read_ratings(both)


def test_empty_ids_drop_leaves_anonymous_rows_out_and_counts_them_in_cli_and_api(tmp_path):
    path = write(tmp_path, "inv.csv", INVOICES)
    result = run("prepare", path, "-o", tmp_path / "o", "--columns", "CustomerID,StockCode,Quantity",
                 "--empty-ids", "drop", "--test-fraction", 0)
    assert result.exit_code == 0, result.output
    assert "  8 rows read - 2 rows with an empty id" in result.stdout
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert summary["empty_id_rows_dropped"] == 2 and summary["parameters"]["empty_ids"] == "drop"
    train = (tmp_path / "o" / "train.tsv").read_text()
    assert "22633" in train and "84879" in train and "\t22633\t12" not in train  # only the customers' rows
    # train reads the raw export by the same rule
    result = run("train", path, "-o", tmp_path / "m.npz", "--model", "popularity", "--columns",
                 "CustomerID,StockCode,Quantity", "--empty-ids", "drop", "-v")
    assert result.exit_code == 0, result.output
    assert "8 rows read - 2 rows with an empty id = 6 pairs kept: 3 users x 4 items" in result.output
    # the API: '' and NaN alike (pandas reads an empty customer id as NaN)
    table = pd.read_csv(path, index_col=False, usecols=["StockCode", "Quantity", "CustomerID"])
    with pytest.raises(InputError, match=r"2 rows have a missing \(NA\) user id \(column 'CustomerID'\).*"
                                         r"`empty_ids=drop`"):
        Interactions.from_dataframe(table, user_col="CustomerID", item_col="StockCode", value_col="Quantity")
    data = Interactions.from_dataframe(table, user_col="CustomerID", item_col="StockCode", value_col="Quantity",
                                       empty_ids="drop")
    assert data.row_counts["empty_id_rows_dropped"] == 2 and data.row_counts["rows_read"] == 8
    assert data.nnz == 6


def test_empty_ids_drop_that_leaves_nothing_is_refused_saying_why(tmp_path):
    path = write(tmp_path, "anon.csv", "user,item,qty\n,x,1\n  ,y,2\n")
    one_line_error(run("prepare", path, "-o", tmp_path / "o", "--empty-ids", "drop"),
                   "no interactions left: 2 rows with an empty id dropped (check --columns")
    with pytest.raises(InputError, match="no interactions left: 2 rows with an empty id dropped"):
        Interactions.from_dataframe(pd.DataFrame({"user": ["", None], "item": ["x", "y"]}), empty_ids="drop")
    # rows outside given ids are no refusal: an empty reindex is asked for
    assert Interactions.from_dataframe(pd.DataFrame({"user": ["a"], "item": ["x"]}), user_ids=["b"]).nnz == 0


def test_empty_ids_drop_still_refuses_a_line_cut_short(tmp_path):
    path = write(tmp_path, "r.csv", "u1,i1,1\nu2\nu3,i3,3\n")
    with pytest.raises(InputError, match=r"r\.csv:2: expected 3 columns like the first line, found 1"):
        read_ratings(path, empty_ids="drop")


# -- 4. negatives options without a value column --------------------------------------------------------
def test_a_negatives_rule_without_a_value_column_is_refused_not_ignored(tmp_path):
    path = write(tmp_path, "inv.csv", INVOICES.replace(",,\n", "\n"))
    for rule in ("net", "drop"):
        result = run("prepare", path, "-o", tmp_path / rule, "--columns", "CustomerID,StockCode",
                     "--negatives", rule, "--empty-ids", "drop")
        one_line_error(result, f"--negatives {rule} acts on negative values, and the table has only user and item",
                       "--columns")
    with pytest.raises(InputError, match="`negatives=net` acts on negative values"):
        Interactions.from_dataframe(pd.DataFrame({"user": ["a"], "item": ["x"]}), negatives="net")


# -- 5. rows named plainly, by file line for read_ratings' tables ----------------------------------------
def test_refusals_name_rows_as_plain_numbers_and_read_ratings_rows_by_line(tmp_path):
    table = pd.DataFrame({"user": [1, 2, 3], "item": [10, 20, 30], "v": [1.0, -2.0, np.nan]},
                         index=np.array([4, 5, 6], dtype=np.int64))
    for rows, words in ((table.iloc[:2], "the first -2 in data row 2 (index 5, user '2', item '20')"),
                        (table, "the first in data row 3 (index 6, user '3', item '30')")):
        with pytest.raises(InputError) as info:
            Interactions.from_dataframe(rows, value_col="v")
        assert words in str(info.value) and "np." not in str(info.value), str(info.value)
    path = write(tmp_path, "r2.tsv", "user\titem\tvalue\na\tx\t1\nb\ty\t2\nc\tx\t3\nd\ty\t4\n")
    df = read_ratings(path)
    df.loc[df.index[1], "value"] = np.inf  # the table read, then changed: its rows are still lines
    for table in (df, df.iloc[::-1], df[df["user"] != "a"]):
        with pytest.raises(InputError) as info:
            Interactions.from_dataframe(table, value_col="value")  # no source: the table knows its file
        assert str(info.value).startswith(f"{path}:3: value inf in column 'value'"), str(info.value)
        assert "user 'b', item 'y'" in str(info.value)
    empty = df.assign(user=["a", "", "c", "d"])
    with pytest.raises(InputError, match=rf"{path.name}:3: 1 row has an empty user id"):
        Interactions.from_dataframe(empty.iloc[::-1])


# -- 6. the first repeated row in file order ---------------------------------------------------------
def test_the_refusal_of_min_value_over_merged_rows_names_the_first_repeat_in_file_order(tmp_path):
    # (a, x) has the lowest codes, but its repeat (line 4) comes after (b, y)'s (line 3)
    path = write(tmp_path, "r.tsv", "a\tx\t1\nb\ty\t2\nb\ty\t3\na\tx\t4\n")
    one_line_error(run("prepare", path, "-o", tmp_path / "o", "--min-value", 2),
                   f"{path}:3: 2 repeated rows of the same user and item, the first in user 'b', item 'y'")
    table = pd.DataFrame({"user": ["a", "b", "b", "a"], "item": ["x", "y", "y", "x"], "v": [1.0, 2.0, 3.0, 4.0]})
    with pytest.raises(InputError, match=r"the first in data row 3 \(user 'b', item 'y'\)"):
        Interactions.from_dataframe(table, value_col="v", min_value=2)


# -- 7. the delimiter of the published book-ratings layout ------------------------------------------------
def test_the_quoted_semicolon_book_layout_is_guessed_as_published(tmp_path):
    text = ('\ufeff"User-ID";"ISBN";"Book-Rating"\r\n"276725";"034545104X";"0"\r\n'
            '"276726";"0-12;34";"5"\r\n"276727";"AB""C";"0"\r\n')
    path = write(tmp_path, "books.csv", text, newline="")
    df = read_ratings(path)
    assert df.attrs["reading"]["sep"] == ";"
    assert df["user"].tolist() == ["276725", "276726", "276727"]
    assert df["item"].tolist() == ["034545104X", "0-12;34", 'AB"C'] and df["value"].tolist() == [0, 5, 0]
    result = run("prepare", path, "-o", tmp_path / "o", "--test-fraction", 0)
    assert result.exit_code == 0, result.output
    pipes = write(tmp_path, "p.txt", "u1|i1|3\nu2|i2|4\nu3|i 3|5\n")
    assert read_ratings(pipes)["item"].tolist() == ["i1", "i2", "i 3"]
    # whitespace-separated, ids holding ';': whitespace splits the lines alike, into the values
    spaced = write(tmp_path, "s.txt", "u1 a;b 5\nu2 c;d 4\n")
    assert read_ratings(spaced)["item"].tolist() == ["a;b", "c;d"]


# -- 8. minor trips ------------------------------------------------------------------------------------
@pytest.fixture
def model_file(tmp_path):
    train = write(tmp_path, "train.tsv", "".join(f"{u}\t{i}\n" for n, u in enumerate(("007", "17850", "u3", "u4"))
                                                  for i in ("ABC", "Warhammer 40,000", "0-12;34", "z")[n % 2:]))
    for model in ("itemknn", "popularity"):
        assert run("train", train, "-o", tmp_path / f"{model}.npz", "--model", model).exit_code == 0
    return tmp_path / "itemknn.npz"


def test_the_comma_hint_only_when_a_join_of_the_pieces_is_a_known_id(model_file):
    result = run("similar", model_file, "--items", "ABC,0-12;35")  # no id holds a comma here
    one_line_error(result, "item '0-12;35' is not in the model", "present in the training data")
    assert "splits at commas" not in result.output
    one_line_error(run("similar", model_file, "--items", "ABC,Warhammer 40,000,nope"),
                   "item 'Warhammer 40' is not in the model", "the id 'Warhammer 40,000' is cut in pieces",
                   "--items-file")


def test_did_you_mean_covers_leading_zeros_as_a_suggestion_only(model_file, tmp_path):
    assert close_id("7", {"007": 0}, ["007"]) == "007" and close_id("7", {"7.5": 0}, ["7.5"]) is None
    (tmp_path / "u.txt").write_text("7\n")
    result = run("recommend", model_file, "--users", tmp_path / "u.txt", "-o", tmp_path / "r.tsv")
    one_line_error(result, "user '7' is not in the model (did you mean '007'?)")  # refused, not served as 007
    # popularity serves new users: 7 may be one (only a float spelling is taken for a known user)
    popularity = model_file.with_name("popularity.npz")
    assert run("recommend", popularity, "--users", tmp_path / "u.txt", "-o", tmp_path / "r.tsv").exit_code == 0
    (tmp_path / "u.txt").write_text("17850.0\n")
    result = run("recommend", popularity, "--users", tmp_path / "u.txt", "-o", tmp_path / "r.tsv")
    one_line_error(result, "user '17850.0' is not in the model (did you mean '17850'?)", "looks like a known user's")
    assert "users not in the model get the most popular items" not in result.output


def test_only_a_float_spelling_or_added_spaces_are_a_known_user_for_a_fallback():
    known = {"7": 0, "007": 1, "17850": 2, "José": 3}
    # a new customer '0007' beside '007' and '7', another case or inner spaces: new users
    for new in ("0007", "josé", "JOSÉ", "17 850", "1 7850"):
        assert spelled_otherwise(new, known) is None, new
    assert spelled_otherwise("Jos\u00e9 ", known) == "José"
    assert spelled_otherwise("17850.0", known) == "17850" and spelled_otherwise("7.0", known) == "7"
    assert spelled_otherwise(" 007", known) == "007"
    assert spelled_otherwise("0007", known) is None and spelled_otherwise("josé", known) is None


def test_a_long_header_echo_ends_with_an_ellipsis(tmp_path):
    header = "user_id_of_the_customer,item_id_of_the_product,rating_given_by_the_customer,timestamp_x"
    df = read_ratings(write(tmp_path, "h.csv", f"{header}\nu1,i1,4,1\n"))
    assert f"{header[:80]!r}..." in describe_reading(df.attrs["reading"])


def test_the_summary_calls_the_pairs_below_the_minimum_pairs_twice(tmp_path):
    path = write(tmp_path, "r.tsv", "".join(f"u{u}\ti{k}\t{k}\n" for u in range(4) for k in range(5)))
    result = run("prepare", path, "-o", tmp_path / "o", "--min-value", 2, "--test-fraction", 0)
    assert result.exit_code == 0, result.output
    assert "= 20 pairs - 8 below --min-value = 12 pairs kept" in result.stdout and "binarised at >= 2: 8 pairs dropped" in result.stdout


def test_a_history_hint_names_no_option_the_command_lacks(model_file, tmp_path):
    history = write(tmp_path, "h.csv", "user,item,rating\nnew,ABC,lots\n")
    result = run("recommend", model_file, "--history", history, "-o", tmp_path / "r.tsv")
    one_line_error(result, "rating 'lots' is not a finite number", "this command guesses the layout")
    assert "columns to choose" not in result.output and "--columns" not in result.output
    history.write_text("new\tABC\n\tz\n")  # an empty id: recommend has no --empty-ids, prepare has
    result = run("recommend", model_file, "--history", history, "-o", tmp_path / "r.tsv")
    one_line_error(result, "1 row has an empty user id", "prepare --empty-ids drop leaves those rows out")
    assert "with --empty-ids" not in result.output and "`" not in result.output


def test_from_dataframe_refuses_an_empty_table():
    with pytest.raises(InputError, match="the table has no rows"):
        Interactions.from_dataframe(pd.DataFrame({"user": [], "item": []}))


def test_feature_files_read_empty_trailing_fields_and_refuse_others_also_on_the_first_data_line(tmp_path):
    from mrec_warp.data.features import read_features

    path = write(tmp_path, "f.csv", "item,feature,weight\ni1,f1,1,,\ni2,f2,2,,,\ni3,f3,3\n")
    assert read_features(path, kind="item")["feature"].tolist() == ["f1", "f2", "f3"]
    path.write_text("item,feature,weight\ni1,f1,1,,\ni2,f2,2,x\n")  # pandas would cut line 3 short
    with pytest.raises(InputError, match=r"f\.csv:3: expected 3 columns like the first line, found 4"):
        read_features(path, kind="item")
