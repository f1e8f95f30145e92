"""``mrec-warp recommend``: top-k lists for many users, streamed to disk."""
from __future__ import annotations

from typing import List, Optional

import click

from ..data.interactions import Interactions
from ..data.io import check_readable, read_ratings
from ..errors import InputError
from ..models import load
from ..recommend import write_recommendations
from ..parallel import check_backend
from ._common import friendly_errors, make_progress, quiet_option
from ._parallel import parallel_options


def read_id_list(path: str, what: str = "user") -> List[str]:
    """One id per line (first whitespace/tab/comma-separated field); blank lines skipped."""
    check_readable(path, f"{what} list")
    ids = []
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            field = line.strip().replace(",", "\t").split("\t")[0].split()
            if field:
                ids.append(field[0])
    if not ids:
        raise InputError(f"no {what} ids found", path=path, hint=f"one {what} id per line")
    return ids


def _check_known(model, ids: List[str], path: str) -> None:
    idx = model.user_indices(ids, strict=False)
    if (idx < 0).any():
        first = int((idx < 0).argmax())
        raise InputError(f"user {ids[first]!r} is not in the model ({int((idx < 0).sum())} unknown)",
                         path=path, line=first + 1, hint="list only users present in the training data")


@click.command(epilog="""\b
Examples:
  mrec-warp recommend model.npz -o recs.tsv -k 20
  mrec-warp recommend model.npz -o recs.parquet --users some_users.txt --n-jobs 2
  mrec-warp recommend model.npz -o recs.tsv --backend dask --scheduler tcp://10.0.0.5:8786 \\
      --workdir /shared/recs.parts      # rerun the same line to resume after a failure
""")
@click.argument("model_file", metavar="MODEL", type=click.Path(dir_okay=False))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False),
              help="Where to write user, item, score, rank rows (best first).")
@click.option("-k", "k", type=click.IntRange(min=1), default=10, show_default=True, help="Items per user.")
@click.option("--train", "train_file", type=click.Path(dir_okay=False),
              help="Exclude these interactions instead of the ones stored in the model.")
@click.option("--users", "users_file", type=click.Path(dir_okay=False),
              help="File with one user id per line (default: every user of the model).")
@click.option("--format", "fmt", type=click.Choice(["tsv", "csv", "parquet"]),
              help="Output format [from the file suffix; tsv otherwise].")
@click.option("--n-jobs", type=int, default=1, show_default=True,
              help="Workers scoring user blocks (-1: every core; with dask and no --scheduler: local workers).")
@click.option("--block-size", type=click.IntRange(min=1), help="Users scored per block (bounds memory).")
@parallel_options(workdir_help="Folder for resumable part files [OUTPUT.parts with --backend processes/dask]; "
                               "a rerun of the same command skips the finished parts.")
@click.option("--part-size", type=click.IntRange(min=1), help="Users per part file [20000].")
@quiet_option
@friendly_errors
def recommend(model_file, output, k, train_file, users_file, fmt, n_jobs, block_size, backend, scheduler, workdir,
              part_size, quiet, verbose):
    """Write the top-k items for each user of MODEL, excluding items they already have.

    Output is headerless TSV ``user<TAB>item<TAB>score<TAB>rank`` (CSV with a header for
    .csv, Parquet for .parquet), written block by block to a temporary file that replaces
    OUTPUT only when complete.
    """
    progress = make_progress(quiet, verbose)
    check_readable(model_file, "model file")
    model = load(model_file)
    exclude = "train"
    if train_file:
        seen = Interactions.from_dataframe(read_ratings(train_file), user_ids=model.user_ids, item_ids=model.item_ids)
        exclude = seen.matrix
    user_ids: Optional[List[str]] = None
    if users_file:
        user_ids = read_id_list(users_file)
        _check_known(model, user_ids, users_file)
    check_backend(backend, scheduler)
    n = write_recommendations(model, output, k=k, user_ids=user_ids, exclude=exclude, format=fmt,
                              n_jobs=n_jobs, block_size=block_size, progress=progress, backend=backend,
                              scheduler=scheduler, workdir=workdir, part_size=part_size, model_file=model_file)
    if not quiet:
        n_users = model.n_users if user_ids is None else len(user_ids)
        click.echo(f"wrote {output}: {n} recommendations for {n_users} users")
