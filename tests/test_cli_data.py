"""``mrec-warp prepare | synth | fetch`` through click's CliRunner: outputs, exits, one-line errors."""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import http.server
import json
import random
import re
import threading
import zipfile
from pathlib import Path

import pytest

from mrec_warp.data import datasets
from .conftest import run, run_ok

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "data" / "sample"
RATINGS = "".join(f"u{u}\ti{i}\t{1 + (u * i) % 5}\t{1000 + 10 * u + i}\n" for u in range(12) for i in range(u % 6 + 1, 9))



def assert_one_line_error(result, *fragments):
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("Error: ")
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


@pytest.fixture
def ratings(tmp_path) -> Path:
    path = tmp_path / "ratings.tsv"
    path.write_text(RATINGS)
    return path


# -- help ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("command, example", [
    ("prepare", "mrec-warp prepare ratings.tsv -o split/ --min-rating 4"),
    ("synth", "mrec-warp synth -o data/sample"),
    ("fetch", "mrec-warp fetch movielens-100k"),
])
def test_help_shows_options_and_an_example(command, example):
    result = run(command, "--help")
    assert result.exit_code == 0
    assert example in result.output
    assert "--quiet" in result.output and "Examples:" in result.output


def test_commands_are_registered():
    listing = run("--help").output
    for command in ("prepare", "synth", "fetch"):
        assert f"  {command} " in listing


# -- prepare ------------------------------------------------------------------------------------
def test_prepare_writes_the_split_and_says_so(ratings, tmp_path):
    out = tmp_path / "split"
    result = run("prepare", ratings, "-o", out, "--min-rating", 2, "--seed", 3)
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == ["summary.json", "test.tsv", "train.tsv"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["parameters"]["min_rating"] == 2 and summary["parameters"]["seed"] == 3
    first, second, ids, header, columns, third = result.stdout.splitlines()
    assert first == (f"wrote {out / 'train.tsv'} ({summary['train']['rows']:,} rows), {out / 'test.tsv'} "
                     f"({summary['test']['rows']:,} rows) and {out / 'summary.json'}")
    assert f" - {summary['rows_below_min_rating']:,} below --min-value = " in second
    assert ids.startswith(f"  {summary['users']['read']} users read")
    assert third == f"  {summary['value_column']['description']}"
    # columns count from 0 in the summary, as in --columns and in errors
    assert header == "  no header line (column 2 holds '1', a number)"
    assert columns == ("  columns (counted from 0): user = column 0, item = column 1, value = column 2, "
                       "timestamp = column 3 (--columns 0,1,2,3)")
    assert f"value column 2: binarised at >= 2: {summary['rows_below_min_rating']:,} pairs dropped" in third
    assert result.stderr == ""  # no progress chatter when not on a terminal


def test_prepare_quiet_prints_nothing(ratings, tmp_path):
    result = run("prepare", ratings, "-o", tmp_path / "s", "--quiet")
    assert result.exit_code == 0 and result.output == ""
    assert (tmp_path / "s" / "train.tsv").exists()


def test_prepare_verbose_logs_to_stderr(ratings, tmp_path):
    result = run("prepare", ratings, "-o", tmp_path / "s", "--verbose")
    assert result.exit_code == 0
    assert f"read {len(RATINGS.splitlines())} rows" in result.stderr


def test_prepare_options_reach_the_function(tmp_path):
    path = tmp_path / "r.csv"
    path.write_text("ts;who;what;stars\n" + "".join(f"{t};u{t % 4};i{t % 7};5\n" for t in range(40)))
    out = tmp_path / "s"
    result = run("prepare", path, "-o", out, "--sep", ";", "--header", "--columns", "who,what,stars,ts",
                 "--leave-out", 2, "--split", "temporal", "--min-user-items", 3)
    assert result.exit_code == 0, result.output
    s = json.loads((out / "summary.json").read_text())
    assert s["parameters"]["split"] == "temporal" and s["parameters"]["leave_out"] == 2
    assert s["parameters"]["columns"] == ["who", "what", "stars", "ts"]
    assert s["test"]["rows"] == 4 * 2 - s["test_rows_with_unknown_item"]
    test_lines = (out / "test.tsv").read_text().splitlines()
    assert all(line.split("\t")[0].startswith("u") for line in test_lines)
    # temporal, on the ts column: each user's test rows come after all of their training rows
    last_train = {}
    for line in (out / "train.tsv").read_text().splitlines():
        user, _, _, ts = line.split("\t")
        last_train[user] = max(last_train.get(user, -1), int(ts))
    assert test_lines and all(int(l.split("\t")[3]) > last_train[l.split("\t")[0]] for l in test_lines)


def test_prepare_num_splits(ratings, tmp_path):
    result = run("prepare", ratings, "-o", tmp_path / "cv", "--num-splits", 2)
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (tmp_path / "cv").iterdir()) == ["split-0", "split-1"]
    assert result.stdout.count("wrote ") == 2 and "split-1" in result.stdout


