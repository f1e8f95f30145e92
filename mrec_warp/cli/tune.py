"""``mrec-warp tune``: search model families and their hyper-parameters with parallel trials."""
from __future__ import annotations

import json

import click

from .. import strict_json
from ..files import atomic_write
from ..errors import InputError
from ..seeds import DEFAULT_SEED
from ..models.families import DEFAULT_FAMILY, FAMILIES, tunable_families
from ..stages import candidates as search
from ..stages.budget import parse_duration
from ..stages.tune import run_tune
from ..files import check_outputs
from ._common import SEED, echo_result, friendly_errors, make_progress, quiet_option, row_options, say
from ._flags import as_flags
from ._parallel import parallel_options
from ._output_paths import OutputPath


@click.command(short_help="Search model families and hyper-parameters (trials in parallel).", epilog="""\b
Examples:
  mrec-warp tune split/train.tsv --time-budget 2m -o best.json   # every family
  mrec-warp tune split/train.tsv --random 16 --n-jobs 2 -o best.json
  mrec-warp tune split/train.tsv --grid grid.json -o best.json --backend dask
  mrec-warp tune split/train.tsv --models warp,itemknn,slim,ease,wrmf -o best.json
  mrec-warp tune plays.tsv --models wrmf --random 16 -o best.json   # alpha, regularization, ...
  mrec-warp train split/train.tsv --params best.json -o model.npz

\b
Each family's defaults are always a trial, so the best is never worse than them on
validation; the vs_defaults_pct column says by how much each trial differs from its
family's defaults, in percent as the summary line (--table: 3.0 for +3.0%). With --models and no --grid/--random each family tries a small
built-in grid; with --random N, N candidates per family are drawn around its defaults.
A grid for several families names them: {"slim": {"l1": [2, 5]}, "ease": {"l2": [100, 400]}}.

\b
--time-budget DURATION (90s, 2m, 1h) runs successive halving: warp and wrmf try
every candidate with a few epochs first and only the best half goes on to longer
trials; each trial's cost is estimated before it starts, and families that cannot fit
the budget or the memory are skipped with a line saying so. The table shows each
trial's 95% interval over validation users (ci95) and the popularity baseline; when the
best families are within noise (the paired 95% interval of their per-user difference
includes 0), the cheaper one is picked and a line says so.

\b
A grid file is a JSON object of parameter -> list of values, e.g.
  {"factors": [32, 64], "learning_rate": [0.02, 0.05], "max_sampled": [20, 50]}
Tunable: factors, learning_rate, user_reg, item_reg, max_sampled, user_max_norm and
item_max_norm (null: no limit); also loss, kos_k, kos_n, learning_schedule, item_bias.
WRMF: factors, alpha, regularization, confidence (linear/log), cg_steps; its trials weigh
TRAIN's value column (3rd) as confidence when there is one.
With --random N and --grid, N points are drawn from the grid's values; with --random
alone, from a default space.
""")
@friendly_errors
@click.argument("train", type=click.Path(dir_okay=False))
@click.option("--models", "models", default="all", show_default=True, metavar="NAME[,NAME...]",
              help=f"Model families to search: {', '.join(tunable_families())}, or all (a flat --grid or "
                   f"--random alone without --models: {DEFAULT_FAMILY}).")
@click.option("--time-budget", "time_budget", metavar="DURATION",
              help="Search within this time (90s, 2m, 1h): short trials first, the best promoted.")
@click.option("--grid", "grid_file", type=click.Path(dir_okay=False), help="JSON grid of candidate values.")
@click.option("--random", "n_random", type=click.IntRange(min=1), help="Try N random candidates.")
@click.option("-o", "--output", type=OutputPath(),
              help="Write the best parameters as JSON (for 'train --params').")
@click.option("--table", "table_file", type=OutputPath(), help="Write every trial as TSV.")
@click.option("--validation", "validation_file", type=click.Path(dir_okay=False),
              help="Validation file, its layout guessed (--sep/--columns describe TRAIN) [hold out "
                   "--validation-fraction of each user's items].")
@click.option("--validation-fraction", type=float, default=0.1, show_default=True,
              help="Share of each user's items held out to score the trials.")
@click.option("-k", "k", type=click.IntRange(min=1), default=10, show_default=True,
              help="Cut-off of the validation precision (trials are sorted by it).")
@click.option("--max-epochs", type=click.IntRange(min=1), default=100, show_default=True,
              help="Most epochs a WARP trial may train (early stopping picks the count; WRMF keeps its own).")
