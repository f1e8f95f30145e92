"""The one place where the library's parameter names become the flags a user types.

Library messages (errors and log lines) name parameters in backticks: `` `factors` ``,
`` `leave_out=1` `` (see :mod:`mrec_warp.errors`). The CLI shows them as ``--factors`` and
``--leave-out 1``: the flag is the name with dashes, except for the few parameters whose
option is spelled differently (:data:`RENAMED`). Names no command has a flag for are left
as written.
"""
from __future__ import annotations

from typing import Optional

from ..errors import InputError, printable, spell_parameters
from ..models.declared import hyper_parameters
from ..models.families import FAMILIES
from ..progress import Progress
from ..stages.train import UnknownParameterError

#: The declared hyper-parameters of every family (:mod:`mrec_warp.models.declared`).
_DECLARED = [param for fam in FAMILIES.values() for param in hyper_parameters(fam.cls)]

#: Parameters whose flag is not ``--`` + the name with dashes: the declared renames
#: (``dtype``: ``--ease-dtype``), then the commands' own.
RENAMED = {
    **{param.name: param.option for param in reversed(_DECLARED) if isinstance(param.option, str)},
    "random_state": "--seed",  # train's, for every family that draws random numbers
    "outdir": "--output",
    "k": "-k",
    "n_users": "--users",  # synth
    "n_items": "--items",
    "n_interactions": "--interactions",
}

#: Model parameters ``train`` has an option for (generated from the declarations: see
#: :mod:`mrec_warp.cli._model_options`); the others are set from --params files only.
MODEL_OPTIONS = frozenset(param.name for param in _DECLARED if param.option)

#: Other parameters that library messages name and that a command sets with ``--name-with-dashes``.
PARAMETERS = MODEL_OPTIONS | frozenset({
    # train, and recommend's cold start: the model and its data
    "model", "validation", "item_features", "user_features", "feature_columns", "feature_sep",
    "sub_models", "include_new_items", "new_items_only", "history", "fold_in_epochs",
    # parallel work
    "backend", "scheduler", "workdir", "part_size", "n_jobs",
    # prepare: reading and splitting
    "format", "sep", "header", "columns", "min_rating", "min_user_items", "test_fraction", "leave_out",
    "split", "num_splits", "features", "seed",
    # prepare, train, tune: the row rules
    "duplicates", "negatives", "min_value", "empty_ids",
    # recommend (and train's output)
    "output", "users", "exclude_items", "block_size", "ann", "unknown_users",
    # similar
    "items", "items_file",
    # evaluate, tune, fetch
    "train", "test", "recs", "name", "models", "grid", "random", "dest", "base_url", "time_budget",
    # evaluate's paired tests, groups and baseline; prepare's global time split
    "paired_test", "correction", "groups", "baseline", "cutoff",
    # factors (imported factor models)
    "user_factors", "item_factors", "user_ids", "item_ids", "npz",
})


def flag(name: str) -> Optional[str]:
    """The flag that sets parameter ``name``, or ``None`` when no command has one."""
    if name in RENAMED:
        return RENAMED[name]
    if name in PARAMETERS:
        return "--" + name.replace("_", "-")
    return None


def spell(name: str, value: Optional[str] = None) -> Optional[str]:
    """How the CLI writes a parameter reference: ``--flag`` or ``--flag value``."""
    option = flag(name)
    if option is None:
        return None
    return option if value is None else f"{option} {value}"


def as_flags(text: str) -> str:
    """``text`` with its parameter references written as flags, and its control characters
    escaped (:func:`~mrec_warp.errors.printable`): what notes and log lines show."""
    return printable(spell_parameters(text, spell))


def option_name(param: str) -> str:
    """The click name of the option that sets model parameter ``param`` (``dtype`` -> ``ease_dtype``)."""
    return flag(param)[2:].replace("-", "_")


def error_line(exc: InputError) -> str:
    """The one line the CLI prints for ``exc`` (without ``Error:``)."""
    if isinstance(exc, UnknownParameterError):  # list the options train has, as flags in order
        exc = exc.with_accepted(sorted((p for p in exc.accepted if p in MODEL_OPTIONS), key=flag))
    return exc.render(spell)


class FlagProgress(Progress):
    """Progress whose log lines name flags where the library names parameters."""

    def log(self, message: str) -> None:
        super().log(as_flags(message))

    def note(self, message: str) -> None:
        super().note(as_flags(message))
