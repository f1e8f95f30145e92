"""What every subcommand shares: error reporting, progress switches, parsing helpers."""
from __future__ import annotations

import contextlib
import errno
import functools
import gzip
import os
import signal
import sys
import traceback
import zlib
from pathlib import Path
from typing import Any, Callable, List, Optional, Sequence, Tuple

import click
from click.core import ParameterSource

from ..data.inputs import output_encoding
from ..data.ratings import FORMATS
from ..data.rows import DEFAULT_DUPLICATES, DEFAULT_EMPTY_IDS, DEFAULT_NEGATIVES, DUPLICATES, EMPTY_IDS, NEGATIVES
from ..jobs import settle_stopped_jobs
from ..errors import InputError, ParameterError, one_line, printable
from ..files import STDOUT_NAME, descriptor_of, file_identity, forget_outputs, meant_path, output_path, \
    remove_made_folders, take_discarded, take_finished
from ..progress import Progress
from ..seeds import MAX_SEED
from ..signals import Stopped, signal_of
from ..stages.options import RowOptions
from ..tables import neutralised_note, write_table as write_table_file
from ..memory import available_bytes, format_bytes, limited_by_address_space
from ..workers import stop_process_workers
from ._flags import FlagProgress, as_flags, command_flags, error_line
from ._logs import configure as configure_logging, log_file, to_log_file
from ._output_paths import check_output_params, writes_folder

#: Set to 1 (or pass the global ``--debug``) to see the traceback behind an error line.
DEBUG_ENV = "MREC_WARP_DEBUG"
#: Exit status of bad input or a fault of the environment (disk full, read-only folder...).
EXIT_INPUT = 2
#: Exit status of an unexpected exception: a bug, reported in one line like the others.
EXIT_INTERNAL = 3
#: Exit status when the reader of standard output went away, as a shell reports SIGPIPE.
EXIT_BROKEN_PIPE = 141

_DEBUG_HINT = "run with --debug for the traceback"
_NO_SPACE = (errno.ENOSPC, errno.EDQUOT)
_NOT_WRITABLE = (errno.EACCES, errno.EPERM, errno.EROFS)
#: Parameters naming what a command writes (the others name what it reads).
_OUTPUT_PARAMS = ("output", "outdir", "report_path", "json_path", "per_user_path", "plot_path", "table_file")


def debug_enabled() -> bool:
    """Whether ``--debug`` or ``MREC_WARP_DEBUG=1`` asks for tracebacks."""
    if os.environ.get(DEBUG_ENV, "").strip().lower() not in ("", "0", "false", "no", "off"):
        return True
    ctx = click.get_current_context(silent=True)
    return bool(ctx is not None and ctx.find_root().meta.get("mrec_warp.debug"))


def _param_paths(ctx: Optional[click.Context], output: bool) -> List[str]:
    """The command's output paths (``output``), or the existing files among its arguments."""
    if ctx is None:
        return []
    found = []
    for name, value in ctx.params.items():
        if not isinstance(value, (str, os.PathLike)) or not str(value) or (name in _OUTPUT_PARAMS) != output:
            continue
        if output or Path(value).is_file():
            found.append(str(value))
    return found


def _input_files(ctx: click.Context) -> List[str]:
    """The values of the command's file arguments and options that it reads (``-`` too)."""
    found = []
    for param in ctx.command.params:
        value = ctx.params.get(param.name)
        if not isinstance(param.type, click.Path) or param.name in _OUTPUT_PARAMS or not value:
            continue
        found.extend(str(v) for v in (value if isinstance(value, (tuple, list)) else [value]) if v)
    return found


def check_standard_output(ctx: Optional[click.Context]) -> None:
    """Refuse a standard output that is one of the command's input files
    (``mrec-warp similar m.npz >> m.npz``, ``train t.tsv -o /dev/stdout >> t.tsv``): what
    the command prints would be appended to the file it reads. Compared by device and inode
    (:func:`~mrec_warp.files.file_identity`); a terminal or a pipe never clashes."""
    out = file_identity("/dev/stdout")
    if ctx is None or out is None:
        return
    clash = next((p for p in _input_files(ctx) if file_identity(p, reading=True) == out), None)
    if clash is not None:
        raise InputError(f"standard output is an input file ({clash}): what the command writes would "
                         "overwrite or extend it", hint="redirect standard output to another file")


