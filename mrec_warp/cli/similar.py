"""``mrec-warp similar``: items with the closest factors to given items."""
from __future__ import annotations

from typing import List

import click

from ..data.io import check_readable, check_tsv_ids
from ..errors import InputError
from ..models import load
from ..progress import Progress
from ._common import cap_k, check_outputs, friendly_errors, write_tsv
from .recommend import read_id_list


def split_id_list(text: str) -> List[str]:
    """The ids of a command-line list: the text between commas, exactly (nothing stripped).

    Ids are the user's bytes, so ``'a, b'`` is the ids ``'a'`` and ``' b'``; empty pieces
    (``'a,,b'``, a trailing comma) are skipped, as no id is empty. An id that holds a comma
    cannot be given this way: ``--items-file`` takes one whole line per id.
    """
    return [s for s in text.split(",") if s != ""]


@click.command(epilog="""\b
Examples:
  mrec-warp similar model.npz --items 50,181 -k 5
  mrec-warp similar model.npz --items-file items.txt -k 20 -o similar.tsv
""")
@click.argument("model_file", metavar="MODEL", type=click.Path(dir_okay=False))
@click.option("--items", help="Comma-separated item ids, each taken exactly as given (spaces included); "
                               "for ids holding a comma use --items-file.")
@click.option("--items-file", type=click.Path(dir_okay=False), help="File with one item id per line.")
@click.option("-k", "k", type=click.IntRange(min=1), default=10, show_default=True, help="Neighbours per item.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write TSV here instead of stdout.")
@friendly_errors
def similar(model_file, items, items_file, k, output):
    """For each item, the k items whose factors are most similar (cosine), or with an
    item-item model (itemknn, slim, ease) the k largest learned weights, as TSV rows
    ``item<TAB>similar_item<TAB>similarity<TAB>rank``.
    """
    check_outputs({"--output": output}, [model_file, items_file])
    check_readable(model_file, "model file")
    model = load(model_file)
    if getattr(model, "item_factors", None) is None and getattr(model, "weights_", None) is None:
        raise InputError(f"a {type(model).__name__} model has no item factors or item-item weights",
                         path=model_file, hint="train a warp, itemknn, slim or ease model")
    if bool(items) == bool(items_file):
        raise click.UsageError("give exactly one of --items or --items-file")
    ids = split_id_list(items) if items else read_id_list(items_file, "item")
    idx = model.item_indices(ids, strict=False)
    if (idx < 0).any():
        bad = ids[int((idx < 0).argmax())]
        hint = "use item ids present in the training data"
        if items and bad.strip() != bad and (model.item_indices([bad.strip()], strict=False) >= 0).all():
            hint = (f"--items takes ids exactly as given between commas, spaces included: "
                    f"did you mean {bad.strip()!r}? (write --items 'a,b', not 'a, b')")
        raise InputError(f"item {bad!r} is not in the model", path=items_file or None, hint=hint)
    k = cap_k(k, model.n_items - 1, Progress(verbose=None), "other items")
    frame = model.similar(ids, k=k)  # item, similar_item, score, rank: the ids as given
    check_tsv_ids(frame["item"], frame["similar_item"], path=output)
    write_tsv(frame, output, model)
