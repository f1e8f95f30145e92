"""The ratings reader: delimiters, headers, column choice, compression, and one-line errors."""
from __future__ import annotations

import gzip
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from mrec_warp.data.ratings import read_ratings
from mrec_warp.data.tsv import write_interactions
from mrec_warp.errors import InputError

from .conftest import error_line

ML100K = Path(__file__).resolve().parents[2] / "shared/data/ml-100k"

ROWS = [("u1", "i1", 5.0, 100), ("u1", "i2", 3.0, 200), ("u2", "i1", 4.0, 300)]


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode("latin-1"))
    return path


def as_rows(df: pd.DataFrame):
    return [tuple(r) for r in df.itertuples(index=False)]


@pytest.mark.parametrize(
    "name, text",
    [
        ("tab.tsv", "u1\ti1\t5\t100\nu1\ti2\t3\t200\nu2\ti1\t4\t300\n"),
        ("comma.csv", "u1,i1,5,100\nu1,i2,3,200\nu2,i1,4,300\n"),
        ("space.txt", "u1 i1  5 100\n  u1\ti2 3 200 \nu2 i1 4 300\n"),
        ("colons.dat", "u1::i1::5::100\nu1::i2::3::200\nu2::i1::4::300\n"),
        ("crlf.csv", "u1,i1,5,100\r\nu1,i2,3,200\r\nu2,i1,4,300\r\n"),
        ("blank.tsv", "\nu1\ti1\t5\t100\n\nu1\ti2\t3\t200\n   \nu2\ti1\t4\t300\n\n"),
    ],
)
def test_delimiters_are_detected(tmp_path, name, text):
    df = read_ratings(write(tmp_path, name, text))
    assert list(df.columns) == ["user", "item", "value", "timestamp"]
    assert as_rows(df) == ROWS
    assert df["value"].dtype == np.float64 and df["timestamp"].dtype == np.int64


def test_canonical_dtypes(tmp_path):
    df = read_ratings(write(tmp_path, "r.tsv", "1\t10\t4.5\t881250949\n2\t20\t1\t881250950\n"))
    assert df["user"].tolist() == ["1", "2"]  # ids stay strings, even numeric ones
    assert df["item"].tolist() == ["10", "20"]
    assert df["value"].tolist() == [4.5, 1.0]
    assert df["timestamp"].tolist() == [881250949, 881250950]


def test_explicit_format_and_separator(tmp_path):
    path = write(tmp_path, "r.txt", "u1;i1;5\nu2;i2;3\n")
    assert as_rows(read_ratings(path, sep=";")) == [("u1", "i1", 5.0), ("u2", "i2", 3.0)]
    tsv = write(tmp_path, "r2.txt", "u 1\ti,1\t5\n")  # tsv format: commas and spaces are id text
    assert as_rows(read_ratings(tsv, format="tsv")) == [("u 1", "i,1", 5.0)]


def test_header_is_guessed_and_can_be_forced(tmp_path):
    text = "userId,movieId,rating,timestamp\nu1,i1,5,100\nu2,i2,3,200\n"
    path = write(tmp_path, "h.csv", text)
    assert as_rows(read_ratings(path)) == [("u1", "i1", 5.0, 100), ("u2", "i2", 3.0, 200)]
    assert len(read_ratings(path, header=True)) == 2
    with pytest.raises(InputError, match=r"h\.csv:1: rating 'rating' is not a finite number"):
        read_ratings(path, header=False)


def test_header_guess_with_two_text_columns(tmp_path):
    # "u1,i1" is data, not a header, even though both fields are text
    no_header = write(tmp_path, "a.csv", "u1,i1\nu2,i2\n")
    assert as_rows(read_ratings(no_header)) == [("u1", "i1"), ("u2", "i2")]
    header = write(tmp_path, "b.csv", "customer,product\nc1,p1\n")
    assert as_rows(read_ratings(header)) == [("c1", "p1")]


def test_movielens_formats(tmp_path):
    ml100k = write(tmp_path, "u.data", "196\t242\t3\t881250949\n186\t302\t3\t891717742\n")
    ml1m = write(tmp_path, "ratings.dat", "1::1193::5::978300760\n1::661::3::978302109\n")
    assert as_rows(read_ratings(ml100k, format="movielens")) == [("196", "242", 3.0, 881250949), ("186", "302", 3.0, 891717742)]
    assert as_rows(read_ratings(ml1m, format="movielens")) == [("1", "1193", 5.0, 978300760), ("1", "661", 3.0, 978302109)]


