"""Is a difference real? Paired tests against a baseline and a multiple-comparison correction.

* **Over users** (one split): the per-user differences ``challenger - baseline`` of one
  metric are tested for a centre of 0, by the Wilcoxon signed-rank test (default) or a
  paired permutation (sign-flip) test of their mean with a fixed seed.
* **Over splits**: the per-split means are compared by a paired t-test (a one-sample t-test
  of the per-split differences), with ``n_splits - 1`` degrees of freedom: with a handful
  of splits it has little power, and the report says so.
* **Correction**: every p-value of one table forms one family, adjusted by Holm (default,
  controls the family-wise error rate), Benjamini-Hochberg (controls the false discovery
  rate) or not at all. A difference is *significant* when its adjusted p-value is below
  :data:`ALPHA`; only those get a star.

Why Wilcoxon by default: per-user metrics are skewed and mostly zero, so a normal interval
or t-test on them is a poor guide, and a Holm correction over some 30 tests needs p-values
down to about 0.001 -- which a permutation test resolves only with 10^4 resamples per cell
(10^9 operations per cell at 100k users), while the signed-rank test is one sort, needs no
seed, and is the same number :func:`scipy.stats.wilcoxon` gives. The permutation test
(``test="permutation"``) tests exactly the mean difference the table shows; it is there
for small studies and for those who want that.
"""
from __future__ import annotations

from typing import Dict, Optional, Sequence

import numpy as np

from ..errors import InputError
from ..seeds import DEFAULT_SEED

#: Paired tests over users.
TESTS = ("wilcoxon", "permutation")
#: Multiple-comparison corrections.
CORRECTIONS = ("holm", "bh", "none")
DEFAULT_TEST = "wilcoxon"
DEFAULT_CORRECTION = "holm"
#: Family-wise (Holm) or false-discovery (BH) level at which a difference gets a star.
ALPHA = 0.05
#: Resamples of the permutation test: p-values resolve down to 1 / (N_RESAMPLES + 1).
N_RESAMPLES = 9999
#: Below this many splits the report warns that the test over splits has low power.
FEW_SPLITS = 10

#: How each test and correction is named in reports.
TEST_NAMES = {
    "wilcoxon": "Wilcoxon signed-rank test over users (zero differences dropped)",
    "permutation": f"paired permutation test of the mean over users ({N_RESAMPLES} sign flips, seed {{seed}})",
    "splits": "paired t-test over splits (per-split means)",
}
CORRECTION_NAMES = {"holm": "Holm", "bh": "Benjamini-Hochberg", "none": "no correction"}


def check_test_options(test: str, correction: str) -> None:
    """Refuse an unknown test or correction in one line."""
    if test not in TESTS:
        raise InputError(f"unknown paired test {test!r}", hint=f"use `test` {' or '.join(TESTS)}")
    if correction not in CORRECTIONS:
        raise InputError(f"unknown correction {correction!r}", hint=f"use `correction` {', '.join(CORRECTIONS)}")


def paired_users_test(diff: np.ndarray, test: str = DEFAULT_TEST, seed: int = DEFAULT_SEED) -> Optional[float]:
    """Two-sided p-value that per-user differences are centred on 0; NaN pairs are left out.

    Parameters
    ----------
    diff : numpy.ndarray
        ``challenger - baseline`` per user.
    test : {"wilcoxon", "permutation"}
        :func:`scipy.stats.wilcoxon` (``zero_method="wilcox"``), or
        :func:`scipy.stats.permutation_test` flipping the signs of the differences
        (statistic: their mean; :data:`N_RESAMPLES` resamples from ``seed``, exact when
        there are fewer sign patterns than that).
    seed : int
        Seed of the permutation test (the same for every cell, so a cell's p-value does not
        depend on what else is in the table).

    Returns
    -------
    float or None
        1.0 when every difference is 0 (nothing to detect); None with no pair at all.
    """
    d = np.asarray(diff, dtype=np.float64)
    d = d[~np.isnan(d)]
    if d.size == 0:
        return None
    if not np.any(d != 0):
        return 1.0
    from scipy import stats  # scipy.stats takes a second to import: only when something is compared

    if test == "wilcoxon":
        return float(stats.wilcoxon(d, zero_method="wilcox", alternative="two-sided").pvalue)
    # memory: at most ~4M floats per batch of resamples, whatever the number of users
    batch = max(1, min(N_RESAMPLES, 4_000_000 // d.size))
    result = stats.permutation_test((d,), np.mean, permutation_type="samples", n_resamples=N_RESAMPLES,
                                    alternative="two-sided", vectorized=True, batch=batch,
                                    random_state=np.random.default_rng(seed))
    return float(result.pvalue)


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


def describe(test: str, correction: str, multi: bool, seed: int = DEFAULT_SEED) -> Dict[str, str]:
    """How a table's differences were tested, in words, for the report."""
    name = TEST_NAMES["splits"] if multi else TEST_NAMES[test].format(seed=seed)
    return {"test": name, "correction": CORRECTION_NAMES[correction], "alpha": ALPHA}
