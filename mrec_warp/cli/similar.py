"""``mrec-warp similar``: items with the closest factors to given items."""
from __future__ import annotations

import click

from ..data.io import check_readable, check_tsv_ids
from ..errors import InputError
from ..models import load
from ._common import friendly_errors, write_tsv
from .recommend import read_id_list


@click.command(epilog="""\b
Examples:
  mrec-warp similar model.npz --items 50,181 -k 5
  mrec-warp similar model.npz --items-file items.txt -k 20 -o similar.tsv
""")
@click.argument("model_file", metavar="MODEL", type=click.Path(dir_okay=False))
@click.option("--items", help="Comma-separated item ids.")
@click.option("--items-file", type=click.Path(dir_okay=False), help="File with one item id per line.")
@click.option("-k", "k", type=click.IntRange(min=1), default=10, show_default=True, help="Neighbours per item.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write TSV here instead of stdout.")
@friendly_errors
def similar(model_file, items, items_file, k, output):
    """For each item, the k items whose factors are most similar (cosine), as TSV rows
    ``item<TAB>similar_item<TAB>similarity<TAB>rank``.
    """
    check_readable(model_file, "model file")
    model = load(model_file)
    if getattr(model, "item_factors", None) is None:
        raise InputError(f"a {type(model).__name__} model has no item factors", path=model_file,
                         hint="train a warp model")
    if bool(items) == bool(items_file):
        raise click.UsageError("give exactly one of --items or --items-file")
    ids = [s.strip() for s in items.split(",") if s.strip()] if items else read_id_list(items_file, "item")
    idx = model.item_indices(ids, strict=False)
    if (idx < 0).any():
        bad = ids[int((idx < 0).argmax())]
        raise InputError(f"item {bad!r} is not in the model", path=items_file or None,
                         hint="use item ids present in the training data")
    frame = model.similar(ids, k=k)  # item, similar_item, score, rank: the ids as given
    check_tsv_ids(frame["item"], frame["similar_item"], path=output)
    write_tsv(frame, output, model)
