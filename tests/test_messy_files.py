"""Messy real-world files through the whole pipeline: every id comes back as the same bytes.

prepare -> train -> recommend (TSV, CSV, Parquet, --users) -> similar -> evaluate, on files
generated here: UTF-8 accents and emoji, a byte-order mark, CRLF line ends, quoted commas
and doubled quotes, a trailing empty column, trailing spaces in ids, leading-zero ids, and
a Latin-1 file.
"""
from __future__ import annotations

import csv
import io
import random
from pathlib import Path
from typing import List, Set

import pytest
from click.testing import CliRunner

from mrec_warp.cli import main

from .conftest import run_ok

EMOJI_ITEM = "🎮 Zelda: Breath of the Wild"
SPECIAL_ITEMS = [
    "Pokémon Gold", EMOJI_ITEM, "Warhammer 40,000 Dawn of War II", 'The "Quoted" Game',
    "Universe Sandbox ", "Universe Sandbox", "007", "Papers, Please", "Ça marche, «vraiment»",
]
SPECIAL_USERS = ["007", "0070", "Zoë", "user 🎮", "u1 ", "u1", "Ünal, Jr."]

LATIN1_ITEMS = ["Pokémon Gold", "Ça va", "naïve café", "Universe Sandbox ", "007", "Señor"]
LATIN1_USERS = ["Zoë", "José ", "007", "Müller"]


def output(*args) -> str:
    """What a command that must succeed printed."""
    return run_ok(*args).output


def corpus(users: List[str], items: List[str], n_users: int = 40, n_items: int = 30, per_user: int = 10):
    """(user, item, hours) rows: the special ids plus plain ones, each user with per_user items."""
    rng = random.Random(7)
    users = users + [f"u{k:03d}" for k in range(n_users - len(users))]
    items = items + [f"game {k}" for k in range(n_items - len(items))]
    rows = []
    for u, user in enumerate(users):
        # every special item is played by someone, so it is in train and can come back
        chosen = {items[u % len(items)], items[(u + 1) % len(items)]}
        while len(chosen) < per_user:
            chosen.add(rng.choice(items))
        rows += [(user, item, rng.choice(["273", "87", "0.5", "12"])) for item in sorted(chosen)]
    return rows


