"""Synthetic implicit-feedback data with a known low-rank structure.

The generative story, chosen so that a factorisation model has something to find and a
popularity baseline does not find it all:

* ``n_topics`` latent topics; every item belongs to one (round-robin over a shuffle, so
  topics have about equal numbers of items) and has a Zipf popularity
  ``1 / rank ** zipf_exponent`` with ranks shuffled across topics.
* Every user holds a sparse mixture over topics, ``theta ~ Dirichlet(concentration * m)``,
  where ``m`` makes some topics more popular than others; a small total concentration
  puts most users on one to three topics.
* A user's number of interactions is log-normal (a few heavy users, many light ones),
  scaled so the total is about ``n_interactions``.
* Each interaction draws a topic from the user's mixture, then an item of that topic by
  popularity; with probability ``noise`` it draws an item by global popularity instead.
  Repeated (user, item) draws are dropped and drawn again, so rows are unique pairs; a
  heavy user whose topics run out of items is topped up from global popularity.
* Ratings 1-5 grow with affinity (the user's weight on the item's topic), plus an item
  quality, a user bias and noise; timestamps increase along each user's rows.
* With ``values="counts"`` the value is a play count instead of a rating:
  ``1 + Poisson(count_scale * affinity * LogNormal(0, 0.7))``. Items of the user's own
  topics get large counts, the stray draws of ``noise`` (mostly outside them) counts near
  1, so a count says how likely the user is to come back to the item's topic: the held-out
  items of a split are mostly topical, and a model that trusts big counts more finds them.
* Items get 1-4 tags, each from its topic's vocabulary (``tag{topic}_{j}``) with
  probability ``1 - tag_noise``, otherwise any tag.

Ids are strings: users ``u1``..``uN`` and items ``i1``..``iM``, so they cannot be mistaken
for positions. Rows come grouped by user, users in order; memory and time are
O(interactions), and :func:`write_synthetic` streams chunks of about a million rows, so 20M
interactions take about a minute.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterator, Optional, Tuple

import numpy as np
import pandas as pd

from ..errors import InputError
from ..files import PathLike, atomic_write
from ..memory import check_memory
from ..progress import SILENT, Progress
from ..seeds import DEFAULT_SEED

#: Timestamps start on 2015-01-01 and span about five years.
START_TIME = 1_420_070_400
TIME_SPAN = 5 * 365 * 86_400
#: Rows generated (and written) at a time; bounds memory at any scale.
CHUNK_ROWS = 1_000_000
#: Draw rounds per chunk; each round re-draws what duplicates took away.
MAX_ROUNDS = 8
#: What the third column holds: 1-5 ratings, or play counts whose size carries signal.
VALUES = ("ratings", "counts")


@dataclass(frozen=True)
class SyntheticConfig:
    """Parameters of the generator (see the module docstring for what each one does)."""

    n_users: int = 3000
    n_items: int = 1500
    n_interactions: int = 50_000
    n_topics: int = 20
    concentration: float = 0.5
    zipf_exponent: float = 1.0
    activity_sigma: float = 1.0
    noise: float = 0.1
    tags_per_topic: int = 5
    tag_noise: float = 0.15
    values: str = "ratings"
    count_scale: float = 20.0
    seed: int = DEFAULT_SEED

    def check(self) -> None:
        for name in ("n_users", "n_items", "n_interactions", "n_topics", "tags_per_topic"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise InputError(f"{name} must be a positive integer, got {value!r}")
        if self.n_users * self.n_items >= 2**63:  # a (user, item) pair is one int64 key
            raise InputError(f"{self.n_users:,} users x {self.n_items:,} items are more pairs than 2**63",
                             hint="lower `n_users` or `n_items`")
        # the world holds about a dozen float64/int64 arrays per item and a few per user,
        # and a chunk about 20 arrays of CHUNK_ROWS rows: checked before any is drawn
        need = 96.0 * self.n_items + 32.0 * self.n_users + 160.0 * min(CHUNK_ROWS, self.n_interactions)
        check_memory(need, f"{self.n_items:,} items and {self.n_users:,} users",
                     "n_items" if self.n_items >= self.n_users else "n_users")
        if self.n_interactions > self.n_users * self.n_items // 2:
            raise InputError(
                f"{self.n_interactions:,} interactions do not fit {self.n_users:,} users x {self.n_items:,} items",
                hint="ask for at most half of users x items, or more users / items",
            )
        for name in ("noise", "tag_noise"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise InputError(f"{name} must be between 0 and 1, got {getattr(self, name)!r}")
        if self.values not in VALUES:
            raise InputError(f"values must be one of {', '.join(VALUES)}, got {self.values!r}")
        for name in ("concentration", "zipf_exponent", "activity_sigma", "count_scale"):
            if not getattr(self, name) > 0:
                raise InputError(f"{name} must be positive, got {getattr(self, name)!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, (int, np.integer)) or self.seed < 0:
            raise InputError(f"seed must be a non-negative integer, got {self.seed!r}")


@dataclass
class _World:
    """Everything about items and users that is drawn once, before any interaction."""

    item_topic: np.ndarray  # topic of each item
    topic_items: np.ndarray  # items grouped by topic
    topic_cum: np.ndarray  # k + cumulative popularity within topic k, per topic_items entry
    global_cum: np.ndarray  # cumulative global popularity over items
    item_quality: np.ndarray
    topic_prior: np.ndarray  # Dirichlet parameters of user mixtures
    activity: np.ndarray  # interactions per user


def _build_world(cfg: SyntheticConfig, rng: np.random.Generator) -> _World:
    k = min(cfg.n_topics, cfg.n_items)
    item_topic = rng.permutation(np.arange(cfg.n_items) % k)
    popularity = 1.0 / (rng.permutation(cfg.n_items) + 1.0) ** cfg.zipf_exponent

    topic_items = np.argsort(item_topic, kind="stable")
    topic_of = item_topic[topic_items]
    weights = popularity[topic_items]
    # cumulative popularity inside each topic, normalised to (0, 1], offset by the topic
    cum = np.cumsum(weights)
    seg_start = np.searchsorted(topic_of, np.arange(k))
    before = np.r_[0.0, cum][seg_start][topic_of]
    total = np.add.reduceat(weights, seg_start)[topic_of]
    within = (cum - before) / total
    within[np.r_[seg_start[1:] - 1, len(within) - 1]] = 1.0  # exact ends: no spill-over
    topic_cum = topic_of + within

    global_cum = np.cumsum(popularity) / popularity.sum()
    global_cum[-1] = 1.0
    topic_weight = 1.0 / (np.arange(k) + 1.0) ** 0.7
    topic_prior = cfg.concentration * topic_weight / topic_weight.sum()
    return _World(
        item_topic=item_topic, topic_items=topic_items, topic_cum=topic_cum, global_cum=global_cum,
        item_quality=rng.normal(0.0, 0.4, cfg.n_items), topic_prior=topic_prior,
        activity=_activity(cfg, rng),
    )


def _activity(cfg: SyntheticConfig, rng: np.random.Generator) -> np.ndarray:
    """Log-normal interactions per user, at least 1, at most a third of the items, summing to ~n."""
    raw = rng.lognormal(0.0, cfg.activity_sigma, cfg.n_users)
    cap = max(1, cfg.n_items // 3)
    scale = cfg.n_interactions / raw.sum()
    for _ in range(30):  # clipping moves the total; a few fixed-point steps put it back
        counts = np.clip(np.floor(raw * scale + 0.5), 1, cap)
        if abs(counts.sum() - cfg.n_interactions) <= 0.001 * cfg.n_interactions:
            break
        scale *= cfg.n_interactions / counts.sum()
    return counts.astype(np.int64)


def _draw_items(world: _World, theta: np.ndarray, user: np.ndarray, noise: float, rng: np.random.Generator) -> np.ndarray:
    """One item per entry of ``user`` (chunk-local indices into ``theta``)."""
    k = theta.shape[1]
    # topic: offset each user's cumulative mixture by its row so one searchsorted serves all
    cum = np.cumsum(theta, axis=1)
    cum[:, -1] = 1.0
    flat = (cum + np.arange(len(theta))[:, None]).ravel()
    topic = np.searchsorted(flat, user + rng.random(len(user)), side="right") - user * k
    topic = np.minimum(topic, k - 1)
    item = world.topic_items[np.searchsorted(world.topic_cum, topic + rng.random(len(user)), side="right")]
    stray = rng.random(len(user)) < noise
    item[stray] = np.searchsorted(world.global_cum, rng.random(int(stray.sum())), side="right")
    return item


def _first_unique(user: np.ndarray, item: np.ndarray, n_items: int) -> np.ndarray:
    """Mask of the first occurrence of each (user, item) pair, in the given order."""
    key = user.astype(np.int64) * n_items + item
    _, first = np.unique(key, return_index=True)
    keep = np.zeros(len(key), dtype=bool)
    keep[first] = True
    return keep


def _chunk_interactions(
    cfg: SyntheticConfig, world: _World, lo: int, hi: int, rng: np.random.Generator
) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(user, item, rating, timestamp) for users ``lo..hi-1``, grouped by user, in time order."""
    n_users = hi - lo
    theta = rng.dirichlet(world.topic_prior, n_users)
    want = world.activity[lo:hi]
    user = np.empty(0, dtype=np.int64)
    item = np.empty(0, dtype=np.int64)
    short = want.copy()
    for round_ in range(MAX_ROUNDS):
        # over-draw a little: duplicates will be thrown away
        extra = np.ceil(short * 1.2 * 2.0 ** max(0, round_ - 2)).astype(np.int64) + (short > 0)
        new_user = np.repeat(np.arange(n_users), extra)
        # A heavy user can exhaust the few items of their topics: late rounds fill the rest
        # more and more from global popularity, so the total stays close to what was asked.
        noise = cfg.noise if round_ < MAX_ROUNDS // 2 else max(cfg.noise, (round_ + 1.0) / MAX_ROUNDS)
        new_item = _draw_items(world, theta, new_user, noise, rng)
        user, item = np.r_[user, new_user], np.r_[item, new_item]
        keep = _first_unique(user, item, cfg.n_items)
        user, item = user[keep], item[keep]
        # keep the first `want` rows of each user, in draw order
        order = np.argsort(user, kind="stable")
        user, item = user[order], item[order]
        have = np.bincount(user, minlength=n_users)
        rank = np.arange(len(user)) - (np.cumsum(have) - have)[user]
        keep = rank < want[user]
        user, item = user[keep], item[keep]
        short = want - np.bincount(user, minlength=n_users)
        if not short.any():
            break
    value_of = _counts if cfg.values == "counts" else _ratings
    return user + lo, item, value_of(cfg, world, theta, user, item, rng), _timestamps(user, n_users, rng)