def test_prepare_same_seed_same_bytes(ratings, tmp_path):
    for name in ("a", "b"):
        assert run("prepare", ratings, "-o", tmp_path / name, "--seed", 5, "-q").exit_code == 0
    for f in ("train.tsv", "test.tsv", "summary.json"):
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes()


def test_prepare_missing_input(tmp_path):
    result = run("prepare", tmp_path / "nope.tsv", "-o", tmp_path / "out")
    assert_one_line_error(result, "nope.tsv: input file does not exist")
    assert not (tmp_path / "out").exists()


def test_prepare_malformed_line(tmp_path):
    path = tmp_path / "bad.tsv"
    path.write_text("u1\ti1\t5\nu1\ti2\t4\nu2\ti1\tfive\n")
    result = run("prepare", path, "-o", tmp_path / "out")
    assert_one_line_error(result, "bad.tsv:3: rating 'five' is not a finite number")
    assert not (tmp_path / "out").exists()


def test_prepare_wrong_column_count(tmp_path):
    path = tmp_path / "bad.tsv"
    path.write_text("u1\ti1\t5\t1\nu1\ti2\t4\t2\nu2\ti1\t3\n")
    assert_one_line_error(run("prepare", path, "-o", tmp_path / "out"), "bad.tsv:3: expected 4 columns")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("args, fragment", [
    (["--test-fraction", "1.5"], "test fraction must be at least 0 and below 1"),
    (["--test-fraction", "-0.1"], "--test-fraction 0.2"),
    (["--test-fraction", "0.2", "--leave-out", "1"], "either --test-fraction F or --leave-out K"),
    (["--leave-out", "-1"], "leave-out count must be a whole number >= 0"),
    (["--split", "temporal", "--num-splits", "2"], "temporal split is the same every time"),
    (["--num-splits", "0"], "number of splits"),
    (["--min-rating", "9"], "no interactions left"),
    (["--columns", "user,movie"], "the file has no header line"),
    (["--columns", "0,7"], "column 7 is out of range"),
])
def test_prepare_bad_options(ratings, tmp_path, args, fragment):
    result = run("prepare", ratings, "-o", tmp_path / "out", *args)
    assert_one_line_error(result, fragment)
    assert not (tmp_path / "out").exists()


def test_prepare_unknown_column_name(tmp_path):
    path = tmp_path / "r.csv"
    path.write_text("user,item,rating\nu1,i1,5\n")
    result = run("prepare", path, "-o", tmp_path / "out", "--columns", "user,movie")
    assert_one_line_error(result, "column 'movie' not found; header columns: user, item, rating")


def test_prepare_temporal_without_timestamps(tmp_path):
    path = tmp_path / "r.tsv"
    path.write_text("u1\ti1\t5\nu1\ti2\t4\n")
    assert_one_line_error(run("prepare", path, "-o", tmp_path / "out", "--split", "temporal"), "needs timestamps")
    assert not (tmp_path / "out").exists()


def test_prepare_keeps_an_existing_output_when_the_input_is_bad(ratings, tmp_path):
    out = tmp_path / "out"
    assert run("prepare", ratings, "-o", out, "-q").exit_code == 0
    before = (out / "train.tsv").read_bytes()
    bad = tmp_path / "bad.tsv"
    bad.write_text("u1\ti1\t5\nu2\n")
    assert run("prepare", bad, "-o", out).exit_code == 2
    assert (out / "train.tsv").read_bytes() == before
    assert sorted(p.name for p in out.iterdir()) == ["summary.json", "test.tsv", "train.tsv"]