def write_csv(path: Path, rows, encoding: str, bom: bool) -> None:
    """RFC 4180 CSV with CRLF line ends and a trailing empty column, as spreadsheets export it."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\r\n")  # quotes commas, doubles quotes
    writer.writerow(["user-id", "game-title", "value", ""])
    for user, item, value in rows:
        writer.writerow([user, item, value, ""])
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + buf.getvalue().encode(encoding))


def tsv_ids(path: Path, columns=(0, 1)) -> Set[bytes]:
    ids = set()
    for line in path.read_bytes().split(b"\n"):
        if line:
            fields = line.split(b"\t")
            ids.update(fields[c] for c in columns)
    return ids


def csv_ids(path: Path, encoding: str, columns=("user", "item")) -> Set[bytes]:
    with open(path, encoding=encoding, newline="") as fh:
        return {row[c].encode(encoding) for row in csv.DictReader(fh) for c in columns}


@pytest.mark.parametrize("encoding, bom", [("utf-8", True), ("latin-1", False)])
def test_every_id_comes_back_byte_for_byte(tmp_path, encoding, bom):
    users, items = (SPECIAL_USERS, SPECIAL_ITEMS) if encoding == "utf-8" else (LATIN1_USERS, LATIN1_ITEMS)
    rows = corpus(users, items)
    source = tmp_path / "games.csv"
    write_csv(source, rows, encoding, bom)
    user_bytes = {u.encode(encoding) for u, _, _ in rows}
    item_bytes = {i.encode(encoding) for _, i, _ in rows}
    all_ids = user_bytes | item_bytes
    split = tmp_path / "split"

    said = output("prepare", source, "-o", split, "--test-fraction", "0.2")
    assert ("read as Latin-1" in said) == (encoding == "latin-1")
    train, test = split / "train.tsv", split / "test.tsv"
    # nothing merged, stripped or re-encoded: train + test hold exactly the input's ids
    assert tsv_ids(train) | tsv_ids(test) == all_ids
    assert tsv_ids(train, (0,)) | tsv_ids(test, (0,)) == user_bytes
    import json
    summary = json.loads((split / "summary.json").read_text())
    assert summary["encoding"] == ("utf-8-sig" if bom else "latin-1")
    assert summary["duplicates_merged"] == 0

    model = tmp_path / "model.npz"
    run_ok("train", train, "-o", model, "--epochs", 2, "--factors", 8, "-q")

    recs_tsv, recs_csv, recs_pq = tmp_path / "recs.tsv", tmp_path / "recs.csv", tmp_path / "recs.parquet"
    for out in (recs_tsv, recs_csv, recs_pq):
        run_ok("recommend", model, "-o", out, "-k", 5, "-q")
    assert tsv_ids(recs_tsv, (0,)) == user_bytes  # every user, under their own bytes
    assert tsv_ids(recs_tsv, (1,)) <= item_bytes
    assert csv_ids(recs_csv, encoding) == tsv_ids(recs_tsv)
    if encoding == "utf-8":  # Parquet text is UTF-8 by definition
        import pyarrow.parquet as pq

        table = pq.read_table(recs_pq).to_pydict()
        assert {s.encode("utf-8") for s in table["user"] + table["item"]} == tsv_ids(recs_tsv)

    # --users: whole lines, repeats once, trailing space kept
    users_file = tmp_path / "users.txt"
    chosen = [users[0], users[-1], users[0], "u1 " if encoding == "utf-8" else "José "]
    users_file.write_bytes(b"\xef\xbb\xbf" * bom + "\r\n".join(chosen).encode(encoding) + b"\r\n")
    some = tmp_path / "some.tsv"
    said = output("recommend", model, "-o", some, "-k", 3, "--users", users_file)
    assert "1 repeated user id(s) ignored" in said
    assert tsv_ids(some, (0,)) == {u.encode(encoding) for u in chosen}
    assert len(some.read_bytes().splitlines()) == 3 * 3  # three distinct users, not four lists

    # similar: one id per line, commas and trailing spaces are part of the id
    wanted = [i for i in items if "," in i or i.endswith(" ") or "🎮" in i]
    items_file = tmp_path / "items.txt"
    items_file.write_bytes("\n".join(wanted).encode(encoding) + b"\n")
    similar = tmp_path / "similar.tsv"
    run_ok("similar", model, "--items-file", items_file, "-k", 3, "-o", similar)
    assert tsv_ids(similar, (0,)) == {i.encode(encoding) for i in wanted}
    assert tsv_ids(similar, (1,)) <= item_bytes
    if encoding == "utf-8":
        assert EMOJI_ITEM.encode("utf-8") in tsv_ids(similar, (0,))

    per_user = tmp_path / "per_user.csv"
    for recs in (recs_tsv, recs_csv) + ((recs_pq,) if encoding == "utf-8" else ()):
        run_ok("evaluate", "--train", train, "--test", test, "--recs", recs, "-k", 5, "--per-user", per_user, "-q")
        # in the test file's encoding: a Latin-1 user id keeps its bytes too
        assert csv_ids(per_user, encoding, ("user",)) == tsv_ids(test, (0,))


def test_emoji_id_round_trips_exactly(tmp_path):
    """The emoji item, its quoted-comma and doubled-quote neighbours come back verbatim."""
    rows = corpus(SPECIAL_USERS, SPECIAL_ITEMS)
    source = tmp_path / "games.csv"
    write_csv(source, rows, "utf-8", bom=True)
    run_ok("prepare", source, "-o", tmp_path / "split", "--test-fraction", "0.2", "-q")
    run_ok("train", tmp_path / "split/train.tsv", "-o", tmp_path / "m.npz", "--model", "popularity", "-q")
    out = tmp_path / "recs.csv"
    run_ok("recommend", tmp_path / "m.npz", "-o", out, "-k", 30, "-q")
    text = out.read_bytes().decode("utf-8")
    assert f"{EMOJI_ITEM}," in text
    assert '"The ""Quoted"" Game"' in text  # quoted exactly once, quotes doubled
    assert '"Warhammer 40,000 Dawn of War II"' in text
    assert "\nu1 ," in text and "\nu1," in text  # two users, never merged
    assert "\n007," in text


# -- the hybrid model with messy feature files ------------------------------------------------
SPECIAL_FEATURES = ["genre:Rôle-playing", "tag:🎮 retro", 'series:"Total War", remastered', "tag:open world ",
                    "tag:open world", "studio:Éditions, Ltd."]
LATIN1_FEATURES = ["genre:Rôle", "tag:café ", "tag:café", 'series:"Señor", deluxe', "year:1995"]
NEW_ITEMS = {"utf-8": ["Café ✨ (new)", "New, Quoted \"Game\" "], "latin-1": ["Nouveauté ", "Niño, el"]}


def write_feature_csv(path: Path, rows, encoding: str, bom: bool) -> None:
    """id,feature[,weight] rows as a spreadsheet exports them: CRLF, quotes, a trailing empty column."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\r\n")
    for row in rows:
        writer.writerow(list(row) + [""])
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + buf.getvalue().encode(encoding))