def check_outputs_outside_workdir(ctx: Optional[click.Context]) -> None:
    """Refuse an output inside ``--workdir`` (or the folder itself), before any work: the
    folder is the job's, and what it holds goes when the job ends -- a finished output named
    like one of its files (``job.json``, ``part-00000.tsv``, ``lock``) would be deleted, or
    taken for one, right after the command said it wrote it."""
    workdir = ctx.params.get("workdir") if ctx is not None else None
    if not workdir:
        return
    folder = Path(os.path.realpath(workdir))
    for out in _param_paths(ctx, output=True):
        target = Path(os.path.realpath(out))
        if target == folder or folder in target.parents:
            raise InputError(f"the output {out} is inside the work folder {workdir}, whose files go when "
                             "the job ends", hint="give an output outside `workdir`, or another `workdir`")


def check_log_file(ctx: Optional[click.Context]) -> None:
    """Refuse a ``--log-file`` that is one of the command's input files: its lines would be
    appended to the data the command reads (compared as :func:`check_standard_output` does)."""
    path = log_file()
    target = file_identity(path) if path else None
    if ctx is None or target is None:
        return
    clash = next((p for p in _input_files(ctx) if file_identity(p, reading=True) == target), None)
    if clash is not None:
        raise InputError(f"--log-file is an input file ({clash}): the log lines would be appended to it",
                         hint="give --log-file another path")


#: Parameters naming a folder the command writes into, besides the folder outputs of
#: :data:`_OUTPUT_PARAMS`.
_OUTPUT_FOLDERS = ("workdir", "dest")


def resolve_standard_output(ctx: Optional[click.Context], kwargs: dict) -> None:
    """``-`` as an output means standard output: a file output becomes ``/dev/stdout`` (in
    ``kwargs`` and ``ctx.params``), a folder output is refused in one line (standard output
    holds no folder). Never a file or folder named ``-``. ``-`` gives standard output to one
    output alone: a second output there (``--json - --per-user -``, or ``-`` and
    ``/dev/stdout``) is refused in one line, as their texts would run together."""
    if ctx is None:
        return
    on_stdout = [(max(param.opts, key=len), str(kwargs[param.name]) == STDOUT_NAME) for param in ctx.command.params
                 if param.name in _OUTPUT_PARAMS and isinstance(param.type, click.Path)
                 and isinstance(kwargs.get(param.name), (str, os.PathLike))
                 and (str(kwargs[param.name]) == STDOUT_NAME or descriptor_of(kwargs[param.name]) == 1)]
    if len(on_stdout) > 1 and any(dash for _, dash in on_stdout):
        flags = " and ".join(flag for flag, _ in on_stdout)
        every = "both" if len(on_stdout) == 2 else "all"
        raise click.UsageError(f"{flags} {every} write standard output: their outputs would run together; give "
                               "'-' to one output at most, files to the others")
    for param in ctx.command.params:
        value = kwargs.get(param.name)
        if not isinstance(param.type, click.Path) or not value:
            continue
        flag = max(param.opts, key=len)
        if param.nargs == 2 and isinstance(value, (tuple, list)) and str(value[1]) == STDOUT_NAME:
            raise InputError(f"{flag} {value[0]} -: standard output cannot hold a folder", hint="give a folder path")
        if str(value) != STDOUT_NAME or not (param.name in _OUTPUT_PARAMS or param.name in _OUTPUT_FOLDERS):
            continue
        if writes_folder(param.type):
            raise InputError(f"{flag} -: standard output cannot hold a folder", hint="give a folder path")
        kwargs[param.name] = ctx.params[param.name] = output_path(value)


