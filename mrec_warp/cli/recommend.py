"""``mrec-warp recommend``: top-k lists for many users, streamed to disk."""
from __future__ import annotations

from typing import List, Optional

import click
import numpy as np
import pandas as pd
import scipy.sparse as sp

from ..context import ExecutionContext
from ..data.idlist import read_id_list
from ..data.inputs import check_readable
from ..data.ratings import read_ratings
from ..errors import InputError
from ..models import load
from ..models.popularity import Popularity
from ..stages.recommend import write_recommendations
from ._common import cap_k, check_outputs, friendly_errors, make_progress, quiet_option
from ..stages.cold_start import cold_start
from ._features import feature_file_options, pop_feature_options
from ._parallel import N_JOBS, parallel_options


#: Most of a --train file's rows that may name users or items the model does not know. A
#: few are legitimate (e.g. users or items dropped when the model was trained, which the
#: model cannot recommend to or recommend anyway); more means another data set's file.
MAX_UNKNOWN_TRAIN_SHARE = 0.05


def _check_known(model, ids: List[str], path: str, progress) -> bool:
    """Refuse unknown users, except for a popularity model, which serves them its overall
    ranking (they have no history). Returns whether the model gained users."""
    idx = model.user_indices(ids, strict=False)
    if not (idx < 0).any():
        return False
    unknown = list(dict.fromkeys(u for u, i in zip(ids, idx) if i < 0))
    if isinstance(model, Popularity):
        model._append_users(unknown)
        progress.log(f"{len(unknown)} users are not in the model: they get the most popular items overall "
                     "(give their history with --history to exclude what they have seen)")
        return True
    first = int((idx < 0).argmax())
    raise InputError(f"user {ids[first]!r} is not in the model ({len(unknown)} unknown)",
                     path=path, line=first + 1, hint="list only users present in the training data, "
                     "or fold new users in with --history")


def train_exclusion(model, path: str, progress) -> sp.csr_matrix:
    """The interactions of a --train file as an exclusion matrix in the model's id space.

    A file whose rows mostly name users or items the model does not know is another data
    set's (or another split's) file: excluding its items would silently let every user's
    own training items through, so it is refused with the counts.
    """
    rows = read_ratings(path)
    users = model.user_indices(rows["user"].to_numpy(), strict=False)
    items = model.item_indices(rows["item"].to_numpy(), strict=False)
    unknown = (users < 0) | (items < 0)
    n_bad = int(unknown.sum())
    if n_bad:
        n_users = len(pd.unique(rows["user"].to_numpy()[users < 0]))
        n_items = len(pd.unique(rows["item"].to_numpy()[items < 0]))
        what = f"{n_bad} of {len(rows)} rows name ids the model does not know ({n_users} users, {n_items} items)"
        if n_bad > MAX_UNKNOWN_TRAIN_SHARE * len(rows):
            first = int(np.argmax(unknown))
            example = rows["user"].iloc[first] if users[first] < 0 else rows["item"].iloc[first]
            raise InputError(f"--train does not match the model: {what}, e.g. {example!r}", path=path,
                             hint="give the training file of this model; without --train the model's own "
                                  "training interactions are excluded")
        progress.log(f"note: --train: {what}; those rows are ignored (the model cannot recommend those items "
                     "or to those users)")
    keep = ~unknown
    csr = sp.csr_matrix((np.ones(int(keep.sum()), np.float32), (users[keep], items[keep])),
                        shape=(model.n_users, model.n_items))
    csr.sum_duplicates()
    csr.data[:] = 1.0
    return csr


def read_filtered_items(model, path: str, progress) -> List[str]:
    """--exclude-items: ids the model knows (unknown ones cannot be recommended anyway)."""
    ids = read_id_list(path, "item")
    known = model.item_indices(ids, strict=False) >= 0
    if not known.any():
        raise InputError(f"none of the {len(ids)} items is in the model, e.g. {ids[0]!r}", path=path,
                         hint="one item id of the training data per line")
    if not known.all():
        progress.log(f"note: --exclude-items: {int((~known).sum())} of {len(ids)} items are not in the model "
                     "(they cannot be recommended anyway)")
    return [i for i, k in zip(ids, known) if k]