@click.option("--patience", type=click.IntRange(min=1), default=10, show_default=True,
              help="Epochs after the last rise of the score before a trial stops (as train's WARP "
                   "default: a shorter one favours settings that peak early, such as no norm limit).")
@row_options("TRAIN")
@click.option("--seed", type=SEED, default=DEFAULT_SEED, show_default=True, help="Seed of the split, sampling and models.")
@parallel_options(n_jobs_default=1,
                  n_jobs_help="Trials at once (-1: every core; with dask and no --scheduler: local workers).",
                  workdir_help="Folder for one result file per finished trial; a rerun skips them.")
@quiet_option
def tune(train, models, time_budget, grid_file, n_random, output, table_file, validation_file, validation_fraction, k,
         max_epochs, patience, rows, seed, context, quiet, verbose):
    """Fit each candidate on TRAIN and rank the candidates by validation precision@k.

    Every trial uses the same split and seed (WARP trials early-stop on their own), so the
    table compares families and parameters only; each trial is single-threaded and
    --n-jobs trials run at once. The table (best first) and a line saying how far the best
    is above the defaults go to standard output, also with --quiet.
    """
    models_given = click.get_current_context().get_parameter_source("models") != click.core.ParameterSource.DEFAULT
    seconds = None
    if time_budget is not None:
        try:
            seconds = parse_duration(time_budget)
        except InputError as exc:
            raise click.BadParameter(str(exc).replace("`time_budget` ", ""), param_hint="--time-budget") from None
    if not grid_file and not n_random and not models_given and seconds is None:
        # a bare `tune TRAIN` is more likely a forgotten option than a wish for every built-in grid
        raise click.UsageError("give --time-budget DURATION, --grid FILE or --random N (a budget goes with either "
                               "of the others), or --models to use built-in grids")
    if models.strip() == "all":
        # a flat grid, or --random alone, searched warp before every family was the default
        families = list(tunable_families()) if models_given or seconds is not None or not (
            grid_file or n_random) else _grid_families(grid_file)
    else:
        families = [m.strip() for m in models.split(",") if m.strip()]
    unknown = [m for m in families if m not in tunable_families()]
    if not families or unknown:
        raise click.BadParameter(f"unknown model family {unknown[0] if unknown else models!r}; choose among "
                                 f"{', '.join(tunable_families())} or all", param_hint="--models")
    families = list(dict.fromkeys(families))
    if not 0 < validation_fraction < 1:
        raise click.BadParameter("must be between 0 and 1, e.g. 0.1", param_hint="--validation-fraction")
    check_outputs({"--output": output, "--table": table_file}, [train, grid_file, validation_file])
    progress = make_progress(quiet, verbose)
    grids = search.read_grid(grid_file, families) if grid_file else None
    points = search.candidates(families, grids, n_random, seed=seed)
    result = run_tune(train, points, validation=validation_file, validation_fraction=validation_fraction, k=k,
                      base={"max_epochs": max_epochs, "patience": patience}, seed=seed, context=context,
                      progress=progress, rows=rows, time_budget=seconds, baseline=True)
    if "error" in result.table:  # failed trials' errors name parameters: show the flags the user typed
        result.table["error"] = result.table["error"].map(lambda e: as_flags(e) if isinstance(e, str) else e)
    if result.table[result.metric].isna().all():
        raise InputError("every trial failed (diverged)", path=train, hint="lower the learning rates tried")
    if output:
        with atomic_write(output) as fh:
            strict_json.dump(result.best_json(), fh, indent=2)
            fh.write("\n")
    if table_file:
        with atomic_write(table_file) as fh:
            result.table.to_csv(fh, sep="\t", index=False, lineterminator="\n")
    echo_result(result.format_table(), nl=False)  # the command's result: shown even with --quiet
    echo_result(result.summary())
    if output:
        say(f"wrote {output}: best {result.metric} {result.best_json()['score']:.4f}", err=True, quiet=quiet)


def _grid_families(grid_file) -> list:
    """The families a grid file names (a flat grid, or none: the default family's)."""
    if not grid_file:
        return [DEFAULT_FAMILY]
    try:
        grid = json.loads(open(grid_file).read())
    except (OSError, ValueError):
        return [DEFAULT_FAMILY]  # read_grid says what is wrong with it
    if isinstance(grid, dict) and grid and all(k in FAMILIES for k in grid):
        return [k for k in grid if k in tunable_families()] or [DEFAULT_FAMILY]
    return [DEFAULT_FAMILY]