def stdout_is_an_output(ctx: Optional[click.Context] = None) -> bool:
    """Whether the command writes one of its outputs to standard output (``-o -``,
    ``--json /dev/stdout``): then only that output may go there."""
    ctx = ctx or click.get_current_context(silent=True)
    return any(descriptor_of(path) == 1 for path in _param_paths(ctx, output=True))


def echo_result(text: str, nl: bool = True) -> None:
    """The command's own result (a table), on standard output, or on standard error when an
    output goes to standard output (it would be mixed into it)."""
    click.echo(text, nl=nl, err=stdout_is_an_output())


def say(text: str, err: bool = False, quiet: bool = False) -> None:
    """A result line of the command (``wrote model.npz: ...``): ``click.echo`` unless ``quiet``,
    and in the global ``--log-file`` whatever ``quiet`` says (the log holds what a run made).
    Each line made printable (:func:`~mrec_warp.errors.printable`), the line breaks of ``text``
    kept. On standard error when an output goes to standard output."""
    text = "\n".join(printable(line) for line in text.split("\n"))
    to_log_file(text)
    if not quiet:
        click.echo(text, err=err or stdout_is_an_output())


def _named(paths: List[str], fallback: str) -> str:
    return ", ".join(paths) if paths else fallback


def describe_error(exc: BaseException, ctx: Optional[click.Context] = None) -> Tuple[str, int]:
    """The one line (without ``Error:``) and the exit status the CLI gives for ``exc``."""
    if isinstance(exc, InputError):
        return error_line(exc, command_flags(ctx)), EXIT_INPUT
    if isinstance(exc, MemoryError):
        return describe_memory_error(ctx), 1
    if _thread_start_failed(exc):
        return as_flags("cannot start another thread: the memory or process limit is reached "
                        "(lower `n_jobs`, or raise the limits of ulimit -v and ulimit -u)", command_flags(ctx)), 1
    if isinstance(exc, (EOFError, zlib.error, gzip.BadGzipFile)):
        gz = [p for p in _param_paths(ctx, output=False) if p.endswith(".gz")] or _param_paths(ctx, output=False)
        return (f"{_named(gz, 'an input file')}: truncated or corrupt gzip file ({exc or type(exc).__name__}) "
                "(check it with `gzip -t`, then re-create or download it again)"), EXIT_INPUT
    if isinstance(exc, UnicodeDecodeError):
        return (f"{_named(_param_paths(ctx, output=False), 'an input file')}: bytes that are not valid "
                f"{exc.encoding} text at byte {exc.start} (save the file as {exc.encoding})"), EXIT_INPUT
    if isinstance(exc, OSError) and exc.errno is not None:
        return _describe_os_error(exc, ctx), EXIT_INPUT
    what = one_line(str(exc)) or "no message"
    return f"unexpected {type(exc).__name__}: {what} ({_DEBUG_HINT})", EXIT_INTERNAL


#: Options whose value sets the size of what a command holds in memory (click's names).
SIZE_OPTIONS = ("factors", "k", "block_size", "n_jobs", "users", "items", "interactions", "topics", "num_splits",
                "max_items", "neighbours", "topk", "sub_models", "part_size", "max_sampled", "kos_n")


def _thread_start_failed(exc: BaseException) -> bool:
    """Whether ``exc`` is, or arose while handling, Python's "can't start new thread" (a
    thread pool's clean-up can hide it behind an AttributeError of its own)."""
    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, RuntimeError) and "can't start new thread" in str(exc):
            return True
        exc, seen = exc.__context__, seen + 1
    return False


