"""``mrec-warp fetch``: download a public dataset into the local cache."""
from __future__ import annotations

import click

from ..data.datasets import DATASETS, ENV_VAR, fetch as fetch_dataset
from ._common import friendly_errors, make_progress, quiet_option
from ._output_paths import OutputPath


@click.command(short_help="Download a public dataset (MovieLens) into the cache.", epilog=f"""\b
Examples:
  mrec-warp fetch movielens-100k
  mrec-warp fetch movielens-1m --dest ~/data
  mrec-warp prepare "$(mrec-warp fetch movielens-100k -q)" -o split/ --format movielens --min-rating 4

\b
Files go to --dest, else ${ENV_VAR}, else ~/.cache/mrec_warp. MovieLens is licensed by
GroupLens for research use and may not be redistributed; see the README beside the data.
""")
@click.argument("name", type=click.Choice(list(DATASETS)))
@click.option("--dest", type=OutputPath(folder=True), help="Cache folder to download into.")
@click.option("--base-url", metavar="URL", help="Download from this mirror instead of files.grouplens.org.")
@quiet_option
@friendly_errors
def fetch(name, dest, base_url, quiet, verbose):
    """Download NAME once, check its MD5, unpack it, and print the ratings file's path.

    A second run finds the data in the cache and downloads nothing. The path alone goes to
    standard output, so it can feed another command.
    """
    progress = make_progress(quiet, verbose)
    path = fetch_dataset(name, dest=dest, base_url=base_url, progress=progress)
    click.echo(str(path))
    if not quiet:
        click.echo(f"{name} is in {path.parent} (read it with --format {DATASETS[name].format}; "
                   "GroupLens licence: research use, no redistribution)", err=True)