def _ratings(cfg: SyntheticConfig, world: _World, theta: np.ndarray, user: np.ndarray, item: np.ndarray,
             rng: np.random.Generator) -> np.ndarray:
    """1-5 stars that grow with the user's weight on the item's topic."""
    affinity = theta[user, world.item_topic[item]]
    user_bias = rng.normal(0.0, 0.4, len(theta))[user]
    mean = 2.2 + 2.6 * np.sqrt(affinity) + world.item_quality[item] + user_bias
    return np.clip(np.floor(mean + rng.normal(0.0, 0.7, len(user)) + 0.5), 1, 5).astype(np.int64)


def _counts(cfg: SyntheticConfig, world: _World, theta: np.ndarray, user: np.ndarray, item: np.ndarray,
            rng: np.random.Generator) -> np.ndarray:
    """Play counts >= 1 whose mean grows with the user's weight on the item's topic."""
    affinity = theta[user, world.item_topic[item]]
    mean = cfg.count_scale * affinity * rng.lognormal(0.0, 0.7, len(user))
    return 1 + rng.poisson(mean).astype(np.int64)


def _timestamps(user: np.ndarray, n_users: int, rng: np.random.Generator) -> np.ndarray:
    """Increasing times along each user's rows, within that user's active period."""
    start = rng.uniform(0.0, 0.7, n_users) * TIME_SPAN
    length = rng.uniform(0.05, 1.0, n_users) * (TIME_SPAN - start)
    count = np.bincount(user, minlength=n_users)
    # sorted uniform points = normalised cumulative sums of exponential gaps
    gaps = rng.exponential(1.0, len(user))
    cum = np.cumsum(gaps)
    group_end = np.cumsum(count)
    base = np.r_[0.0, cum][group_end - count][user]
    total = (cum[group_end - 1] - np.r_[0.0, cum][group_end - count])[user] + rng.exponential(1.0, n_users)[user]
    offset = (cum - base) / total * length[user]
    rank = np.arange(len(user)) - (group_end - count)[user]
    # + rank keeps them strictly increasing even when a long history is squeezed into a day
    return START_TIME + (start[user] + offset).astype(np.int64) + rank