@pytest.mark.parametrize("encoding, bom", [("utf-8", True), ("latin-1", False)])
def test_hybrid_with_messy_feature_files_keeps_every_id_and_feature(tmp_path, encoding, bom):
    users, items = (SPECIAL_USERS, SPECIAL_ITEMS) if encoding == "utf-8" else (LATIN1_USERS, LATIN1_ITEMS)
    features = SPECIAL_FEATURES if encoding == "utf-8" else LATIN1_FEATURES
    rows = corpus(users, items)
    source = tmp_path / "games.csv"
    write_csv(source, rows, encoding, bom)
    item_bytes = {i.encode(encoding) for _, i, _ in rows}
    all_items = sorted({i for _, i, _ in rows})
    new_items = NEW_ITEMS[encoding]
    # every trained item gets one or two messy features; the new items are known by features only
    item_rows = [(item, features[k % len(features)]) for k, item in enumerate(all_items)]
    item_rows += [(item, features[(k + 1) % len(features)]) for k, item in enumerate(all_items[::3])]
    item_rows += [(item, features[k]) for k, item in enumerate(new_items)]
    item_file = tmp_path / "item_features.csv"
    write_feature_csv(item_file, item_rows, encoding, bom)
    user_rows = [(u, f"country:{'Ünited' if k % 2 else 'Ça, va'} ") for k, u in enumerate(users)]
    user_file = tmp_path / "user_features.csv"
    write_feature_csv(user_file, user_rows, encoding, bom)

    split = tmp_path / "split"
    run_ok("prepare", source, "-o", split, "--test-fraction", "0.2", "-q")
    train = split / "train.tsv"
    model = tmp_path / "hybrid.npz"
    run_ok("train", train, "-o", model, "--model", "hybrid", "--epochs", 2, "--factors", 8, "-q",
        "--item-features", item_file, "--user-features", user_file)

    # the model file keeps every feature name and new id as it was written
    from mrec_warp.models import load

    fitted = load(model)
    assert fitted.id_encoding_ == ("latin-1" if encoding == "latin-1" else "utf-8")
    trained = set(fitted.item_ids)
    assert {f.encode(encoding) for f in fitted.item_feature_names} == {
        f.encode(encoding) for i, f in item_rows if i in trained}  # the vocabulary: features of trained items
    assert "tag:open world " in fitted.item_feature_names or encoding == "latin-1"  # not merged with its twin
    assert {f.encode(encoding) for f in fitted.user_feature_names} == {f.encode(encoding) for _, f in user_rows}
    assert {i.encode(encoding) for i in fitted.new_item_ids} == {i.encode(encoding) for i in new_items}

    # recommend with the new items: trained and new ids come back as their bytes
    recs = tmp_path / "recs.tsv"
    run_ok("recommend", model, "-o", recs, "-k", len(all_items) + 2, "--include-new-items", "-q")
    new_bytes = {i.encode(encoding) for i in new_items}
    assert tsv_ids(recs, (1,)) == item_bytes | new_bytes
    recs_csv = tmp_path / "recs.csv"
    run_ok("recommend", model, "-o", recs_csv, "-k", len(all_items) + 2, "--item-features", item_file, "-q")
    assert csv_ids(recs_csv, encoding, ("item",)) == item_bytes | new_bytes

    # similar: a trailing-space id given on the command line is that id, not its stripped twin
    spaced = next(i for i in items if i.endswith(" "))
    similar = tmp_path / "similar.tsv"
    run_ok("similar", model, "--items", f"{spaced},007", "-k", 3, "-o", similar)
    assert tsv_ids(similar, (0,)) == {spaced.encode(encoding), b"007"}
    assert tsv_ids(similar, (1,)) <= item_bytes


