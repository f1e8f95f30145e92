"""``mrec-warp explain``: which of a user's items drove their recommendations (WRMF)."""
from __future__ import annotations

import click

from ..data.tsv import check_tsv_ids
from ..stages.explain import explain as explain_scores
from ..tables import RECS_FORMATS, output_format
from ..files import check_outputs
from ._common import friendly_errors, quiet_option, say, write_table
from ._output_paths import OutputPath


@click.command(epilog="""\b
Examples:
  mrec-warp explain wrmf.npz --user 196                 # the user's top 10, 5 reasons each
  mrec-warp explain wrmf.npz --user 196 --items 50,181 -k 3 -o why.tsv
""")
@click.argument("model_file", metavar="MODEL", type=click.Path(dir_okay=False))
@click.option("--user", "user_id", required=True, help="The user id to explain.")
@click.option("--items", help="Comma-separated item ids to explain [the user's top --top recommendations].")
@click.option("--top", "n", type=click.IntRange(min=1), default=10, show_default=True,
              help="Recommendations to explain when --items is not given.")
@click.option("-k", "k", type=click.IntRange(min=1), default=5, show_default=True,
              help="History items shown per explained item (largest contribution first).")
@click.option("-o", "--output", type=OutputPath(),
              help="Write here instead of stdout (.csv, .parquet, .gz as for recommend).")
@click.option("--format", "fmt", type=click.Choice(list(RECS_FORMATS)),
              help="Output format [from the file suffix; tsv otherwise].")
@quiet_option
@friendly_errors
def explain(model_file, user_id, items, n, k, output, fmt, quiet, verbose):
    """Explain scores of a WRMF model as sums over the user's training items (Hu, Koren &
    Volinsky 2008): rows ``user<TAB>item<TAB>score<TAB>history_item<TAB>contribution<TAB>rank``.

    The contributions of an item add up to its score under the exact least-squares user
    vector (the trained vector comes from a few conjugate-gradient steps and scores within a
    small margin of it).
    """
    check_outputs({"--output": output}, [model_file])
    fmt = output_format(output or "-", fmt)
    if fmt == "parquet" and not output:
        raise click.UsageError("Parquet output needs a file: give -o why.parquet")
    result = explain_scores(model_file, user_id, items, top=n, k=k)
    if fmt == "tsv":
        check_tsv_ids(result.frame["user"], result.frame["item"], result.frame["history_item"], path=output)
    write_table(result.frame, output, fmt, result.model, quiet=quiet)
    if output:
        say(f"wrote {output}: {len(result.frame)} rows", quiet=quiet)
