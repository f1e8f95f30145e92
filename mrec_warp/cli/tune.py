"""``mrec-warp tune``: search WARP's hyper-parameters with parallel trials."""
from __future__ import annotations

import json

import click

from ..data.io import atomic_write
from ..errors import InputError
from ..parallel import check_backend
from ._common import check_outputs, friendly_errors, make_progress, quiet_option
from ._parallel import N_JOBS, parallel_options


@click.command(short_help="Search WARP's hyper-parameters (trials in parallel).", epilog="""\b
Examples:
  mrec-warp tune split/train.tsv --random 16 --n-jobs 2 -o best.json
  mrec-warp tune split/train.tsv --grid grid.json -o best.json --backend dask
  mrec-warp train split/train.tsv --params best.json -o model.npz
  mrec-warp tune plays.tsv --model wrmf --random 16 -o best.json   # alpha, regularization, ...

\b
A grid file is a JSON object of parameter -> list of values, e.g.
  {"factors": [32, 64], "learning_rate": [0.02, 0.05], "max_sampled": [20, 50]}
Tunable: factors, learning_rate, user_reg, item_reg, max_sampled, user_max_norm and
item_max_norm (null: no limit); also loss, kos_k, kos_n, learning_schedule, item_bias.
WRMF (--model wrmf): factors, alpha, regularization, confidence (linear/log), cg_steps.
With --random N and --grid, N points are drawn from the grid's values; with --random
alone, from a default space.
""")
@click.argument("train", type=click.Path(dir_okay=False))
@click.option("--model", "model_name", type=click.Choice(["warp", "wrmf"]), default="warp", show_default=True,
              help="Which model the trials fit.")
@click.option("--grid", "grid_file", type=click.Path(dir_okay=False), help="JSON grid of candidate values.")
@click.option("--random", "n_random", type=click.IntRange(min=1), help="Try N random candidates.")
@click.option("-o", "--output", type=click.Path(dir_okay=False),
              help="Write the best parameters as JSON (for 'train --params').")
@click.option("--table", "table_file", type=click.Path(dir_okay=False), help="Write every trial as TSV.")
@click.option("--validation", "validation_file", type=click.Path(dir_okay=False),
              help="Validation file [hold out --validation-fraction of each user's items].")
@click.option("--validation-fraction", type=float, default=0.1, show_default=True,
              help="Share of each user's items held out to score the trials.")
@click.option("-k", "k", type=click.IntRange(min=1), default=10, show_default=True,
              help="Cut-off of the validation precision (trials are sorted by it).")
@click.option("--max-epochs", type=click.IntRange(min=1), default=100, show_default=True,
              help="Most epochs a trial may train (early stopping picks the count).")
@click.option("--patience", type=click.IntRange(min=1), default=10, show_default=True,
              help="Evaluations without improvement before a trial stops (as in train: a "
                   "shorter one favours settings that peak early, such as no norm limit).")
@click.option("--format", "fmt", default="auto", show_default=True,
              type=click.Choice(["auto", "tsv", "csv", "movielens"]), help="Format of TRAIN.")
@click.option("--seed", type=int, default=42, show_default=True, help="Seed of the split, sampling and models.")
@click.option("--n-jobs", type=N_JOBS, default=1, show_default=True,
              help="Trials at once (-1: every core; with dask and no --scheduler: local workers).")
@parallel_options(workdir_help="Folder for one result file per finished trial; a rerun skips them.")
@quiet_option
@friendly_errors
def tune(train, model_name, grid_file, n_random, output, table_file, validation_file, validation_fraction, k, max_epochs,
         patience, fmt, seed, n_jobs, backend, scheduler, workdir, quiet, verbose):
    """Fit WARP once per candidate on TRAIN and rank the candidates by validation precision@k.

    Every trial uses the same split and seed and early-stops on its own, so the table
    compares parameters only; each trial is single-threaded and --n-jobs trials run at
    once. The table (best first) goes to standard output.
    """
    from .. import tune as tuning
    from .train import load_interactions

    if not grid_file and not n_random:
        raise click.UsageError("give --grid FILE, --random N, or both")
    if not 0 < validation_fraction < 1:
        raise click.BadParameter("must be between 0 and 1, e.g. 0.1", param_hint="--validation-fraction")
    check_backend(backend, scheduler)
    check_outputs({"--output": output, "--table": table_file}, [train, grid_file, validation_file])
    progress = make_progress(quiet, verbose)
    grid = tuning.read_grid(grid_file) if grid_file else None
    if n_random:
        space = {name: values for name, values in grid.items()} if grid else (
            tuning.WRMF_SPACE if model_name == "wrmf" else None)
        points = tuning.random_points(n_random, space, seed=seed)
    else:
        points = tuning.grid_points(grid)
    data = load_interactions(train, fmt, values=model_name == "wrmf")
    validation = load_interactions(validation_file, fmt) if validation_file else None
    result = tuning.tune(data, points, validation=validation, validation_fraction=validation_fraction, k=k,
                         base={"max_epochs": max_epochs, "patience": patience}, seed=seed, backend=backend,
                         n_jobs=n_jobs, scheduler=scheduler, workdir=workdir, progress=progress,
                         model=model_name, use_values=data.has_values)
    if result.table[result.metric].isna().all():
        raise InputError("every trial failed (diverged)", path=train, hint="lower the learning rates tried")
    if output:
        with atomic_write(output) as fh:
            json.dump(result.best_json(), fh, indent=2)
            fh.write("\n")
    if table_file:
        with atomic_write(table_file) as fh:
            result.table.to_csv(fh, sep="\t", index=False, lineterminator="\n")
    if not quiet:
        click.echo(result.format_table(), nl=False)
        if output:
            click.echo(f"wrote {output}: best {result.metric} {result.best_json()['score']:.4f}", err=True)