def describe_memory_error(ctx: Optional[click.Context]) -> str:
    """Why memory ran out, as far as can be told, and what to change: ``ulimit -v`` when it
    is the limit, else the size options given on the command line, else the input itself."""
    available = format_bytes(available_bytes())
    if limited_by_address_space():
        return (f"out of memory: `ulimit -v` leaves this process {available} "
                "(raise the limit, or lower the sizes the options set)")
    given = []
    if ctx is not None:
        for name in SIZE_OPTIONS:
            value = ctx.params.get(name)
            if value is not None and ctx.get_parameter_source(name) in (ParameterSource.COMMANDLINE,
                                                                         ParameterSource.ENVIRONMENT):
                given.append(f"`{name}={value}`")
    if given:
        return as_flags(f"out of memory ({available} available): the sizes set by {', '.join(given)} need more "
                        "(lower them)", command_flags(ctx))
    return (f"out of memory ({available} available): the input needs more than this machine has free "
            "(free memory, or split the input)")


def _writing_option(exc: OSError, ctx: Optional[click.Context]) -> Optional[str]:
    """The option (its longest flag) whose file or folder ``exc`` happened in: ``--workdir``
    for a part file of the work folder, ``--output`` for the output or its temporary twin;
    ``None`` for a file no option names (``index`` writes MODEL.ann beside the model)."""
    if ctx is None or exc.filename is None:
        return None
    for param in ctx.command.params:
        value = ctx.params.get(param.name)
        if param.name not in _OUTPUT_PARAMS + _OUTPUT_FOLDERS or not isinstance(value, (str, os.PathLike)):
            continue
        if _owning_output(exc, [str(value)]) is not None:
            return max(param.opts, key=len)
    return None


def _describe_os_error(exc: OSError, ctx: Optional[click.Context]) -> str:
    outputs = _param_paths(ctx, output=True)
    output = _owning_output(exc, outputs)
    # a temporary name beside an output means nothing to the user: name the output itself
    where = output or (str(exc.filename) if exc.filename is not None else _named(outputs, "standard output"))
    if descriptor_of(where) == 1:
        where = "standard output"
    reason = exc.strerror or os.strerror(exc.errno)
    if exc.errno in _NO_SPACE:
        option = _writing_option(exc, ctx)
        elsewhere = f", or write elsewhere with {option}" if option else ""
        return f"cannot write {where}: {reason} (free some space{elsewhere})"
    if exc.errno in _NOT_WRITABLE and (output or exc.filename is None):
        return (f"cannot write {where}: {reason} "
                "(choose a folder you can write to with -o, or change its permissions)")
    if exc.filename is not None and exc.errno in (errno.ENOTDIR, errno.EEXIST) and output:
        return f"cannot write {where}: a part of its path is a file, not a folder (check the path given with -o)"
    if exc.filename is not None and exc.errno == errno.ENOENT and output:
        return f"cannot write {where}: {reason} (check that the path given with -o can be created)"
    if exc.filename is not None:
        return f"{where}: {reason}"
    return f"{type(exc).__name__}: {reason} ({_DEBUG_HINT})"  # e.g. a connection: no file to name


def _owning_output(exc: OSError, outputs: List[str]) -> Optional[str]:
    """The output ``exc`` happened on: the file itself, its folder, or its temporary twin."""
    if exc.filename is None:
        return _named(outputs, "") or None
    name = Path(meant_path(str(exc.filename))).absolute()  # a file of a temporary folder: the folder meant
    for out in outputs:
        out_path = Path(out).absolute()
        twin = name.parent == out_path.parent and name.name.startswith(f".{out_path.stem}.")
        if name == out_path or out_path in name.parents or name in out_path.parents or twin:
            return out
    return None


def report_error(exc: BaseException, ctx: Optional[click.Context] = None) -> None:
    """Print ``exc`` as one line (after its traceback under ``--debug``) and exit."""
    if isinstance(exc, BrokenPipeError) and exc.filename is None:
        # the reader of our standard output stopped (``| head``): not an error worth a line;
        # standard output goes to /dev/null so that the flush at exit cannot fail again
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(EXIT_BROKEN_PIPE)
    message, status = describe_error(exc, ctx)
    if debug_enabled():
        traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)
    click.echo(f"Error: {one_line(message)}", err=True)
    sys.exit(status)


