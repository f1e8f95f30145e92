"""Users the model does not know in a batch: ``recommend --unknown-users refuse|skip|popular``,
``mw.recommend(unknown_users=...)`` and ``recommend_frame(unknown_users=...)`` (issue 33.1).
``serve`` is tested with the other endpoints (tests/test_serve.py)."""
from __future__ import annotations

import random

import numpy as np
import pandas as pd
import pytest

import mrec_warp as mw
from mrec_warp import InputError
from mrec_warp.evaluation.recs_file import read_recs
from mrec_warp.models import Factors

from .conftest import run_strict as run

#: Ids a batch meets: accents, an emoji, spaces, a comma, a quote; two known ones are odd too.
KNOWN = ["Zoë", "u 1", "a,b", "😀 smile", "007", "17850"] + [f"user{n}" for n in range(40)]
ITEMS = ["item 0", "i,1", "ç2", "🍕 pie", "say \"hi\""] + [f"i{n}" for n in range(40)]
NEW = ["new é 😀", "another, one", "  spaced  out", "ünïcode"]
#: A --users file in the order the output must keep: unknown users between known ones.
BATCH = ["Zoë", NEW[0], "u 1", NEW[1], "007", NEW[2], "a,b", NEW[3], "😀 smile"]


def _lines(path):
    return path.read_bytes().decode("utf-8").splitlines()


def _fields(path):
    return [line.split("\t") for line in _lines(path)]


def _users_in_order(rows):
    return list(dict.fromkeys(row[0] for row in rows))


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("unknown")
    rng = random.Random(3)
    train = folder / "train.tsv"
    # item popularity falls with the index, with ties (so the tie order is tested too)
    pairs = [(u, i) for u in KNOWN for i in rng.sample(ITEMS[:25], 6) + rng.sample(ITEMS, 2)]
    train.write_text("".join(f"{u}\t{i}\n" for u, i in dict.fromkeys(pairs)), encoding="utf-8")
    for family in ("warp", "popularity"):
        args = ("--epochs", 3, "--factors", 8, "--seed", 1) if family == "warp" else ()
        assert run("train", train, "-o", folder / f"{family}.npz", "--model", family, "-q", *args).exit_code == 0
    batch = folder / "batch.txt"
    batch.write_text("".join(f"{u}\n" for u in BATCH), encoding="utf-8")
    known = folder / "known.txt"
    known.write_text("".join(f"{u}\n" for u in BATCH if u not in NEW), encoding="utf-8")
    seen = {}
    for u, i in pairs:
        seen.setdefault(u, set()).add(i)
    return {"folder": folder, "train": train, "warp": folder / "warp.npz", "pop": folder / "popularity.npz",
            "batch": batch, "known": known, "seen": seen}


def test_refuse_is_the_default_one_line_and_nothing_written(files, tmp_path):
    out = tmp_path / "recs.tsv"
    for extra in ((), ("--unknown-users", "refuse")):
        result = run("recommend", files["warp"], "-o", out, "--users", files["batch"], *extra)
        assert result.exit_code == 2 and not out.exists()
        lines = [line for line in result.output.splitlines() if line.strip()]
        assert len(lines) == 1, result.output
        assert lines[0].startswith("Error: ") and "batch.txt:2: user 'new é 😀' is not in the model, 4 unknown" in lines[0]
        assert "--unknown-users skip or --unknown-users popular" in lines[0]  # the way out, as flags
    with pytest.raises(InputError, match="'new é 😀' is not in the model"):
        mw.recommend(files["warp"], out, users=files["batch"])
    assert not out.exists()


def test_skip_writes_the_known_users_in_order_and_says_how_many(files, tmp_path):
    out, alone = tmp_path / "recs.tsv", tmp_path / "known.tsv"
    result = run("recommend", files["warp"], "-o", out, "--users", files["batch"], "-k", 4, "--unknown-users", "skip")
    assert result.exit_code == 0, result.output
    assert "note: 4 users of 9 are not in the model and were skipped (--unknown-users skip), e.g. 'new é 😀'" \
        in result.stderr
    assert "wrote" in result.stdout and "20 recommendations for 5 users" in result.stdout
    assert run("recommend", files["warp"], "-o", alone, "--users", files["known"], "-k", 4).exit_code == 0
    assert out.read_bytes() == alone.read_bytes()  # exactly the run of the known users alone
    assert _users_in_order(_fields(out)) == [u for u in BATCH if u not in NEW]
    stage = mw.recommend(files["warp"], tmp_path / "api.tsv", k=4, users=files["batch"], unknown_users="skip")
    assert (stage.rows, stage.users, stage.skipped_users, stage.fallback_users) == (20, 5, 4, 0)
    assert any("were skipped" in note for note in stage.notes)
    assert (tmp_path / "api.tsv").read_bytes() == out.read_bytes()