def test_colon_separator_across_read_chunks(tmp_path):
    # more than pandas' 256 KiB read size, so '::' falls on chunk boundaries
    n = 30_000
    lines = "".join(f"{u}::{u % 97}::{u % 5 + 1}::{1000 + u}\n" for u in range(n))
    df = read_ratings(write(tmp_path, "big.dat", lines))
    assert len(df) == n
    assert df["user"].tolist() == [str(u) for u in range(n)]
    assert df["timestamp"].to_numpy().tolist() == list(range(1000, 1000 + n))


def test_columns_by_name(tmp_path):
    text = "ts,rating,extra,item,user\n100,5,x,i1,u1\n200,3,y,i2,u1\n"
    path = write(tmp_path, "c.csv", text)
    df = read_ratings(path, columns=["user", "item", "rating", "ts"])
    assert as_rows(df) == [("u1", "i1", 5.0, 100), ("u1", "i2", 3.0, 200)]
    # a comma-separated string works too, as on the command line
    assert as_rows(read_ratings(path, columns="user,item")) == [("u1", "i1"), ("u1", "i2")]


def test_columns_by_position(tmp_path):
    path = write(tmp_path, "p.tsv", "x\tu1\t100\ti1\t5\nx\tu2\t200\ti2\t4\n")
    df = read_ratings(path, columns=[1, 3, 4, 2])
    assert as_rows(df) == [("u1", "i1", 5.0, 100), ("u2", "i2", 4.0, 200)]
    df = read_ratings(path, columns=["1", "3"])
    assert list(df.columns) == ["user", "item"]


def test_unknown_or_out_of_range_column(tmp_path):
    path = write(tmp_path, "c.csv", "user,item,rating\nu1,i1,5\n")
    with pytest.raises(InputError, match="column 'movie' not found; header columns: user, item, rating"):
        read_ratings(path, columns=["user", "movie"])
    with pytest.raises(InputError, match="column 7 is out of range"):
        read_ratings(path, columns=[0, 7])
    with pytest.raises(InputError, match="2 to 4 columns"):
        read_ratings(path, columns=["user"])


def test_two_and_three_columns(tmp_path):
    assert list(read_ratings(write(tmp_path, "a.tsv", "u\ti\n")).columns) == ["user", "item"]
    assert list(read_ratings(write(tmp_path, "b.tsv", "u\ti\t2.5\n")).columns) == ["user", "item", "value"]
    with pytest.raises(InputError, match="at least 2 columns"):
        read_ratings(write(tmp_path, "c.tsv", "justone\n"))


def test_gzip(tmp_path):
    path = tmp_path / "r.tsv.gz"
    with gzip.open(path, "wt") as fh:
        fh.write("u1\ti1\t5\t100\nu1\ti2\t3\t200\nu2\ti1\t4\t300\n")
    assert as_rows(read_ratings(path)) == ROWS


def test_gzip_colon_separated(tmp_path):
    path = tmp_path / "ratings.dat.gz"
    with gzip.open(path, "wt") as fh:
        fh.write("1::10::5::100\n2::20::4::200\n")
    assert as_rows(read_ratings(path)) == [("1", "10", 5.0, 100), ("2", "20", 4.0, 200)]


def test_latin1_and_utf8_bytes_do_not_crash(tmp_path):
    path = tmp_path / "l.tsv"
    path.write_bytes("Zoë\tCafé\t5\n".encode("latin-1") + "Zoë\tCafé\t4\n".encode("utf-8") + b"\xff\xfe\t\x80\t1\n")
    df = read_ratings(path)
    assert len(df) == 3
    assert df["user"].iloc[0] == "Zoë"  # Latin-1 bytes decode to themselves
    assert df["user"].iloc[1] != df["user"].iloc[0]  # UTF-8 stays distinct (and stable) bytes
    assert df["user"].tolist() == ["Zoë", "ZoÃ«", "ÿþ"] and df["item"].iloc[2] == "\x80"  # byte for byte


def test_utf8_bom_is_ignored(tmp_path):
    path = tmp_path / "bom.csv"
    path.write_bytes(b"\xef\xbb\xbfuser,item,rating\nu1,i1,5\n")
    assert as_rows(read_ratings(path)) == [("u1", "i1", 5.0)]
    path.write_bytes(b"\xef\xbb\xbfu1,i1,5\n")
    assert as_rows(read_ratings(path)) == [("u1", "i1", 5.0)]


