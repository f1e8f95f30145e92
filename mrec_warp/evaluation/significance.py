"""Is a difference real? Paired tests against a baseline and a multiple-comparison correction.

* **Over users** (one split): the per-user differences ``challenger - baseline`` of one
  metric are tested for a centre of 0, by a paired permutation test of their mean
  (default: each user's difference keeps or flips its sign at random, :data:`N_RESAMPLES`
  times, from a fixed seed; every sign pattern when there are fewer than that) or by the
  Wilcoxon signed-rank test (:func:`scipy.stats.wilcoxon`, zero differences dropped).
* **Over splits**: the per-split means are compared by a paired t-test (a one-sample t-test
  of the per-split differences), with ``n_splits - 1`` degrees of freedom: with a handful
  of splits it has little power, and the report says so.
* **Correction**: every p-value of one table forms one family, adjusted by Holm (default,
  controls the family-wise error rate under any dependence) or Benjamini-Hochberg (the
  false discovery rate), or not at all. A difference is *significant* when its adjusted
  p-value is below :data:`ALPHA`; only those get a star.

Why the permutation test by default: the table shows the *mean* paired difference, and
the permutation test tests exactly that mean, with no normal approximation (per-user
metrics are skewed and mostly zero) and no symmetry assumption. The signed-rank test asks
another question -- are positive and negative differences balanced in rank -- and can
disagree with the mean: on ml-100k, item-kNN vs WARP recall@10 gains +0.014 on average
from a few large gains, with as many users losing a little as gaining (235 of 460
non-zero differences positive): permutation p = 0.007, signed-rank p = 0.14. Its
p-values are those of :func:`scipy.stats.permutation_test` when every pattern is
enumerated; the sign flips are drawn once per comparison and shared by its metrics (one
matrix product), so a table costs well under a second at 1,000 users.

Resolution: with N random sign flips no p can be below ``2 / (N + 1)`` (:func:`smallest_p`),
and a correction multiplies the smallest p by up to the number of tests, so a big table at a
fixed N would put every clear difference at one floor near -- or past -- :data:`ALPHA`.
:func:`resamples_for` raises N with the number of tests; a p at its floor is reported as such.
"""
from __future__ import annotations

import math
from typing import Dict, List, Optional, Sequence

import numpy as np

from ..errors import InputError
from ..seeds import DEFAULT_SEED

#: Paired tests over users.
TESTS = ("permutation", "wilcoxon")
#: Multiple-comparison corrections.
CORRECTIONS = ("holm", "bh", "none")
DEFAULT_TEST = "permutation"
DEFAULT_CORRECTION = "holm"
#: Family-wise (Holm) or false-discovery (BH) level at which a difference gets a star.
ALPHA = 0.05
#: Resamples of the permutation test for a table of few tests: two-sided p-values resolve
#: down to 2 / (N_RESAMPLES + 1).
N_RESAMPLES = 9999
#: The most resamples :func:`resamples_for` raises that to: ten times the default's time.
MAX_RESAMPLES = 99_999
#: :func:`resamples_for` aims the smallest adjusted p of a table at ALPHA / RESOLUTION_MARGIN.
RESOLUTION_MARGIN = 10
#: Below this many splits the report warns that the test over splits has low power.
FEW_SPLITS = 10

#: How each test and correction is named in reports.
TEST_NAMES = {
    "wilcoxon": "Wilcoxon signed-rank test over users",
    "permutation": "paired permutation test over users ({n_resamples:,} sign flips, seed {seed})",
    "splits": "paired t-test over splits (per-split means)",
}
CORRECTION_NAMES = {"holm": "Holm", "bh": "Benjamini-Hochberg", "none": "no correction"}


def check_test_options(test: str, correction: str) -> None:
    """Refuse an unknown test or correction in one line."""
    if test not in TESTS:
        raise InputError(f"unknown paired test {test!r}", hint=f"use `paired_test` {' or '.join(TESTS)}")
    if correction not in CORRECTIONS:
        raise InputError(f"unknown correction {correction!r}", hint=f"use `correction` {', '.join(CORRECTIONS)}")