@pytest.mark.skipif(not (SAMPLE / "ratings.tsv").exists(), reason="shipped sample missing")
def test_make_demo_prepare_step(tmp_path):
    out = tmp_path / "demo-out" / "split"
    result = run("prepare", SAMPLE / "ratings.tsv", "-o", out, "--min-rating", 1, "--test-fraction", 0.2, "--seed", 42)
    assert result.exit_code == 0, result.output
    s = json.loads((out / "summary.json").read_text())
    assert s["users"]["kept"] == 3000 and s["train"]["rows"] + s["test"]["rows"] == s["rows_read"]


# -- synth --------------------------------------------------------------------------------------
def test_synth_writes_both_files(tmp_path):
    out = tmp_path / "syn"
    result = run("synth", "-o", out, "--users", 100, "--items", 80, "--interactions", 1500, "--topics", 5, "--seed", 1)
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == ["item_tags.tsv", "ratings.tsv"]
    n_rows = len((out / "ratings.tsv").read_text().splitlines())
    assert abs(n_rows - 1500) <= 2
    assert result.stdout.startswith(f"wrote {out / 'ratings.tsv'} ({n_rows:,} interactions, 100 users")


def test_synth_impossible_size(tmp_path):
    result = run("synth", "-o", tmp_path / "syn", "--users", 10, "--items", 10, "--interactions", 1000)
    assert_one_line_error(result, "do not fit")
    assert not (tmp_path / "syn").exists()


@pytest.mark.skipif(not (SAMPLE / "README.txt").exists(), reason="shipped sample missing")
def test_shipped_sample_is_what_its_readme_command_makes(tmp_path):
    command = next(line.split("mrec-warp ", 1)[1] for line in (SAMPLE / "README.txt").read_text().splitlines()
                   if line.strip().startswith("mrec-warp synth"))
    args = command.split()
    args[args.index("-o") + 1] = str(tmp_path / "again")
    assert run(*args).exit_code == 0
    for name in ("ratings.tsv", "item_tags.tsv"):
        assert (tmp_path / "again" / name).read_bytes() == (SAMPLE / name).read_bytes(), name


# -- fetch --------------------------------------------------------------------------------------
class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture
def mirror(tmp_path, monkeypatch):
    """A local mirror holding ml-100k.zip, with the checksum table patched to match it."""
    www = tmp_path / "www"
    www.mkdir()
    with zipfile.ZipFile(www / "ml-100k.zip", "w") as zf:
        zf.writestr("ml-100k/u.data", "1\t10\t5\t881250949\n2\t10\t4\t881250950\n")
    md5 = hashlib.md5((www / "ml-100k.zip").read_bytes()).hexdigest()
    monkeypatch.setitem(datasets.DATASETS, "movielens-100k",
                        dataclasses.replace(datasets.DATASETS["movielens-100k"], md5=md5))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(www)))
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()
    httpd.server_close()
    thread.join()


def test_fetch_prints_the_path(mirror, tmp_path):
    result = run("fetch", "movielens-100k", "--dest", tmp_path / "cache", "--base-url", mirror)
    assert result.exit_code == 0, result.output
    path = tmp_path / "cache" / "ml-100k" / "u.data"
    assert result.stdout == f"{path}\n"  # only the path, so $(mrec-warp fetch ...) works
    assert "research use" in result.stderr
    assert path.exists()
    again = run("fetch", "movielens-100k", "--dest", tmp_path / "cache", "--base-url", "http://127.0.0.1:9/", "-q")
    assert again.exit_code == 0 and again.stdout == f"{path}\n" and again.stderr == ""


def test_fetch_checksum_mismatch(mirror, tmp_path, monkeypatch):
    monkeypatch.setitem(datasets.DATASETS, "movielens-100k",
                        dataclasses.replace(datasets.DATASETS["movielens-100k"], md5="f" * 32))
    result = run("fetch", "movielens-100k", "--dest", tmp_path / "cache", "--base-url", mirror)
    assert_one_line_error(result, "checksum mismatch", "the download was deleted")
    assert list((tmp_path / "cache").iterdir()) == []


