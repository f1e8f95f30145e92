"""Feature tables of known datasets: MovieLens 100k side files, a synth folder's item tags."""
from __future__ import annotations

from mrec_warp.data.side_features import (
    age_bucket, movielens_item_features, movielens_user_features, side_features, year_bucket,
)
from mrec_warp.stages.prepare import prepare


def test_buckets():
    assert [year_bucket(y) for y in (1922, 1955, 1989, 1991, 1995)] == ["<1950", "1950s", "1980s", "1990-92", "1995"]
    assert [age_bucket(a) for a in (7, 18, 24, 25, 49, 56, 73)] == ["<18", "18-24", "18-24", "25-34", "45-49", "56+", "56+"]


def test_movielens_100k_features(ml100k_dir):
    items = movielens_item_features(ml100k_dir / "u.item")
    assert items["id"].nunique() == 1682
    toy = set(items.loc[items["id"] == "1", "feature"])
    assert toy == {"genre:Animation", "genre:Children's", "genre:Comedy", "year:1995"}
    assert items["feature"].str.startswith("genre:").sum() > 2800
    users = movielens_user_features(ml100k_dir / "u.user")
    assert set(users.loc[users["id"] == "1", "feature"]) == {"age:18-24", "gender:M", "occupation:technician"}
    assert users["id"].nunique() == 943 and len(users) == 3 * 943
    found = side_features(ml100k_dir / "u.data")
    assert sorted(found) == ["item_features.tsv", "user_features.tsv"]


def test_synthetic_tags_become_item_features(tmp_path):
    from mrec_warp.data.synthetic import write_synthetic

    write_synthetic(tmp_path, n_users=50, n_items=40, n_interactions=300, seed=1)
    found = side_features(tmp_path / "ratings.tsv")
    assert list(found) == ["item_features.tsv"]
    tags = found["item_features.tsv"]
    assert tags["feature"].str.startswith("tag:tag").all() and tags["id"].nunique() == 40


def test_prepare_features_from_item_tags_keep_their_bytes(tmp_path):
    """``prepare --features`` beside a synth-style folder: item_features.tsv in the input's encoding."""
    for encoding in ("utf-8", "latin-1"):
        folder = tmp_path / encoding
        folder.mkdir()
        ratings = "".join(f"u{u}\tCafé {i} \t1\n" for u in range(6) for i in range(5))
        (folder / "ratings.tsv").write_bytes(ratings.encode(encoding))
        tags = "".join(f"Café {i} \tRôle {i % 2} \n" for i in range(5))
        (folder / "item_tags.tsv").write_bytes(tags.encode(encoding))
        prepare(folder / "ratings.tsv", folder / "out", test_fraction=0.2, features=True)
        written = (folder / "out" / "item_features.tsv").read_bytes()
        assert written == "".join(f"Café {i} \ttag:Rôle {i % 2} \n" for i in range(5)).encode(encoding)