def _chunks(world: _World) -> Iterator[Tuple[int, int]]:
    """User ranges of about CHUNK_ROWS interactions each."""
    cum = np.cumsum(world.activity)
    cuts = np.searchsorted(cum, np.arange(CHUNK_ROWS, cum[-1], CHUNK_ROWS), side="right")
    bounds = np.unique(np.r_[0, cuts, len(cum)])
    yield from zip(bounds[:-1].tolist(), bounds[1:].tolist())


def _seeds(cfg: SyntheticConfig) -> Tuple[np.random.SeedSequence, ...]:
    """Independent streams for the world, the users and the tags."""
    return tuple(np.random.SeedSequence(int(cfg.seed)).spawn(3))


def _iter_chunks(cfg: SyntheticConfig, world: _World, progress: Progress) -> Iterator[Tuple[np.ndarray, ...]]:
    ranges = list(_chunks(world))
    seqs = _seeds(cfg)[1].spawn(len(ranges))
    for (lo, hi), seq in progress.iterate(zip(ranges, seqs), total=len(ranges), desc="users", unit="chunk"):
        yield _chunk_interactions(cfg, world, lo, hi, np.random.default_rng(seq))


def _item_tags(cfg: SyntheticConfig, world: _World) -> Tuple[np.ndarray, np.ndarray]:
    """(item, tag index) pairs: 1-4 distinct tags per item, mostly from its topic."""
    rng = np.random.default_rng(_seeds(cfg)[2])
    k, per = int(world.item_topic.max()) + 1, cfg.tags_per_topic
    n_tags = rng.integers(1, 5, cfg.n_items)
    item = np.repeat(np.arange(cfg.n_items), n_tags)
    tag = world.item_topic[item] * per + rng.integers(0, per, len(item))
    stray = rng.random(len(item)) < cfg.tag_noise
    tag[stray] = rng.integers(0, k * per, int(stray.sum()))
    keep = _first_unique(item, tag, k * per)
    return item[keep], tag[keep]