def _small_model(tmp_path, encoding: str, model: str = "hybrid", *extra) -> Path:
    rows = corpus(LATIN1_USERS, LATIN1_ITEMS) if encoding == "latin-1" else corpus(SPECIAL_USERS, SPECIAL_ITEMS)
    source = tmp_path / "games.csv"
    write_csv(source, rows, encoding, bom=False)
    out = tmp_path / f"{model}.npz"
    run_ok("train", source, "-o", out, "--model", model, "--epochs", 1, "--factors", 4, "-q", *extra)
    return out


def test_similar_items_list_takes_ids_as_given(tmp_path):
    """--items splits at commas only: ' 007' is not '007', and the error says why."""
    model = _small_model(tmp_path, "utf-8", "warp")
    result = CliRunner().invoke(main, ["similar", str(model), "--items", "Pokémon Gold, 007", "-k", "2"])
    assert result.exit_code != 0
    assert "item ' 007' is not in the model" in result.output
    assert "did you mean '007'?" in result.output and "Traceback" not in result.output
    out = tmp_path / "similar.tsv"
    run_ok("similar", model, "--items", "Universe Sandbox ,Pokémon Gold,", "-k", 2, "-o", out)
    assert tsv_ids(out, (0,)) == {b"Universe Sandbox ", "Pokémon Gold".encode()}


@pytest.mark.parametrize("ratings, features", [("latin-1", "utf-8"), ("utf-8", "latin-1")])
def test_feature_file_in_another_encoding_than_the_ratings_is_refused(tmp_path, ratings, features):
    items = LATIN1_ITEMS if ratings == "latin-1" else SPECIAL_ITEMS
    feature_file = tmp_path / "f.tsv"
    feature_file.write_bytes("".join(f"{i}\tgenre:Rôle\n" for i in items if i.isascii() or
                                     i.encode(features, "ignore").decode(features) == i).encode(features))
    rows = corpus(LATIN1_USERS, LATIN1_ITEMS) if ratings == "latin-1" else corpus(SPECIAL_USERS, SPECIAL_ITEMS)
    source = tmp_path / "games.csv"
    write_csv(source, rows, ratings, bom=False)
    result = CliRunner().invoke(main, ["train", str(source), "-o", str(tmp_path / "m.npz"), "--model", "hybrid",
                                       "--epochs", "1", "--item-features", str(feature_file)])
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert f"{feature_file}: the item feature file is" in result.output and "iconv" in result.output
    assert not (tmp_path / "m.npz").exists()


def test_hybrid_copies_with_new_ids_keep_the_id_encoding(tmp_path):
    """with_new_users / with_new_items copies (and what they save) still write Latin-1 ids."""
    from mrec_warp.models import load

    features = tmp_path / "f.tsv"
    features.write_bytes("Nouveauté \tgenre:Rôle\nSeñor\tgenre:Rôle\nnouveau Zoë\tgenre:Rôle\n".encode("latin-1"))
    users = tmp_path / "u.tsv"
    users.write_bytes("Zoë\tâge:20\nNöel \tâge:20\n".encode("latin-1"))
    model = load(_small_model(tmp_path, "latin-1", "hybrid", "--item-features", features, "--user-features", users))
    assert model.id_encoding_ == "latin-1"
    for copy in (model.with_new_items(), model.with_new_users(), model.with_new_items(only=True)):
        assert copy.id_encoding_ == "latin-1"
        copy.save(tmp_path / "copy.npz")
        assert load(tmp_path / "copy.npz").id_encoding_ == "latin-1"
    recs = tmp_path / "recs.tsv"
    run_ok("recommend", tmp_path / "hybrid.npz", "-o", recs, "-k", 40, "--include-new-items", "--user-features", users)
    assert "Nöel ".encode("latin-1") in tsv_ids(recs, (0,))
    assert "Nouveauté ".encode("latin-1") in tsv_ids(recs, (1,))


def test_evaluate_items_reads_the_first_field_of_a_csv_feature_file(tmp_path):
    """A quoted comma in the first column of a CSV feature file is part of the id."""
    from mrec_warp.data.id_lines import read_id_list

    path = tmp_path / "items.csv"
    path.write_bytes(b'"Warhammer 40,000",genre:Strategy\r\n"The ""Quoted"" Game",x\r\nPlain ,y\r\nalone\r\n')
    assert read_id_list(path, "item", first_column=True) == [
        "Warhammer 40,000", 'The "Quoted" Game', "Plain ", "alone"]