def test_iso_dates_become_unix_seconds(tmp_path):
    path = write(tmp_path, "d.csv", "u1,i1,5,2021-01-01T00:00:00Z\nu1,i2,4,1970-01-02\n")
    assert read_ratings(path)["timestamp"].tolist() == [1609459200, 86400]


def test_missing_file(tmp_path):
    with pytest.raises(InputError, match=r"nope\.tsv: input file does not exist \(check the path\)"):
        read_ratings(tmp_path / "nope.tsv")


def test_directory_instead_of_file(tmp_path):
    with pytest.raises(InputError, match="is a directory"):
        read_ratings(tmp_path)


@pytest.mark.parametrize("text", ["", "\n\n  \n"])
def test_empty_file(tmp_path, text):
    with pytest.raises(InputError, match="empty|no data lines"):
        read_ratings(write(tmp_path, "e.tsv", text))


def test_header_only(tmp_path):
    with pytest.raises(InputError, match="header but no data lines"):
        read_ratings(write(tmp_path, "h.csv", "user,item,rating\n"))


def test_too_many_columns_names_the_line(tmp_path):
    text = "u1\ti1\t5\t100\n\nu2\ti2\t3\t200\nu3\ti3\t4\t1\t9\nu4\ti4\t2\t300\n"
    with pytest.raises(InputError) as info:
        read_ratings(write(tmp_path, "long.tsv", text))
    assert str(info.value).startswith(f"{tmp_path / 'long.tsv'}:4: expected 4 columns like the first line, found 5")
    assert "\n" not in str(info.value)


def test_too_few_columns_names_the_line(tmp_path):
    text = "user\titem\trating\tts\n\nu1\ti1\t5\t100\nu2\ti2\t3\t200\nu3\ti3\t4\nu4\ti4\t2\t300\n"
    with pytest.raises(InputError, match=r"short\.tsv:5: expected 4 columns like the first line, found 3"):
        read_ratings(write(tmp_path, "short.tsv", text))


def test_too_few_columns_in_a_file_without_ratings(tmp_path):
    with pytest.raises(InputError, match=r"s\.tsv:2: expected 2 columns like the first line, found 1"):
        read_ratings(write(tmp_path, "s.tsv", "u1\ti1\nu2\nu3\ti3\n"))


def test_empty_id_names_the_line(tmp_path):
    with pytest.raises(InputError, match=r"e\.tsv:3: 1 row has an empty \(only spaces\) item id \(column 1\), the first on this line"):
        read_ratings(write(tmp_path, "e.tsv", "u1\ti1\t5\nu2\ti2\t3\nu3\t \t4\n"))


@pytest.mark.parametrize("bad", ["abc", "NaN", "nan", "inf", "4,5"])
def test_bad_rating_names_the_line(tmp_path, bad):
    text = f"u1\ti1\t5\t100\n\nu2\ti2\t3\t200\nu3\ti3\t{bad}\t300\n"
    with pytest.raises(InputError) as info:
        read_ratings(write(tmp_path, "r.tsv", text))
    assert str(info.value).startswith(f"{tmp_path / 'r.tsv'}:4: rating {bad!r} is not a finite number")


def test_bad_rating_after_header_names_the_line(tmp_path):
    text = "user,item,rating\nu1,i1,5\nu2,i2,oops\n"
    with pytest.raises(InputError, match=r"r\.csv:3: rating 'oops'"):
        read_ratings(write(tmp_path, "r.csv", text))


def test_bad_timestamp_names_the_line(tmp_path):
    with pytest.raises(InputError, match=r"t\.tsv:2: timestamp 'yesterday' is neither a number nor a date"):
        read_ratings(write(tmp_path, "t.tsv", "u1\ti1\t5\t100\nu2\ti2\t3\tyesterday\n"))


def test_unknown_format(tmp_path):
    with pytest.raises(InputError, match="unknown format 'xlsx'"):
        read_ratings(write(tmp_path, "r.tsv", "u\ti\n"), format="xlsx")


