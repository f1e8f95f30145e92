"""``mrec-warp evaluate``: score recommendation files against held-out interactions."""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import List, Optional, Sequence

import click

from ..context import ExecutionContext
from ..data.id_lines import read_id_list
from ..data.inputs import check_readable
from ..errors import printable
from ..data.features import read_features
from ..evaluation.formatting import DEFAULT_WIDTH, format_long, format_table, study_notes
from ..evaluation.groups import GROUPINGS
from ..evaluation.significance import CORRECTIONS, DEFAULT_CORRECTION, DEFAULT_TEST, TESTS
from ..seeds import DEFAULT_SEED
from ..evaluation.plot import check_plot_available
from ..evaluation.report import check_baseline, write_reports
from ..stages.evaluate import SPLIT_PLACEHOLDER, default_names, resolve_split, evaluate as evaluate_stage
from ..workers import BACKENDS
from ._parallel import N_JOBS
from ..files import check_outputs
from ._common import SEED, echo_result, friendly_errors, make_progress, parse_int_list, quiet_option, say
from ._output_paths import OutputPath


#: What ``--table`` prints on standard output.
TABLES = ("compact", "long")


def _parse_ks(ctx, param, value: str) -> List[int]:
    return parse_int_list(value, "-k")


def _parse_splits(ctx, param, value: Optional[str]) -> Optional[List[str]]:
    if value is None:
        return None
    labels = [v.strip() for v in value.split(",") if v.strip()]
    if not labels:
        raise click.BadParameter("give comma-separated split labels, e.g. 0,1,2,3,4", param_hint="--splits")
    if len(set(labels)) != len(labels):
        raise click.BadParameter(f"{value!r} repeats a split label", param_hint="--splits")
    return labels


def _check_split_options(train: str, test: str, recs: Sequence[str], splits: Optional[List[str]]) -> None:
    """``{split}`` and ``--splits`` go together, in every input path, or not at all."""
    paths = {"--train": [train], "--test": [test], "--recs": list(recs)}
    with_placeholder = {o for o, ps in paths.items() if any(SPLIT_PLACEHOLDER in p for p in ps)}
    if splits is None and with_placeholder:
        raise click.UsageError(f"{', '.join(sorted(with_placeholder))} contain {SPLIT_PLACEHOLDER}: "
                               "give the split labels with --splits, e.g. --splits 0,1,2")
    if splits is not None:
        missing = [p for ps in paths.values() for p in ps if SPLIT_PLACEHOLDER not in p]
        if missing:
            raise click.UsageError(f"with --splits every --train/--test/--recs path needs {SPLIT_PLACEHOLDER}; "
                                   f"missing in {missing[0]!r}")


def _check_names(recs: Sequence[str], names: Sequence[str]) -> List[str]:
    if names and len(names) != len(recs):
        raise click.UsageError(f"got {len(names)} --name for {len(recs)} --recs; give one name per --recs or none")
    names = list(names) or default_names(recs)
    if len(set(names)) != len(names):
        raise click.UsageError(f"--name values must be distinct, got {', '.join(names)}")
    return names


@click.command(epilog="""\b
Examples:
  mrec-warp evaluate --train split/train.tsv --test split/test.tsv --recs recs.tsv
  mrec-warp evaluate --train split/train.tsv --test split/test.tsv \\
      --recs pop.tsv --recs warp.tsv --name popularity --name warp \\
      -k 5,10,20 --report report.md --json report.json --plot curves.png
  mrec-warp evaluate --train cold/train.tsv --test cold/test.tsv --recs cold.tsv \\
      --items cold/item_features.tsv          # new items (cold-items split)
  mrec-warp evaluate --train split/train.tsv --test split/test.tsv --recs warp.tsv \\
      --recs itemknn.tsv --correction bh --beyond-accuracy --groups item-popularity
  mrec-warp evaluate --train split/train.tsv --test split/test.tsv --recs pop.tsv \\
      --recs warp.tsv --recs wrmf.tsv --baseline warp --table long > long.tsv
  mrec-warp evaluate --splits 0,1,2,3,4 --train 'cv/split-{split}/train.tsv' \\
      --test 'cv/split-{split}/test.tsv' --recs 'cv/split-{split}/recs.tsv'
""")
@click.option("--train", "train", required=True, metavar="FILE",
              help="Training interactions (user item [value [timestamp]]); their items are "
                   "removed from the recommendations and define the catalogue for coverage.")