def report_interrupt(exc: BaseException, ctx: Optional[click.Context] = None) -> None:
    """Ctrl-C, SIGTERM or SIGHUP (:mod:`mrec_warp.signals`): stop the worker processes, then
    one line saying so -- which partial outputs were removed, and how to resume where part
    files were kept -- and exit with ``128 + signal`` (130 for Ctrl-C, 143 for SIGTERM).

    ``ctx`` (the subcommand's context) names the outputs; whether part files were kept is
    what the job engine says (:func:`~mrec_warp.jobs.settle_stopped_jobs`), not a guess from
    options.

    Outputs are written to temporary names that the interrupt removed on its way here, so
    nothing partial is left; the part files of a ``--workdir`` (or ``OUTPUT.parts``) job
    are kept on purpose, and a rerun of the same command skips the finished ones.
    """
    stop_process_workers()
    # parts the killed workers and this process's threads were writing go; a job that
    # finished no unit goes whole (nothing to resume), one that did keeps its folder
    kept = settle_stopped_jobs()
    # name the outputs given on the command line that were cut short (not a part file in a
    # work folder, nor a file of a temporary folder)
    outputs = [Path(os.path.realpath(p)) for p in _param_paths(ctx, output=True)]

    def asked(path: str) -> bool:  # an output of the command line, or inside one
        real = Path(os.path.realpath(path))
        return any(out == real or out in real.parents for out in outputs)

    partial = [path for path in take_discarded() if asked(path)]
    # what was finished before the signal stays, and the line says so; folders made for
    # outputs that never came go again
    finished = [path for path in take_finished() if asked(path) and os.path.exists(path)]
    remove_made_folders()
    if debug_enabled():
        traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)
    signum = signal_of(exc)
    what = "interrupted" if signum == signal.SIGINT else f"stopped by {Stopped(signum).name}"
    removed = f"; removed the partial {', '.join(partial)}" if partial else ""
    removed += f"; kept the finished {', '.join(finished)}" if finished else ""
    # only a job that kept its work folder can be resumed: ask the job engine, not the options
    tail = " (rerun the same command to resume from its work folder)" if kept else ""
    click.echo(f"Error: {what}{removed}{tail}", err=True)
    sys.exit(128 + signum)


def friendly_errors(func: Callable) -> Callable:
    """Turn any exception of a command into one line on standard error and a non-zero exit.

    A :class:`~mrec_warp.errors.ParameterError` (options that miss or exclude each other) is
    a usage error, shown as click's own are: one line pointing to the command's help
    (:func:`mrec_warp.cli.report_usage_error`), exit 2.

    :class:`InputError` and faults of the environment (a full disk, a read-only folder, a
    truncated ``.gz`` input) exit with 2; anything else is unexpected and exits with 3,
    pointing to ``--debug`` for the traceback. click's own errors pass through.
    """

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            resolve_standard_output(click.get_current_context(silent=True), kwargs)
            check_output_params(click.get_current_context(silent=True))
            check_standard_output(click.get_current_context(silent=True))
            check_log_file(click.get_current_context(silent=True))
            check_outputs_outside_workdir(click.get_current_context(silent=True))
            forget_outputs()
            return func(*args, **kwargs)
        except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise
        except ParameterError as exc:  # the library's word for a command line that cannot work
            raise click.UsageError(error_line(exc)) from None
        except KeyboardInterrupt as exc:  # Ctrl-C, or a signal (mrec_warp.signals)
            report_interrupt(exc, click.get_current_context(silent=True))
        except Exception as exc:  # noqa: BLE001 - every error ends as one line
            remove_made_folders()  # an output folder this run made and could not fill goes too
            report_error(exc, click.get_current_context(silent=True))

    return wrapper


def check_sep(ctx: click.Context, param: click.Parameter, value: Optional[str]) -> Optional[str]:
    """``--sep`` must name a delimiter: an empty one would split nothing."""
    if value is not None and value == "":
        raise click.BadParameter("an empty delimiter splits nothing; give e.g. ';', '\\t' or '\\s+'")
    return value


