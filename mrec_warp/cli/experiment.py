"""``mrec-warp experiment``: every model of a TOML file on every split, one report folder."""
from __future__ import annotations

import click

from ..experiments.run import experiment as run_experiment
from ._common import friendly_errors, make_progress, quiet_option, say
from ._parallel import parallel_options
from ._output_paths import OutputPath


@click.command(short_help="Compare models on several splits from one TOML file (paired, corrected tests).",
               epilog="""\b
Examples:
  mrec-warp experiment data/experiment-ml100k.toml --n-jobs 2
  mrec-warp experiment exp.toml -o report/ --backend dask --scheduler tcp://10.0.0.5:8786

\b
CONFIG names the data and its reader options ([data]), one or more split sets
([splits.NAME]: kind, repeats, test_fraction, seed), the models ([models.NAME]: family and
its parameters), the cut-offs, metrics, baseline, paired test and correction ([evaluate]);
docs/tutorials/experiments.rst lists every key. The whole file is checked before any work, the data
file included (columns, timestamps, cut-off): a fault is one line naming the file and the
line of the key. A run that fails before any run finished leaves no work folder.

\b
Each (model, split) run fits on one thread; --n-jobs runs that many at once. Finished runs
are kept in the work folder (OUTPUT/work): rerunning an interrupted experiment skips them.
The report folder holds results.md / results.csv (mean ± interval per model and metric,
paired differences to the baseline with corrected p-values), each split set's evaluate
reports, accuracy-vs-novelty.png (with matplotlib), the config and reproduce.json.
The same file gives byte-identical tables. The folder records whose report it holds: a
folder with other files or another experiment's report is refused (--force replaces it).
""")
@friendly_errors
@click.argument("config", type=click.Path(dir_okay=False))
@click.option("-o", "--output", type=OutputPath(folder=True),
              help="Report folder [the file's output key, relative to the file].")
@parallel_options(n_jobs_default=1,
                  n_jobs_help="Runs at once, each on one thread (-1: every core; with dask and no --scheduler: local "
                              "workers).",
                  workdir_help="Folder of the finished runs [OUTPUT/work]; a rerun skips them.", keep_parts="keep_work")
@click.option("--keep-work", is_flag=True, help="Keep the work folder (splits, recommendations) after the report.")
@click.option("--force", is_flag=True,
              help="Write into a folder that holds other files or another experiment's report: that report is "
                   "replaced whole (without it such a folder is refused).")
@quiet_option
def experiment(config, output, context, force, quiet, verbose):
    """Run every model of CONFIG on every split and write one report folder.

    The headline table goes to standard output, also with --quiet; one log line per
    finished run goes to standard error.
    """
    progress = make_progress(quiet, verbose)
    result = run_experiment(config, output, context=context, progress=progress, force=force)
    click.echo((result.output / "results.md").read_text(), nl=False)
    for note in result.notes:
        say(f"note: {note}", err=True, quiet=quiet)
    say(f"wrote {result.output}/ ({result.runs} runs, {result.skipped} from an earlier run; "
        f"{result.seconds:.0f}s)", err=True, quiet=quiet)