def _world(cfg: SyntheticConfig) -> _World:
    cfg.check()
    return _build_world(cfg, np.random.default_rng(_seeds(cfg)[0]))


def _tag_names(tag: np.ndarray, per: int) -> np.ndarray:
    return np.array([f"tag{t // per}_{t % per}" for t in range(int(tag.max()) + 1)], dtype=object)[tag]


def _ids(prefix: str, codes: np.ndarray) -> pd.Series:
    return prefix + pd.Series(codes + 1, dtype=np.int64).astype(str)


# -- public API -------------------------------------------------------------------------------
def generate(
    n_users: int = 3000,
    n_items: int = 1500,
    n_interactions: int = 50_000,
    n_topics: int = 20,
    seed: int = DEFAULT_SEED,
    progress: Optional[Progress] = None,
    **options: Any,
) -> Tuple[pd.DataFrame, pd.DataFrame]:
    """Generate ratings and item tags in memory.

    Parameters
    ----------
    n_users, n_items : int
        Sizes of the id spaces (users ``u1..``, items ``i1..``); rare items may get no rows.
    n_interactions : int
        About how many unique (user, item) rows to make (within a fraction of a percent
        unless users ask for more items than their topics can offer).
    n_topics : int
        Rank of the latent structure.
    seed : int
        Same seed, same data, whatever the platform.
    **options
        Other fields of :class:`SyntheticConfig` (``concentration``, ``zipf_exponent``,
        ``activity_sigma``, ``noise``, ``tags_per_topic``, ``tag_noise``, ``values``:
        ``"ratings"`` (default) or ``"counts"``, ``count_scale``).

    Returns
    -------
    ratings : pandas.DataFrame
        ``user``, ``item`` (str), ``value`` (float64: 1-5, or counts >= 1), ``timestamp`` (int64).
    item_tags : pandas.DataFrame
        ``item``, ``tag`` (str), one row per (item, tag).
    """
    cfg = _config(n_users, n_items, n_interactions, n_topics, seed, options)
    world = _world(cfg)
    parts = list(_iter_chunks(cfg, world, progress or SILENT))
    user, item, rating, stamp = (np.concatenate(p) for p in zip(*parts))
    ratings = pd.DataFrame({
        "user": _ids("u", user), "item": _ids("i", item),
        "value": rating.astype(np.float64), "timestamp": stamp,
    })
    tag_item, tag = _item_tags(cfg, world)
    tags = pd.DataFrame({"item": _ids("i", tag_item), "tag": _tag_names(tag, cfg.tags_per_topic)})
    tags["tag"] = tags["tag"].astype(str)
    return ratings, tags