def _popularity_list(files, tmp_path, k):
    """The list a popularity model trained on the same file gives a user it never saw."""
    stranger = tmp_path / "stranger.txt"
    stranger.write_text("somebody new\n")
    out = tmp_path / "pop.tsv"
    assert run("recommend", files["pop"], "-o", out, "--users", stranger, "-k", k).exit_code == 0
    return [row[1:] for row in _fields(out)]


def test_popular_marks_the_fallback_rows_with_the_popularity_order(files, tmp_path):
    out, skipped = tmp_path / "recs.tsv", tmp_path / "skip.tsv"
    result = run("recommend", files["warp"], "-o", out, "--users", files["batch"], "-k", 5, "--unknown-users", "popular")
    assert result.exit_code == 0, result.output
    assert "note: 4 users of 9 are not in the model: they get its most popular training items, marked 'popular' " \
           "in the 'source' column" in result.stderr
    rows = _fields(out)
    assert all(len(row) == 5 for row in rows) and _users_in_order(rows) == BATCH  # ids byte for byte, in order
    popular = [row for row in rows if row[4] == "popular"]
    assert {row[0] for row in popular} == set(NEW) and {row[4] for row in rows} == {"personal", "popular"}
    expected = _popularity_list(files, tmp_path, 5)
    for user in NEW:
        assert [row[1:4] for row in popular if row[0] == user] == expected
    counts = pd.read_csv(files["train"], sep="\t", header=None, names=["u", "i"], dtype=str, keep_default_na=False,
                         quoting=3).groupby("i")["u"].nunique()
    assert [float(score) for _, score, _ in expected] == sorted(counts, reverse=True)[:5]
    # the known users' rows are their own lists, never a seen item
    assert run("recommend", files["warp"], "-o", skipped, "--users", files["batch"], "-k", 5,
               "--unknown-users", "skip").exit_code == 0
    personal = [row for row in rows if row[4] == "personal"]
    assert [row[:2] + row[3:4] for row in personal] == [row[:2] + row[3:4] for row in _fields(skipped)]
    assert not any(row[1] in files["seen"][row[0]] for row in personal)
    stage = mw.recommend(files["warp"], tmp_path / "api.tsv", k=5, users=files["batch"], unknown_users="popular")
    assert (stage.users, stage.skipped_users, stage.fallback_users) == (9, 0, 4)
    assert (tmp_path / "api.tsv").read_bytes() == out.read_bytes()


def test_popular_is_the_same_in_every_format_and_on_part_files(files, tmp_path):
    base = ("recommend", files["warp"], "--users", files["batch"], "-k", 3, "--unknown-users", "popular", "-q")
    assert run(*base, "-o", tmp_path / "a.tsv").exit_code == 0
    parts = run(*base, "-o", tmp_path / "b.tsv", "--backend", "processes", "--n-jobs", 2, "--part-size", 2)
    assert parts.exit_code == 0, parts.output
    assert (tmp_path / "a.tsv").read_bytes() == (tmp_path / "b.tsv").read_bytes()
    assert run(*base, "-o", tmp_path / "a.csv").exit_code == 0
    assert run(*base, "-o", tmp_path / "b.csv", "--workdir", tmp_path / "parts", "--part-size", 3).exit_code == 0
    assert (tmp_path / "a.csv").read_bytes() == (tmp_path / "b.csv").read_bytes()
    table = pd.read_csv(tmp_path / "a.csv", dtype=str, keep_default_na=False)
    assert list(table.columns) == ["user", "item", "score", "rank", "source"]
    assert table["user"].drop_duplicates().tolist() == BATCH  # "another, one" quoted, not split
    pytest.importorskip("pyarrow")
    assert run(*base, "-o", tmp_path / "a.parquet").exit_code == 0
    parquet = pd.read_parquet(tmp_path / "a.parquet")
    assert parquet["source"].tolist() == table["source"].tolist() and parquet["user"].tolist() == table["user"].tolist()


