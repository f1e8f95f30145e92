"""``mrec-warp similar``: items with the closest factors to given items."""
from __future__ import annotations

import click

from ..data.tsv import check_tsv_ids
from ..stages.similar import similar as similar_items
from ..tables import RECS_FORMATS, output_format
from ..files import check_outputs
from ._common import friendly_errors, quiet_option, say, write_table
from ._flags import as_flags
from ._output_paths import OutputPath


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
@click.option("-o", "--output", type=OutputPath(),
              help="Write here instead of stdout (.gz: gzip-compressed).")
@click.option("--format", "fmt", type=click.Choice(list(RECS_FORMATS)),
              help="Output format [from the file suffix; tsv otherwise].")
@quiet_option
@friendly_errors
def similar(model_file, items, items_file, k, output, fmt, quiet, verbose):
    """For each item, the k items whose factors are most similar (cosine), or with an
    item-item model (itemknn, slim, ease, rp3beta...) the k largest learned weights, as rows
    ``item, similar_item, score, rank``: headerless TSV by default (ids as they are), CSV
    with a header for .csv (RFC 4180 quoting), Parquet for .parquet.
    """
    check_outputs({"--output": output}, [model_file, items_file])
    fmt = output_format(output or "-", fmt)
    if fmt == "parquet" and not output:
        raise click.UsageError("Parquet output needs a file: give -o similar.parquet")
    result = similar_items(model_file, items or None, items_file=items_file or None, k=k)
    if not quiet:
        for note in result.notes:
            click.echo(f"note: {as_flags(note)}", err=True)
    if fmt == "tsv":
        check_tsv_ids(result.frame["item"], result.frame["similar_item"], path=output)
    write_table(result.frame, output, fmt, result.model, quiet=quiet)
    if output:
        say(f"wrote {output}: {len(result.frame)} rows", quiet=quiet)
