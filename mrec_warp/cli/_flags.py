"""How the CLI shows the parameters library messages name: as the flags its commands declare.

A library message names parameters (:class:`~mrec_warp.errors.Reference`: `` `factors` ``,
`` `leave_out=1` ``); the CLI shows each as the flag that sets it (``--factors``,
``--leave-out 1``). Which flag sets which parameter is read from the click declarations
themselves, never kept in a list (:func:`flags_of`):

- each long spelling of an option sets the parameter of that name (``--min-rating``:
  ``min_rating``, ``--format``: ``format``);
- a :class:`ParameterOption` sets the library parameters it names (``train --seed``:
  ``random_state``; ``train --ease-dtype``: the model parameter ``dtype``, from its
  :class:`~mrec_warp.models.declared.Param`);
- an option's Python name is the keyword it is passed on as (``-o/--output``'s ``outdir``,
  ``-k``'s ``k``).

A command spells a name by its own options first, then by every other command's (a hint may
name another command's flag: ``train --model hybrid``); a name that no command declares stays
as written.
"""
from __future__ import annotations

import functools
from typing import Dict, Iterator, List, Mapping, Optional, Sequence

import click

from ..errors import InputError, Speller, printable, spell_parameters
from ..progress import Progress
from ..stages.train import UnknownParameterError


class ParameterOption(click.Option):
    """A click option that sets library parameters its flag does not spell.

    Parameters
    ----------
    parameters : sequence of str
        The library parameters the option's value is passed on as (``--seed`` sets
        ``random_state``); a message naming one of them shows this option's flag.
    """

    def __init__(self, *args, parameters: Sequence[str] = (), **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.parameters = tuple(parameters)


def _flag(option: click.Option) -> str:
    """The flag a message shows for ``option``: its first long spelling, else its short one (``-k``)."""
    return next((opt for opt in option.opts if opt.startswith("--")), option.opts[0])


def _options(command: click.Command) -> Iterator[click.Option]:
    """The options of ``command`` and, for a group, of every command below it, in order."""
    yield from (param for param in command.params if isinstance(param, click.Option))
    for sub in getattr(command, "commands", {}).values():
        yield from _options(sub)


@functools.lru_cache(maxsize=None)
def flags_of(command: click.Command) -> Dict[str, str]:
    """Parameter name -> the flag that sets it, from the options ``command`` declares (and
    those of its subcommands, for a group).

    A parameter a long spelling names outranks one a declaration names, which outranks a
    Python name: ``similar --items-file`` is ``items_file``'s flag, not ``evaluate --items``,
    whose Python name is ``items_file``.
    """
    options = list(_options(command))
    table: Dict[str, str] = {}
    for option in options:
        for opt in option.opts:
            if opt.startswith("--"):
                table.setdefault(opt[2:].replace("-", "_"), opt)
    for option in options:
        for name in getattr(option, "parameters", ()):
            table.setdefault(name, _flag(option))
    for option in options:
        if option.name:
            table.setdefault(option.name, _flag(option))
    return table


def command_flags(ctx: Optional[click.Context] = None) -> Dict[str, str]:
    """The flags as the running command spells parameters (``ctx``, by default the current
    one): its own options first, then every command's. Outside a command: none."""
    ctx = ctx or click.get_current_context(silent=True)
    if ctx is None:
        return {}
    return {**flags_of(ctx.find_root().command), **flags_of(ctx.command)}


def speller(flags: Mapping[str, str]) -> Speller:
    """How the CLI writes a parameter reference, given ``flags``: ``--flag`` or ``--flag value``."""
    def spell(name: str, value: Optional[str] = None) -> Optional[str]:
        option = flags.get(name)
        if option is None:
            return None
        return option if value is None else f"{option} {value}"
    return spell


def as_flags(text: str, flags: Optional[Mapping[str, str]] = None) -> str:
    """``text`` with its parameter references written as flags (``flags``, by default the
    running command's: :func:`command_flags`), and its control characters escaped
    (:func:`~mrec_warp.errors.printable`): what notes and log lines show."""
    return printable(spell_parameters(text, speller(command_flags() if flags is None else flags)))


def error_line(exc: InputError, flags: Optional[Mapping[str, str]] = None) -> str:
    """The one line the CLI prints for ``exc`` (without ``Error:``), its parameters spelled
    by ``flags`` (by default the running command's: :func:`command_flags`)."""
    flags = command_flags() if flags is None else flags
    if isinstance(exc, UnknownParameterError):  # list the options there are, as flags in order
        accepted: List[str] = sorted((p for p in exc.accepted if p in flags), key=flags.__getitem__)
        exc = exc.with_accepted(accepted)
        flag = flags.get(exc.parameter, "")
        if exc.switched_off and flag.startswith("--"):  # a bool given as --no-select
            flags = {**flags, exc.parameter: "--no-" + flag[2:]}
    return exc.render(speller(flags))


class FlagProgress(Progress):
    """Progress whose log lines name flags where the library names parameters: the flags of
    the command that made it (log lines may come from other threads, which have no command)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.flags = command_flags()

    def log(self, message: str) -> None:
        super().log(as_flags(message, self.flags))

    def note(self, message: str) -> None:
        super().note(as_flags(message, self.flags))
