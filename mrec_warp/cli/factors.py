"""``mrec-warp factors``: factors computed elsewhere in as a model file, or a model's factors out."""
from __future__ import annotations

import click

from ..progress import plural
from ..stages.factors import export_factors, import_factors
from ._common import friendly_errors, quiet_option, row_options, say
from ._output_paths import OutputPath


@click.command(short_help="Import factors computed elsewhere as a model file, or export a model's factors.",
               epilog="""\b
Examples:
  mrec-warp factors -o model.npz --user-factors U.npy --user-ids users.txt \\
      --item-factors V.npy --item-ids items.txt --item-bias b.npy --train train.tsv
  mrec-warp factors -o model.npz --user-factors users.vec --item-factors items.vec --train train.tsv
  mrec-warp factors -o model.npz --npz factors.npz --train train.tsv
  mrec-warp factors --export model.npz exported/      # factors.npz, *.npy + id lists, *.tsv

\b
Inputs: .npy (2-D float, row n for line n of --user-ids / --item-ids); .npz with
user_factors, item_factors, optionally item_bias, user_ids, item_ids (--npz); or text
vectors with the ids inside, one row per id: id<TAB>v1 v2 ... (the id is everything before
the first tab), id,v1,v2,... (CSV, quoted ids may hold commas) or id v1 v2 ... (word2vec;
a 'COUNT WIDTH' first line is read as its header). --item-bias is a .npy in the item
factors' order, or text rows id<TAB>bias. The model scores user_factors . item_factors
+ item_bias, as warp does; recommend --history folds new users in by least squares.
Without --train the model stores no interactions, so recommend excludes nothing unless
given --train.
""")
@friendly_errors
@click.option("-o", "--output", type=OutputPath(), help="Model file to write (.npz).")
@click.option("--user-factors", type=click.Path(dir_okay=False), help="User factors: .npy or text vectors.")
@click.option("--item-factors", type=click.Path(dir_okay=False), help="Item factors: .npy or text vectors.")
@click.option("--item-bias", type=click.Path(dir_okay=False), help="Item biases: .npy or text rows id<TAB>bias.")
@click.option("--user-ids", type=click.Path(dir_okay=False), help="User ids of a .npy, one per line (line n: row n).")
@click.option("--item-ids", type=click.Path(dir_okay=False), help="Item ids of a .npy, one per line (line n: row n).")
@click.option("--npz", type=click.Path(dir_okay=False), help="One .npz holding the factors (and ids).")
@click.option("--train", "train_file", type=click.Path(dir_okay=False),
              help="The interactions the factors were trained on (ratings file, .mtx or .npz): excluded by "
                   "recommend; every id must have factors.")
@row_options("--train")
@click.option("--regularization", type=click.FloatRange(min=0), default=0.01, show_default=True,
              help="Ridge penalty of fold-in (recommend --history), relative to the item factors' scale.")
@click.option("--export", nargs=2, type=click.Path(), metavar="MODEL OUTDIR",
              help="Instead: write the factors of MODEL (warp, hybrid, wrmf or imported) into OUTDIR.")
@click.option("--force", is_flag=True,
              help="With --export: replace the files of an earlier export in OUTDIR (refused without it).")
@quiet_option
def factors(output, user_factors, item_factors, item_bias, user_ids, item_ids, npz, train_file, rows, regularization,
            export, force, quiet, verbose):
    """Wrap user/item factors computed elsewhere as a model file that recommend, evaluate
    and similar use like their own (mrec's mrec_factors); or, with --export, write a model's
    factors and ids as .npz, .npy + id lists and text vectors."""
    if export:
        if output or user_factors or item_factors or npz or train_file:
            raise click.UsageError("--export takes only MODEL OUTDIR")
        written = export_factors(export[0], export[1], force=force)
        say(f"wrote {len(written)} files into {export[1]}: " + ", ".join(p.split("/")[-1] for p in written),
            quiet=quiet)
        return
    if not output:
        raise click.UsageError("give -o MODEL (or --export MODEL OUTDIR)")
    if force:
        raise click.UsageError("--force goes with --export (a model file -o is replaced as every output is)")
    s = import_factors(output, user_factors=user_factors, item_factors=item_factors, item_bias=item_bias,
                       user_ids=user_ids, item_ids=item_ids, npz=npz, train=train_file, reader=rows.reader,
                       duplicates=rows.duplicates, negatives=rows.negatives, min_value=rows.min_value,
                       regularization=regularization)
    say(f"wrote {output}: {plural(s['users'], 'user')} x {plural(s['items'], 'item')}, {s['factors']} factors"
        + (", item biases" if s["item_bias"] else "")
        + (f", {plural(s['train'], 'training interaction')}" if s["train"] is not None else ""), quiet=quiet)
    if quiet:
        return
    if s["train"] is None:
        click.echo("note: no --train: the model stores no interactions, so recommend excludes nothing "
                   "unless given --train", err=True)
