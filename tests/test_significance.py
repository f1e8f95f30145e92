"""Paired tests and corrections: the same p-values as scipy.stats, adjustments by hand, and
stars in reports only where the corrected test finds a difference."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from scipy import stats

from mrec_warp.cli.evaluate import evaluate as evaluate_cli
from mrec_warp.errors import InputError
from mrec_warp.evaluation.formatting import format_markdown, format_table, p_text
from mrec_warp.stages.evaluate import evaluate_here as evaluate
from mrec_warp.evaluation.significance import (
    ALPHA, MAX_RESAMPLES, N_RESAMPLES, adjust, paired_splits_test, paired_users_pvalues, paired_users_test,
    resamples_for, smallest_p,
)


# ----------------------------------------------------------------------------------------
# the tests themselves, against scipy.stats
# ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [4, 9, 13])
def test_exact_permutation_test_is_scipys(n):
    """With fewer sign patterns than resamples both enumerate them all: the very same p."""
    rng = np.random.default_rng(n)
    d = np.round(rng.normal(0.3, 1.0, n), 1)  # rounded: ties and zeros, as per-user metrics have
    d[0] = 0.0
    expected = stats.permutation_test((d,), np.mean, permutation_type="samples", n_resamples=9999,
                                      vectorized=True).pvalue
    assert paired_users_test(d, "permutation") == pytest.approx(expected, rel=1e-12)


def test_random_permutation_test_is_close_to_scipys_and_repeatable():
    rng = np.random.default_rng(0)
    d = rng.normal(0.12, 1.0, 300)
    expected = stats.permutation_test((d,), np.mean, permutation_type="samples", n_resamples=9999,
                                      vectorized=True, random_state=1).pvalue
    got = paired_users_test(d, "permutation", seed=7)
    assert got == pytest.approx(expected, abs=0.015)  # two Monte Carlo estimates of the same p
    assert paired_users_test(d, "permutation", seed=7) == got  # a fixed seed: the same p every run
    assert got == pytest.approx(stats.ttest_1samp(d, 0).pvalue, abs=0.02)


def test_wilcoxon_is_scipys():
    rng = np.random.default_rng(1)
    d = np.round(rng.normal(0.1, 0.5, 80), 1)
    assert paired_users_test(d, "wilcoxon") == pytest.approx(stats.wilcoxon(d, zero_method="wilcox").pvalue)


def test_columns_are_tested_separately_and_nan_users_left_out():
    rng = np.random.default_rng(2)
    d = np.round(rng.normal(0.2, 1.0, (12, 3)), 1)
    d[:, 2] = 0.0  # identical on this metric
    d[[1, 5], 0] = np.nan  # undefined for two users
    p = paired_users_pvalues(d, "permutation")
    kept = d[~np.isnan(d[:, 0]), 0]
    assert p[0] == pytest.approx(stats.permutation_test((kept,), np.mean, permutation_type="samples",
                                                        vectorized=True).pvalue)
    assert p[1] == pytest.approx(paired_users_test(d[:, 1], "permutation"))
    assert p[2] == 1.0
    assert paired_users_pvalues(np.full((3, 1), np.nan))[0] is None


def test_splits_test_is_paired_t():
    a = np.array([0.20, 0.22, 0.19, 0.25, 0.21])
    b = np.array([0.22, 0.25, 0.20, 0.26, 0.24])
    assert paired_splits_test(b - a) == pytest.approx(stats.ttest_rel(b, a).pvalue)
    assert paired_splits_test([0.0, 0.0, 0.0]) == 1.0
    assert paired_splits_test([0.1]) is None


def test_holm_and_bh_by_hand():
    p = [0.01, 0.04, None, 0.03, 0.005]
    # Holm: sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1 = 0.02, 0.03, 0.06, 0.04 -> running max
    assert adjust(p, "holm")[[0, 1, 3, 4]] == pytest.approx([0.03, 0.06, 0.06, 0.02])
    # BH: times 4/1, 4/2, 4/3, 4/4 = 0.02, 0.02, 0.04, 0.04 -> running min from the largest
    assert adjust(p, "bh")[[0, 1, 3, 4]] == pytest.approx([0.02, 0.04, 0.04, 0.02])
    assert np.isnan(adjust(p, "holm")[2]) and np.isnan(adjust(p, "bh")[2])
    assert adjust([0.9, 0.8], "holm") == pytest.approx([1.0, 1.0])
    assert adjust(p, "none")[[0, 4]] == pytest.approx([0.01, 0.005])


def test_adjustments_match_statsmodels_when_installed():
    multitest = pytest.importorskip("statsmodels.stats.multitest")
    p = np.random.default_rng(3).random(25) ** 3
    assert adjust(p, "holm") == pytest.approx(multitest.multipletests(p, method="holm")[1])
    assert adjust(p, "bh") == pytest.approx(multitest.multipletests(p, method="fdr_bh")[1])


# ----------------------------------------------------------------------------------------
# in studies and reports
# ----------------------------------------------------------------------------------------
def write_case(d, seed=0, n_users=80, n_items=30):
    """A train/test split; ``good`` recommends each user's test items first, ``base`` and
    ``same`` the same random lists."""
    rng = np.random.default_rng(seed)
    rows = [(f"u{u}", f"i{i}") for u in range(n_users) for i in range(n_items) if rng.random() < 0.25]
    df = pd.DataFrame(rows, columns=["user", "item"])
    test = rng.random(len(df)) < 0.3
    d.mkdir(parents=True, exist_ok=True)
    df[~test].to_csv(d / "train.tsv", sep="\t", header=False, index=False)
    df[test].to_csv(d / "test.tsv", sep="\t", header=False, index=False)
    seen = df[~test].groupby("user")["item"].agg(set)
    held = df[test].groupby("user")["item"].agg(list)
    base, good = [], []
    for u in sorted(set(df["user"])):
        unseen = [f"i{i}" for i in rng.permutation(n_items) if f"i{i}" not in seen.get(u, set())]
        base += [(u, i, 1.0 - r / 10, r + 1) for r, i in enumerate(unseen[:10])]
        first = [i for i in held.get(u, []) if i in unseen]
        ordered = first + [i for i in unseen if i not in first]
        good += [(u, i, 1.0 - r / 10, r + 1) for r, i in enumerate(ordered[:10])]
    for name, recs in (("base", base), ("same", base), ("good", good)):
        pd.DataFrame(recs).to_csv(d / f"{name}.tsv", sep="\t", header=False, index=False)


def test_identical_files_get_no_star_and_say_so(tmp_path):
    write_case(tmp_path)
    data = evaluate(tmp_path / "train.tsv", tmp_path / "test.tsv",
                    [tmp_path / "base.tsv", tmp_path / "same.tsv"], ks=(5,)).to_dict()
    comparison = data["comparison"]
    assert comparison["n_significant"] == 0 and comparison["correction"] == "Holm"
    assert all(d["p"] == 1.0 for m, d in data["runs"][1]["difference_to_baseline"].items() if m != "coverage@5")
    table = format_table(data)
    assert "*" not in table.split("\n\n", 1)[1]  # no star below the legend
    assert "same vs base: no detectable difference on any of the" in table


def test_stars_follow_the_adjusted_p_values(tmp_path):
    write_case(tmp_path)
    study = evaluate(tmp_path / "train.tsv", tmp_path / "test.tsv",
                     [tmp_path / "base.tsv", tmp_path / "good.tsv", tmp_path / "same.tsv"], ks=(5, 10),
                     correction="bh")
    data = study.to_dict()
    cells = [(r, m) for r in data["runs"][1:] for m in data["metrics"]
             if r["difference_to_baseline"][m]["p"] is not None]
    raw = [r["difference_to_baseline"][m]["p"] for r, m in cells]
    expected = adjust(raw, "bh")
    for (r, m), p_adj in zip(cells, expected):
        d = r["difference_to_baseline"][m]
        assert d["p_adjusted"] == pytest.approx(p_adj)
        assert d["significant"] == (p_adj < 0.05)
        # the raw p is the permutation test of this metric's per-user differences
        a, b = study.evaluations[0][0].per_user[m], study.evaluations[0][data["runs"].index(r)].per_user[m]
        assert d["p"] == pytest.approx(paired_users_test((b - a).to_numpy()))
    assert data["runs"][1]["difference_to_baseline"]["precision@5"]["significant"]
    assert data["comparison"]["n_tests"] == len(cells) and data["comparison"]["correction"] == "Benjamini-Hochberg"
    md = format_markdown(data)
    assert "good vs base (BH-adjusted p < 0.05): higher on precision@5" in md
    assert "same vs base: no detectable difference" in md


def test_several_splits_test_over_splits_and_warn_of_low_power(tmp_path):
    for s in range(3):
        write_case(tmp_path / f"s{s}", seed=s)
    p = str(tmp_path / "s{split}")
    study = evaluate(f"{p}/train.tsv", f"{p}/test.tsv", [f"{p}/base.tsv", f"{p}/good.tsv"], ks=(5,),
                     splits=["0", "1", "2"])
    data = study.to_dict()
    means = np.array([[study.evaluations[s][r].mean("ndcg@5") for s in range(3)] for r in range(2)])
    d = data["runs"][1]["difference_to_baseline"]["ndcg@5"]
    assert d["p"] == pytest.approx(stats.ttest_rel(means[1], means[0]).pvalue)
    assert "paired t-test over splits" in data["comparison"]["test"]
    assert any("power is low" in n for n in data["comparison"]["notes"])
    assert "power is low" in format_table(data)


def test_unknown_test_or_correction_is_refused():
    with pytest.raises(InputError, match="correction"):
        evaluate(pd.DataFrame({"user": ["a"], "item": ["x"]}), pd.DataFrame({"user": ["a"], "item": ["y"]}),
                 [pd.DataFrame({"user": ["a"], "item": ["y"], "rank": [1]})], correction="bonferroni")


def test_cli_options_name_the_test_and_correction(tmp_path):
    write_case(tmp_path)
    args = ["--train", tmp_path / "train.tsv", "--test", tmp_path / "test.tsv", "--recs", tmp_path / "base.tsv",
            "--recs", tmp_path / "good.tsv", "-k", "5", "--json", tmp_path / "r.json"]
    r = CliRunner().invoke(evaluate_cli, [str(a) for a in args] + ["--paired-test", "wilcoxon", "--correction", "bh"])
    assert r.exit_code == 0, r.output
    words = " ".join(r.stdout.split())  # the legend is wrapped to the width
    assert "Benjamini-Hochberg-adjusted p of the Wilcoxon signed-rank test over users" in words and " *" in r.stdout
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["comparison"]["test"].startswith("Wilcoxon")
    r = CliRunner().invoke(evaluate_cli, [str(a) for a in args[:-2]] + ["--correction", "bonferroni"])
    assert r.exit_code == 2 and "bonferroni" in r.output and "Traceback" not in r.output


# ----------------------------------------------------------------------------------------
# resolution: sign flips for many tests, and a p at its floor
# ----------------------------------------------------------------------------------------
def test_sign_flips_grow_with_the_tests_corrected_together():
    # up to 25 tests the default keeps the smallest Holm-adjusted p, 25 * 2 / 10000, at 0.005
    assert resamples_for(16) == resamples_for(25) == N_RESAMPLES
    n = resamples_for(176)  # 12 runs, k = 5,10,20: 11 x 16 tests
    assert n == 79_999 and 176 * smallest_p(1000, n) <= ALPHA / 10
    assert resamples_for(10_000) == MAX_RESAMPLES  # bounded: ten times the default's time at most
    assert resamples_for(176, "none") == N_RESAMPLES  # no correction: each p stands alone
    assert smallest_p(10, N_RESAMPLES) is None  # 1024 patterns, all enumerated: the p is exact


def test_smallest_p_is_what_a_clear_difference_gets():
    d = np.random.default_rng(4).normal(1.0, 0.1, (500, 2))
    for n in (N_RESAMPLES, 19_999):
        assert paired_users_pvalues(d, "permutation", n_resamples=n) == [smallest_p(500, n)] * 2


def many_runs(d, n_runs=12, n_users=150, n_items=40, seed=0):
    """A split and ``n_runs`` recommendation files, ``r0`` random and each later one putting
    the user's test items first for a growing share of users."""
    rng = np.random.default_rng(seed)
    rows = [(f"u{u}", f"i{i}") for u in range(n_users) for i in range(n_items) if rng.random() < 0.25]
    df = pd.DataFrame(rows, columns=["user", "item"])
    test = rng.random(len(df)) < 0.3
    d.mkdir(parents=True, exist_ok=True)
    df[~test].to_csv(d / "train.tsv", sep="\t", header=False, index=False)
    df[test].to_csv(d / "test.tsv", sep="\t", header=False, index=False)
    seen = df[~test].groupby("user")["item"].agg(set)
    held = df[test].groupby("user")["item"].agg(list)
    paths = []
    for r in range(n_runs):
        recs = []
        for u in sorted(set(df["user"])):
            unseen = [f"i{i}" for i in rng.permutation(n_items) if f"i{i}" not in seen.get(u, set())]
            first = [i for i in held.get(u, []) if i in unseen] if rng.random() < r / n_runs else []
            ordered = first + [i for i in unseen if i not in first]
            recs += [(u, i, 1.0 - k / 20, k + 1) for k, i in enumerate(ordered[:20])]
        pd.DataFrame(recs).to_csv(d / f"r{r}.tsv", sep="\t", header=False, index=False)
        paths.append(d / f"r{r}.tsv")
    return paths