def write_synthetic(
    outdir: PathLike,
    n_users: int = 3000,
    n_items: int = 1500,
    n_interactions: int = 50_000,
    n_topics: int = 20,
    seed: int = DEFAULT_SEED,
    progress: Optional[Progress] = None,
    **options: Any,
) -> Dict[str, Any]:
    """Write ``ratings.tsv`` and ``item_tags.tsv`` into ``outdir``, streaming in chunks.

    ``ratings.tsv`` is headerless ``user<TAB>item<TAB>rating<TAB>timestamp`` (the third
    column a play count with ``values="counts"``), grouped by
    user with increasing timestamps; ``item_tags.tsv`` is headerless ``item<TAB>tag``. Both
    are written atomically. Parameters are those of :func:`generate`.

    Returns
    -------
    dict
        The paths written and the numbers of rows, users and items.
    """
    progress = progress or SILENT
    cfg = _config(n_users, n_items, n_interactions, n_topics, seed, options)
    outdir = Path(outdir)
    world = _world(cfg)
    rows, users, items_seen = 0, 0, np.zeros(cfg.n_items, dtype=bool)
    with atomic_write(outdir / "ratings.tsv") as fh:
        for user, item, rating, stamp in _iter_chunks(cfg, world, progress):
            # str.format over Python ints beats pandas.to_csv by ~2x for four int columns
            fh.write("".join(map("u{}\ti{}\t{}\t{}\n".format, (user + 1).tolist(), (item + 1).tolist(),
                                 rating.tolist(), stamp.tolist())))
            rows += len(user)
            users += len(np.unique(user))
            items_seen[item] = True
            progress.log(f"{rows:,} interactions written")
    tag_item, tag = _item_tags(cfg, world)
    names = _tag_names(tag, cfg.tags_per_topic)
    with atomic_write(outdir / "item_tags.tsv") as fh:
        fh.write("".join(f"i{i}\t{t}\n" for i, t in zip((tag_item + 1).tolist(), names.tolist())))
    return {
        "ratings": str(outdir / "ratings.tsv"), "item_tags": str(outdir / "item_tags.tsv"),
        "interactions": rows, "users": users, "items": int(items_seen.sum()), "tags": int(len(tag)),
        "config": cfg.__dict__.copy(),
    }


def _config(n_users: int, n_items: int, n_interactions: int, n_topics: int, seed: int, options: Dict[str, Any]) -> SyntheticConfig:
    unknown = set(options) - set(SyntheticConfig.__dataclass_fields__)
    if unknown:
        raise TypeError(f"unknown option(s): {', '.join(sorted(unknown))}")
    return SyntheticConfig(n_users=n_users, n_items=n_items, n_interactions=n_interactions,
                           n_topics=n_topics, seed=seed, **options)
