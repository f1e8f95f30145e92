"""Feature-file options shared by ``train`` and ``recommend``."""
from __future__ import annotations

from typing import Callable, Optional

import click

from ..data.features import FeatureFiles
from ._common import gathered


def _feature_files_of(item_features: Optional[str], user_features: Optional[str], feature_sep: Optional[str],
                      feature_header: Optional[bool], feature_columns: Optional[str]) -> FeatureFiles:
    return FeatureFiles(user=user_features, item=item_features, sep=feature_sep, header=feature_header,
                        columns=feature_columns)


def feature_file_options(func: Callable) -> Callable:
    """``--item-features``, ``--user-features`` and how to read them, given to the command as
    one :class:`~mrec_warp.data.features.FeatureFiles`, ``features``."""
    func = gathered("features", ("item_features", "user_features", "feature_sep", "feature_header",
                                 "feature_columns"), _feature_files_of)(func)
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
