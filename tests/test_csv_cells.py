"""Spreadsheet formulas in CSV outputs (issue 20, item 5): a text cell starting with =, +,
-, @, a tab or a carriage return is written with a leading ``'`` and counted in a note;
numbers (scores) are never touched; TSV and Parquet keep every id byte for byte; evaluate
reads the neutralised ids back as they were."""
from __future__ import annotations

import csv
import io

import pandas as pd
import pytest
from click.testing import CliRunner

from mrec_warp.cli import main
from mrec_warp.evaluation.recs_file import read_recs
from mrec_warp.tables import neutralise_cells, restore_cells

HOSTILE = ['=HYPERLINK("http://x")', "+cmd|' /C calc'!A0", "-1", "@x", "\tt", "'=already", "'plain", "ok"]


def test_the_rule_prefixes_formula_cells_of_text_columns_only_and_reverses_exactly():
    frame = pd.DataFrame({"user": HOSTILE, "item": ["i"] * len(HOSTILE), "score": [-0.5] * len(HOSTILE),
                          "rank": range(1, len(HOSTILE) + 1)})
    out, n = neutralise_cells(frame)
    assert out["user"].tolist() == ["'" + h for h in HOSTILE[:6]] + ["'plain", "ok"]
    assert n == 6 and frame["user"].tolist() == HOSTILE  # the caller's frame is not changed
    assert out["score"].tolist() == [-0.5] * len(HOSTILE)  # a negative score stays a number
    assert restore_cells(out["user"]).tolist() == HOSTILE
    text = out.to_csv(index=False, lineterminator="\n")
    cells = [row[0] for row in csv.reader(io.StringIO(text))][1:]
    # no cell a spreadsheet reads starts a formula; RFC 4180 quoting as ever
    assert not any(c[:1] in ("=", "+", "-", "@", "\t", "\r") for c in cells)
    assert '"\'=HYPERLINK(""http://x"")"' in text


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    folder = tmp_path_factory.mktemp("csv")
    rows = [(u, f"i{(n * 3 + j) % 7}") for n, u in enumerate(HOSTILE[:4] + ["u5", "u6"]) for j in range(3)]
    rows.append(("u5", "-2"))  # an item id that looks like a negative number
    (folder / "t.tsv").write_text("".join(f"{u}\t{i}\n" for u, i in rows))
    result = CliRunner().invoke(main, ["train", str(folder / "t.tsv"), "-o", str(folder / "m.npz"),
                                       "--model", "popularity", "-q"])
    assert result.exit_code == 0, result.output
    return folder / "m.npz"


@pytest.mark.parametrize("parallel", [[], ["--backend", "processes", "--n-jobs", "2", "--part-size", "2"]])
def test_recommendations_csv_neutralises_ids_says_how_many_and_reads_back(model_file, tmp_path, parallel):
    runner = CliRunner()
    tsv, csv_out = tmp_path / "r.tsv", tmp_path / "r.csv"
    assert runner.invoke(main, ["recommend", str(model_file), "-o", str(tsv), "-k", "3", "-q"]).exit_code == 0
    result = runner.invoke(main, ["recommend", str(model_file), "-o", str(csv_out), "-k", "3", *parallel])
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO(csv_out.read_text())))
    tsv_rows = [line.split("\t") for line in tsv.read_text().splitlines()]
    expected = sum(cell[:1] in "=+-@\t" for r in tsv_rows for cell in r[:2])
    assert expected >= 4 * 3
    assert f"note: {expected} CSV cells start with =, +, -, @" in result.stderr
    assert not any(r[c][:1] in ("=", "+", "-", "@", "\t") for r in rows for c in ("user", "item"))
    assert {r["user"] for r in rows} >= {"'-1", "'@x", "'=HYPERLINK(\"http://x\")"}
    # TSV keeps the ids as they are, and evaluate's reader gives back the same table from both
    assert {r[0] for r in tsv_rows} >= set(HOSTILE[:4])
    pd.testing.assert_frame_equal(read_recs(csv_out).drop(columns="line").reset_index(drop=True),
                                  read_recs(tsv).drop(columns="line").reset_index(drop=True))


def test_per_user_csv_neutralises_ids_and_names(model_file, tmp_path):
    folder = model_file.parent
    (tmp_path / "test.tsv").write_text("-1\ti2\n@x\ti0\nu5\ti1\n")
    runner = CliRunner()
    assert runner.invoke(main, ["recommend", str(model_file), "-o", str(tmp_path / "r.tsv"), "-q"]).exit_code == 0
    result = runner.invoke(main, ["evaluate", "--train", str(folder / "t.tsv"), "--test", str(tmp_path / "test.tsv"),
                                  "--recs", str(tmp_path / "r.tsv"), "--name", "=SUM(A1)",
                                  "--per-user", str(tmp_path / "u.csv"), "-k", "3"])
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO((tmp_path / "u.csv").read_text())))
    assert {r["user"] for r in rows} == {"'-1", "'@x", "u5"} and {r["recs"] for r in rows} == {"'=SUM(A1)"}
    assert "note: 5 CSV cells start with" in result.stderr


def test_similar_csv_neutralises_and_tsv_does_not(tmp_path):
    (tmp_path / "t.tsv").write_text("".join(f"u{u}\t{'-' if u % 2 else '@'}{(u + j) % 6}\n"
                                            for u in range(30) for j in range(3)))
    runner = CliRunner()
    assert runner.invoke(main, ["train", str(tmp_path / "t.tsv"), "-o", str(tmp_path / "m.npz"), "--model", "itemknn",
                                "-q"]).exit_code == 0
    result = runner.invoke(main, ["similar", str(tmp_path / "m.npz"), "--items=-1", "-k", "2", "-o",
                                  str(tmp_path / "s.csv")])
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO((tmp_path / "s.csv").read_text())))
    assert rows and all(r["item"] == "'-1" and r["similar_item"][:1] == "'" for r in rows)
    assert f"note: {2 * len(rows)} CSV cells start with" in result.stderr
    out = runner.invoke(main, ["similar", str(tmp_path / "m.npz"), "--items=-1", "-k", "2", "-q"])
    assert out.stdout.splitlines()[0].startswith("-1\t")
