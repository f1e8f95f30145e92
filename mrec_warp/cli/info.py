"""``mrec-warp info``: what a model file holds, as a table or as JSON."""
from __future__ import annotations

import click

from .. import strict_json
from ..progress import plural
from ..stages.info import info as model_info
from ._common import friendly_errors, quiet_option


def _value(value) -> str:
    """A parameter's value as the table shows it: JSON's spelling (null, true, "auto")."""
    return strict_json.dumps(value, ensure_ascii=False)


@click.command(epilog="""\b
Examples:
  mrec-warp info model.npz
  mrec-warp info model.npz --json | jq .parameters
""")
@click.argument("model_file", metavar="MODEL", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of the table.")
@quiet_option
@friendly_errors
def info(model_file, as_json, quiet, verbose):
    """Show what MODEL holds: its family, every parameter (and what `auto` chose), the shape
    and fingerprint of its training data, the file's format version, size and digest.

    The file is loaded and checked as recommend loads it. The output is the command's
    result: it is printed with --quiet too.
    """
    found = model_info(model_file)
    data = found.as_dict()
    if as_json:
        click.echo(strict_json.dumps(data, indent=2, ensure_ascii=False))
        return
    shape = data["training_data"]
    rows = [
        ("file", f"{data['file']} ({plural(data['size_bytes'], 'byte')}, format version {data['format_version']})"),
        ("sha256", data["sha256"]),
        ("family", f"{data['family']} (class {data['class']})"),
        ("trained with", data["trained_with"] or "(not recorded)"),
        ("training data", f"{plural(shape['users'], 'user')} x {plural(shape['items'], 'item')}, "
                          f"{plural(shape['interactions'], 'interaction')}"),
        ("fingerprint", shape["fingerprint"]),
    ]
    rows += [(f"  {name}", _value(value)) for name, value in sorted(data["parameters"].items())]
    rows += [(f"  {name}", _value(value)) for name, value in sorted(data["fitted"].items())]
    rows += [(f"  {name}", f"{' x '.join(map(str, spec['shape'])) or 'scalar'} {spec['dtype']}")
             for name, spec in data["arrays"].items()]
    width = max(len(label) for label, _ in rows)
    headings = {len(rows) - len(data["arrays"]) - len(data["fitted"]) - len(data["parameters"]): "parameters",
                len(rows) - len(data["arrays"]) - len(data["fitted"]): "fitted",
                len(rows) - len(data["arrays"]): "arrays"}
    for i, (label, value) in enumerate(rows):
        if i in headings:
            click.echo(f"{headings[i]}:")
        click.echo(f"{label.ljust(width)}  {value}")
