"""The type of every option naming a file or folder a command writes (``-o``, ``--report``,
``--table``, ``--workdir``, ...).

click's own ``Path(dir_okay=False)`` refuses an existing folder in its words ("File 'out'
is a directory."), with nothing to do about it; this type only shows ``FILE`` or
``DIRECTORY`` in the help, and :func:`check_output_params` refuses a folder where a file
goes, or a file where a folder goes, as every other refusal is worded: the path, what is
wrong, how to fix it (:func:`~mrec_warp.files.check_output_place`).
"""
from __future__ import annotations

from typing import Optional

import click

from ..files import check_output_place


class OutputPath(click.Path):
    """A path the command writes: a file, or with ``folder`` a folder it writes into."""

    def __init__(self, folder: bool = False):
        super().__init__(file_okay=not folder, dir_okay=folder)  # the help's FILE / DIRECTORY
        self.folder = folder
        self.file_okay = self.dir_okay = True  # the kind is checked by check_output_params


def writes_folder(kind: click.Path) -> bool:
    """Whether a path option names a folder (an :class:`OutputPath` of a folder, or a
    click ``Path`` that refuses files)."""
    return kind.folder if isinstance(kind, OutputPath) else not kind.file_okay


def check_output_params(ctx: Optional[click.Context]) -> None:
    """Refuse an :class:`OutputPath` value of the wrong kind, naming the option as typed
    (its longest flag, or an argument's metavar)."""
    if ctx is None:
        return
    for param in ctx.command.params:
        value = ctx.params.get(param.name)
        if not isinstance(param.type, OutputPath) or not value:
            continue
        name = max(param.opts, key=len) if isinstance(param, click.Option) else param.make_metavar(ctx)
        check_output_place(name, str(value), folder=param.type.folder)