def test_a_table_of_many_tests_draws_more_flips_and_marks_p_at_its_floor(tmp_path):
    paths = many_runs(tmp_path)
    data = evaluate(tmp_path / "train.tsv", tmp_path / "test.tsv", paths).to_dict()
    c = data["comparison"]
    assert c["n_tests"] == 11 * 16 and c["n_resamples"] == resamples_for(176) and c["n_resamples_default"] == 9999
    assert "79,999 sign flips" in c["test"]
    floor = smallest_p(150, c["n_resamples"])
    cells = [d for r in data["runs"][1:] for d in r["difference_to_baseline"].values() if d["p"] is not None]
    at_floor = [d for d in cells if d["p_at_floor"]]
    assert at_floor and all(d["p"] == pytest.approx(floor) for d in at_floor)
    assert all(d["p"] > floor * 1.0001 for d in cells if not d["p_at_floor"])
    assert c["n_at_floor"] == len(at_floor) and c["p_adjusted_floor"] == max(d["p_adjusted"] for d in at_floor)
    assert c["p_adjusted_floor"] < ALPHA / 5  # the many-test floor sits well below alpha
    words = " ".join(format_table(data).split())
    assert "79,999 sign flips instead of 9,999" in words
    assert f"{len(at_floor)} of the 176 p-values are the smallest the 79,999 sign flips can give" in words
    md = format_markdown(data)
    assert "p≤0.00" in md and "**resolution**" in md


def test_one_set_of_flips_per_split_gives_each_run_its_own_p(tmp_path):
    """The runs of a split go through the test together: the same p as each alone."""
    paths = many_runs(tmp_path, n_runs=4)
    study = evaluate(tmp_path / "train.tsv", tmp_path / "test.tsv", paths, ks=(5,))
    data = study.to_dict()
    base = study.evaluations[0][0].per_user
    for r, run in enumerate(data["runs"][1:], start=1):
        other = study.evaluations[0][r].per_user
        for m in ("precision@5", "ndcg@5", "mrr"):
            assert run["difference_to_baseline"][m]["p"] == paired_users_test((other[m] - base[m]).to_numpy())


def test_p_text_shows_the_floor_as_an_upper_bound():
    assert p_text({"p_adjusted": 0.00321, "p_at_floor": True}) == "p≤0.004"
    assert p_text({"p_adjusted": 0.00321, "p_at_floor": False}) == "p=0.003"
    assert p_text({"p_adjusted": 0.0004, "p_at_floor": True}) == "p<0.001"
    assert p_text({"p_adjusted": 0.035, "p_at_floor": True}) == "p≤0.035"
