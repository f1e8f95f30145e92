"""``train``'s model options, generated from the families' declared parameters.

One option per parameter name over every registered family
(:data:`~mrec_warp.models.families.FAMILIES`), in registry then declaration order: ``--name``
(``--flag`` when the declaration renames it), ``--name/--no-name`` for a bool, a choice for a
parameter with choices. Each option names the parameter it sets
(:class:`~mrec_warp.cli._flags.ParameterOption`): a message naming ``dtype`` shows
``--ease-dtype``. Click only parses the type; the model's own check
(:meth:`~mrec_warp.models.base.Recommender.check_params`) judges the value, so a value out of
range is the same one line from the CLI, a ``--params`` file and the API. When families share
a name but not its help or default, the help says each family's: ``slim: L2 penalty [200];
ease: lambda [400]``.
"""
from __future__ import annotations

import re
from typing import Callable, Dict, List, Tuple

import click

from ..models.declared import Param, hyper_parameters
from ..models.families import FAMILIES
from ._flags import ParameterOption, as_flags


def declared_options() -> Dict[str, List[Tuple[str, Param]]]:
    """Each parameter ``train`` has an option for -> its (family, declaration) pairs."""
    out: Dict[str, List[Tuple[str, Param]]] = {}
    for family, fam in FAMILIES.items():
        for param in hyper_parameters(fam.cls):
            if param.option:
                out.setdefault(param.name, []).append((family, param))
    return out


def option_parameters() -> Dict[str, str]:
    """click's name of each model option -> the parameter it sets (``ease_dtype`` -> ``dtype``)."""
    return {_click_name(pairs[0][1].flag): name for name, pairs in declared_options().items()}


def _click_name(flag: str) -> str:
    return flag[2:].replace("-", "_")


def _sentence(text: str) -> str:
    """Help text as the CLI shows it: parameter names (`` `name` ``) as flags, no final stop.
    A declaration's help names other parameters of its family, whose flags are declared too."""
    flags = {name: pairs[0][1].flag for name, pairs in declared_options().items()}
    return as_flags(text, flags).rstrip(".")


def option_help(pairs: List[Tuple[str, Param]]) -> str:
    """One option's help: ``help [default].`` when every family agrees, else each family's."""
    groups: Dict[Tuple[str, str], List[str]] = {}
    for family, param in pairs:
        groups.setdefault((_sentence(param.help), param.default_text()), []).append(family)
    if len(groups) == 1:
        (text, default), families = next(iter(groups.items()))
        return f"{', '.join(families)}: {text} [{default}]."
    return "; ".join(f"{', '.join(families)}: {text} [{default}]" for (text, default), families in groups.items()) + "."


class NumberOrWord(click.ParamType):
    """A number, or one of the words a declaration takes as its default (WRMF's ``alpha``:
    ``auto`` or a number)."""

    name = "number"

    def __init__(self, kind: type, words: List[str]) -> None:
        self.kind, self.words = kind, words
        self.name = "|".join([*words, kind.__name__.upper()])

    def convert(self, value, param, ctx):
        if isinstance(value, str) and value.strip() in self.words:
            return value.strip()
        try:
            return self.kind(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not {' or '.join(repr(w) for w in self.words)} or a number", param, ctx)


def _click_type(pairs: List[Tuple[str, Param]]):
    kinds = {p.type for _, p in pairs}
    choices = [c for _, p in pairs for c in p.choices]
    if len(kinds) != 1:
        raise TypeError(f"parameter {pairs[0][1].name!r} is declared with different types by "
                        f"{', '.join(f for f, _ in pairs)}: give one of them another name")
    kind = kinds.pop()
    if choices:
        return click.Choice(list(dict.fromkeys(choices)))
    words = list(dict.fromkeys(p.default for _, p in pairs if isinstance(p.default, str)))
    if words and kind in (int, float):  # a number, or the word that is its default ("auto")
        return NumberOrWord(kind, words)
    return {int: click.INT, float: click.FLOAT, str: click.STRING}[kind]


def model_options(func: Callable) -> Callable:
    """Decorate ``train`` with one option per declared parameter (see the module docstring)."""
    for name, pairs in reversed(list(declared_options().items())):
        flag = pairs[0][1].flag
        help_text = re.sub(r"\s+", " ", option_help(pairs))
        if pairs[0][1].type is bool:
            func = click.option(f"{flag}/--no-{flag[2:]}", default=None, help=help_text,
                                cls=ParameterOption, parameters=(name,))(func)
        else:
            func = click.option(flag, type=_click_type(pairs), help=help_text,
                                cls=ParameterOption, parameters=(name,))(func)
    return func
