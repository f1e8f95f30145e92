"""Pieces the benchmark scripts share: the synthetic sets, LightFM's factors, hold-out P@10.

Not part of the package (nothing here is installed); imported by the scripts beside it.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import scipy.sparse as sp

#: MovieLens 100k beside the project (``../shared/data/ml-100k``).
ML100K = Path(__file__).resolve().parents[2] / "shared" / "data" / "ml-100k" / "u.data"

#: Synthetic sets, name -> (users, items, interactions); cached as bench-out/cache/synth-NAME.npz.
SIZES = {"1m": (25_000, 10_000, 1_000_000), "10m": (200_000, 50_000, 10_000_000)}


def movielens_split():
    """The benchmarks' MovieLens 100k split: ratings >= 4, per-user 80/20 with seed 42
    (``mrec-warp prepare``), as (train, test) rating frames."""
    import tempfile

    from mrec_warp.data.ratings import read_ratings
    from mrec_warp.stages.prepare import prepare

    with tempfile.TemporaryDirectory() as tmp:
        prepare(ML100K, tmp, format="movielens", min_rating=4, test_fraction=0.2, seed=42)
        return read_ratings(Path(tmp) / "train.tsv"), read_ratings(Path(tmp) / "test.tsv")


def synthetic_matrix(name: str, cache: Path) -> Path:
    """The synthetic set ``name`` as a users x items CSR file, generated once (seed 1)."""
    path = cache / f"synth-{name}.npz"
    if not path.exists():
        from mrec_warp.data.interactions import Interactions
        from mrec_warp.data.synthetic import generate

        users, items, n = SIZES[name]
        ratings, _ = generate(n_users=users, n_items=items, n_interactions=n, seed=1)
        cache.mkdir(parents=True, exist_ok=True)
        sp.save_npz(path, Interactions.from_dataframe(ratings).matrix)
    return path


#: The thread-scaling set (``bench_warp.py --scaling``): 50k users x 20k items, 1M
#: interactions (seed 1, as ``bench_models.py``'s big set), 20% of each user's items held out
#: (seed 0), which leaves ~0.8M training positives.
SCALING_SET = dict(n_users=50_000, n_items=20_000, n_interactions=1_000_000, seed=1)


def scaling_split(cache: Path):
    """(train path, hold-out path) of the thread-scaling set, generated once."""
    train, val = cache / "synth-0.8m-train.npz", cache / "synth-0.8m-val.npz"
    if not (train.exists() and val.exists()):
        from mrec_warp.data.interactions import Interactions
        from mrec_warp.data.synthetic import generate
        from mrec_warp.models.early_stopping import holdout_split

        ratings, _ = generate(**SCALING_SET)
        X = Interactions.from_dataframe(ratings).matrix.tocsr().astype(np.float32)
        X.data[:] = 1
        fit, held = holdout_split(X, 0.2, np.random.default_rng(0))
        cache.mkdir(parents=True, exist_ok=True)
        sp.save_npz(train, fit)
        sp.save_npz(val, held)
    return train, val


def lightfm_factors(model):
    """(user factors, item factors, item biases) of a LightFM model without features, float32."""
    ib, iemb = model.get_item_representations()
    _, uemb = model.get_user_representations()
    return uemb.astype(np.float32), iemb.astype(np.float32), ib.astype(np.float32)


def holdout_precision_at_10(uf, itf, ib, train, val, n_users: int = 5000) -> float:
    """P@10 of any library's factors on ``n_users`` random hold-out users (seed 0), training
    items excluded, with the same top-k code for every library (a fair comparison)."""
    from mrec_warp.models.early_stopping import precision_at_k

    users = np.flatnonzero(np.diff(val.indptr) > 0)
    users = np.sort(np.random.default_rng(0).choice(users, min(n_users, len(users)), replace=False))
    return precision_at_k(lambda rows: uf[rows] @ itf.T + ib, itf.shape[0], train, val, 10, users=users)


def cpu_seconds() -> float:
    """CPU time of this process, all threads (user + system)."""
    import resource

    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def load_avg() -> str:
    """The machine's load averages (1, 5, 15 min), to print beside timings on a shared machine."""
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:  # pragma: no cover - not on every OS
        return "n/a"