def test_fetch_unknown_name(tmp_path):
    result = run("fetch", "netflix", "--dest", tmp_path)
    assert result.exit_code == 2
    assert "movielens-100k" in result.stderr


# -- prepare says which column became what (issue 9) ------------------------------------------
def test_prepare_keeps_a_headerless_first_line_and_says_which_column_is_what(tmp_path):
    path = tmp_path / "s200.csv"
    path.write_text('151603712,"The Elder Scrolls V Skyrim",purchase,1.0,0\n'
                    '151603712,"Fallout 4",play,273.0,0\n59945701,"Spore",purchase,1.0,0\n')
    out = tmp_path / "s200"
    result = run("prepare", path, "-o", out, "--columns", "0,1,3")
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["rows_read"] == 3 and summary["users"]["kept"] == 2
    assert summary["reading"]["header"] is False
    assert summary["reading"]["columns"]["value"] == {"position": 3, "name": None}
    lines = result.stdout.splitlines()
    assert "  no header line (column 0 holds '151603712', a number)" in lines
    assert "  columns (counted from 0): user = column 0, item = column 1, value = column 3 (--columns 0,1,3)" in lines
    assert summary["value_column"]["column"] == "column 3"


def test_column_positions_mean_the_same_in_columns_errors_and_the_summary(tmp_path):
    """One convention, from 0: what --columns picks, what an error names and what the summary says."""
    path = tmp_path / "s.csv"
    path.write_text("u1,x,purchase,1.0\nu1,y,play,\nu2,x,play,5\n")
    result = run("prepare", path, "-o", tmp_path / "a", "--columns", "0,1,3")
    assert_one_line_error(result, "s.csv:2: column 3 (value) is empty")
    path.write_text("u1,x,purchase,1.0\nu1,y,play,2\nu2,x,play,5\n")
    result = run("prepare", path, "-o", tmp_path / "b", "--columns", "0,1,3")
    assert result.exit_code == 0, result.output
    assert "value = column 3 (--columns 0,1,3)" in result.stdout and "value column 3: kept" in result.stdout
    result = run("prepare", path, "-o", tmp_path / "c", "--columns", "0,1,4")
    assert_one_line_error(result, "column 4 is out of range: lines have 4 columns (positions 0-3)")
    assert "--columns" in run("prepare", "--help").stdout.split("Columns count from 0")[0]


def test_prepare_says_when_it_takes_line_1_as_a_header(tmp_path):
    path = tmp_path / "games.csv"
    path.write_text("user-id,game-title,value,\n151603712,Skyrim,273,1\n151603712,Fallout 4,87,\n")
    out = tmp_path / "g"
    result = run("prepare", path, "-o", out)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert ("  line 1 taken as a header: 'user-id,game-title,value,' ('user-id' is a column name and no field "
            "is a number; use --no-header if it is data)") in lines
    assert ("  columns (counted from 0): user = column 0 'user-id', item = column 1 'game-title', "
            "value = column 2 'value' (--columns 0,1,2); column 3 ignored (no name in the header)") in lines
    reading = json.loads((out / "summary.json").read_text())["reading"]
    assert reading["header_guessed"] is True and reading["columns"]["item"] == {"position": 1, "name": "game-title"}


def test_prepare_with_a_separator_the_file_lacks_names_the_line_and_a_better_one(tmp_path):
    path = tmp_path / "steam.csv"
    path.write_text("\n151603712,Skyrim,273\n")
    result = run("prepare", path, "-o", tmp_path / "out", "--sep", ";")
    assert_one_line_error(result, "steam.csv:2: expected at least 2 columns (user, item), found 1",
                          "try --sep ',')")
    assert "--sep ';'" not in result.stderr


def test_prepare_says_how_it_read_the_input_once_for_many_splits(ratings, tmp_path):
    result = run("prepare", ratings, "-o", tmp_path / "cv", "--num-splits", "2")
    assert result.exit_code == 0, result.output
    assert result.stdout.count("columns (counted from 0): user = column 0, item = column 1") == 1
    assert result.stdout.count("no header line") == 1