def gathered(into: str, names: Sequence[str], build: Callable[..., Any]) -> Callable[[Callable], Callable]:
    """A decorator: the command gets one argument ``into``, ``build(**options)`` of its options
    ``names``, instead of those options.

    A command that takes such a group lists :func:`friendly_errors` right under
    ``@click.command``, so that a refusal while building the object is one line as well.
    """
    def decorate(func: Callable) -> Callable:
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            kwargs[into] = build(**{name: kwargs.pop(name) for name in names})
            return func(*args, **kwargs)
        return wrapper
    return decorate


def _row_options_of(fmt: str, sep: Optional[str], header: Optional[bool], columns: Optional[str],
                    duplicates: Optional[str], negatives: str, min_value: Optional[float],
                    empty_ids: str) -> RowOptions:
    return RowOptions(format=fmt, sep=sep, header=header, columns=columns, duplicates=duplicates,
                      negatives=negatives, min_value=min_value, empty_ids=empty_ids)


def row_options(what: str = "INPUT") -> Callable[[Callable], Callable]:
    """How a ratings file is read -- ``--format``, ``--sep``, ``--header/--no-header`` and
    ``--columns`` -- and what its rows become -- ``--duplicates``, ``--negatives``,
    ``--min-value`` and ``--empty-ids``, the row rules of :mod:`mrec_warp.data.rows`: declared
    once for every command that reads one (``what`` names its argument), and given to the
    command as one :class:`~mrec_warp.stages.options.RowOptions`, ``rows``."""
    options = (
        click.option("--format", "fmt", type=click.Choice(FORMATS), default="auto", show_default=True,
                     help=f"Format of {what}: tsv, csv, movielens (u.data or ratings.dat), parquet (needs "
                          "pyarrow: the [parquet] extra), or guess: Parquet by its first bytes or a .parquet "
                          "name, else the delimiter from the first lines: '::', tab, comma, then ';' or '|' "
                          "when they split the lines alike, then whitespace."),
        click.option("--sep", callback=check_sep,
                     help=r"Field delimiter, overriding --format, e.g. ';' or '\t'; '\s+' is runs of spaces and tabs. "
                          "With every one-character delimiter a field in double quotes may hold it "
                          r"(RFC 4180); '\s+' and '::' have no quoting."),
        click.option("--header/--no-header", default=None,
                     help="Whether the first line names the columns [guessed: never when a field is a "
                          "number; prepare's output says what was chosen]."),
        click.option("--columns", metavar="USER,ITEM[,VALUE[,TS]]",
                     help="Which columns to use, by header name or 0-based position, e.g. "
                          "userId,movieId,rating,timestamp or 0,1,2 [the first four]. A whole number is "
                          "always a position, never a header name. Columns count from 0 here, in errors "
                          "and in the summary alike."),
        # no default value: with --min-value, repeated pairs need the rule chosen (rows.merge_rows)
        click.option("--duplicates", type=click.Choice(DUPLICATES), default=None,
                     help="How repeated (user, item) rows merge: sum their values, keep the largest, the "
                          "first or last in file order, or count the rows. The merged timestamp is the earliest. "
                          "With --min-value, repeated pairs need it chosen (ratings: last or max).  "
                          f"[default: {DEFAULT_DUPLICATES}]"),
        click.option("--negatives", type=click.Choice(NEGATIVES), default=DEFAULT_NEGATIVES, show_default=True,
                     help="Negative values (returns): refuse the file, drop those rows, or net them against "
                          "the same user and item (sum; pairs netting <= 0 dropped). With --min-value >= 0 "
                          "they are ratings below it (a -10..10 scale), not refused."),
        click.option("--min-value", "--min-rating", "min_value", type=float, metavar="R",
                     help="Drop (merged) pairs valued below R, e.g. ratings below 4 [keep all: a value is a "
                          "strength, 0 the lowest; train --confidence weighs rows by it]. Needs a value column, "
                          "or --duplicates count (pairs of at least R rows)."),
        click.option("--empty-ids", type=click.Choice(EMPTY_IDS), default=DEFAULT_EMPTY_IDS, show_default=True,
                     help="Rows whose user or item id is empty (anonymous rows, e.g. no customer id): refuse the "
                          "file, or drop those rows (the summary counts them)."),
    )

    def decorate(func: Callable) -> Callable:
        func = gathered("rows", ("fmt", "sep", "header", "columns", "duplicates", "negatives", "min_value",
                                 "empty_ids"), _row_options_of)(func)
        for option in reversed(options):
            func = option(func)
        return func
    return decorate