def test_a_history_beats_the_fallback(files, tmp_path):
    history = tmp_path / "history.tsv"
    history.write_text(f"{NEW[0]}\titem 0\n{NEW[0]}\ti,1\n", encoding="utf-8")
    out = tmp_path / "recs.tsv"
    result = run("recommend", files["warp"], "-o", out, "--users", files["batch"], "-k", 6,
                 "--unknown-users", "popular", "--history", history)
    assert result.exit_code == 0, result.output
    rows = _fields(out)
    folded = [row for row in rows if row[0] == NEW[0]]
    assert {row[4] for row in folded} == {"personal"}  # folded in, not a fallback
    assert not {"item 0", "i,1"} & {row[1] for row in folded}  # its history is excluded
    assert {row[0] for row in rows if row[4] == "popular"} == set(NEW[1:])
    assert "3 users of 9 are not in the model" in result.stderr


def test_a_train_file_naming_a_new_user_excludes_its_items_from_the_fallback(files, tmp_path):
    top = _popularity_list(files, tmp_path, 3)[0][0]
    train = tmp_path / "train.tsv"
    train.write_text(files["train"].read_text(encoding="utf-8") + f"{NEW[1]}\t{top}\n", encoding="utf-8")
    out = tmp_path / "recs.tsv"
    assert run("recommend", files["warp"], "-o", out, "--users", files["batch"], "-k", 3, "--unknown-users", "popular",
               "--train", train, "-q").exit_code == 0
    lists = {user: [row[1] for row in _fields(out) if row[0] == user] for user in NEW}
    assert top not in lists[NEW[1]] and top == lists[NEW[0]][0]


def test_a_known_id_written_otherwise_is_refused_not_given_the_fallback(files, tmp_path):
    users = tmp_path / "users.txt"
    users.write_text("Zoë\n17850.0\n", encoding="utf-8")
    out = tmp_path / "recs.tsv"
    result = run("recommend", files["warp"], "-o", out, "--users", users, "--unknown-users", "popular")
    assert result.exit_code == 2 and not out.exists()
    assert "users.txt:2: user '17850.0' is not in the model (did you mean '17850'?)" in result.output
    skipped = run("recommend", files["warp"], "-o", out, "--users", users, "--unknown-users", "skip")
    assert skipped.exit_code == 0 and "e.g. '17850.0' (did you mean '17850'?)" in skipped.stderr
    with pytest.raises(InputError, match=r"user '17850.0' is not in the model \(did you mean '17850'\?\)"):
        mw.load(files["warp"]).recommend_frame(["17850.0"], unknown_users="popular")


def test_popular_without_users_adds_the_column_and_changes_nothing_else(files, tmp_path):
    plain, marked = tmp_path / "plain.tsv", tmp_path / "marked.tsv"
    assert run("recommend", files["warp"], "-o", plain, "-k", 2, "-q").exit_code == 0
    assert run("recommend", files["warp"], "-o", marked, "-k", 2, "-q", "--unknown-users", "popular").exit_code == 0
    assert [line + "\tpersonal" for line in _lines(plain)] == _lines(marked)


def test_a_popularity_model_still_serves_new_users_by_default_and_skips_them_on_request(files, tmp_path):
    out = tmp_path / "recs.tsv"
    assert run("recommend", files["pop"], "-o", out, "--users", files["batch"], "-q").exit_code == 0
    assert _users_in_order(_fields(out)) == BATCH and all(len(row) == 4 for row in _fields(out))
    assert run("recommend", files["pop"], "-o", out, "--users", files["batch"], "-q",
               "--unknown-users", "skip").exit_code == 0
    assert _users_in_order(_fields(out)) == [u for u in BATCH if u not in NEW]


