"""The synthetic data generator: shape, determinism, skew, tags, and a learnable low rank."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from scipy.sparse.linalg import svds

from mrec_warp.data import synthetic
from mrec_warp.data.ratings import read_ratings
from mrec_warp.data.split import iter_splits
from mrec_warp.data.synthetic import generate, write_synthetic
from mrec_warp.errors import InputError


@pytest.fixture(scope="module")
def sample():
    """The shipped sample's parameters (3000 users, 1500 items, 50k interactions)."""
    return generate(seed=42)


def test_shape_and_columns(sample):
    ratings, tags = sample
    assert list(ratings.columns) == ["user", "item", "value", "timestamp"]
    assert ratings["value"].dtype == np.float64 and ratings["timestamp"].dtype == np.int64
    assert abs(len(ratings) - 50_000) <= 50  # "about" n_interactions: within 0.1%
    assert ratings["user"].nunique() == 3000  # every user has at least one row
    assert ratings["item"].nunique() > 1400  # a few tail items may never be drawn
    assert ratings["user"].str.fullmatch(r"u[1-9]\d*").all()
    assert ratings["item"].str.fullmatch(r"i[1-9]\d*").all()
    assert not ratings.duplicated(["user", "item"]).any()
    assert set(ratings["value"].unique()) == {1.0, 2.0, 3.0, 4.0, 5.0}


def test_same_seed_same_data_other_seed_other_data(sample):
    ratings, tags = sample
    again, tags_again = generate(seed=42)
    pd.testing.assert_frame_equal(ratings, again)
    pd.testing.assert_frame_equal(tags, tags_again)
    other, _ = generate(seed=43)
    assert not ratings[["user", "item"]].equals(other[["user", "item"]])


def test_timestamps_increase_along_each_user(sample):
    ratings, _ = sample
    user_change = ratings["user"].to_numpy()[1:] != ratings["user"].to_numpy()[:-1]
    step = np.diff(ratings["timestamp"].to_numpy())
    assert (step[~user_change] > 0).all()
    assert not ratings["user"].iloc[np.flatnonzero(user_change) + 1].duplicated().any()  # grouped by user
    assert ratings["timestamp"].min() >= synthetic.START_TIME
    assert ratings["timestamp"].max() <= synthetic.START_TIME + synthetic.TIME_SPAN + 1000


