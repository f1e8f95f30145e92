"""The ``mrec-warp`` command: a click group whose subcommands live one per module."""
from __future__ import annotations

import importlib

import click

from .. import __version__

# (module, command) pairs; each module defines a click command named after it.
_COMMANDS = ("prepare", "synth", "fetch", "train", "recommend", "evaluate", "similar", "explain", "tune")


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="mrec-warp")
def main() -> None:
    """Recommendations from implicit feedback with WARP matrix factorisation.

    A typical run goes ratings file -> prepare -> train -> recommend -> evaluate:

    \b
      mrec-warp prepare ratings.tsv -o split/ --min-rating 4
      mrec-warp train split/train.tsv -o model.npz
      mrec-warp recommend model.npz -o recs.tsv -k 20
      mrec-warp evaluate --train split/train.tsv --test split/test.tsv --recs recs.tsv

    Run any command with --help for its options and an example.
    """


for _name in _COMMANDS:
    try:
        _module = importlib.import_module(f".{_name}", __name__)
    except ModuleNotFoundError as exc:  # a command still being written must not break the others
        if exc.name != f"{__name__}.{_name}":
            raise
        continue
    main.add_command(getattr(_module, _name))