# -- RFC 4180 quoting with every one-character delimiter -------------------------------------------
#: Ids a book-ratings export quotes: a delimiter inside, a doubled quote, accents, an emoji,
#: a quote in the middle of an id, a leading quote, spaces kept.
QUOTED_USERS = ["276725", "2767;25", "Zoë", "user 🎮"]
QUOTED_ITEMS = ['034545104X', 'a;b|c,d', 'The "Best" Book', "Ça «marche»", '"Quoted" first', "x ", "O'Brien"]


def quoted_export(path: Path, sep: str, crlf: bool = True, bom: bool = True) -> List[tuple]:
    """Every field in double quotes (doubled inside), like the published book-ratings dump:
    ``"User-ID";"ISBN";"Book-Rating"``, CRLF, a byte-order mark, rating 0 among the values."""
    rows = [(u, i, str((k + j) % 6)) for k, u in enumerate(QUOTED_USERS) for j, i in enumerate(QUOTED_ITEMS)]
    end = "\r\n" if crlf else "\n"

    def q(field):
        return '"' + field.replace('"', '""') + '"'

    text = end.join(sep.join(q(f) for f in row) for row in [("User-ID", "ISBN", "Book-Rating")] + rows) + end
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8"))
    return rows


@pytest.mark.parametrize("sep", [";", "\t", "|", ","])
@pytest.mark.parametrize("how", ["sep", "format csv"])
def test_quoted_fields_lose_their_quotes_with_every_delimiter(tmp_path, sep, how):
    """prepare -> train.tsv and the API reader give the ids unquoted, otherwise byte for byte."""
    from mrec_warp.data.ratings import read_ratings

    path = tmp_path / "books.csv"
    rows = quoted_export(path, sep)
    options = ["--sep", sep] if how == "sep" else ["--format", "csv", "--sep", sep]
    run_ok("prepare", path, "-o", tmp_path / "split", "--test-fraction", "0.3", *options)
    written = tsv_ids(tmp_path / "split" / "train.tsv") | tsv_ids(tmp_path / "split" / "test.tsv")
    # train.tsv holds each id as it is; only the one starting with a quote is written quoted
    expected = {x.encode() for r in rows for x in r[:2]} - {b'"Quoted" first'} | {b'"""Quoted"" first"'}
    assert written == expected
    table = read_ratings(path, sep=sep)
    assert list(zip(table["user"], table["item"], table["value"].astype(int).astype(str))) == rows
    # what prepare wrote reads back as the same ids
    back = read_ratings(tmp_path / "split" / "train.tsv")
    assert set(back["item"]) <= set(QUOTED_ITEMS) and '"Quoted" first' in set(back["item"]) | set(
        read_ratings(tmp_path / "split" / "test.tsv")["item"])


def test_quoted_field_spanning_lines_keeps_line_numbers_right(tmp_path):
    """A quoted field with a line break in an unused column: errors still name the right line."""
    from mrec_warp.data.ratings import read_ratings
    from mrec_warp.errors import InputError

    path = tmp_path / "r.txt"
    path.write_text('u;i;5;"a note\nover; two lines"\nv;j;4;x\nw;k;five;y\n', encoding="utf-8")
    with pytest.raises(InputError) as info:
        read_ratings(path, sep=";", header=False)
    assert str(info.value).startswith(f"{path}:4: rating 'five' is not a finite number")
    path.write_text('u;i;5;"a note\nover; two lines"\nv;"j\tk";4;x\n', encoding="utf-8")
    with pytest.raises(InputError, match=r":3: item id 'j\\tk' holds a tab"):
        read_ratings(path, sep=";", header=False)
    for sep in (";", ","):  # pandas counts a quoted field's line breaks out; the message counts them in
        path.write_text(f'u{sep}i{sep}5{sep}"a\nb\n\nc"\n\nv{sep}j{sep}4{sep}x\nw{sep}k{sep}3{sep}y{sep}extra\n',
                        encoding="utf-8")
        with pytest.raises(InputError, match=r"r\.txt:7: expected 4 columns like the first line, found 5"):
            read_ratings(path, sep=sep, header=False)
    path.write_text('u|i|5\nv|"never closed|4\nw|k|3\n', encoding="utf-8")
    with pytest.raises(InputError, match=r":2: a quote opened here is never closed"):
        read_ratings(path, sep="|")


