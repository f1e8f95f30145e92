"""``mrec-warp recommend``: top-k lists for many users, streamed to disk."""
from __future__ import annotations

import click

from ..models.fallback import UNKNOWN_USERS
from ..progress import plural
from ..stages.recommend import run_recommend
from ..stages.recommend_inputs import ColdStartOptions
from ..tables import TableOutput
from ._common import friendly_errors, make_progress, quiet_option, say
from ._features import feature_file_options
from ._flags import as_flags
from ._parallel import parallel_options
from ._output_paths import OutputPath


@click.command(epilog="""\b
Examples:
  mrec-warp recommend model.npz -o recs.tsv -k 20
  mrec-warp recommend model.npz -o recs.parquet --users some_users.txt --n-jobs 2
  mrec-warp recommend model.npz -o recs.tsv --users batch.txt --unknown-users skip
  mrec-warp recommend model.npz -o recs.tsv --users batch.txt --unknown-users popular  # + source column
  mrec-warp recommend model.npz -o recs.tsv --backend dask --scheduler tcp://10.0.0.5:8786 \\
      --workdir /shared/recs.parts      # rerun the same line to resume after a failure
  mrec-warp recommend hybrid.npz -o recs.tsv --item-features items.tsv --include-new-items
  mrec-warp recommend hybrid.npz -o cold.tsv --new-items-only      # rank only items unseen in training
  mrec-warp recommend hybrid.npz -o recs.tsv --user-features new_users.tsv   # new users by features
  mrec-warp recommend model.npz -o recs.tsv --history new_users.tsv  # fold in, no refit
  mrec-warp recommend pop.npz -o recs.tsv --history new_users.tsv    # popularity for new users
  mrec-warp recommend model.npz -o recs.tsv --exclude-items discontinued.txt
  mrec-warp index model.npz && mrec-warp recommend model.npz -o recs.tsv --ann   # approximate, faster
""")
@friendly_errors
@click.argument("model_file", metavar="MODEL", type=click.Path(dir_okay=False))
@click.option("-o", "--output", required=True, type=OutputPath(),
              help="Where to write user, item, score, rank rows (best first); a name ending in .gz "
                   "is gzip-compressed.")
@click.option("-k", "k", type=click.IntRange(min=1), default=10, show_default=True, help="Items per user.")
@click.option("--train", "train_file", type=click.Path(dir_okay=False),
              help="Exclude these interactions instead of the ones stored in the model (its ids must be the "
                   "model's: a file with more than 5% of rows naming unknown users or items is refused).")
@click.option("--exclude-items", "exclude_items_file", type=click.Path(dir_okay=False), metavar="FILE",
              help="Item ids, one per line, never to recommend to anyone (besides each user's seen items).")
@click.option("--users", "users_file", type=click.Path(dir_okay=False),
              help="File with one user id per line, in output order (default: every user of the model).")
@click.option("--unknown-users", type=click.Choice(UNKNOWN_USERS), default=UNKNOWN_USERS[0], show_default=True,
              help="What --users ids the model does not know get: refuse (exit 2, nothing written; a popularity "
                   "model serves them its ranking), skip (left out; a note says how many), or popular (the "
                   "items most training users have; every row then gets a 5th column, source: popular or "
                   "personal). A user with --history rows is folded in, not unknown.")
@click.option("--format", "fmt", type=click.Choice(["tsv", "csv", "parquet"]),
              help="Output format [from the file suffix; tsv otherwise].")
@click.option("--block-size", type=click.IntRange(min=1), help="Users scored per block (bounds memory).")
@parallel_options(n_jobs_default=-1,
                  n_jobs_help="Workers scoring user blocks (-1: every core; with dask and no --scheduler: local "
                              "workers). Each scores on one BLAS thread, so the output is the same for any count.",
                  workdir_help="Folder for resumable part files [OUTPUT.parts with --backend processes/dask]; "
                               "a rerun of the same command skips the finished parts.")
@click.option("--part-size", type=click.IntRange(min=1), help="Users per part file [20000, or --block-size if larger].")
@click.option("--partitions", type=click.IntRange(min=1), metavar="P",
              help="With --backend dask: cut the users into P blocks, each (its factors and seen items) held and "
                   "scored by one worker, one part file each; the same output [off: every worker loads the model].")
@feature_file_options
@click.option("--include-new-items", is_flag=True,
              help="Hybrid: also rank items known only by their features (from --item-features or "
                   "kept at training) alongside the trained ones.")
@click.option("--new-items-only", is_flag=True,
              help="Hybrid: rank only the items known by their features alone (cold-start evaluation).")
@click.option("--history", "history", type=click.Path(dir_okay=False), metavar="FILE",
              help="user<TAB>item rows of users to fold in without refitting (new users are added, "
                   "known ones refined); recommends for them unless --users is given.")
@click.option("--fold-in-epochs", type=click.IntRange(min=1), help="Passes over --history [30].")
@click.option("--ann", is_flag=True,
              help="Rank with the model's approximate index MODEL.ann (mrec-warp index; the [ann] extra): faster "
                   "on large catalogues, recall below 1; seen and filtered items still never listed. A stale "
                   "index is refused. [exact]")
@quiet_option
def recommend(model_file, output, k, train_file, exclude_items_file, users_file, unknown_users, fmt, block_size,
              context, part_size, partitions, features, include_new_items, new_items_only, history, fold_in_epochs, ann,
              quiet, verbose):
    """Write the top-k items for each user of MODEL, excluding items they already have.

    Output is headerless TSV ``user<TAB>item<TAB>score<TAB>rank`` (CSV with a header for
    .csv, Parquet for .parquet; gzip-compressed for a name ending in .gz), written block by
    block to a temporary file that replaces OUTPUT only when complete. With
    ``--unknown-users popular`` each row has a fifth field, ``source``: ``personal``, or
    ``popular`` for a user the model does not know, whose list is the fallback.
    """
    progress = make_progress(quiet, verbose)
    cold = ColdStartOptions(features, include_new_items=include_new_items, new_items_only=new_items_only,
                            history=history, fold_in_epochs=fold_in_epochs)
    result = run_recommend(model_file, TableOutput(output, fmt), k, users=users_file, train=train_file,
                           exclude_items=exclude_items_file, cold=cold, ann=ann, unknown_users=unknown_users,
                           block_size=block_size, part_size=part_size, partitions=partitions, context=context,
                           progress=progress)
    for note in [] if quiet else result.notes:
        click.echo(f"note: {as_flags(note)}", err=True)
    say(f"wrote {output}: {plural(result.rows, 'recommendation')} for {plural(result.users, 'user')}", quiet=quiet)
