"""Arrow and polars tables into ``Interactions.from_dataframe``, Parquet files into every
command that reads a ratings file: the same ids, byte for byte, and the same row rules as
the same rows in a text file."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from mrec_warp.data.interactions import Interactions
from mrec_warp.data.ratings import read_ratings
from mrec_warp.errors import InputError

from .test_guards import one_line_error, run

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

# Ids a CSV round trip through a spreadsheet would damage: emoji, spaces, commas, leading zeros.
USERS = ["u 1", "007", "ünï,code", "😀", "u 1", "007", "😀", "u5"]
ITEMS = ["i,1", "0042", " pad ", "i,1", "0042", "x", "x", "0042"]


def _messy_rows():
    """A purchase log with a duplicate pair, a return, a zero, a rating below 2 and an anonymous row."""
    return pd.DataFrame({
        "customer": ["c1", "c1", "c2", "c2", "c3", "c3", "c4", "", "c4", "007"],
        "product": ["p1", "p1", "p2", "p3", "p1", "p2", "p3", "p1", "p1", "0042"],
        "qty": [2.0, 3.0, 5.0, -5.0, 0.0, 1.0, 4.0, 9.0, 1.5, 6.0],
        "ts": list(range(880000000, 880000010)),
    })


def test_pyarrow_table_gives_the_ids_and_matrix_of_the_same_pandas_table():
    df = pd.DataFrame({"user": USERS, "item": ITEMS, "value": np.arange(1.0, 9.0)})
    want = Interactions.from_dataframe(df, value_col="value")
    for table in (pa.Table.from_pandas(df, preserve_index=False),
                  pa.table({"user": pa.array(USERS, pa.large_string()),
                            "item": pa.array(ITEMS).dictionary_encode(), "value": np.arange(1.0, 9.0)})):
        got = Interactions.from_dataframe(table, value_col="value")
        assert got.user_ids.tolist() == want.user_ids.tolist() == ["u 1", "007", "ünï,code", "😀", "u5"]
        assert got.item_ids.tolist() == want.item_ids.tolist()
        assert " pad " in got.item_ids.tolist()
        assert (got.matrix != want.matrix).nnz == 0
        assert got.row_counts == want.row_counts


def test_integer_id_columns_are_their_decimal_text_also_with_nulls_and_dictionaries():
    table = pa.table({"user": pa.array([1, 2, None, 30], pa.int64()),
                      "item": pa.array([7, 8, 7, 9], pa.int32()).dictionary_encode()})
    got = Interactions.from_dataframe(table, empty_ids="drop")
    assert got.user_ids.tolist() == ["1", "2", "30"]
    assert got.item_ids.tolist() == ["7", "8", "9"]
    assert got.row_counts["empty_id_rows_dropped"] == 1
    # an integer column that went through a NaN is a float column: whole numbers stay "1", not "1.0"
    floats = pa.table({"user": pa.array([1.0, 2.0, 2.5]), "item": pa.array(["a", "b", "c"])})
    assert Interactions.from_dataframe(floats).user_ids.tolist() == ["1", "2", "2.5"]


@pytest.mark.parametrize("column", [pa.array([1.0, float("nan"), 3.0]), pa.array(["a", None, "c"]),
                                    pa.array(["a", "  ", "c"])])
def test_a_nan_null_or_blank_id_is_the_empty_id_refusal(column):
    table = pa.table({"user": column, "item": pa.array(["x", "y", "z"])})
    refused = r"1 row has an? .*user id \(column 'user'\), the first in data row 2 \(user ' *', item 'y'\).*empty_ids=drop"
    with pytest.raises(InputError, match=refused):
        Interactions.from_dataframe(table)
    kept = Interactions.from_dataframe(table, empty_ids="drop")
    assert kept.n_users == 2 and kept.row_counts["empty_id_rows_dropped"] == 1


def test_missing_column_and_null_value_are_refused_in_one_line():
    table = pa.table({"user": ["a", "b"], "item": ["x", "y"], "value": pa.array([1.0, None])})
    with pytest.raises(InputError, match=r"no column 'rating' for the values; the table has 'user', 'item', 'value'"):
        Interactions.from_dataframe(table, value_col="rating")
    with pytest.raises(InputError, match="is not a finite number"):
        Interactions.from_dataframe(table, value_col="value")


def test_polars_dataframe_reads_as_pandas_does():
    pl = pytest.importorskip("polars")
    df = pd.DataFrame({"user": USERS, "item": ITEMS, "value": np.arange(1.0, 9.0)})
    got = Interactions.from_dataframe(pl.DataFrame({"user": USERS, "item": ITEMS, "value": np.arange(1.0, 9.0)}),
                                      value_col="value")
    want = Interactions.from_dataframe(df, value_col="value")
    assert got.user_ids.tolist() == want.user_ids.tolist() and got.item_ids.tolist() == want.item_ids.tolist()
    assert (got.matrix != want.matrix).nnz == 0
    ints = Interactions.from_dataframe(pl.DataFrame({"user": [1, None, 3], "item": [5, 6, 7]}), empty_ids="drop")
    assert ints.user_ids.tolist() == ["1", "3"] and ints.item_ids.tolist() == ["5", "7"]


# -- Parquet files through the CLI -------------------------------------------------------------
def _both(tmp_path, frame):
    """The same rows as a TSV with a header and as a Parquet file."""
    tsv, parquet = tmp_path / "log.tsv", tmp_path / "log.parquet"
    frame.to_csv(tsv, sep="\t", index=False)
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), parquet)
    return tsv, parquet


def test_prepare_counts_and_writes_the_same_from_parquet_as_from_tsv(tmp_path):
    tsv, parquet = _both(tmp_path, _messy_rows())
    outs = []
    for name, path in (("t", tsv), ("p", parquet)):
        out = tmp_path / name
        result = run("prepare", path, "-o", out, "--negatives", "net", "--empty-ids", "drop", "--duplicates", "sum",
                     "--min-value", "1", "--test-fraction", "0.3", "--seed", "3", "--min-user-items", "1", "-q")
        assert result.exit_code == 0, result.output
        outs.append(out)
    s_tsv, s_pq = (json.loads((o / "summary.json").read_text()) for o in outs)
    for key in ("rows_read", "duplicates_merged", "negative_rows", "pairs_netted_out", "rows_below_min_rating",
                "empty_id_rows_dropped", "train", "test", "users", "items"):
        assert s_tsv[key] == s_pq[key], key
    assert s_pq["rows_read"] == 10 and s_pq["empty_id_rows_dropped"] == 1
    for name in ("train.tsv", "test.tsv"):
        assert (outs[0] / name).read_bytes() == (outs[1] / name).read_bytes()
    assert "007\t0042" in (outs[1] / "train.tsv").read_text() + (outs[1] / "test.tsv").read_text()


def test_parquet_columns_by_name_and_by_position_and_the_format_flag(tmp_path):
    frame = pd.DataFrame({"note": ["n"] * 4, "item": ["a", "b", "a", "c"], "who": ["007", "😀", "😀", "007"],
                          "stars": [4, 5, 3, 2]})
    _, parquet = _both(tmp_path, frame)
    plain = tmp_path / "data.bin"  # no telling name: the format is given, or told by PAR1
    plain.write_bytes(parquet.read_bytes())
    by_name = read_ratings(parquet, columns="who,item,stars")
    by_pos = read_ratings(plain, format="parquet", columns=[2, 1, 3])
    guessed = read_ratings(plain, columns="2,1,3")
    for got in (by_name, by_pos, guessed):
        assert got["user"].tolist() == ["007", "😀", "😀", "007"]
        assert got["value"].tolist() == [4.0, 5.0, 3.0, 2.0]
    assert by_name.attrs["value_column"] == "stars"
    one_line_error(run("prepare", parquet, "-o", tmp_path / "o", "--columns", "who,nope"), "'nope' not found")
    one_line_error(run("prepare", parquet, "-o", tmp_path / "o", "--sep", ","), "does not apply to a Parquet file")
    one_line_error(run("prepare", parquet, "-o", tmp_path / "o", "--format", "tsv"), "this is a Parquet file",
                   "--format parquet")
    text = tmp_path / "text.parquet"
    text.write_text("u\ti\n")
    one_line_error(run("prepare", text, "-o", tmp_path / "o"), "not a Parquet file")


def test_parquet_null_id_and_bad_value_name_the_data_row(tmp_path):
    table = pa.table({"user": pa.array(["a", "b", None]), "item": ["x", "y", "z"]})
    path = tmp_path / "r.parquet"
    pq.write_table(table, path)
    one_line_error(run("prepare", path, "-o", tmp_path / "o"), "1 row has a missing (null) user id",
                   "data row 3", "--empty-ids drop")
    pq.write_table(pa.table({"user": ["a", "b"], "item": ["x", "y"], "v": pa.array([1.0, None])}), path)
    one_line_error(run("prepare", path, "-o", tmp_path / "o"), "data row 2", "is not a finite number")
    pq.write_table(pa.table({"user": ["a\tb", "b"], "item": ["x", "y"]}), path)
    one_line_error(run("prepare", path, "-o", tmp_path / "o"), "holds a tab or line break", "data row 1")
    path.write_bytes(b"PAR1 and then nothing")
    one_line_error(run("prepare", path, "-o", tmp_path / "o"), "cannot read the Parquet file")


def test_train_and_recommend_from_a_raw_parquet_file_keep_integer_and_unicode_ids(tmp_path):
    rng = np.random.default_rng(0)
    users = rng.integers(1, 40, 600)
    items = rng.integers(1, 60, 600)
    item_ids = [f"ï{i:04d}" if i % 2 else str(i) for i in items]
    table = pa.table({"user": pa.array(users, pa.int64()), "item": pa.array(item_ids).dictionary_encode(),
                      "value": pa.array(np.ones(600), pa.float32()),
                      "ts": pa.array(pd.to_datetime(880000000 + np.arange(600), unit="s"), pa.timestamp("ms"))})
    path = tmp_path / "raw.parquet"
    pq.write_table(table, path)
    df = read_ratings(path)
    assert df["timestamp"].iloc[0] == 880000000 and df["user"].iloc[0] == str(users[0])
    model = tmp_path / "m.npz"
    assert run("train", path, "-o", model, "--model", "popularity", "-q").exit_code == 0
    recs = tmp_path / "recs.tsv"
    assert run("recommend", model, "-o", recs, "-k", "3").exit_code == 0
    lines = recs.read_text(encoding="utf-8").splitlines()
    assert {ln.split("\t")[0] for ln in lines} == {str(u) for u in users}
    assert {ln.split("\t")[1] for ln in lines} <= set(item_ids)


def test_the_package_imports_and_refuses_parquet_in_one_line_without_pyarrow(tmp_path):
    path = tmp_path / "r.parquet"
    pq.write_table(pa.table({"user": ["a"], "item": ["x"]}), path)
    code = (
        "import sys; sys.modules['pyarrow'] = None\n"
        "import pandas as pd, mrec_warp as mw\n"
        "from mrec_warp.errors import InputError\n"
        "print(mw.Interactions.from_dataframe(pd.DataFrame({'user': ['a'], 'item': ['x']})).n_users)\n"
        f"try:\n    mw.read_ratings({str(path)!r})\nexcept InputError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines()[0] == "1"
    assert "reading a Parquet file needs pyarrow" in out and "mrec-warp[parquet]" in out


@pytest.mark.parametrize("name", ["n.parquet", "n.csv", "n.tsv"])
def test_a_fourth_column_of_text_taken_as_the_timestamp_names_it_and_columns(tmp_path, name):
    frame = pd.DataFrame({"user": ["a", "b"], "item": ["x", "y"], "qty": [1.0, 2.0], "note": ["gift", "x"]})
    path = tmp_path / name
    if name.endswith(".parquet"):
        pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path)
    else:
        frame.to_csv(path, index=False, header=name.endswith(".csv"), sep="," if name.endswith(".csv") else "\t")
    column = "column 3" + ("" if name.endswith(".tsv") else " 'note'")
    one_line_error(run("prepare", path, "-o", tmp_path / "out"), "timestamp 'gift'", "is neither a number nor a date",
                   f"if {column} is no timestamp", "choose the columns with --columns", "--columns 0,1,2")
    assert not (tmp_path / "out").exists()


def test_a_parquet_bomb_is_refused_from_its_footer_before_any_column_is_read(tmp_path, monkeypatch):
    """5M rows of one dictionary-encoded pair in 25 KB: the footer's row count against the
    file's size refuses it at once, naming the file, as does a row count whose columns need
    more memory than is available (checked before reading, not after filling memory)."""
    import mrec_warp.data.parquet as parquet_module

    n = 5_000_000
    zeros = pa.array(np.zeros(n, dtype=np.int32))
    bomb = tmp_path / "bomb.parquet"
    pq.write_table(pa.table({"user": pa.DictionaryArray.from_arrays(zeros, pa.array(["u1"])),
                             "item": pa.DictionaryArray.from_arrays(zeros, pa.array(["i1"]))}), bomb,
                   row_group_size=1 << 22)
    assert bomb.stat().st_size < 100_000
    read = []
    monkeypatch.setattr(pq.ParquetFile, "read", lambda self, *a, **k: read.append(1))
    with pytest.raises(InputError, match="declares 5,000,000 rows in a file of") as info:
        read_ratings(bomb)
    assert info.value.path == str(bomb) and not read
    one_line_error(run("prepare", bomb, "-o", tmp_path / "split"), "bomb.parquet", "rows a byte")
    monkeypatch.undo()
    plain = tmp_path / "plain.parquet"
    pq.write_table(pa.table({"user": [f"u{u}" for u in range(1000)], "item": [f"i{u % 7}" for u in range(1000)]}),
                   plain)
    monkeypatch.setattr(parquet_module, "available_bytes", lambda: 1000)
    with pytest.raises(InputError, match="needs at least .* of memory, more than the 1000 bytes available") as info:
        read_ratings(plain)
    assert info.value.path == str(plain)


def test_a_parquet_id_column_of_a_type_ids_cannot_have_names_the_file_and_column(tmp_path):
    path = tmp_path / "lists.parquet"
    pq.write_table(pa.table({"user": pa.array([[1, 2], [3]]), "item": ["a", "b"]}), path)
    with pytest.raises(InputError) as info:
        read_ratings(path)
    assert info.value.path == str(path)
    assert "user id column 0 'user'" in str(info.value) and "cannot be read as text" in str(info.value)


@pytest.mark.parametrize("role, table", [
    ("value", {"user": ["a", "b"], "item": ["x", "y"], "rating": [[1], [2]]}),
    ("timestamp", {"user": ["a", "b"], "item": ["x", "y"], "rating": [1, 2], "when": [{"s": 1}, {"s": 2}]}),
    ("user id", {"user": [[1], [2]], "item": ["x", "y"]}),
])
def test_a_nested_parquet_column_is_named_with_its_file_and_role(tmp_path, role, table):
    """A list or struct column where a value, a timestamp or an id is read: one line naming
    the file, the column and its role, never "an id column" for a value."""
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    path = tmp_path / "nested.parquet"
    pq.write_table(pa.table(table), path)
    name = {"value": "rating", "timestamp": "when", "user id": "user"}[role]
    with pytest.raises(InputError, match=f"{role} column [0-9] {name!r}") as caught:
        read_ratings(path)
    assert str(caught.value).startswith(str(path)) and "\n" not in str(caught.value)
    if role != "user id":
        assert "an id column" not in str(caught.value)
    one_line_error(run("prepare", path, "-o", tmp_path / "out"), f"{role} column", "nested.parquet")
    if role != "timestamp":  # (an Arrow table in memory has no timestamp role)
        with pytest.raises(InputError, match=f"column {name!r}"):  # the column named there too
            Interactions.from_dataframe(pa.table(table), "user", "item", value_col="rating" if role == "value" else None)