@click.command(epilog="""\b
Examples:
  mrec-warp recommend model.npz -o recs.tsv -k 20
  mrec-warp recommend model.npz -o recs.parquet --users some_users.txt --n-jobs 2
  mrec-warp recommend model.npz -o recs.tsv --backend dask --scheduler tcp://10.0.0.5:8786 \\
      --workdir /shared/recs.parts      # rerun the same line to resume after a failure
  mrec-warp recommend hybrid.npz -o recs.tsv --item-features items.tsv --include-new-items
  mrec-warp recommend hybrid.npz -o cold.tsv --new-items-only      # rank only items unseen in training
  mrec-warp recommend hybrid.npz -o recs.tsv --user-features new_users.tsv   # new users by features
  mrec-warp recommend model.npz -o recs.tsv --history new_users.tsv  # fold in, no refit
  mrec-warp recommend pop.npz -o recs.tsv --history new_users.tsv    # popularity for new users
  mrec-warp recommend model.npz -o recs.tsv --exclude-items discontinued.txt
""")
@click.argument("model_file", metavar="MODEL", type=click.Path(dir_okay=False))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False),
              help="Where to write user, item, score, rank rows (best first); a name ending in .gz "
                   "is gzip-compressed.")
@click.option("-k", "k", type=click.IntRange(min=1), default=10, show_default=True, help="Items per user.")
@click.option("--train", "train_file", type=click.Path(dir_okay=False),
              help="Exclude these interactions instead of the ones stored in the model (its ids must be the "
                   "model's: a file with more than 5% of rows naming unknown users or items is refused).")
@click.option("--exclude-items", "exclude_items_file", type=click.Path(dir_okay=False), metavar="FILE",
              help="Item ids, one per line, never to recommend to anyone (besides each user's seen items).")
@click.option("--users", "users_file", type=click.Path(dir_okay=False),
              help="File with one user id per line (default: every user of the model).")
@click.option("--format", "fmt", type=click.Choice(["tsv", "csv", "parquet"]),
              help="Output format [from the file suffix; tsv otherwise].")
@click.option("--n-jobs", type=N_JOBS, default=-1, show_default=True,
              help="Workers scoring user blocks (-1: every core; with dask and no --scheduler: local workers). "
                   "Each scores on one BLAS thread, so the output is the same for any count.")
@click.option("--block-size", type=click.IntRange(min=1), help="Users scored per block (bounds memory).")
@parallel_options(workdir_help="Folder for resumable part files [OUTPUT.parts with --backend processes/dask]; "
                               "a rerun of the same command skips the finished parts.")
@click.option("--part-size", type=click.IntRange(min=1), help="Users per part file [20000].")
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
@quiet_option
@friendly_errors
def recommend(model_file, output, k, train_file, exclude_items_file, users_file, fmt, n_jobs, block_size, backend,
              scheduler, workdir, part_size, quiet, verbose, **cold):
    """Write the top-k items for each user of MODEL, excluding items they already have.

    Output is headerless TSV ``user<TAB>item<TAB>score<TAB>rank`` (CSV with a header for
    .csv, Parquet for .parquet; gzip-compressed for a name ending in .gz), written block by
    block to a temporary file that replaces OUTPUT only when complete.
    """
    progress = make_progress(quiet, verbose)
    context = ExecutionContext(backend, n_jobs=n_jobs, scheduler=scheduler, workdir=workdir)
    check_outputs({"--output": output}, [model_file, train_file, users_file, cold.get("history"),
                                         cold.get("item_features"), cold.get("user_features")])
    check_readable(model_file, "model file")
    model = load(model_file)
    feature_opts = pop_feature_options(cold)
    # repeated users get one list, and the user hears about it (unless -q)
    note = None if quiet else (lambda line: click.echo(f"note: {line}", err=True))
    requested = read_id_list(users_file, unique=True, note=note) if users_file else None
    extended = cold_start(model, model_file, **feature_opts, include_new_items=cold["include_new_items"],
                          new_items_only=cold["new_items_only"], history=cold["history"],
                          fold_in_epochs=cold["fold_in_epochs"], requested_users=requested, progress=progress)
    model, focus, changed = extended.model, extended.users, extended.changed
    user_ids: Optional[List[str]] = None
    if users_file:
        user_ids = requested
        changed = _check_known(model, user_ids, users_file, progress) or changed
    elif focus is not None:  # --user-features / --history: recommend for those users
        user_ids = focus
    exclude = train_exclusion(model, train_file, progress) if train_file else "train"
    filtered = read_filtered_items(model, exclude_items_file, progress) if exclude_items_file else None
    k = cap_k(k, model.n_items, quiet)
    n = write_recommendations(model, output, k=k, user_ids=user_ids, exclude=exclude, format=fmt,
                              filter_items=filtered, block_size=block_size, part_size=part_size,
                              model_file=None if changed else model_file, context=context, progress=progress)
    if not quiet:
        n_users = model.n_users if user_ids is None else len(user_ids)
        click.echo(f"wrote {output}: {n} recommendations for {n_users} users")