def test_item_popularity_is_skewed(sample):
    counts = np.sort(sample[0]["item"].value_counts().to_numpy())[::-1]
    top_tenth = counts[: len(counts) // 10].sum() / counts.sum()
    assert top_tenth > 0.35  # uniform would be 0.10
    assert counts[0] > 20 * np.median(counts)


def test_user_activity_is_log_normal_like(sample):
    per_user = sample[0].groupby("user").size().to_numpy()
    assert per_user.min() >= 1 and per_user.max() > 10 * np.median(per_user)
    logs = np.log(per_user)
    assert 0.6 < logs.std() < 1.4  # sigma of the log-normal is 1
    assert abs(np.mean(logs) - np.median(logs)) < 0.25  # about symmetric in log space


def _topic_labels(tags: pd.DataFrame) -> pd.Series:
    """Each item's most common tag topic (tags are named tag{topic}_{j})."""
    topic = tags["tag"].str.extract(r"tag(\d+)_")[0].astype(int)
    return pd.DataFrame({"item": tags["item"], "topic": topic}).groupby("item")["topic"].agg(lambda s: s.mode().iloc[0])


def test_tags(sample):
    ratings, tags = sample
    assert list(tags.columns) == ["item", "tag"]
    per_item = tags.groupby("item").size()
    assert len(per_item) == 1500 and per_item.between(1, 4).all()
    assert set(per_item.unique()) == {1, 2, 3, 4}
    assert not tags.duplicated().any()
    assert tags["tag"].nunique() == 20 * 5


def test_tags_and_ratings_follow_the_latent_topics(sample):
    ratings, tags = sample
    label = _topic_labels(tags)
    df = ratings.assign(topic=label.reindex(ratings["item"]).to_numpy())
    main = df.groupby("user")["topic"].agg(lambda s: s.mode().iloc[0])
    df["in_main"] = df["topic"].to_numpy() == main.reindex(df["user"]).to_numpy()
    heavy = df.groupby("user")["item"].transform("size") >= 10
    # users concentrate on few topics, and tags reveal those topics (random would be ~1/20)
    assert df.loc[heavy, "in_main"].mean() > 0.4  # measured 0.53 for seed 42
    # ratings are higher for items of a user's main topic
    by_affinity = df.groupby("in_main")["value"].mean()
    assert by_affinity[True] > by_affinity[False] + 0.5


def _precision_at_10(scores: np.ndarray, train: sp.csr_matrix, test: sp.csr_matrix) -> float:
    scores = scores.copy()
    scores[train.nonzero()] = -np.inf
    top = np.argpartition(-scores, 10, axis=1)[:, :10]
    hits = np.take_along_axis(test.toarray(), top, axis=1).sum(axis=1)
    return float(hits.mean() / 10)


def test_low_rank_structure_beats_popularity(sample):
    ratings, _ = sample
    train_df, test_df, _ = next(iter_splits(ratings, test_fraction=0.2, seed=1))
    users = pd.Index(train_df["user"].unique())
    items = pd.Index(train_df["item"].unique())

    def matrix(df):
        return sp.csr_matrix(
            (np.ones(len(df)), (users.get_indexer(df["user"]), items.get_indexer(df["item"]))),
            shape=(len(users), len(items)),
        )

    train, test = matrix(train_df), matrix(test_df)
    active = np.flatnonzero(test.getnnz(axis=1) > 0)
    train, test = train[active], test[active]
    popularity = np.tile(np.asarray(train.sum(axis=0)).ravel(), (len(active), 1))
    u, s, vt = svds(matrix(train_df), k=20, random_state=0)
    low_rank = (u[active] * s) @ vt
    p_pop = _precision_at_10(popularity, train, test)
    p_svd = _precision_at_10(low_rank, train, test)
    assert p_svd > 1.5 * p_pop, (p_svd, p_pop)


def test_write_synthetic_matches_generate(tmp_path):
    info = write_synthetic(tmp_path / "out", n_users=300, n_items=200, n_interactions=4000, seed=5)
    ratings, tags = generate(n_users=300, n_items=200, n_interactions=4000, seed=5)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["item_tags.tsv", "ratings.tsv"]
    back = read_ratings(tmp_path / "out/ratings.tsv")
    pd.testing.assert_frame_equal(back, ratings, check_dtype=False)
    assert (tmp_path / "out/ratings.tsv").read_text().split("\n", 1)[0].count("\t") == 3
    tag_lines = (tmp_path / "out/item_tags.tsv").read_text().splitlines()
    assert tag_lines == [f"{i}\t{t}" for i, t in zip(tags["item"], tags["tag"])]
    assert info["interactions"] == len(ratings) and info["users"] == 300 and info["tags"] == len(tags)


def test_write_synthetic_is_byte_identical(tmp_path):
    for name in ("a", "b"):
        write_synthetic(tmp_path / name, n_users=200, n_items=100, n_interactions=2000, seed=9)
    for f in ("ratings.tsv", "item_tags.tsv"):
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes()


def test_many_chunks(monkeypatch):
    # the streaming path: chunks of users generated one after another
    monkeypatch.setattr(synthetic, "CHUNK_ROWS", 3000)
    ratings, _ = generate(n_users=2000, n_items=500, n_interactions=20_000, seed=1)
    assert abs(len(ratings) - 20_000) <= 20
    assert ratings["user"].nunique() == 2000
    assert not ratings.duplicated(["user", "item"]).any()


def test_heavy_users_are_filled_even_when_their_topics_run_out():
    ratings, _ = generate(n_users=200, n_items=100, n_interactions=5000, n_topics=10, seed=2)
    assert abs(len(ratings) - 5000) <= 5
    assert ratings.groupby("user").size().max() <= 100 // 3


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"n_users": 10, "n_items": 10, "n_interactions": 60}, "do not fit"),
        ({"n_users": 0}, "n_users must be a positive integer"),
        ({"noise": 1.5}, "noise must be between 0 and 1"),
        ({"seed": -3}, "seed must be a non-negative integer"),
    ],
)
def test_bad_parameters(kwargs, message):
    with pytest.raises(InputError, match=message):
        generate(**kwargs)


def test_unknown_option():
    with pytest.raises(TypeError, match="unknown option"):
        generate(colour="blue")
