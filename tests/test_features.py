"""Feature files: reading, one-line errors, writing back the same bytes."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from mrec_warp import InputError
from mrec_warp.data.features import as_feature_table, check_ids_match, read_features, write_features


def write(tmp_path, text, name="features.tsv"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def one_line(exc) -> str:
    text = str(exc.value)
    assert "\n" not in text
    return text


# -- reading ---------------------------------------------------------------------------------
def test_two_columns_mean_weight_one_and_duplicates_add_up(tmp_path):
    path = write(tmp_path, "i1\tgenre:a\ni1\tgenre:b\n\ni2\tgenre:a\ni1\tgenre:a\n")
    table = read_features(path)
    assert list(table.columns) == ["id", "feature", "weight"]
    got = {(r.id, r.feature): r.weight for r in table.itertuples()}
    assert got == {("i1", "genre:a"): 2.0, ("i1", "genre:b"): 1.0, ("i2", "genre:a"): 1.0}
    assert table["weight"].dtype == np.float32


def test_weights_header_and_other_delimiters(tmp_path):
    table = read_features(write(tmp_path, "item,tag,weight\n7,x,0.5\n8,y,2\n", "f.csv"))
    assert table.to_dict("list") == {"id": ["7", "8"], "feature": ["x", "y"], "weight": [0.5, 2.0]}
    # columns chosen by name; other columns ignored
    path = write(tmp_path, "name\tmovie\tgenre\nfoo\t1\tDrama\nbar\t2\tComedy\n")
    table = read_features(path, columns="movie,genre")
    assert table[["id", "feature"]].values.tolist() == [["1", "Drama"], ["2", "Comedy"]]
    table = read_features(write(tmp_path, "1 a\n2 b\n", "ws.txt"))
    assert table["feature"].tolist() == ["a", "b"]


@pytest.mark.parametrize("text, line, fragment", [
    ("i1\ta\t1\ni2\tb\t-0.5\n", 2, "weight -0.5 is negative"),
    ("i1\ta\t1\ni2\tb\tnan\n", 2, "weight 'nan' is not a finite number"),
    ("i1\ta\t1\ni2\tb\theavy\n", 2, "weight 'heavy' is not a finite number"),
    ("i1\ta\t1\ni2\tb\tinf\n", 2, "not a finite number"),
    ("i1\ta\t1\ni2\tb\n", 2, "expected 3 columns like the first line, found 2"),
    ("i1\ta\n\ni2\tb\textra\n", 3, "expected 2 columns"),
    ("i1\ta\n\tb\n", 2, "column 0 (id) is empty"),
])
def test_bad_rows_are_one_line_errors_naming_file_and_line(tmp_path, text, line, fragment):
    path = write(tmp_path, text)
    with pytest.raises(InputError) as exc:
        read_features(path, kind="item")
    msg = one_line(exc)
    assert f"{path}:{line}:" in msg and fragment in msg


@pytest.mark.parametrize("text, fragment", [
    ("", "item feature file is empty"),
    ("\n\n  \n", "has no data lines"),
    ("i1\ni2\n", "needs at least 2 columns"),
    ("id\tfeature\n", "header but no data lines"),
])
def test_empty_or_shapeless_files(tmp_path, text, fragment):
    path = write(tmp_path, text)
    with pytest.raises(InputError) as exc:
        read_features(path)
    assert fragment in one_line(exc) and str(path) in str(exc.value)


def test_missing_file(tmp_path):
    with pytest.raises(InputError, match="user feature file does not exist"):
        read_features(tmp_path / "nope.tsv", kind="user")


def test_unknown_id_format_is_caught_against_the_training_ids():
    table = as_feature_table(pd.DataFrame({"id": ["0001", "0002"], "feature": ["a", "b"]}))
    with pytest.raises(InputError) as exc:
        check_ids_match(table, np.array(["1", "2", "3"]), "item", "items.tsv")
    msg = one_line(exc)
    assert msg.startswith("items.tsv: none of the 2 ids") and "'0001'" in msg and "'1'" in msg
    check_ids_match(table, np.array(["0001", "9"]), "item")  # one known id is enough


def test_tables_are_checked_like_files():
    with pytest.raises(InputError, match="negative"):
        as_feature_table(pd.DataFrame({"id": [1], "feature": ["a"], "weight": [-1.0]}))
    with pytest.raises(InputError, match="finite"):
        as_feature_table(pd.DataFrame({"id": [1], "feature": ["a"], "weight": [np.nan]}))
    with pytest.raises(InputError, match="empty"):
        as_feature_table(pd.DataFrame({"id": [], "feature": []}))
    table = as_feature_table(pd.DataFrame({"movie": [1, 1], "genre": ["a", "a"]}))
    assert table.to_dict("list") == {"id": ["1"], "feature": ["a"], "weight": [2.0]}


def test_write_then_read_round_trip(tmp_path):
    table = pd.DataFrame({"id": ["a", "a", "b"], "feature": ["x", "y", "x"], "weight": np.float32([1, 0.25, 3])})
    write_features(table, tmp_path / "out.tsv")
    back = read_features(tmp_path / "out.tsv")
    pd.testing.assert_frame_equal(back, table)
    write_features(table.assign(weight=np.float32(1)), tmp_path / "plain.tsv")
    assert (tmp_path / "plain.tsv").read_text().splitlines()[0] == "a\tx"


# -- ids and feature names are the user's bytes (issue 9) -------------------------------------
def test_ids_and_features_are_never_stripped_and_utf8_is_utf8(tmp_path):
    path = tmp_path / "f.tsv"
    path.write_bytes("Universe Sandbox \ttag:space \nUniverse Sandbox\ttag:space\nPokémon\t🎮 retro\n".encode())
    table = read_features(path)
    assert set(zip(table["id"], table["feature"])) == {
        ("Universe Sandbox ", "tag:space "), ("Universe Sandbox", "tag:space"), ("Pokémon", "🎮 retro")}
    assert table.attrs["encoding"] == "utf-8"


def test_csv_feature_file_follows_rfc4180_with_bom_crlf_and_trailing_column(tmp_path):
    path = tmp_path / "f.csv"
    path.write_bytes(b'\xef\xbb\xbf"Warhammer 40,000",studio:Relic,\r\n'
                     b'"The ""Quoted"" Game","series:""X"", remastered",\r\n'
                     b'007,tag:old ,\r\n')
    table = read_features(path)
    assert table[["id", "feature"]].values.tolist() == [
        ["Warhammer 40,000", "studio:Relic"], ['The "Quoted" Game', 'series:"X", remastered'], ["007", "tag:old "]]
    assert table["weight"].tolist() == [1.0, 1.0, 1.0]  # the empty trailing column is not a weight


def test_latin1_feature_file_is_latin1_and_written_back_as_the_same_bytes(tmp_path):
    data = "Señor \tgenre:Rôle \t1\nZoë\tcafé\t0.5\n".encode("latin-1")
    path = tmp_path / "f.tsv"
    path.write_bytes(data)
    table = read_features(path)
    assert table.attrs["encoding"] == "latin-1"
    assert table["id"].tolist() == ["Señor ", "Zoë"]
    out = tmp_path / "out.tsv"
    write_features(table, out)
    assert out.read_bytes() == data


def test_feature_file_errors_name_file_and_line_in_utf8(tmp_path):
    path = tmp_path / "f.csv"
    path.write_bytes('Pokémon,genre:a\n"Warhammer, 40k",\n'.encode())
    with pytest.raises(InputError) as exc:
        read_features(path)
    assert f"{path}:2: column 1 (feature) is empty" in one_line(exc)
    path.write_bytes(b'a,genre:a\nb,"two\nlines"\n')
    with pytest.raises(InputError) as exc:
        read_features(path)
    assert f"{path}:2: feature 'two\\nlines' holds a tab or line break" in one_line(exc)


@pytest.mark.parametrize("bad", ["a\rb", "a\tb", "a\nb"])
@pytest.mark.parametrize("column", ["id", "feature"])
def test_write_features_refuses_what_a_tsv_cannot_hold(tmp_path, bad, column):
    table = pd.DataFrame({"id": ["x", "y"], "feature": ["f", "g"], "weight": [1.0, 1.0]})
    table.loc[1, column] = bad
    out = tmp_path / "out.tsv"
    with pytest.raises(InputError, match="holds a tab or line break"):
        write_features(table, out)
    assert not out.exists() and list(tmp_path.iterdir()) == []