def resamples_for(n_tests: int, correction: str = DEFAULT_CORRECTION) -> int:
    """Sign flips of the permutation test for a table of ``n_tests`` p-values adjusted together.

    Holm multiplies the smallest p by the number of tests ``m`` (Benjamini-Hochberg by at most
    as much), so the smallest adjusted p a table can show is ``m * 2 / (N + 1)``: at the
    default N that passes :data:`ALPHA` from 250 tests on (12 runs with the beyond-accuracy
    metrics), and then no difference, however large, could get a star. N is therefore raised
    until that floor is at most ``ALPHA / RESOLUTION_MARGIN`` -- a clear difference is then
    clearly starred, and the floor it sits at is shown as ``p≤`` -- rounded up to a whole
    ten thousand minus one, and capped at :data:`MAX_RESAMPLES` because the test's time grows
    linearly with N (ten times the default's at most; past 250 tests the floor rises again,
    still below ALPHA up to 2,500). A table of up to 25 tests keeps :data:`N_RESAMPLES`.

    Parameters
    ----------
    n_tests : int
        p-values corrected together (one table).
    correction : {"holm", "bh", "none"}
        Without a correction each p stands alone: the default N.

    Returns
    -------
    int
    """
    family = 1 if correction == "none" else max(1, int(n_tests))
    needed = 2 * family * RESOLUTION_MARGIN / ALPHA  # N + 1 at which family * 2 / (N + 1) = ALPHA / margin
    if needed <= N_RESAMPLES + 1:
        return N_RESAMPLES
    return min(MAX_RESAMPLES, math.ceil(needed / 10_000) * 10_000 - 1)


def smallest_p(n_pairs: int, n_resamples: int = N_RESAMPLES) -> Optional[float]:
    """The smallest two-sided p the permutation test over ``n_pairs`` users can give when it
    draws ``n_resamples`` random sign flips, ``2 / (n_resamples + 1)``: a p equal to it only says
    that the true p is at most that. None when every sign pattern is enumerated (the p is
    then exact)."""
    if _enumerates(n_pairs, n_resamples):
        return None
    return 2.0 / (n_resamples + 1)


def _enumerates(n_pairs: int, n_resamples: int) -> bool:
    """Whether the permutation test runs every sign pattern (as scipy does when there are at
    most as many as resamples) instead of random ones."""
    return n_pairs <= 62 and 2 ** n_pairs <= n_resamples


def paired_users_test(diff: np.ndarray, test: str = DEFAULT_TEST, seed: int = DEFAULT_SEED) -> Optional[float]:
    """Two-sided p-value that per-user differences are centred on 0; NaN pairs are left out.

    Parameters
    ----------
    diff : numpy.ndarray
        ``challenger - baseline`` per user.
    test : {"permutation", "wilcoxon"}
        See :func:`paired_users_pvalues`.
    seed : int
        Seed of the permutation test.

    Returns
    -------
    float or None
        1.0 when every difference is 0 (nothing to detect); None with no pair at all.
    """
    return paired_users_pvalues(np.asarray(diff, dtype=np.float64)[:, None], test, seed)[0]


