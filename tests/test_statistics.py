"""Statistics: the 95% interval over users, paired differences, the standard error across splits."""
from __future__ import annotations

import math

import numpy as np
import pytest

from mrec_warp.evaluation.metrics import evaluate_recommendations
from mrec_warp.evaluation.result import metric_names
from mrec_warp.evaluation.statistics import across_splits, paired_difference, summarize

from .test_metrics import as_frames, random_case


def test_ci_formula():
    rng = np.random.default_rng(0)
    v = rng.random(57)
    s = summarize(v)
    sd = math.sqrt(sum((x - v.mean()) ** 2 for x in v) / (len(v) - 1))
    assert s["mean"] == pytest.approx(v.mean())
    assert s["sd"] == pytest.approx(sd)
    assert s["ci95"] == pytest.approx(1.96 * sd / math.sqrt(57))
    assert (s["low"], s["high"]) == pytest.approx((v.mean() - s["ci95"], v.mean() + s["ci95"]))
    assert math.isnan(summarize([0.3])["ci95"])


def test_paired_difference_matches_reference():
    train, test, recs, ks = random_case(11)
    rng = np.random.default_rng(1)
    recs2 = [(u, i, int(r)) for (u, i, _), r in zip(recs, rng.permutation(len(recs)) + 1)]
    tr, te, rc = as_frames(train, test, recs)
    a = evaluate_recommendations(tr, te, rc, ks=ks)
    b = evaluate_recommendations(tr, te, as_frames(train, test, recs2)[2], ks=ks)
    d = paired_difference(a, b)
    for name in metric_names(ks):
        diffs = [b.per_user.loc[u, name] - a.per_user.loc[u, name] for u in a.per_user.index]
        n = len(diffs)
        mean = sum(diffs) / n
        sd = math.sqrt(sum((x - mean) ** 2 for x in diffs) / (n - 1))
        assert d.loc[name, "mean"] == pytest.approx(mean, abs=1e-12)
        assert d.loc[name, "ci95"] == pytest.approx(1.96 * sd / math.sqrt(n), abs=1e-12)
    k = ks[0]
    assert d.loc[f"coverage@{k}", "mean"] == pytest.approx(b.mean(f"coverage@{k}") - a.mean(f"coverage@{k}"))


def test_across_splits_standard_error():
    out = across_splits([0.1, 0.2, 0.3, 0.2])
    assert out["mean"] == pytest.approx(0.2)
    assert out["se"] == pytest.approx(np.std([0.1, 0.2, 0.3, 0.2], ddof=1) / 2)
    assert out["n_splits"] == 4
    assert math.isnan(across_splits([0.5])["se"])
