"""``mrec-warp synth``: synthetic ratings and item tags with a learnable structure."""
from __future__ import annotations

import click

from ..data.synthetic import VALUES, write_synthetic
from ..seeds import DEFAULT_SEED
from ._common import SEED, friendly_errors, make_progress, quiet_option, say
from ._flags import ParameterOption
from ._output_paths import OutputPath


@click.command(short_help="Generate synthetic ratings and item tags.", epilog="""\b
Examples:
  mrec-warp synth -o data/sample                  # the shipped sample (3000 x 1500, ~50k rows)
  mrec-warp synth -o big/ --users 500000 --items 100000 --interactions 20000000 --seed 1
  mrec-warp synth -o plays/ --values counts --noise 0.3   # play counts that carry signal
""")
@click.option("-o", "--output", "outdir", required=True, type=OutputPath(folder=True),
              help="Folder for ratings.tsv and item_tags.tsv (created if needed).")
# each sets write_synthetic's n_<name>, which its messages name
@click.option("--users", type=int, default=3000, show_default=True, help="Number of users (ids u1, u2, ...).",
              cls=ParameterOption, parameters=("n_users",))
@click.option("--items", type=int, default=1500, show_default=True, help="Number of items (ids i1, i2, ...).",
              cls=ParameterOption, parameters=("n_items",))
@click.option("--interactions", type=int, default=50_000, show_default=True, cls=ParameterOption,
              parameters=("n_interactions",),
              help="About how many distinct (user, item) rows to write.")
@click.option("--topics", type=int, default=20, show_default=True, cls=ParameterOption, parameters=("n_topics",),
              help="Latent topics: the rank of the structure a model can learn.")
@click.option("--values", "values", type=click.Choice(VALUES), default="ratings", show_default=True,
              help="Third column: 1-5 ratings, or play counts (1 + Poisson, large for the items of "
                   "the user's own topics, near 1 for stray ones).")
@click.option("--noise", type=click.FloatRange(0, 1), default=0.1, show_default=True,
              help="Share of rows drawn by global popularity instead of the user's topics.")
@click.option("--seed", type=SEED, default=DEFAULT_SEED, show_default=True, help="Same seed, same files.")
@quiet_option
@friendly_errors
def synth(outdir, users, items, interactions, topics, values, noise, seed, quiet, verbose):
    """Generate synthetic implicit feedback: ratings.tsv and item_tags.tsv.

    Users mix a few latent topics; items have Zipf popularity within their topic; user
    activity is log-normal; ratings 1-5 grow with the user's affinity for the item's topic;
    timestamps increase along each user's rows; with --values counts the third column is a
    play count instead, large for the items of the user's own topics. ratings.tsv is headerless
    user<TAB>item<TAB>rating<TAB>timestamp; item_tags.tsv is item<TAB>tag, 1-4 tags per
    item mostly from its topic. Files are streamed, so 20M rows need well under 1 GB.
    """
    progress = make_progress(quiet, verbose)
    info = write_synthetic(outdir, n_users=users, n_items=items, n_interactions=interactions,
                           n_topics=topics, seed=seed, progress=progress, values=values, noise=noise)
    say(f"wrote {info['ratings']} ({info['interactions']:,} interactions, {info['users']:,} users, "
        f"{info['items']:,} items) and {info['item_tags']} ({info['tags']:,} tags)", quiet=quiet)