def test_unquoted_fields_keep_their_quotes_and_whitespace_files_have_no_quoting(tmp_path):
    from mrec_warp.data.ratings import read_ratings

    path = tmp_path / "r.tsv"
    path.write_text('O"Brien\tsay "hi"\t1\n u\t "v"\t2\n', encoding="utf-8")
    # a quote that does not start a field is a character; so is one after a space
    assert read_ratings(path)[["user", "item"]].values.tolist() == [['O"Brien', 'say "hi"'], [" u", ' "v"']]
    path.write_text("  u1 caf\u00a0e 5  \nv\t\u00a0i 3\n", encoding="utf-8")
    # whitespace is spaces and tabs, as pandas splits: a no-break space stays in the id
    assert read_ratings(path, sep=r"\s+")[["user", "item"]].values.tolist() == [["u1", "caf\u00a0e"],
                                                                               ["v", "\u00a0i"]]
    path.write_text('"a" "b" 1\n"c" d 2\n', encoding="utf-8")
    assert read_ratings(path, sep=r"\s+")["user"].tolist() == ['"a"', '"c"']
    path.write_text('"a"::"b"::1\n"c"::d::2\n', encoding="utf-8")
    assert read_ratings(path, format="movielens")["user"].tolist() == ['"a"', '"c"']


def test_ids_starting_with_a_quote_round_trip_through_every_tsv_writer(tmp_path):
    """train.tsv, test.tsv and feature files are read back by quoting readers: an id starting
    with a quote is written quoted, every other id as it is."""
    import pandas as pd

    from mrec_warp.data.features import read_features, write_features
    from mrec_warp.data.ratings import read_ratings
    from mrec_warp.data.tsv import write_interactions

    ids = ['"a" b', '"', '""', 'c"d', "plain", '"x\u00e9']
    df = pd.DataFrame({"user": ids, "item": ids[::-1], "value": [1.0] * len(ids)})
    write_interactions(df, tmp_path / "t.tsv")
    lines = (tmp_path / "t.tsv").read_text(encoding="utf-8").splitlines()
    assert lines[0].split("\t")[0] == '"""a"" b"' and lines[3].split("\t")[0] == 'c"d'
    back = read_ratings(tmp_path / "t.tsv")
    assert back["user"].tolist() == ids and back["item"].tolist() == ids[::-1]
    write_features(pd.DataFrame({"id": ids, "feature": ids[::-1], "weight": 1.0}), tmp_path / "f.tsv")
    feats = read_features(tmp_path / "f.tsv", header=False)
    assert feats["id"].tolist() == ids and feats["feature"].tolist() == ids[::-1]


@pytest.mark.parametrize("sep", ["\t", ",", ";"])
def test_text_after_a_closing_quote_is_refused_with_its_line(tmp_path, sep):
    """`"quoted" start`: RFC 4180 ends the field at its closing quote; the parser would glue
    the rest on (the id `quoted start`, which the file does not say): refused with the
    file:line and how to write it, while doubled quotes, unquoted quotes and an unused column
    with such a field read as before."""
    from mrec_warp.data.ratings import read_ratings
    from mrec_warp.errors import InputError

    good = [f'u1{sep}"say ""hi"""{sep}1', f'u2{sep}O"Brien{sep}1', f'"u3"{sep}"x"{sep}1']
    path = tmp_path / "ratings.txt"
    path.write_text("\n".join(good + [f'u4{sep}"quoted" start{sep}1']) + "\n")
    with pytest.raises(InputError, match="column 1 \\(item\\) has text after its closing quote") as caught:
        read_ratings(path, sep=sep)
    assert str(caught.value).startswith(f"{path}:4:") and '""' in str(caught.value)
    result = CliRunner().invoke(main, ["prepare", str(path), "--sep", sep, "-o", str(tmp_path / "out")])
    assert result.exit_code == 2 and f"{path}:4:" in result.output
    path.write_text("\n".join([f"{line}{sep}n" for line in good] + [f'u4{sep}i9{sep}1{sep}"a" note']) + "\n")
    frame = read_ratings(path, sep=sep, columns=[0, 1, 2])  # the fourth column, not used, is not checked
    assert list(frame["item"]) == ['say "hi"', 'O"Brien', "x", "i9"] and list(frame["user"])[2] == "u3"