def quiet_option(func: Callable) -> Callable:
    """``--quiet`` / ``--verbose``: default is to talk only on a terminal; both together are
    a usage error (which one would win is no rule a user should have to know)."""
    def not_both(ctx: click.Context, param: click.Parameter, value: bool) -> bool:
        other = "verbose" if param.name == "quiet" else "quiet"
        if value and ctx.params.get(other):  # the second of the two parsed sees the first
            raise click.UsageError("-q and -v contradict each other: give one of them", ctx=ctx)
        return value

    # eager: parsed before the other options, so that their checks know whether to say notes
    func = click.option("--verbose", "-v", is_flag=True, is_eager=True, callback=not_both,
                        help="Log progress even when not on a terminal.")(func)
    func = click.option("--quiet", "-q", is_flag=True, is_eager=True, callback=not_both,
                        help="No log lines or notes: only errors and the command's result (a table it prints; "
                             "a --log-file still gets the result lines).")(func)
    return func


def make_progress(quiet: bool, verbose: bool) -> Progress:
    """The command's progress: its records shown as ``-q``, ``-v``, the terminal and the
    global ``--log-file`` say (:func:`~mrec_warp.cli._logs.configure`); bars on a terminal
    unless ``-q``."""
    configure_logging(quiet, verbose, log_file())
    return FlagProgress(verbose=False if quiet else None)


class SeedType(click.ParamType):
    """``--seed``: a whole number from 0 to :data:`~mrec_warp.seeds.MAX_SEED`, refused the
    same way by every command (a negative one reached numpy as a traceback)."""

    name = "integer"

    def convert(self, value, param, ctx):
        if isinstance(value, int) and not isinstance(value, bool):
            number = value
        else:
            try:
                number = int(str(value).strip())
            except ValueError:
                self.fail(f"{value!r} is not a whole number (e.g. --seed 42)", param, ctx)
        if not 0 <= number <= MAX_SEED:
            self.fail(f"{number} is not a seed: give a whole number from 0 to {MAX_SEED} (e.g. --seed 42)",
                      param, ctx)
        return number


#: The type of every command's ``--seed``.
SEED = SeedType()


def parse_int_list(text: str, name: str) -> List[int]:
    """Parse ``"5,10,20"``; every value must be a positive integer."""
    try:
        values = [int(v) for v in str(text).split(",") if v.strip()]
    except ValueError:
        raise click.BadParameter(f"{text!r} is not a comma-separated list of integers, e.g. 5,10,20", param_hint=name)
    if not values or any(v <= 0 for v in values):
        raise click.BadParameter(f"{text!r}: every value must be a positive integer, e.g. 5,10,20", param_hint=name)
    return values


def write_table(frame, output, fmt: str, model, quiet: bool = False) -> None:
    """Write ``frame`` to ``output`` (atomically; gzip for ``.gz``) or standard output:
    headerless TSV with ids as they are (never quoted), CSV with a header and RFC 4180
    quoting (cells a spreadsheet would run as formulas get a leading ``'``, with a note
    saying how many unless ``quiet``), or Parquet (a file only); text in the encoding the
    model's training data came in, floats to 4 places."""
    n = write_table_file(frame, output, fmt, encoding=output_encoding(getattr(model, "id_encoding_", None)))
    note = neutralised_note(n)
    if note and not quiet:
        click.echo(f"note: {note}", err=True)