@click.option("--test", "test", required=True, metavar="FILE", help="Held-out interactions; every row is a positive.")
@click.option("--recs", "recs", required=True, multiple=True, metavar="FILE",
              help="Recommendations: user<TAB>item<TAB>score<TAB>rank (.tsv), .csv or .parquet. "
                   "Repeat to compare files; each is compared with the --baseline.")
@click.option("--name", "names", multiple=True, help="Display name of each --recs, in order [file name].")
@click.option("--baseline", metavar="NAME",
              help="The run every other is compared with (Δ, paired test), by its --name or default name "
                   "[the first --recs].")
@click.option("--table", "table", type=click.Choice(TABLES), default="compact", show_default=True,
              help="What standard output gets: compact (a row per metric while that fits the width, else a "
                   "row per run in blocks of metrics that fit it; the width: $COLUMNS, the terminal's, or 100 "
                   "in a pipe), or long (one tab-separated row per run and metric with its interval, difference "
                   "to the baseline, p, adjusted p and star: pandas.read_csv(FILE, sep='\\t') loads it).")
@click.option("-k", "ks", default="5,10,20", show_default=True, callback=_parse_ks, metavar="K[,K...]",
              help="Cut-offs for the @k metrics.")
@click.option("--splits", "splits", callback=_parse_splits, metavar="LABELS",
              help="Evaluate several splits: comma-separated labels substituted for {split} in "
                   "--train, --test and every --recs; results are mean ± standard error over splits.")
@click.option("--report", "report_path", type=OutputPath(), help="Write a Markdown report.")
@click.option("--json", "json_path", type=OutputPath(), help="Write every number as JSON.")
@click.option("--per-user", "per_user_path", type=OutputPath(),
              help="Write per-user metrics as CSV (one row per split, recs file and user).")
@click.option("--plot", "plot_path", type=OutputPath(),
              help="Write a PNG of the metrics against k (needs matplotlib).")
@click.option("--items", "items_file", type=click.Path(dir_okay=False), metavar="FILE",
              help="Item ids (first column, e.g. an item feature file) that recommendations may name though "
                   "they are in neither --train nor --test: the new items of a cold-items split.")
@click.option("--paired-test", "paired_test", type=click.Choice(TESTS), default=DEFAULT_TEST, show_default=True,
              help="Paired test over users of each difference to the baseline: Wilcoxon signed-rank, or "
                   "a sign-flip permutation test of the mean (9,999 sign flips, --seed; more, up to 99,999, "
                   "when many tests are corrected together). With --splits: a paired t-test over splits.")
@click.option("--correction", type=click.Choice(CORRECTIONS), default=DEFAULT_CORRECTION, show_default=True,
              help="Multiple-comparison correction over the p-values of the table: Holm, Benjamini-Hochberg, "
                   "or none. Only differences significant after it get a star.")
@click.option("--seed", type=SEED, default=DEFAULT_SEED, show_default=True, help="Seed of --paired-test permutation.")
@click.option("--beyond-accuracy", "beyond", is_flag=True,
              help="Add novelty, average recommended popularity, long-tail share and Gini of exposure at each k.")
@click.option("--item-features", "item_features", type=click.Path(dir_okay=False), metavar="FILE",
              help="Item features (item<TAB>feature[<TAB>weight]): add intra-list diversity at each k "
                   "(implies --beyond-accuracy).")
@click.option("--groups", type=click.Choice(GROUPINGS),
              help="Also report each group: users in tertiles of training-profile size (user-activity), or "
                   "head / long-tail test items (item-popularity).")
@click.option("--n-jobs", type=N_JOBS, default=1, show_default=True,
              help="Score (split, recs file) pairs at once (-1: every core).")