def test_round_trip_through_writer(tmp_path):
    df = pd.DataFrame(ROWS, columns=["user", "item", "value", "timestamp"])
    write_interactions(df, tmp_path / "out.tsv")
    assert (tmp_path / "out.tsv").read_text() == "u1\ti1\t5\t100\nu1\ti2\t3\t200\nu2\ti1\t4\t300\n"
    assert as_rows(read_ratings(tmp_path / "out.tsv")) == ROWS


@pytest.mark.skipif(not (ML100K / "u.data").exists(), reason="MovieLens 100k not available")
def test_movielens_100k():
    df = read_ratings(ML100K / "u.data", format="movielens")
    assert len(df) == 100_000
    assert df["user"].nunique() == 943 and df["item"].nunique() == 1682
    assert set(np.unique(df["value"])) == {1.0, 2.0, 3.0, 4.0, 5.0}


def test_column_names_need_a_header(tmp_path):
    path = write(tmp_path, "n.tsv", "u1\ti1\t5\nu2\ti2\t4\n")
    with pytest.raises(InputError, match="no header line.*give 0-based positions"):
        read_ratings(path, columns=["user", "item"])
    # unless the user says the first line is a header
    assert as_rows(read_ratings(path, columns=["u1", "i1"], header=True)) == [("u2", "i2")]


# -- real-world files (issue 9): encodings, quoting, columns, whitespace, overflow ------------