def paired_users_pvalues(diffs: np.ndarray, test: str = DEFAULT_TEST, seed: int = DEFAULT_SEED,
                         n_resamples: int = N_RESAMPLES) -> List[Optional[float]]:
    """Two-sided p-values, one per column of ``diffs`` (users x metrics), of a paired test over users.

    * ``permutation``: the statistic is the mean difference; its null distribution comes
      from flipping the sign of each user's difference -- every one of the ``2^n`` patterns
      when that is at most ``n_resamples``, else ``n_resamples`` random patterns drawn from
      ``seed`` (shared by every column). As :func:`scipy.stats.permutation_test` does,
      ``p = min(1, 2 min(P(null >= obs), P(null <= obs)))``, a random draw adding 1 to
      numerator and denominator so p is never 0.
    * ``wilcoxon``: :func:`scipy.stats.wilcoxon` with ``zero_method="wilcox"`` per column.

    A NaN difference (a metric undefined for that user) leaves the user out of that column.
    A column without any pair gives None, a column of zeros 1.0.
    """
    d = np.asarray(diffs, dtype=np.float64)
    valid = ~np.isnan(d)
    n_valid = valid.sum(axis=0)
    d = np.where(valid, d, 0.0)  # a 0 flips to 0: the left-out users change no resampled mean
    out: List[Optional[float]] = [None if n == 0 else 1.0 for n in n_valid]
    todo = [j for j in range(d.shape[1]) if n_valid[j] > 0 and np.any(d[:, j] != 0)]
    if not todo:
        return out
    if test == "wilcoxon":
        from scipy import stats  # scipy.stats takes a second to import: only when something is compared

        for j in todo:
            out[j] = float(stats.wilcoxon(d[valid[:, j], j], zero_method="wilcox").pvalue)
        return out
    sub = d[:, todo]
    observed = sub.sum(axis=0)  # sums: the same order as means for a fixed number of users
    gamma = np.abs(observed) * np.finfo(np.float64).eps * 100  # rounding: as scipy compares
    n = sub.shape[0]
    greater = np.zeros(len(todo))
    less = np.zeros(len(todo))
    if _enumerates(n, n_resamples):
        total, extra = 2 ** n, 0
        codes = np.arange(total, dtype=np.int64)
        for start in range(0, total, 4096):
            block = codes[start:start + 4096]
            signs = ((block[:, None] >> np.arange(n)) & 1) * -2.0 + 1.0
            null = signs @ sub
            greater += (null >= observed - gamma).sum(axis=0)
            less += (null <= observed + gamma).sum(axis=0)
    else:
        rng = np.random.default_rng(seed)
        total, extra = n_resamples, 1
        batch = max(1, min(n_resamples, 2 ** 22 // max(n, 1)))  # at most ~32 MB of signs at a time
        for start in range(0, n_resamples, batch):
            size = min(batch, n_resamples - start)
            signs = rng.integers(0, 2, size=(size, n), dtype=np.int8) * -2.0 + 1.0
            null = signs @ sub
            greater += (null >= observed - gamma).sum(axis=0)
            less += (null <= observed + gamma).sum(axis=0)
    p = np.minimum(1.0, 2 * np.minimum(greater + extra, less + extra) / (total + extra))
    for j, value in zip(todo, p):
        out[j] = float(value)
    return out


def paired_splits_test(diffs: Sequence[float]) -> Optional[float]:
    """Two-sided p-value of a paired t-test over splits, from the per-split differences of
    the means (the same as :func:`scipy.stats.ttest_rel` on the two runs' per-split means).

    None with fewer than 2 splits, or when the differences are all equal but not 0 (no
    spread: the t statistic is undefined); 1.0 when they are all 0.
    """
    d = np.asarray([x for x in diffs if x is not None], dtype=np.float64)
    d = d[~np.isnan(d)]
    if d.size < 2:
        return None
    if not np.any(d != 0):
        return 1.0
    if np.all(d == d[0]):
        return None
    from scipy import stats

    return float(stats.ttest_1samp(d, 0.0).pvalue)


def adjust(pvalues: Sequence[Optional[float]], correction: str = DEFAULT_CORRECTION) -> np.ndarray:
    """Adjusted p-values, one family: every p-value that is not None/NaN.

    * ``holm``: sorted ascending, ``p_(i) * (m - i + 1)``, made non-decreasing, at most 1;
    * ``bh``: sorted ascending, ``p_(i) * m / i``, made non-increasing from the largest
      down, at most 1;
    * ``none``: the p-values as they are.

    Missing p-values stay NaN and do not count in ``m``.
    """
    p = np.array([np.nan if v is None else v for v in pvalues], dtype=np.float64)
    out = p.copy()
    ok = np.flatnonzero(~np.isnan(p))
    m = len(ok)
    if m == 0 or correction == "none":
        return out
    order = ok[np.argsort(p[ok], kind="stable")]
    ranked = p[order]
    i = np.arange(1, m + 1)
    if correction == "holm":
        adjusted = np.maximum.accumulate(ranked * (m - i + 1))
    elif correction == "bh":
        adjusted = np.minimum.accumulate((ranked * m / i)[::-1])[::-1]
    else:
        raise ValueError(f"unknown correction {correction!r}")
    out[order] = np.minimum(adjusted, 1.0)
    return out


def describe(test: str, correction: str, multi: bool, seed: int = DEFAULT_SEED,
             n_resamples: int = N_RESAMPLES) -> Dict[str, str]:
    """How a table's differences were tested, in words, for the report."""
    name = TEST_NAMES["splits"] if multi else TEST_NAMES[test].format(seed=seed, n_resamples=n_resamples)
    return {"test": name, "correction": CORRECTION_NAMES[correction], "alpha": ALPHA}