@click.option("--backend", type=click.Choice(BACKENDS), default="threads", show_default=True,
              help="Where --n-jobs workers run: threads, processes, or a Dask cluster.")
@click.option("--scheduler", metavar="tcp://HOST:PORT", help="Dask scheduler [a local cluster].")
@quiet_option
@friendly_errors
def evaluate(train, test, recs, names, ks, splits, report_path, json_path, per_user_path, plot_path, n_jobs, backend,
             scheduler, quiet, verbose, items_file=None, paired_test=DEFAULT_TEST, correction=DEFAULT_CORRECTION,
             seed=DEFAULT_SEED, beyond=False, item_features=None, groups=None, baseline=None, table="compact"):
    """Score recommendation files against held-out test interactions.

    For every user with test items: precision, recall, NDCG, MAP and hit rate at each k,
    and MRR; averaged over those users with a 95% confidence interval (1.96·sd/√n).
    Catalogue coverage at each k is one global number. Training items are removed from
    the recommendations before scoring; test items also in train are ignored.

    A few --recs are columns beside each metric; more are rows, in blocks of metrics that
    fit the terminal. Every run but the baseline (the first --recs, or --baseline) gets its
    paired per-user difference to it (Δ), starred when the p-value of a paired test
    (--paired-test), adjusted over the table (--correction), is below 0.05; --table long
    lists every p-value (p≤: one at the smallest value the permutation test can give). With --splits,
    every path holds a {split} placeholder, each number is the mean over splits ± its
    standard error and the test is a paired t-test over splits.

    --beyond-accuracy adds novelty, average recommended popularity, long-tail share and
    the Gini of exposure (--item-features: intra-list diversity); --groups repeats every
    table per group of users (activity) or of test items (head / long tail).

    The table goes to standard output; --report/--json/--per-user/--plot write files,
    each one complete or not at all (the JSON strict: null, never NaN).
    """
    progress = make_progress(quiet, verbose)
    _check_split_options(train, test, recs, splits)
    names = _check_names(recs, names)
    check_baseline(baseline, names)
    labels = splits or [None]
    inputs = _existing_inputs(train, test, recs, labels)
    if item_features:
        check_readable(item_features, "item feature file")
    check_outputs({"--report": report_path, "--json": json_path, "--per-user": per_user_path,
                    "--plot": plot_path}, inputs + [items_file, item_features])
    if plot_path:
        check_plot_available(plot_path)  # fail before the work, not after

    context = ExecutionContext(backend, n_jobs=n_jobs, scheduler=scheduler)
    catalog = read_id_list(items_file, "item", first_column=True) if items_file else None
    features = read_features(item_features, kind="item") if item_features else None
    study = evaluate_stage(train, test, list(recs), names=names, ks=ks, splits=splits, catalog=catalog,
                           context=context, progress=progress, beyond=beyond, item_features=features,
                           groups=groups, paired_test=paired_test, correction=correction, seed=seed,
                           baseline=baseline)
    written_notes: List[str] = []
    written = write_reports(study, markdown=report_path, json_path=json_path, per_user=per_user_path, plot=plot_path,
                            notes=written_notes)
    data = study.to_dict()
    # the command's result: shown even with --quiet
    echo_result(format_long(data) if table == "long" else format_table(data, notes=False, width=_width()), nl=False)
    if not quiet:  # what happened on the way is a log: standard error, so a pipe gets the table alone
        for note in study_notes(data) + written_notes:
            click.echo(f"note: {printable(note)}", err=True)
    for path in written:
        say(f"wrote {path}", err=True, quiet=quiet)


def _width() -> int:
    """The terminal's columns ($COLUMNS first); DEFAULT_WIDTH when standard output is no terminal."""
    return shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns or DEFAULT_WIDTH


def _existing_inputs(train: str, test: str, recs: Sequence[str], labels) -> List[str]:
    """Every input file of every split, checked up front so a typo fails in one line."""
    files = []
    for label in labels:
        for what, pattern in [("training file", train), ("test file", test)] + [("recommendations file", r) for r in recs]:
            path = resolve_split(pattern, label)
            check_readable(path, what)
            files.append(str(Path(path)))
    return files