def test_recommend_frame_gives_the_lists_the_command_writes(files, tmp_path):
    model = mw.load(files["warp"])
    with pytest.raises(InputError, match="not known to the model"):
        model.recommend_frame(BATCH)
    out = tmp_path / "recs.tsv"
    assert run("recommend", files["warp"], "-o", out, "--users", files["batch"], "-k", 5,
               "--unknown-users", "popular", "-q").exit_code == 0
    written = pd.DataFrame(_fields(out), columns=["user", "item", "score", "rank", "source"])
    frame = model.recommend_frame(BATCH, k=5, unknown_users="popular")
    assert list(frame.columns) == ["user", "item", "score", "rank", "source"]
    for column in ("user", "item", "source"):
        assert frame[column].tolist() == written[column].tolist()
    assert frame["rank"].tolist() == written["rank"].astype(int).tolist()
    np.testing.assert_allclose(frame["score"], written["score"].astype(float), rtol=1e-5)
    skipped = model.recommend_frame(BATCH, k=5, unknown_users="skip")
    assert skipped.attrs["skipped_users"] == 4 and skipped["user"].drop_duplicates().tolist() == [
        u for u in BATCH if u not in NEW]
    assert skipped.equals(model.recommend_frame([u for u in BATCH if u not in NEW], k=5))
    # one id, and only unknown ones; an item filtered for everyone is filtered from the fallback too
    top = frame.loc[frame["user"] == NEW[0], "item"].iloc[0]
    alone = model.recommend_frame(NEW[0], k=5, unknown_users="popular", filter_items=[top])
    assert top not in alone["item"].tolist() and set(alone["source"]) == {"popular"}
    assert model.recommend_frame(NEW, k=5, unknown_users="skip").empty
    with pytest.raises(InputError, match="`unknown_users` must be one of refuse, skip, popular, got 'maybe'"):
        model.recommend_frame(BATCH, unknown_users="maybe")
    assert model.n_users == len(KNOWN)  # nothing was added to the model


def test_a_model_without_training_interactions_has_no_fallback(tmp_path):
    rng = np.random.default_rng(0)
    model = Factors.from_arrays(rng.normal(size=(3, 2)), rng.normal(size=(4, 2)), ["a", "b", "c"],
                                ["w", "x", "y", "z"])
    path = tmp_path / "factors.npz"
    model.save(path)
    users = tmp_path / "users.txt"
    users.write_text("a\nnew\n")
    result = run("recommend", path, "-o", tmp_path / "r.tsv", "--users", users, "--unknown-users", "popular")
    assert result.exit_code == 2
    assert "stores no training interactions, so it has no popular items for the 1 users it does not know" \
        in result.output and "--unknown-users skip" in result.output
    with pytest.raises(InputError, match="stores no training interactions"):
        model.recommend_frame(["a", "new"], unknown_users="popular")
    result = run("recommend", path, "-o", tmp_path / "r.tsv", "--users", users, "--unknown-users", "skip", "-q")
    assert result.exit_code == 0 and _users_in_order(_fields(tmp_path / "r.tsv")) == ["a"]


def test_evaluate_reads_a_file_with_the_source_column(files, tmp_path):
    out = tmp_path / "recs.tsv"
    assert run("recommend", files["warp"], "-o", out, "--users", files["batch"], "-k", 3, "--unknown-users", "popular",
               "-q").exit_code == 0
    recs = read_recs(out)
    assert recs["user"].drop_duplicates().tolist() == BATCH and recs["rank"].tolist() == [1.0, 2.0, 3.0] * len(BATCH)


def test_items_known_by_their_features_alone_have_no_training_user_in_the_fallback(files, tmp_path):
    features = tmp_path / "items.tsv"
    features.write_text("".join(f"{item}\tgenre:{n % 3}\n" for n, item in enumerate(ITEMS)), encoding="utf-8")
    model = tmp_path / "hybrid.npz"
    assert run("train", files["train"], "-o", model, "--model", "hybrid", "--item-features", features, "--epochs", 2,
               "--factors", 4, "-q").exit_code == 0
    extended = tmp_path / "more_items.tsv"
    extended.write_text(features.read_text(encoding="utf-8") + "brand new\tgenre:1\n", encoding="utf-8")
    out = tmp_path / "recs.tsv"
    result = run("recommend", model, "-o", out, "--users", files["batch"], "-k", 5, "--unknown-users", "popular",
                 "--item-features", extended, "--include-new-items", "-q")
    assert result.exit_code == 0, result.output
    expected = _popularity_list(files, tmp_path, 5)
    for user in NEW:
        assert [row[1:4] for row in _fields(out) if row[0] == user] == expected


def test_recommend_frame_refusal_names_the_way_out():
    """The default refusal of ``recommend_frame`` says which argument lets unknown users through."""
    rows = [("a", "x"), ("a", "y"), ("b", "y"), ("b", "z"), ("c", "x")]
    model = mw.ItemKNN().fit(mw.Interactions.from_dataframe(pd.DataFrame(rows, columns=["user", "item"])))
    with pytest.raises(InputError) as info:
        model.recommend_frame(["a", "newcomer"], k=2)
    assert "'newcomer'" in str(info.value)
    assert 'unknown_users="skip"' in str(info.value) and 'unknown_users="popular"' in str(info.value)
