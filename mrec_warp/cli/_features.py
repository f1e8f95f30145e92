"""Feature-file options shared by ``train`` and ``recommend``, and cold start for ``recommend``."""
from __future__ import annotations

from typing import Callable, List, Optional, Tuple

import click
import numpy as np
import pandas as pd

from ..data.features import read_features
from ..data.inputs import output_encoding
from ..errors import InputError
from ..progress import Progress


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


def read_feature_files(opts: dict, id_encoding: Optional[str] = None
                       ) -> Tuple[Optional[pd.DataFrame], Optional[pd.DataFrame]]:
    """(user table, item table) from the options, ``None`` where no file was given.

    ``id_encoding`` is the encoding of the training data's ids; a feature file in another
    one is refused when it holds a character outside ASCII (see :func:`check_same_encoding`).
    """
    read = dict(sep=opts.get("feature_sep"), header=opts.get("feature_header"), columns=opts.get("feature_columns"))
    tables = []
    for kind in ("user", "item"):
        path = opts.get(f"{kind}_features")
        table = read_features(path, kind=kind, **read) if path else None
        if table is not None:
            check_same_encoding(table, id_encoding, kind, path)
        tables.append(table)
    return tables[0], tables[1]


def check_same_encoding(table: pd.DataFrame, id_encoding: Optional[str], kind: str, path: str) -> None:
    """Refuse a feature file whose non-ASCII text is in another encoding than the training data.

    Outputs are written in the training data's encoding, so an id ``Señor`` read from a
    UTF-8 feature file would come out as other bytes than it went in as (and an id matched
    across the two files would be two different byte strings). ASCII reads the same in both.
    """
    mine, theirs = output_encoding(table.attrs.get("encoding")), output_encoding(id_encoding)
    if mine == theirs:
        return
    text = pd.concat([table["id"], table["feature"]]).astype(str)
    if text.map(str.isascii).all():
        return
    names = {"utf-8": "UTF-8", "latin-1": "Latin-1 (it is not valid UTF-8)"}
    raise InputError(
        f"the {kind} feature file is {names[mine]} but the training data is {names[theirs].split(' (')[0]}: "
        "its ids and features would not come back as the same bytes", path=path,
        hint=f"convert one file, e.g. iconv -f {mine} -t {theirs} {path} > converted.tsv",
    )


def is_hybrid(model) -> bool:
    from ..models.hybrid import HybridWARP

    return isinstance(model, HybridWARP)


def cold_start(
    model,
    model_file: str,
    opts: dict,
    include_new_items: bool,
    new_items_only: bool,
    history: Optional[str],
    fold_in_epochs: Optional[int],
    requested_users: Optional[List[str]],
    progress: Progress,
):
    """Extend a loaded model for ``recommend``: new users, fold-in, new items.

    Returns
    -------
    (model, users, changed)
        The model to recommend with, the user ids to recommend for when ``--users`` was
        not given (``None``: every trained user), and whether the model now differs from
        ``model_file``.
    """
    user_table, item_table = read_feature_files(opts, getattr(model, "id_encoding_", None))
    hybrid = is_hybrid(model)
    kind = type(model).__name__
    if not hybrid:
        for flag, given in (("--user-features", user_table is not None), ("--item-features", item_table is not None),
                            ("--include-new-items", include_new_items), ("--new-items-only", new_items_only)):
            if given:
                raise InputError(f"{flag} needs a hybrid model, this is a {kind}", path=model_file,
                                 hint="train with 'mrec-warp train --model hybrid'")
    if history and not hasattr(model, "fold_in"):
        raise InputError(f"--history needs a warp or hybrid model, this is a {kind}", path=model_file)
    changed = False
    focus: List[str] = []

    if user_table is not None:
        ids = np.asarray(pd.unique(user_table["id"].to_numpy()), dtype=str)
        new = ids[model.user_indices(ids, strict=False) < 0]
        if len(new):
            before = model.n_users
            model = model.with_new_users(user_table[user_table["id"].isin(set(new))])
            bare = int((model._uw[before:].getnnz(axis=1) == 0).sum())
            progress.log(f"added {model.n_users - before} new users from their features"
                         + (f"; {bare} have no feature the model knows and get its non-personal ranking"
                            if bare else ""))
            changed = True
        known = model.user_indices(ids, strict=False) >= 0
        focus.extend(ids[known].tolist())
    if requested_users and hybrid and len(model.new_user_ids):
        trained = set(model.user_ids.tolist())
        unknown = [u for u in requested_users if u not in trained]
        kept = set(model.new_user_ids.tolist())
        if any(u in kept for u in unknown):
            model = model.with_new_users()  # the users whose features were given at training
            changed = True
    if history:
        from ..data.ratings import read_ratings

        rows = read_ratings(history)
        try:
            model.fold_in(rows, epochs=fold_in_epochs, progress=progress)
        except InputError as exc:
            if exc.path is None:
                raise InputError(exc.message, path=history, hint=exc.hint) from None
            raise
        known = set(model.user_ids.tolist())
        focus.extend(u for u in pd.unique(rows["user"].astype(str).to_numpy()) if u in known)
        changed = True
    if include_new_items or new_items_only or item_table is not None:
        before = model.n_items
        model = model.with_new_items(item_table, only=new_items_only)
        n_new = model.n_items - (0 if new_items_only else before)
        if n_new == 0:
            raise InputError("there are no new items to rank", path=opts.get("item_features") or model_file,
                             hint="give --item-features with items absent from training")
        progress.log(f"ranking {n_new} new items" + ("" if new_items_only else f" alongside {before} trained ones"))
        changed = True
    users = list(dict.fromkeys(focus)) if focus else None
    return model, users, changed