def test_prepare_says_how_many_items_were_read_and_how_many_train_holds(tmp_path):
    """Items only in test rows (whose rows are dropped) are counted among the items read,
    and the line says train holds fewer; summary.json keeps its counts."""
    rows = [f"u{u}\ti{(u + j) % 6}\t1\t{100 + j}\n" for u in range(20) for j in range(4)]
    # each user's latest row is the test row: new-a and new-b appear in no training row
    rows += ["u1\tnew-a\t1\t999\n", "u2\tnew-a\t1\t999\n", "u3\tnew-b\t1\t999\n"]
    path = tmp_path / "t.tsv"
    path.write_text("".join(rows))
    result = run_ok("prepare", path, "-o", tmp_path / "out", "--split", "temporal", "--leave-out", "1",
                    "--columns", "0,1,2,3")
    assert ("  83 rows read = 83 pairs kept - 3 test rows with items unseen in train = 63 train + 17 test rows\n"
            "  20 users read = 20 kept; 8 items read - 2 only in dropped test rows = 6 in train\n") in result.output
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["items"] == {"read": 8, "kept": 6, "dropped_without_positives": 0, "dropped_only_in_test": 2}
    assert summary["test_rows_with_unknown_item"] == 3 and summary["test"]["rows"] == 17
    plain = run_ok("prepare", path, "-o", tmp_path / "all", "--leave-out", "0", "--columns", "0,1,2,3")
    assert ("  83 rows read = 83 pairs kept = 83 train + 0 test rows\n"
            "  20 users read = 20 kept; 8 items read = 8 in train\n") in plain.output


def _checked_sum(text: str) -> list:
    """The numbers of a summary line, checked to add up: ``A - B - C = D`` (every ``= N`` is
    what the terms before it leave), and a last ``= A + B`` splits the total in two."""
    parts = re.split(r" ([-=+]) (?=\d)", text.strip())
    numbers = [int(re.match(r"[\d,]+", part).group().replace(",", "")) for part in parts[::2]]
    signs = parts[1::2]
    total = numbers[0]
    for i, (sign, n) in enumerate(zip(signs, numbers[1:])):
        if sign == "-":
            total -= n
        elif sign == "=":
            following = numbers[i + 2:] if signs[i + 1:] and set(signs[i + 1:]) == {"+"} else []
            assert n + sum(following) == total, (text, n, following, total)
            total = n
    return numbers


def test_prepare_line_adds_up_and_says_what_summary_json_says(tmp_path):
    """Signed ratings binarised at 5 (issue 33.4): rows read -> pairs -> dropped by each
    rule, disjoint -> kept -> train + test; users and items read -> kept, with the users
    left without a pair; every number one of summary.json's."""
    rows = ["user,joke,rating"]
    for u in range(30):
        for j in range(10):
            if (u + j) % 3:
                rows.append(f"u{u},j{j},{((u * 7 + j * 3) % 21) - 10}")
    rows += ["quiet,j1,-4", "quiet,j2,3"]  # a user with no rating >= 5
    path = tmp_path / "jokes.csv"
    path.write_text("\n".join(rows) + "\n")
    result = run_ok("prepare", path, "-o", tmp_path / "s", "--min-rating", 5, "--header", "--seed", 1)
    s = json.loads((tmp_path / "s" / "summary.json").read_text())
    lines = result.stdout.splitlines()
    rows_line, ids_line = lines[1], lines[2]
    assert rows_line == (f"  {s['rows_read']:,} rows read = {s['rows_read']:,} pairs - {s['rows_below_min_value']:,} "
                         f"below --min-value ({s['negative_pairs_below_min_value']:,} of them negative) = "
                         f"{s['pairs_kept']:,} pairs kept = {s['train']['rows']:,} train + {s['test']['rows']:,} "
                         "test rows"), result.stdout
    # the negatives are among the pairs below the minimum, not a count beside them
    assert 0 < s["negative_pairs_below_min_value"] == s["negative_rows"] < s["rows_below_min_value"]
    assert s["rows_read"] - s["rows_below_min_value"] == s["pairs_kept"] == s["train"]["rows"] + s["test"]["rows"]
    users, items = s["users"], s["items"]
    assert users["dropped_without_positives"] >= 1  # "quiet" (and any other) lost every row
    assert ids_line == (f"  {users['read']} users read - {users['dropped_without_positives']} with no pair left = "
                        f"{users['kept']} kept; {items['read']} items read - {items['dropped_without_positives']} "
                        f"with no pair left = {items['kept']} in train"), result.stdout
    assert users["read"] - users["dropped_without_positives"] == users["kept"]
    assert _checked_sum(rows_line) == [s["rows_read"], s["rows_read"], s["rows_below_min_value"], s["pairs_kept"],
                                       s["train"]["rows"], s["test"]["rows"]]
    users_part, items_part = ids_line.split(";")
    assert _checked_sum(users_part) == [users["read"], users["dropped_without_positives"], users["kept"]]
    assert _checked_sum(items_part) == [items["read"], items["dropped_without_positives"], items["kept"]]