def write_bytes(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


GAME_LOG = (
    "user-id,game-title,value,\n"
    "151603712,The Elder Scrolls V Skyrim,273,1\n"
    "151603712,Fallout 4,87,\n"
    '151603712,"Warhammer 40,000 Dawn of War II",0.5,\n'
)
GAME_ROWS = [("151603712", "The Elder Scrolls V Skyrim", 273.0), ("151603712", "Fallout 4", 87.0),
             ("151603712", "Warhammer 40,000 Dawn of War II", 0.5)]


@pytest.mark.parametrize("options", [
    {}, {"sep": ","}, {"header": True}, {"format": "csv"},
    {"columns": "user-id,game-title,value"}, {"columns": "0,1,2"},
])
def test_game_log_with_trailing_empty_column_reads(tmp_path, options):
    df = read_ratings(write(tmp_path, "games.csv", GAME_LOG), **options)
    assert as_rows(df) == GAME_ROWS


def test_a_first_data_line_longer_than_the_header_is_named_not_shifted(tmp_path):
    # the file with the trailing commas removed: line 2 has 4 fields, the header 3
    text = GAME_LOG.replace(",\n", "\n")
    with pytest.raises(InputError) as info:
        read_ratings(write(tmp_path, "games.csv", text))
    assert "games.csv:2: expected 3 columns like the first line, found 4 (the extra ones not empty)" in str(info.value)
    assert "is empty" not in str(info.value)


def test_headerless_trailing_separator_is_not_a_column(tmp_path):
    df = read_ratings(write(tmp_path, "t.csv", "1,10,4,\n2,20,5,\n"))
    assert as_rows(df) == [("1", "10", 4.0), ("2", "20", 5.0)]


def test_unused_columns_may_be_empty_or_missing(tmp_path):
    text = "u\ti\tnote\tscore\nu1\ti1\t\t5\nu2\ti2\tgood\t3\n"
    df = read_ratings(write(tmp_path, "n.tsv", text), columns="u,i,score")
    assert as_rows(df) == [("u1", "i1", 5.0), ("u2", "i2", 3.0)]
    short = read_ratings(write(tmp_path, "s.csv", "u1,i1,x\nu2,i2\n"), columns="0,1", header=False)
    assert as_rows(short) == [("u1", "i1"), ("u2", "i2")]


def test_utf8_ids_are_decoded_as_utf8(tmp_path):
    data = "u1\tPokémon Gold\t5\nu2\t🎮 Zelda\t4\n".encode("utf-8")
    df = read_ratings(write_bytes(tmp_path, "u.tsv", data))
    assert df["item"].tolist() == ["Pokémon Gold", "🎮 Zelda"]
    assert df.attrs["encoding"] == "utf-8"


def test_a_byte_order_mark_is_dropped_and_the_header_still_found(tmp_path):
    data = b"\xef\xbb\xbfuser,item,rating\r\nu1,i1,5\r\nu2,i2,4\r\n"
    df = read_ratings(write_bytes(tmp_path, "bom.csv", data), columns="user,item,rating")
    assert as_rows(df) == [("u1", "i1", 5.0), ("u2", "i2", 4.0)]
    assert df.attrs["encoding"] == "utf-8-sig"
    headerless = read_ratings(write_bytes(tmp_path, "bom2.tsv", b"\xef\xbb\xbfu1\ti1\nu2\ti2\n"))
    assert headerless["user"].tolist() == ["u1", "u2"]


def test_latin1_file_round_trips_byte_for_byte(tmp_path):
    data = b"u1\tcaf\xe9\t5\nu\xfc2\tna\xefve\t4\n"
    df = read_ratings(write_bytes(tmp_path, "l.tsv", data))
    assert df.attrs["encoding"] == "latin-1"
    assert df["item"].tolist() == ["café", "naïve"]
    out = tmp_path / "out.tsv"
    write_interactions(df, out)
    assert out.read_bytes() == data


def test_utf8_output_is_byte_identical(tmp_path):
    data = 'u1\tPokémon Gold\t5\n007\tThe "Quoted" Game\t4\nu3\tUniverse Sandbox \t3\n'.encode("utf-8")
    df = read_ratings(write_bytes(tmp_path, "u.tsv", data))
    out = tmp_path / "out.tsv"
    write_interactions(df, out)
    assert out.read_bytes() == data  # no re-encoding, no added quotes, no stripped spaces


def test_csv_quoting_follows_rfc4180(tmp_path):
    text = 'u1,"The ""Quoted"" Game",5\nu2,"Papers, Please",4\nu3,plain "inner" quotes,3\nu4, "x",2\n'
    df = read_ratings(write(tmp_path, "q.csv", text))
    # a field is quoted only when it starts with a quote: ' "x"' is an id with a space and quotes
    assert df["item"].tolist() == ['The "Quoted" Game', "Papers, Please", 'plain "inner" quotes', ' "x"']


def test_a_quoted_line_break_in_an_id_is_refused_with_its_line(tmp_path):
    text = 'u1,i1,5\nu2,"two\nlines",4\n'
    with pytest.raises(InputError, match=r"q\.csv:2: item id 'two\\nlines' holds a tab or line break"):
        read_ratings(write(tmp_path, "q.csv", text))


UNCLOSED = "a quote opened here is never closed (add the closing quote"


@pytest.mark.parametrize("text, line", [
    # later quoted lines: the open quote swallows lines up to the next quote (7 fields, not 5)
    ("user,item,plays,ts,x\n" + "u1,i1,1,10,x\n" * 5 + 'u2,"bad item,3,10,x\n' + "u3,i3,1,10,x\n" * 3
     + 'u4,"i,4",1,10,x\n' + "u5,i5,1,10,x\n", 7),
    # no later quote: the quote runs to the end of the file (pandas: "EOF inside string")
    ('user,item,plays\nu1,i1,1\nu2,"i2,2\nu3,i3,3\nu4,i4,4\n', 3),
    ('u1,i1,1\nu2,i2,2\nu3,"i3,3\n', 3),  # on the last line
])
def test_an_unclosed_quote_is_named_with_the_line_it_opens_on(tmp_path, text, line):
    with pytest.raises(InputError) as caught:
        read_ratings(write(tmp_path, "q.csv", text))
    assert str(caught.value).startswith(f"{tmp_path / 'q.csv'}:{line}: {UNCLOSED}")
    assert "\n" not in str(caught.value)


def test_an_open_quote_that_makes_an_id_of_several_lines_says_so(tmp_path):
    text = 'u0,i0,1\nu1,"i1,1\nu2,i2,2\nu3,"i3",3\nu4,i4,4\n'  # closed by the next line's quote
    with pytest.raises(InputError, match=r"q\.csv:2: .*if a quote opened on this line is never closed"):
        read_ratings(write(tmp_path, "q.csv", text))


def test_ids_are_never_stripped_or_merged(tmp_path):
    text = "u1\tUniverse Sandbox\t1\nu1\tUniverse Sandbox \t2\n u1\t007\t3\n"
    df = read_ratings(write(tmp_path, "w.tsv", text))
    assert df["item"].tolist() == ["Universe Sandbox", "Universe Sandbox ", "007"]
    assert df["user"].tolist() == ["u1", "u1", " u1"]


@pytest.mark.parametrize("row, fragment", [
    ("u3\ti3\t1e308\t300", "o.tsv:3: rating '1e+308' is too large"),
    ("u3\ti3\t4\t1e30", "o.tsv:3: timestamp '1e+30' is too large"),
])
def test_values_that_cannot_be_represented_are_refused(tmp_path, row, fragment):
    text = f"u1\ti1\t5\t100\nu2\ti2\t3\t200\n{row}\n"
    with pytest.raises(InputError) as info:
        read_ratings(write(tmp_path, "o.tsv", text))
    assert fragment in str(info.value)


def test_empty_id_error_does_not_blame_the_separator(tmp_path):
    with pytest.raises(InputError) as info:
        read_ratings(write(tmp_path, "e.csv", "u1,i1,5\n,i2,3\n"))
    assert "e.csv:2: 1 row has an empty user id (column 0)" in str(info.value)
    assert "--sep" not in str(info.value)


def test_a_quoted_header_field_with_a_comma_names_one_column(tmp_path):
    text = 'user,"title, full",hours\nu1,"Papers, Please",3\n'
    df = read_ratings(write(tmp_path, "h.csv", text), columns="user,1,hours")  # names and positions mix
    assert as_rows(df) == [("u1", "Papers, Please", 3.0)]


# -- header guess, --columns positions, and what the reader reports (issue 9, a new user's trial) --
STEAM = ('151603712,"The Elder Scrolls V Skyrim",purchase,1.0,0\n'
         '151603712,"The Elder Scrolls V Skyrim",play,273.0,0\n'
         '151603712,"Fallout 4",purchase,1.0,0\n'
         '59945701,"Spore",purchase,1.0,0\n'
         '59945701,"Spore",play,14.0,0\n'
         '53875128,"Grand Theft Auto V",purchase,1.0,0\n')


def test_a_headerless_first_line_with_numbers_is_data_and_column_0_is_position_0(tmp_path):
    # line 1 was taken as a header (its third field is text), and "0" matched its last field
    df = read_ratings(write(tmp_path, "s200.csv", STEAM), columns="0,1,3")
    assert len(df) == 6
    assert df["user"].tolist() == ["151603712"] * 3 + ["59945701"] * 2 + ["53875128"]
    assert as_rows(df)[0] == ("151603712", "The Elder Scrolls V Skyrim", 1.0)
    reading = df.attrs["reading"]
    assert reading["header"] is False and reading["header_guessed"] is True
    assert reading["header_reason"] == "column 0 holds '151603712', a number"
    assert reading["columns"] == {"user": {"position": 0, "name": None}, "item": {"position": 1, "name": None},
                                  "value": {"position": 3, "name": None}}


@pytest.mark.parametrize("first, second, header", [
    ("user-id,game-title,value,", "151603712,Skyrim,273,", True),  # a column name; the empty field is no number
    ("userId,movieId,rating,timestamp", "1,31,2.5,1260759144", True),
    ("player,game,hours", "151603712,Skyrim,273", True),  # no known name, but words above numbers
    ("player,game,hours", "p1,Skyrim,273", True),
    ("user,item,5", "u2,i2,4", False),  # a number: data, even beside column-like words
    ("u1,Skyrim,2024-01-31", "u2,Spore,2024-02-01", False),  # a date is data too
    ("alice,Skyrim,purchase", "bob,Spore,play", False),  # text only, nothing known: data, said so
])
def test_the_header_guess(tmp_path, first, second, header):
    df = read_ratings(write(tmp_path, "h.csv", f"{first}\n{second}\n"), columns="0,1")
    assert len(df) == (1 if header else 2)
    assert df.attrs["reading"]["header"] is header and df.attrs["reading"]["header_guessed"] is True


def test_a_text_only_first_line_read_as_data_says_why(tmp_path):
    df = read_ratings(write(tmp_path, "t.csv", "alice,Skyrim\nbob,Spore\n"))
    assert as_rows(df) == [("alice", "Skyrim"), ("bob", "Spore")]
    assert df.attrs["reading"]["header_reason"] == "no field is a number, but no column name was recognised either"


def test_column_names_on_a_text_only_first_line_make_it_the_header(tmp_path):
    path = write(tmp_path, "n.csv", "member,title\nalice,Skyrim\nbob,Spore\n")
    df = read_ratings(path, columns="member,title")
    assert as_rows(df) == [("alice", "Skyrim"), ("bob", "Spore")]
    assert df.attrs["reading"]["header_reason"] == "the --columns names are on it"


def test_a_whole_number_in_columns_is_a_position_even_where_a_header_says_otherwise(tmp_path):
    path = write(tmp_path, "d.csv", "user,item,0,1\nu1,i1,5,x\nu2,i2,4,y\n")
    df = read_ratings(path, header=True, columns="0,1,2")
    assert as_rows(df) == [("u1", "i1", 5.0), ("u2", "i2", 4.0)]
    assert df.attrs["reading"]["columns"]["user"] == {"position": 0, "name": "user"}


def test_the_reading_record_names_each_column_and_the_ignored_ones(tmp_path):
    text = "user-id,game-title,value,\n151603712,Skyrim,273,1\n151603712,Fallout 4,87,\n"
    reading = read_ratings(write(tmp_path, "g.csv", text)).attrs["reading"]
    assert reading["header_line"] == {"line": 1, "text": "user-id,game-title,value,"}
    assert reading["columns"] == {"user": {"position": 0, "name": "user-id"},
                                  "item": {"position": 1, "name": "game-title"},
                                  "value": {"position": 2, "name": "value"}}
    assert reading["ignored_columns"] == [{"position": 3, "why": "no name in the header"}]
    headerless = read_ratings(write(tmp_path, "t.csv", "u1,i1,5,\nu2,i2,4,\n")).attrs["reading"]
    assert headerless["ignored_columns"] == [{"position": 3, "why": "empty on every line"}]


def test_a_trailing_unnamed_column_past_the_fourth_is_ignored_by_name(tmp_path):
    path = write(tmp_path, "p.csv", "user,item,plays,ts,\nu1,i1,3,100,\nu2,i2,4,200,\n")
    reading = read_ratings(path).attrs["reading"]
    assert list(reading["columns"]) == ["user", "item", "value", "timestamp"]
    assert reading["ignored_columns"] == [{"position": 4, "why": "no name in the header"}]
    with pytest.raises(InputError) as caught:
        read_ratings(path, columns=["user", "movie"])
    assert "header columns: user, item, plays, ts, column 4 (no name) (" in str(caught.value)


@pytest.mark.parametrize("text, sep, suggested", [
    (STEAM, ";", "','"),  # the user's --sep is never the one suggested
    # lines ';' does not split alike are guessed as whitespace: the error names the one that splits line 1
    ("u1;i1;5\nu2;i2\n", None, "';'"),
    ("u1|i1|5\nu2|i2|4\n", "\t", "'|'"),
])
def test_a_separator_that_does_not_split_line_1_names_the_line_and_one_that_does(tmp_path, text, sep, suggested):
    path = write(tmp_path, "one.txt", text)
    with pytest.raises(InputError) as info:
        read_ratings(path, sep=sep)
    assert f"try `sep={suggested}`)" in str(info.value)  # the library names the parameter
    message = error_line(info.value)  # the CLI its flag
    assert message.startswith(f"{path}:1: expected at least 2 columns (user, item), found 1")
    assert message.count("--sep") == 1 and f"try --sep {suggested})" in message


def test_no_delimiter_at_all_suggests_none(tmp_path):
    with pytest.raises(InputError, match=r"w\.txt:2: expected at least 2 columns.*give it with `sep`") as info:
        read_ratings(write(tmp_path, "w.txt", "\nalice\nbob\n"))
    assert re.search(r"w\.txt:2: expected at least 2 columns.*give it with --sep", error_line(info.value))
    assert "try --sep" not in error_line(info.value) and "try `sep" not in str(info.value)


# -- what is not text of short lines: refused before parsing, naming the file and line ------------
@pytest.mark.parametrize("encoding, bom, what", [
    ("utf-16", True, "UTF-16"), ("utf-16-le", False, "UTF-16"), ("utf-16-be", False, "UTF-16"),
    ("utf-32", True, "UTF-32"),
])
def test_utf16_and_utf32_files_are_named_as_such(tmp_path, encoding, bom, what):
    path = tmp_path / "r.csv"
    path.write_bytes("user,item,rating\nZoë,a,5\nbob,b,3\n".encode(encoding))  # "utf-16" writes a BOM
    assert path.read_bytes()[:2] in (b"\xff\xfe", b"\xfe\xff") if bom else True
    with pytest.raises(InputError) as info:
        read_ratings(path)
    assert str(info.value).startswith(f"{path}: file is {what}") and "save it as UTF-8" in str(info.value)
    assert "columns" not in str(info.value)


def test_a_carriage_return_that_does_not_end_a_line_is_refused_with_its_line(tmp_path):
    path = tmp_path / "r.tsv"
    path.write_bytes(b"u1\ti1\t5\r\nu2\tit\rem\t3\r\n")  # CRLF line ends are fine, a CR inside an id is not
    with pytest.raises(InputError, match=r"r\.tsv:2: line holds a carriage return .* not part of a CRLF line end"):
        read_ratings(path)
    path.write_bytes(b"u1\ti1\t5\ru2\ti2\t3\r")  # old Mac line ends
    with pytest.raises(InputError, match=r"r\.tsv:1: line holds a carriage return .*tr '\\r' '\\n'"):
        read_ratings(path)
    path.write_bytes(b"u1,i1,5\r\nu2,\"it\r\nem\",3\r\n")  # a CRLF inside a quoted id: no TSV can hold it
    with pytest.raises(InputError, match=r":2: item id 'it\\r\\nem' holds a tab or line break"):
        read_ratings(path)


def test_nul_bytes_and_binary_files_are_refused(tmp_path):
    path = tmp_path / "r.tsv"
    path.write_bytes(b"u1\ti1\t5\nu2\ti\x002\t3\n")
    with pytest.raises(InputError, match=r"r\.tsv:2: line holds a NUL byte"):
        read_ratings(path)
    path.write_bytes(b"PK\x03\x04" + b"\x00" * 100)
    with pytest.raises(InputError, match=r"r\.tsv: file is a zip archive"):
        read_ratings(path)
    path.write_bytes(gzip.compress(b"u1\ti1\t5\n"))
    with pytest.raises(InputError, match=r"file is gzip-compressed, but its name does not end in \.gz"):
        read_ratings(path)


@pytest.mark.parametrize("gz", [False, True])
def test_a_line_over_the_limit_is_refused_as_it_arrives(tmp_path, monkeypatch, gz):
    from mrec_warp.data import inputs

    monkeypatch.setattr(inputs, "MAX_LINE_BYTES", 64)
    text = "u1\ti1\t5\n" + "u2\t" + "x" * 61 + "\n" + "u3\t" + "y" * 100 + "\t3\n"  # line 2 is 64 bytes: fine
    path = tmp_path / ("r.tsv.gz" if gz else "r.tsv")
    path.write_bytes(gzip.compress(text.encode()) if gz else text.encode())
    with pytest.raises(InputError, match=r"r\.tsv(\.gz)?:3: line is longer than 64 bytes \(the limit\)"):
        read_ratings(path)


def test_an_id_over_the_limit_is_refused_at_read_time_with_its_line(tmp_path):
    from mrec_warp.data.inputs import MAX_ID_LENGTH

    path = tmp_path / "r.tsv"
    path.write_text(f"u1\ti1\t5\nu2\t{'x' * MAX_ID_LENGTH}\t3\n", encoding="utf-8")
    assert len(read_ratings(path)["item"].iloc[1]) == MAX_ID_LENGTH  # at the limit: fine
    path.write_text(f"u1\ti1\t5\nu2\ti2\t4\n{'é' * (MAX_ID_LENGTH + 1)}\ti3\t3\n", encoding="utf-8")
    with pytest.raises(InputError) as info:
        read_ratings(path)
    assert str(info.value).startswith(f"{path}:3: user id 'éééé")
    assert f"is {MAX_ID_LENGTH + 1:,} characters long; the limit is {MAX_ID_LENGTH:,}" in str(info.value)


def test_devices_folders_and_sockets_are_refused_before_any_reading(tmp_path):
    import socket
    import tempfile

    with pytest.raises(InputError, match="input file is a directory"):
        read_ratings(tmp_path)
    for device in ("/dev/zero", "/dev/null"):
        if Path(device).exists():  # Linux and macOS; the check itself is portable
            with pytest.raises(InputError, match=f"^{device}: input file is a character device"):
                read_ratings(device)
    if hasattr(socket, "AF_UNIX"):
        with tempfile.TemporaryDirectory() as short:  # socket paths must be short
            sock = socket.socket(socket.AF_UNIX)
            try:
                sock.bind(str(Path(short) / "s"))
                with pytest.raises(InputError, match="input file is a socket, not a file or a pipe"):
                    read_ratings(Path(short) / "s")
            finally:
                sock.close()
