"""The ``mrec-warp`` command: a click group whose subcommands live one per module."""
from __future__ import annotations

import importlib
import sys
import warnings

import click

from .._version import __version__
from ..signals import stop_on_signals
from ..errors import one_line
from ..workers import quiet_resource_tracker
from ._common import DEBUG_ENV, report_error, report_interrupt
from ._logs import log_file_option, start_log_file

# (module, command) pairs; each module defines a click command named after it.
_COMMANDS = ("prepare", "synth", "fetch", "train", "recommend", "evaluate", "similar", "explain", "tune",
             "experiment", "convert", "factors", "serve", "index", "info")


#: The options of ``mrec-warp`` itself, given before the command.
_GROUP_OPTIONS = ("--log-file", "--debug")


def report_usage_error(exc: click.UsageError) -> None:
    """Show a usage error (an unknown option, a bad value, a folder given as a file) as the
    one line every other error is, pointing to the command's help, and exit with 2.

    click's own display takes four lines (usage, "Try ... --help", a blank line, the error).
    A command run with no arguments at all still shows its help, as click does.
    """
    if isinstance(exc, click.exceptions.NoArgsIsHelpError):
        raise exc
    names, ctx = [], exc.ctx
    while ctx is not None and ctx.parent is not None:  # the root is always mrec-warp (also as python -m)
        names.insert(0, ctx.info_name)
        ctx = ctx.parent
    path = " ".join(["mrec-warp", *names])
    message = one_line(exc.format_message())
    if isinstance(exc, click.NoSuchOption) and exc.option_name in _GROUP_OPTIONS and names:
        # a global option after the command: click would suggest the command's nearest option
        shown = f"{exc.option_name} FILE" if exc.option_name == "--log-file" else exc.option_name
        message = f"{exc.option_name} goes before the command: mrec-warp {shown} {names[0]} ..."
        path = "mrec-warp"
    click.echo(f"Error: {message} (see '{path} --help')", err=True)
    sys.exit(exc.exit_code)


class _Group(click.Group):
    """The command group; a last line of defence so that no command ends in a traceback."""

    def make_context(self, info_name, args, parent=None, **extra):
        try:  # the group's own options (``mrec-warp --bogus``)
            return super().make_context(info_name, args, parent=parent, **extra)
        except click.UsageError as exc:
            report_usage_error(exc)

    def invoke(self, ctx: click.Context):
        # SIGTERM and SIGHUP stop a command as Ctrl-C does: every clean-up on the way out
        # runs, then one line and the shell's 128 + signal (mrec_warp.signals)
        with stop_on_signals():
            try:
                return super().invoke(ctx)
            except click.UsageError as exc:  # a command's options and arguments, parsed here
                report_usage_error(exc)
            except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort):
                raise
            except KeyboardInterrupt as exc:  # one line and 128 + signal, not click's "Aborted!"
                report_interrupt(exc, ctx)
            except Exception as exc:  # noqa: BLE001 - commands report their own; this catches the rest
                report_error(exc, ctx)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="mrec-warp")
@click.option("--debug", is_flag=True,
              help=f"Show the Python traceback behind an error (or set {DEBUG_ENV}=1).")
@log_file_option
@click.pass_context
def main(ctx: click.Context, debug: bool) -> None:
    """Recommendations from implicit feedback with WARP matrix factorisation.

    A typical run goes ratings file -> prepare -> train -> recommend -> evaluate:

    \b
      mrec-warp prepare ratings.tsv -o split/ --min-rating 4
      mrec-warp train split/train.tsv -o model.npz
      mrec-warp recommend model.npz -o recs.tsv -k 20
      mrec-warp evaluate --train split/train.tsv --test split/test.tsv --recs recs.tsv

    Run any command with --help for its options and an example. Errors are one line on
    standard error; exit status 2 means bad input or a fault you can fix (disk full,
    read-only folder), 3 an unexpected error (add --debug before the command to see where).
    Ctrl-C, SIGTERM and SIGHUP stop a command cleanly (workers stopped, partial files
    removed) with status 128 + the signal's number: 130, 143, 129.
    """
    ctx.meta["mrec_warp.debug"] = debug
    start_log_file()
    quiet_resource_tracker()  # no warning of loky's after the line of a stopped command
    # an interrupted job cancels its queued blocks on purpose: joblib's warning about it is noise
    # (its wording: "N tasks have been successfully executed but not used. Additionally, M
    # tasks which were still being processed by the workers have been cancelled. ...")
    warnings.filterwarnings("ignore", message=r"\d+ tasks (have been successfully executed|which were still being "
                            r"processed)", category=UserWarning)


for _name in _COMMANDS:
    try:
        _module = importlib.import_module(f".{_name}", __name__)
    except ModuleNotFoundError as exc:  # a command still being written must not break the others
        if exc.name != f"{__name__}.{_name}":
            raise
        continue
    main.add_command(getattr(_module, _name))