def test_prepare_line_adds_up_with_every_rule(tmp_path):
    """Empty ids, returns netted, a minimum, a minimum per user and test rows of unseen items:
    each step once, in the order the rules apply, and the sums hold."""
    rng = random.Random(0)
    rows = ["InvoiceNo,CustomerID,StockCode,Quantity"]
    for n in range(600):
        customer = "" if rng.random() < 0.03 else f"c{rng.randrange(25)}"
        rows.append(f"{n},{customer},s{rng.randrange(30)},{rng.choice([1, 2, 6, 12, -1, -2])}")
    # an item rated once, by a user with other rows: its row, when chosen for test, is dropped
    rows += [f"{900 + u},c{u},only-in-test-{u},5" for u in range(25)]
    path = tmp_path / "inv.csv"
    path.write_text("\n".join(rows) + "\n")
    result = run_ok("prepare", path, "-o", tmp_path / "s", "--columns", "CustomerID,StockCode,Quantity",
                    "--negatives", "net", "--empty-ids", "drop", "--min-value", 2, "--min-user-items", 10)
    s = json.loads((tmp_path / "s" / "summary.json").read_text())
    rows_line, ids_line = result.stdout.splitlines()[1:3]
    pairs = s["rows_read"] - s["empty_id_rows_dropped"] - s["duplicates_merged"]
    steps = [s["rows_read"], s["empty_id_rows_dropped"], s["duplicates_merged"], pairs, s["pairs_netted_out"],
             s["rows_below_min_value"], s["pairs_kept"], s["rows_of_users_below_min_user_items"],
             s["test_rows_with_unknown_item"], s["train"]["rows"], s["test"]["rows"]]
    assert all(steps), s  # every rule removed something here
    assert _checked_sum(rows_line) == steps
    assert rows_line.index("empty id") < rows_line.index("duplicates") < rows_line.index("net <= 0") \
        < rows_line.index("--min-value") < rows_line.index("pairs kept") < rows_line.index("--min-user-items") \
        < rows_line.index("unseen in train")
    users, items = s["users"], s["items"]
    users_part, items_part = ids_line.split(";")
    assert _checked_sum(users_part) == [users["read"], users["dropped_below_min_user_items"], users["kept"]]
    assert _checked_sum(items_part) == [items["read"], items["dropped_without_positives"],
                                        items["dropped_only_in_test"], items["kept"]]


def test_convert_into_a_pipe_never_reads_its_output_back(tmp_path):
    """`convert IN - | wc -l`: the rows go to the pipe and the command ends (a stream is never
    read back for carriage returns: its ids are checked before writing)."""
    import os
    import subprocess
    import sys

    import pandas as pd

    from mrec_warp.errors import InputError
    from mrec_warp.data.tsv import write_interactions

    source = tmp_path / "in.tsv"
    source.write_text("".join(f"u{u}\ti{(u * 7 + j) % 50}\t1\n" for u in range(200) for j in range(5)))
    piped = subprocess.run(f"{sys.executable} -m mrec_warp convert {source} - | wc -l", shell=True,
                           capture_output=True, text=True, timeout=120)
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout.strip() == "1000"
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE)
    try:
        with pytest.raises(InputError, match="line break"):  # a lone CR in an id, refused before writing
            write_interactions(pd.DataFrame({"user": ["a\rb"], "item": ["i"], "value": [1.0]}), fifo)
    finally:
        with open(fifo, "w"):  # the reader ends at this end of file
            pass
        assert reader.communicate(timeout=30)[0] == b""
