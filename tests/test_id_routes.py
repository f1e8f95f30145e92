"""One id text and one row numbering whatever route a table takes in: pandas (float64 with a
NaN, Int64, category, Arrow-backed strings), pyarrow (dictionaries, string_view), polars
(Categorical, Enum), Parquet through the CLI."""
import numpy as np
import pandas as pd
import pytest

from mrec_warp.data.interactions import Interactions
from mrec_warp.errors import InputError
from tests.conftest import run

pa = pytest.importorskip("pyarrow")

USERS = ["u1", "u2", "u1", "u 3", "u2"]
ITEMS = ["x", "y", "y", "x", "z"]


def ids(table, **kwargs):
    got = Interactions.from_dataframe(table, **kwargs)
    return got.user_ids.tolist(), got.item_ids.tolist()


def test_polars_categorical_and_enum_ids_are_the_plain_string_ids():
    pl = pytest.importorskip("polars")
    plain = ids(pl.DataFrame({"user": USERS, "item": ITEMS}))
    cat = pl.DataFrame({"user": USERS, "item": ITEMS}).with_columns(
        pl.col("user").cast(pl.Categorical), pl.col("item").cast(pl.Enum(["z", "y", "x"])))
    assert ids(cat) == plain == (["u1", "u2", "u 3"], ["x", "y", "z"])
    with_null = pl.DataFrame({"user": USERS + [None], "item": ITEMS + ["x"]}).with_columns(
        pl.col("user").cast(pl.Categorical))
    assert ids(with_null, empty_ids="drop") == plain
    with pytest.raises(InputError, match=r"missing \(NA\) user id .*data row 6 \(user '', item 'x'\)"):
        Interactions.from_dataframe(with_null)


@pytest.mark.parametrize("make", [
    lambda: pa.table({"user": pa.array(USERS).dictionary_encode(), "item": pa.array(ITEMS, pa.large_string())}),
    lambda: pa.table({"user": pa.DictionaryArray.from_arrays(pa.array([0, 1, 0, 2, 1], pa.uint32()),
                                                             pa.array(["u1", "u2", "u 3"], pa.string_view())),
                      "item": pa.array(ITEMS, pa.string_view())}),
    lambda: pd.DataFrame({"user": pd.Categorical(USERS), "item": pd.Series(ITEMS, dtype="category")}),
    lambda: pd.DataFrame({"user": pd.Series(USERS, dtype=pd.ArrowDtype(pa.string_view())),
                          "item": pd.Series(pa.array(ITEMS).dictionary_encode(),
                                            dtype=pd.ArrowDtype(pa.dictionary(pa.int32(), pa.string())))}),
], ids=["arrow-dictionary-large_string", "arrow-view-dictionary-string_view", "pandas-category",
        "pandas-arrow-string_view-dictionary"])
def test_dictionary_and_view_columns_of_every_source_give_the_plain_string_ids(make):
    assert ids(make()) == ids(pd.DataFrame({"user": USERS, "item": ITEMS})) == (["u1", "u2", "u 3"], ["x", "y", "z"])


# the same numbers by every route: whole floats as a text file says them, -0.0 as 0
FLOATS = [3.0, 1000.0, -0.0, 1.5, 7.0, np.nan]
WANT = ["3", "1000", "0", "1.5", "7"]


def test_float_ids_are_the_same_text_by_every_route(tmp_path):
    frame = pd.DataFrame({"user": FLOATS, "item": ["a", "b", "c", "d", "e", "f"]})
    assert frame["user"].dtype == np.float64  # as pandas makes any id column holding a NaN
    routes = {
        "pandas float64": frame,
        "pandas Float64": frame.astype({"user": "Float64"}),
        "pandas category": frame.astype({"user": "category"}),
        "pandas object": frame.astype({"user": object}),
        "pyarrow": pa.table({"user": pa.array(FLOATS, from_pandas=True), "item": frame["item"]}),
    }
    pl = None
    try:
        import polars as pl
    except ImportError:
        pass
    if pl is not None:
        routes["polars"] = pl.DataFrame({"user": FLOATS, "item": frame["item"].tolist()})
    got = {name: ids(table, empty_ids="drop")[0] for name, table in routes.items()}
    assert got == {name: WANT for name in routes}
    ints = pd.DataFrame({"user": pd.array([3, 1000, 0, None, 7], dtype="Int64"), "item": list("abcfe")})
    assert ids(ints, empty_ids="drop")[0] == ["3", "1000", "0", "7"]
    # and Parquet through the CLI's reader: the ids a model file lists
    from mrec_warp.data.ratings import read_ratings

    pytest.importorskip("pyarrow.parquet").write_table(routes["pyarrow"].filter(pa.array([True] * 5 + [False])),
                                                       tmp_path / "r.parquet")
    assert read_ratings(tmp_path / "r.parquet")["user"].tolist() == WANT


def test_float32_ids_are_their_shortest_text():
    frame = pd.DataFrame({"user": np.array([0.1, 2.0], dtype=np.float32), "item": ["a", "b"]})
    assert ids(frame)[0] == ids(pa.table(frame))[0] == ["0.1", "2"]


def test_a_null_row_is_the_same_data_row_for_the_cli_and_every_table(tmp_path):
    users = [f"u{k}" for k in range(80)]
    users[73] = None  # the 74th data row
    items = [f"i{k % 7}" for k in range(80)]
    frame = pd.DataFrame({"user": users, "item": items})
    pq = pytest.importorskip("pyarrow.parquet")
    pq.write_table(pa.table(frame), tmp_path / "r.parquet")
    result = run("prepare", tmp_path / "r.parquet", "-o", tmp_path / "out")
    assert result.exit_code != 0 and "data row 74" in result.output, result.output
    tables = [frame, pa.table(frame)]
    try:
        import polars as pl

        tables.append(pl.from_pandas(frame))
    except ImportError:
        pass
    for table in tables:
        with pytest.raises(InputError) as info:
            Interactions.from_dataframe(table)
        assert "the first in data row 74 (user '', item 'i3')" in str(info.value), str(info.value)
        assert "nan" not in str(info.value) and "None" not in str(info.value)
    # a pandas index of its own is shown beside the position, for df.loc
    with pytest.raises(InputError, match=r"data row 74 \(index 'r73', user '', item 'i3'\)"):
        Interactions.from_dataframe(frame.set_axis([f"r{k}" for k in range(80)]))


def test_float_ids_given_to_fix_the_index_or_looked_up_match_the_tables_ids():
    frame = pd.DataFrame({"user": [3.0, 1000.0, np.nan], "item": ["a", "b", "c"]})
    got = Interactions.from_dataframe(frame, empty_ids="drop", user_ids=[3.0, 1000.0, 7.0])
    assert got.user_ids.tolist() == ["3", "1000", "7"] and got.row_counts["rows_outside_given_ids"] == 0
    assert got.nnz == 2  # no row silently outside the ids given: 3.0 is the id '3' in both
    assert got.user_indices(3.0).tolist() == [0] and got.user_indices([1000.0, "3", np.float64(7)]).tolist() == [1, 0, 2]
