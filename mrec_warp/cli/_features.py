"""Feature-file options shared by ``train`` and ``recommend``."""
from __future__ import annotations

from typing import Callable

import click


def feature_file_options(func: Callable) -> Callable:
    """``--item-features``, ``--user-features`` and how to read them."""
    func = click.option("--feature-columns", metavar="ID,FEATURE[,WEIGHT]",
                        help="Columns of the feature files, by header name or 0-based position [the first 2-3].")(func)
    func = click.option("--feature-header/--no-feature-header", "feature_header", default=None,
                        help="Whether feature files start with a header line [guessed].")(func)
    func = click.option("--feature-sep", metavar="SEP",
                        help=r"Delimiter of the feature files, e.g. ',' or '\t' [guessed from the first line].")(func)
    func = click.option("--user-features", "user_features", type=click.Path(dir_okay=False), metavar="FILE",
                        help="User features: id<TAB>feature[<TAB>weight] rows (hybrid model).")(func)
    func = click.option("--item-features", "item_features", type=click.Path(dir_okay=False), metavar="FILE",
                        help="Item features: id<TAB>feature[<TAB>weight] rows (hybrid model).")(func)
    return func


def pop_feature_options(options: dict) -> dict:
    """Take the feature options out of a command's ``**options``."""
    return {k: options.pop(k, None) for k in ("item_features", "user_features", "feature_sep",
                                              "feature_header", "feature_columns")}
