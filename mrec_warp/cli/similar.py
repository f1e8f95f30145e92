"""``mrec-warp similar``: items with the closest factors to given items."""
from __future__ import annotations

from typing import List

import click
import numpy as np

from ..data.idlist import read_id_list
from ..data.io import check_readable, check_tsv_ids
from ..errors import InputError
from ..models import load
from ..tables import RECS_FORMATS, output_format
from ._common import cap_k, check_outputs, friendly_errors, quiet_option, write_table


def split_id_list(text: str) -> List[str]:
    """The ids of a command-line list: the text between commas, exactly (nothing stripped).

    Ids are the user's bytes, so ``'a, b'`` is the ids ``'a'`` and ``' b'``; empty pieces
    (``'a,,b'``, a trailing comma) are skipped, as no id is empty. An id that holds a comma
    cannot be given this way: ``--items-file`` takes one whole line per id.
    """
    return [s for s in text.split(",") if s != ""]


def _unknown_item_hint(bad: str, items: str, model) -> str:
    """How to fix an unknown id of --items: spaces kept as given, or an id cut at a comma."""
    if bad.strip() != bad and (model.item_indices([bad.strip()], strict=False) >= 0).all():
        return (f"--items takes ids exactly as given between commas, spaces included: "
                f"did you mean {bad.strip()!r}? (write --items 'a,b', not 'a, b')")
    if "," in items:
        return ("--items splits at commas, so an id holding a comma is cut in pieces: "
                "put ids with commas in a file, one id per line, and give it with --items-file")
    return "use item ids present in the training data"


def _without_neighbours(ids: List[str], frame, model) -> str:
    """One line on the asked items that got no row at all, and why ("" when every one did).

    An item-item model lists only positive learned weights: SLIM leaves the row of an item
    empty when it explains nothing, and EASE learns nothing for items outside its
    ``--max-items`` most popular. Without this note such items would silently vanish.
    """
    asked = list(dict.fromkeys(ids))
    listed = set(frame["item"])
    missing = [i for i in asked if i not in listed]
    if not missing:
        return ""
    name = type(model).__name__
    kept = getattr(model, "kept_items_", None)
    reasons = []
    rest = len(missing)
    if kept is not None:
        inside = np.zeros(model.n_items, dtype=bool)
        inside[kept] = True
        outside = int((~inside[model.item_indices(missing)]).sum())
        if outside:
            reasons.append(f"{outside:,} lie outside the {len(kept):,} most popular items {name} learned "
                           f"weights for (--max-items {len(kept):,})")
        rest -= outside
    if rest:
        what = "learned weights" if getattr(model, "weights_", None) is not None else "similarities"
        reasons.append(f"{rest:,} have no positive {what} to any other item in the {name} model")
    return (f"{len(missing):,} of the {len(asked):,} item(s) asked have no neighbours and are not listed "
            f"(first: {missing[0]!r}): {'; '.join(reasons)}")


@click.command(epilog="""\b
Examples:
  mrec-warp similar model.npz --items 50,181 -k 5
  mrec-warp similar model.npz --items-file items.txt -k 20 -o similar.tsv
  mrec-warp similar model.npz --items-file items.txt -o similar.csv.gz   # CSV, gzip-compressed
""")
@click.argument("model_file", metavar="MODEL", type=click.Path(dir_okay=False))
@click.option("--items", help="Comma-separated item ids, each taken exactly as given (spaces included); "
                               "for ids holding a comma use --items-file.")
@click.option("--items-file", type=click.Path(dir_okay=False), help="File with one item id per line.")
@click.option("-k", "k", type=click.IntRange(min=1), default=10, show_default=True, help="Neighbours per item.")
@click.option("-o", "--output", type=click.Path(dir_okay=False),
              help="Write here instead of stdout (.gz: gzip-compressed).")
@click.option("--format", "fmt", type=click.Choice(list(RECS_FORMATS)),
              help="Output format [from the file suffix; tsv otherwise].")
@quiet_option
@friendly_errors
def similar(model_file, items, items_file, k, output, fmt, quiet, verbose):
    """For each item, the k items whose factors are most similar (cosine), or with an
    item-item model (itemknn, slim, ease) the k largest learned weights, as rows
    ``item, similar_item, score, rank``: headerless TSV by default (ids as they are), CSV
    with a header for .csv (RFC 4180 quoting), Parquet for .parquet.
    """
    check_outputs({"--output": output}, [model_file, items_file])
    fmt = output_format(output or "-", fmt)
    if fmt == "parquet" and not output:
        raise click.UsageError("Parquet output needs a file: give -o similar.parquet")
    check_readable(model_file, "model file")
    model = load(model_file)
    if getattr(model, "item_factors", None) is None and getattr(model, "weights_", None) is None:
        raise InputError(f"a {type(model).__name__} model has no item factors or item-item weights",
                         path=model_file, hint="train a warp, hybrid, wrmf, itemknn, slim or ease model")
    if bool(items) == bool(items_file):
        raise click.UsageError("give exactly one of --items or --items-file")
    ids = split_id_list(items) if items else read_id_list(items_file, "item")
    idx = model.item_indices(ids, strict=False)
    if (idx < 0).any():
        bad = ids[int((idx < 0).argmax())]
        hint = _unknown_item_hint(bad, items, model) if items else "use item ids present in the training data"
        raise InputError(f"item {bad!r} is not in the model", path=items_file or None, hint=hint)
    k = cap_k(k, model.n_items - 1, quiet, "other items")
    frame = model.similar(ids, k=k)  # item, similar_item, score, rank: the ids as given
    if not quiet:
        lonely = _without_neighbours(ids, frame, model)
        if lonely:
            click.echo(f"note: {lonely}", err=True)
    if fmt == "tsv":
        check_tsv_ids(frame["item"], frame["similar_item"], path=output)
    write_table(frame, output, fmt, model)
