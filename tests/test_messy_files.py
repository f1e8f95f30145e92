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

EMOJI_ITEM = "🎮 Zelda: Breath of the Wild"
SPECIAL_ITEMS = [
    "Pokémon Gold", EMOJI_ITEM, "Warhammer 40,000 Dawn of War II", 'The "Quoted" Game',
    "Universe Sandbox ", "Universe Sandbox", "007", "Papers, Please", "Ça marche, «vraiment»",
]
SPECIAL_USERS = ["007", "0070", "Zoë", "user 🎮", "u1 ", "u1", "Ünal, Jr."]

LATIN1_ITEMS = ["Pokémon Gold", "Ça va", "naïve café", "Universe Sandbox ", "007", "Señor"]
LATIN1_USERS = ["Zoë", "José ", "007", "Müller"]


def run(*args) -> str:
    result = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


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

    said = run("prepare", source, "-o", split, "--test-fraction", "0.2")
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
    run("train", train, "-o", model, "--epochs", 2, "--factors", 8, "-q")

    recs_tsv, recs_csv, recs_pq = tmp_path / "recs.tsv", tmp_path / "recs.csv", tmp_path / "recs.parquet"
    for out in (recs_tsv, recs_csv, recs_pq):
        run("recommend", model, "-o", out, "-k", 5, "-q")
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
    said = run("recommend", model, "-o", some, "-k", 3, "--users", users_file)
    assert "1 repeated user id(s) ignored" in said
    assert tsv_ids(some, (0,)) == {u.encode(encoding) for u in chosen}
    assert len(some.read_bytes().splitlines()) == 3 * 3  # three distinct users, not four lists

    # similar: one id per line, commas and trailing spaces are part of the id
    wanted = [i for i in items if "," in i or i.endswith(" ") or "🎮" in i]
    items_file = tmp_path / "items.txt"
    items_file.write_bytes("\n".join(wanted).encode(encoding) + b"\n")
    similar = tmp_path / "similar.tsv"
    run("similar", model, "--items-file", items_file, "-k", 3, "-o", similar)
    assert tsv_ids(similar, (0,)) == {i.encode(encoding) for i in wanted}
    assert tsv_ids(similar, (1,)) <= item_bytes
    if encoding == "utf-8":
        assert EMOJI_ITEM.encode("utf-8") in tsv_ids(similar, (0,))

    per_user = tmp_path / "per_user.csv"
    for recs in (recs_tsv, recs_csv) + ((recs_pq,) if encoding == "utf-8" else ()):
        run("evaluate", "--train", train, "--test", test, "--recs", recs, "-k", 5, "--per-user", per_user, "-q")
        if encoding == "utf-8":
            assert csv_ids(per_user, "utf-8", ("user",)) == tsv_ids(test, (0,))


def test_emoji_id_round_trips_exactly(tmp_path):
    """The emoji item, its quoted-comma and doubled-quote neighbours come back verbatim."""
    rows = corpus(SPECIAL_USERS, SPECIAL_ITEMS)
    source = tmp_path / "games.csv"
    write_csv(source, rows, "utf-8", bom=True)
    run("prepare", source, "-o", tmp_path / "split", "--test-fraction", "0.2", "-q")
    run("train", tmp_path / "split/train.tsv", "-o", tmp_path / "m.npz", "--model", "popularity", "-q")
    out = tmp_path / "recs.csv"
    run("recommend", tmp_path / "m.npz", "-o", out, "-k", 30, "-q")
    text = out.read_bytes().decode("utf-8")
    assert f"{EMOJI_ITEM}," in text
    assert '"The ""Quoted"" Game"' in text  # quoted exactly once, quotes doubled
    assert '"Warhammer 40,000 Dawn of War II"' in text
    assert "\nu1 ," in text and "\nu1," in text  # two users, never merged
    assert "\n007," in text
