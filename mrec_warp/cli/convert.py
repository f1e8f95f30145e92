"""``mrec-warp convert``: interaction matrices between ratings files, Matrix Market and scipy ``.npz``."""
from __future__ import annotations

import click

from ..data.matrix_files import id_list_paths, matrix_format, read_matrix, write_matrix
from ..data.rows import describe_counts
from ..files import check_outputs
from ..progress import plural
from ._common import friendly_errors, quiet_option, row_options, say
from ._output_paths import OutputPath


@click.command(short_help="Convert interactions between ratings files, Matrix Market (.mtx) and scipy .npz.",
               epilog="""\b
Examples:
  mrec-warp convert ratings.csv ratings.mtx      # + ratings.users.txt, ratings.items.txt
  mrec-warp convert ratings.mtx ratings.npz      # one archive: scipy.sparse.load_npz reads it, ids inside
  mrec-warp convert ratings.npz train.tsv        # back to a ratings TSV
  mrec-warp convert export.csv plays.npz --sep ';' --columns 0,1,2 --negatives net

\b
Formats come from the names: .mtx is Matrix Market (coordinate, 1-based; line n of
NAME.users.txt / NAME.items.txt beside it is the id of row / column n), .npz a scipy sparse
archive (csr, csc or coo; ids inside, or in NAME.users.txt / NAME.items.txt beside it),
anything else a ratings file (read with the options below, written as headerless
TSV user<TAB>item<TAB>value). Every input goes through the row rules: a coordinate stored
twice merges by --duplicates, negatives follow --negatives, and a stored 0 is kept (an
interaction with the lowest value). A file of pairs gets the value 1; timestamps are not
carried (the matrix formats hold none).
""")
@friendly_errors
@click.argument("input_file", metavar="INPUT", type=click.Path(dir_okay=False))
@click.argument("output", metavar="OUTPUT", type=OutputPath())
@row_options("INPUT (a ratings file)")
@quiet_option
def convert(input_file, output, rows, quiet, verbose):
    """Convert the interactions of INPUT into OUTPUT, ids byte for byte."""
    in_fmt, out_fmt = matrix_format(input_file), matrix_format(output)
    if in_fmt != "text" and rows.given_layout:
        raise click.UsageError("--format, --sep, --header and --columns read a ratings file; INPUT is "
                               f"{'Matrix Market' if in_fmt == 'mtx' else 'an .npz'}")
    inputs = [input_file, *(map(str, id_list_paths(input_file)) if in_fmt != "text" else ())]
    outputs = [output, *(map(str, id_list_paths(output)) if out_fmt == "mtx" else ())]
    check_outputs({"OUTPUT": outputs}, inputs)
    m = read_matrix(input_file, reader=rows.reader, duplicates=rows.duplicates, negatives=rows.negatives,
                    min_value=rows.min_value)
    written = write_matrix(m, output)
    n_users, n_items = m.matrix.shape
    say(f"wrote {', '.join(written)}: {plural(m.matrix.nnz, 'interaction')} of "
        f"{plural(n_users, 'user')} x {plural(n_items, 'item')}", quiet=quiet)
    say(f"  {describe_counts(m.counts, rows.duplicates, rows.negatives)}", quiet=quiet)
    if quiet:
        return
    if m.timestamps:
        click.echo("note: the timestamp column is not carried: OUTPUT holds user, item and value", err=True)
    if m.encoding == "latin-1":
        say("  ids are not valid UTF-8: read as Latin-1 and written back in Latin-1 (the same bytes)")
