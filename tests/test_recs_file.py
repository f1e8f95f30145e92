"""Reading recommendation files: TSV, CSV, Parquet, headers, blank lines, ranks, one-line errors."""
from __future__ import annotations

import pandas as pd
import pytest

from mrec_warp.errors import InputError
from mrec_warp.evaluation.recs_file import read_recs


def test_read_recs_tsv_with_blank_lines_and_header(tmp_path):
    p = tmp_path / "recs.tsv"
    p.write_text("user\titem\tscore\trank\na\tx\t0.9\t1\n\na\ty\t0.5\t2\n")
    recs = read_recs(p)
    assert recs[["user", "item"]].values.tolist() == [["a", "x"], ["a", "y"]]
    assert recs["line"].tolist() == [2, 4]
    assert recs["rank"].tolist() == [1, 2]


def test_read_recs_header_after_a_utf8_bom(tmp_path):
    p = tmp_path / "recs.csv"
    p.write_bytes("\ufeffuser,item,score\na,x,0.9\n".encode("utf-8"))  # as Excel saves CSV
    recs = read_recs(p)
    assert recs[["user", "item"]].values.tolist() == [["a", "x"]]


def test_read_recs_rank_from_score_then_file_order(tmp_path):
    p = tmp_path / "recs.csv"
    p.write_text("a,x,0.1\na,y,0.9\nb,x,0.5\n")
    recs = read_recs(p)
    assert recs.set_index(["user", "item"])["rank"].to_dict() == {("a", "x"): 2, ("a", "y"): 1, ("b", "x"): 1}
    q = tmp_path / "two.tsv"
    q.write_text("a\tx\na\ty\n")
    assert read_recs(q)["rank"].tolist() == [1, 2]


def test_read_recs_parquet(tmp_path):
    pytest.importorskip("pyarrow")
    p = tmp_path / "recs.parquet"
    pd.DataFrame({"user": [1, 1], "item": [5, 6], "score": [2.0, 1.0], "rank": [1, 2]}).to_parquet(p)
    recs = read_recs(p)
    assert recs["user"].tolist() == ["1", "1"] and recs["item"].tolist() == ["5", "6"]


@pytest.mark.parametrize(
    "text, pattern",
    [
        ("a\tx\t0.9\t1\na\ty\t0.5\tsecond\n", r"recs.tsv:2: rank 'second' is not a number"),
        ("a\tx\t0.9\t1\na\ty\t0.5\t2\t7\n", r"recs.tsv:2: .*same number of columns"),
        ("a\tx\t1\t1\t1\n", r"recs.tsv:1: expected at most 4 columns"),
        ("a\tx\t0.9\t1\n\t\t0.2\t2\n", r"recs.tsv:2: missing user id"),
        ("a\tx\t0.9\t1\na\ty\t0.5\n", r"recs.tsv:2: missing rank"),
        ("user\titem\tscore\trank\n\na\tx\t0.9\t1\na\ty\t0.5\t2\t9\n", r"recs.tsv:4: .*same number of columns"),
        ("\n\n", r"recs.tsv: recommendations file has no data lines"),
    ],
)
def test_read_recs_errors(tmp_path, text, pattern):
    p = tmp_path / "recs.tsv"
    p.write_text(text)
    with pytest.raises(InputError, match=pattern):
        read_recs(p)


def test_read_recs_missing_and_empty(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        read_recs(tmp_path / "nope.tsv")
    (tmp_path / "empty.tsv").write_text("")
    with pytest.raises(InputError, match="is empty"):
        read_recs(tmp_path / "empty.tsv")


def test_recs_file_with_a_byte_order_mark_reads(tmp_path):
    path = tmp_path / "recs.tsv"
    path.write_bytes("\ufeffu1\tPokémon\t0.9\t1\nu1\ti2\t0.5\t2\n".encode("utf-8"))
    recs = read_recs(path)
    assert recs["user"].tolist() == ["u1", "u1"] and recs["item"].tolist() == ["Pokémon", "i2"]


@pytest.mark.parametrize("rank", ["0", "-1", "1.5"])
def test_recs_rank_below_one_is_refused_with_its_line(tmp_path, rank):
    path = tmp_path / "recs.tsv"
    path.write_bytes(f"u1\ti1\t0.9\t1\nu1\ti2\t0.5\t{rank}\n".encode("latin-1"))
    with pytest.raises(InputError, match=r"recs\.tsv:2: rank .* is not a whole number >= 1"):
        read_recs(path)
