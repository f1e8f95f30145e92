"""Logs the standard way: the library emits records on the ``mrec_warp`` logger and configures
nothing; the CLI shows them as ``[    1.2s] message`` by -q / -v / terminal, and --log-file."""
from __future__ import annotations

import io
import logging
import re
import subprocess
import sys

import pytest
from click.testing import CliRunner

import mrec_warp as mw
from mrec_warp.cli import main
from mrec_warp.progress import SILENT, Progress

LINE = re.compile(r"^\[ *\d+\.\ds\] ")


@pytest.fixture()
def ratings(tmp_path):
    path = tmp_path / "r.tsv"
    path.write_text("".join(f"u{u}\ti{(u * 3 + j) % 9}\t{1 + j % 5}\n" for u in range(15) for j in range(4)))
    return path


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_library_prints_nothing_and_its_records_reach_the_application(ratings, capsys, caplog):
    with caplog.at_level(logging.INFO, logger="mrec_warp"):
        mw.train(ratings, params={"factors": 4, "epochs": 2})
    out, err = capsys.readouterr()
    assert out == "" and err == ""
    messages = [r.getMessage() for r in caplog.records if r.name.startswith("mrec_warp")]
    assert any("15 users x 9 items" in m for m in messages), messages
    assert sum("fit epoch" in m for m in messages) == 2 and all(r.levelno == logging.INFO for r in caplog.records)


def test_without_configuration_nothing_reaches_standard_error_and_basic_config_shows_it(ratings):
    # a fresh interpreter: no pytest handlers; the package's NullHandler keeps logging's
    # "last resort" handler quiet even with the package logger at INFO
    code = ("import logging, sys, mrec_warp as mw\n"
            "logging.getLogger('mrec_warp').setLevel(logging.INFO)\n"
            "mw.train(sys.argv[1], params={'factors': 4, 'epochs': 1})\n"
            "print('trained', flush=True)\n"
            "logging.basicConfig(level=logging.INFO, format='%(name)s|%(message)s')\n"
            "mw.train(sys.argv[1], params={'factors': 4, 'epochs': 1})\n")
    proc = subprocess.run([sys.executable, "-c", code, str(ratings)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "trained\n"
    lines = proc.stderr.splitlines()
    assert lines and all(line.startswith("mrec_warp|") for line in lines), proc.stderr
    assert sum("fit epoch" in line for line in lines) == 1


def test_verbose_progress_still_prints_its_lines_and_emits_records(caplog):
    out = io.StringIO()
    with caplog.at_level(logging.INFO, logger="mrec_warp"):
        Progress(verbose=True, stream=out).log("read 3 rows of `factors`")
        SILENT.log("a silent line is still a record")
    assert LINE.match(out.getvalue()) and out.getvalue().endswith("] read 3 rows of `factors`\n")
    assert [r.getMessage() for r in caplog.records] == ["read 3 rows of `factors`", "a silent line is still a record"]


def test_bars_on_a_terminal_when_lines_are_shown_never_for_silent_progress(caplog):
    tty = Terminal()
    assert not Progress(stream=tty).bars  # nobody shows INFO records: no bar either
    assert not Progress(stream=io.StringIO(), verbose=True).bars  # a pipe: lines, no bar
    with caplog.at_level(logging.INFO, logger="mrec_warp"):
        assert Progress(stream=tty).bars and Progress(stream=tty, verbose=True).bars
        assert not Progress(stream=tty, verbose=False).bars and not SILENT.bars
        assert list(Progress(stream=tty).iterate(range(3), total=3, desc="epoch 1")) == [0, 1, 2]
    assert "epoch 1:" in tty.getvalue() and "/3 [" in tty.getvalue()  # tqdm drew on it


def _train(ratings, tmp_path, *flags, before=()):
    result = CliRunner().invoke(main, [*before, "train", str(ratings), "-o", str(tmp_path / "m.npz"),
                                       "--epochs", "2", "--factors", "4", *flags])
    assert result.exit_code == 0, result.output
    return result


def test_cli_shows_lines_with_verbose_none_in_a_pipe_or_with_quiet(ratings, tmp_path):
    verbose = _train(ratings, tmp_path, "-v").stderr.splitlines()
    assert all(LINE.match(line) for line in verbose) and sum("fit epoch" in line for line in verbose) == 2, verbose
    assert _train(ratings, tmp_path).stderr == ""  # a pipe: no log lines
    assert _train(ratings, tmp_path, "-q").stderr == ""
    # the command's handlers go with it: the library is back to configuring nothing
    package = logging.getLogger("mrec_warp")
    assert [type(h) for h in package.handlers] == [logging.NullHandler] and package.level == logging.NOTSET


def test_log_file_gets_every_line_even_with_quiet(ratings, tmp_path):
    log = tmp_path / "run.log"
    result = _train(ratings, tmp_path, "-q", before=("--log-file", str(log)))
    assert result.stderr == "" and result.stdout == ""
    lines = log.read_text(encoding="utf-8").splitlines()
    assert sum(" INFO mrec_warp [" in line and "fit epoch" in line for line in lines) == 2, lines
    _train(ratings, tmp_path, "-q", before=("--log-file", str(log)))  # appended, not replaced
    assert sum("fit epoch" in line for line in log.read_text().splitlines()) == 4


def test_an_unwritable_log_file_is_one_line(ratings, tmp_path):
    result = CliRunner().invoke(main, ["--log-file", str(tmp_path / "no" / "such" / "run.log"), "train", str(ratings),
                                       "-o", str(tmp_path / "m.npz"), "--epochs", "1"])
    assert result.exit_code == 2 and not (tmp_path / "m.npz").exists()
    assert result.stderr.count("\n") == 1 and "run.log" in result.stderr and "--log-file" in result.stderr


def test_log_file_gets_the_epochs_of_sub_models_on_worker_processes_even_with_quiet(ratings, tmp_path):
    # the units' lines come back through the file relay (unit_logs) and are the driver's records
    log, work = tmp_path / "run.log", tmp_path / "work"
    proc = subprocess.run([sys.executable, "-m", "mrec_warp", "--log-file", str(log), "train", str(ratings),
                           "-o", str(tmp_path / "m.npz"), "--epochs", "2", "--factors", "4", "--sub-models", "2",
                           "--backend", "processes", "--n-jobs", "2", "--workdir", str(work), "-q"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    text = log.read_text(encoding="utf-8")
    for i in (0, 1):
        assert text.count(f"sub-model {i}: fit epoch ") == 2, text


def test_a_command_without_progress_of_its_own_still_opens_the_log_file(ratings, tmp_path):
    _train(ratings, tmp_path, "-q")
    result = CliRunner().invoke(main, ["--log-file", str(tmp_path / "s.log"), "similar", str(tmp_path / "m.npz"),
                                       "--items", "i1", "-k", "2"])
    assert result.exit_code == 0 and (tmp_path / "s.log").exists()
    assert [type(h) for h in logging.getLogger("mrec_warp").handlers] == [logging.NullHandler]


def test_on_a_terminal_lines_and_bars_show_and_quiet_silences_both(ratings, tmp_path, monkeypatch):
    import mrec_warp.cli._logs as cli_logs
    import mrec_warp.progress as progress

    monkeypatch.setattr(cli_logs, "is_terminal", lambda stream: True)
    monkeypatch.setattr(progress, "is_terminal", lambda stream: True)
    shown = _train(ratings, tmp_path).stderr
    pieces = re.split(r"[\r\n]", shown)  # a bar is cleared with a carriage return before each line
    assert sum(bool(LINE.match(piece)) and "fit epoch" in piece for piece in pieces) == 2, shown
    assert "chunk" in shown  # the epochs' tqdm bars, drawn on standard error
    assert _train(ratings, tmp_path, "-q").stderr == ""


def test_a_log_file_that_is_an_input_is_refused_and_the_input_kept(ratings, tmp_path):
    before = ratings.read_bytes()
    result = CliRunner().invoke(main, ["--log-file", str(ratings), "train", str(ratings), "-o", str(tmp_path / "m.npz"),
                                       "--epochs", "1", "-v"])
    assert result.exit_code == 2 and result.stderr.count("\n") == 1 and "--log-file is an input file" in result.stderr
    assert ratings.read_bytes() == before and not (tmp_path / "m.npz").exists()


# -- progress: a bar on a terminal for every long loop; a line per unit in a pipe only with -v; nothing with -q --
def _terminal(monkeypatch):
    import mrec_warp.cli._logs as cli_logs
    import mrec_warp.progress as progress

    monkeypatch.setattr(cli_logs, "is_terminal", lambda stream: True)
    monkeypatch.setattr(progress, "is_terminal", lambda stream: True)


def test_a_finished_bar_stays_on_the_terminal_and_nested_ones_go(caplog):
    tty = Terminal()
    with caplog.at_level(logging.INFO, logger="mrec_warp"):
        progress = Progress(stream=tty)
        for _ in progress.iterate(range(2), total=2, desc="fit", unit="epoch", lines=False):
            list(progress.iterate(range(3), total=3, desc="chunks", unit="chunk"))
    text = tty.getvalue()
    # kept: the outer bar's last frame ends the output with a new line (an erased bar ends with a
    # carriage return over blanks, as the inner ones do)
    assert text.endswith("\n") and text[:-1].rsplit("\r", 1)[-1].startswith("fit: 100%"), text
    assert "2/2 [" in text[:-1].rsplit("\r", 1)[-1]


def test_a_terminal_of_zero_columns_gets_a_bar_80_wide(monkeypatch):
    import os

    import mrec_warp.progress as progress

    class Pty(Terminal):
        def fileno(self) -> int:
            return 99

    monkeypatch.setattr(os, "get_terminal_size", lambda fd: os.terminal_size((0, 0)))
    assert progress.bar_width(Pty()) == 80
    monkeypatch.setattr(os, "get_terminal_size", lambda fd: os.terminal_size((120, 40)))
    assert progress.bar_width(Pty()) is None  # tqdm asks the terminal itself
    assert progress.bar_width(Terminal()) is None  # no file descriptor: a notebook's stream


def test_without_bars_a_line_per_finished_unit_only_when_lines_are_shown(caplog):
    pipe = io.StringIO()
    assert list(Progress(stream=pipe).iterate(range(3), total=3, desc="recommend", unit="block")) == [0, 1, 2]
    assert pipe.getvalue() == "" and not caplog.records  # nobody shows INFO records: no line made
    with caplog.at_level(logging.INFO, logger="mrec_warp"):
        list(Progress(stream=pipe).iterate(range(3), total=3, desc="recommend", unit="block"))
        list(Progress(stream=pipe).iterate(range(2), total=2, desc="fit", unit="epoch", lines=False))
        list(Progress(stream=pipe, verbose=False).iterate(range(2), total=2, desc="x"))  # verbose=False: no bar
    assert [r.getMessage() for r in caplog.records][:3] == [f"recommend: block {i} of 3 done" for i in (1, 2, 3)]
    assert len(caplog.records) == 5 and pipe.getvalue() == ""


@pytest.fixture()
def split(tmp_path):
    train = tmp_path / "train.tsv"
    test = tmp_path / "test.tsv"
    train.write_text("".join(f"u{u}\ti{(u * 3 + j) % 12}\n" for u in range(40) for j in range(5)))
    test.write_text("".join(f"u{u}\ti{(u * 3 + 7) % 12}\n" for u in range(40)))
    return train, test


def _cli(*args):
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result.stderr


def _commands(train, test, tmp_path, *flags):
    """stderr of train (WARP on 2 threads, SLIM), recommend (blocks of 8 users) and evaluate."""
    return {
        "warp": _cli("train", train, "-o", tmp_path / "w.npz", "--epochs", 3, "--factors", 4, "--n-jobs", 2, *flags),
        "slim": _cli("train", train, "-o", tmp_path / "s.npz", "--model", "slim", *flags),
        "recommend": _cli("recommend", tmp_path / "w.npz", "-o", tmp_path / "recs.tsv", "--block-size", 8, *flags),
        "evaluate": _cli("evaluate", "--train", train, "--test", test, "--recs", tmp_path / "recs.tsv", *flags),
    }


def test_every_long_loop_draws_a_bar_on_a_terminal_and_quiet_draws_none(split, tmp_path, monkeypatch):
    _terminal(monkeypatch)
    shown = _commands(*split, tmp_path)
    bars = {"warp": "fit: 100%", "slim": "%|", "recommend": "recommend: 100%", "evaluate": "evaluate: 100%"}
    for command, bar in bars.items():
        assert bar in shown[command] and "5/5 [" in shown["recommend"], (command, shown[command])
    assert "3/3 [" in shown["warp"]  # one bar over the epochs, also when they run on several threads
    assert all(text == "" for text in _commands(*split, tmp_path, "-q").values())


def test_in_a_pipe_a_line_per_finished_unit_only_with_verbose(split, tmp_path):
    quiet = _commands(*split, tmp_path)
    assert all("%|" not in text and " done" not in text for text in quiet.values()), quiet
    verbose = _commands(*split, tmp_path, "-v")
    assert all("%|" not in text for text in verbose.values())  # no bar drawn into a pipe
    assert [f"recommend: block {i} of 5 done" in verbose["recommend"] for i in range(1, 6)] == [True] * 5
    assert "evaluate: file 1 of 1 done" in verbose["evaluate"]
    assert verbose["warp"].count("fit epoch") == 3 and " done" not in verbose["warp"]  # epochs: their own lines
    assert _commands(*split, tmp_path, "-q") == {name: "" for name in quiet}


# -- -q with -v, global options after the command, result lines in the log file -----------------------------
@pytest.mark.parametrize("flags", [("-q", "-v"), ("-v", "-q"), ("--quiet", "--verbose")])
def test_quiet_and_verbose_together_are_a_one_line_usage_error(ratings, tmp_path, flags):
    result = CliRunner().invoke(main, ["train", str(ratings), "-o", str(tmp_path / "m.npz"), *flags])
    assert result.exit_code == 2 and not (tmp_path / "m.npz").exists()
    assert result.stderr.splitlines() == ["Error: -q and -v contradict each other: give one of them "
                                          "(see 'mrec-warp train --help')"]


@pytest.mark.parametrize("option, shown", [("--log-file", "--log-file FILE"), ("--debug", "--debug")])
def test_a_global_option_after_the_command_says_where_it_goes(ratings, tmp_path, option, shown):
    extra = [str(tmp_path / "run.log")] if option == "--log-file" else []
    result = CliRunner().invoke(main, ["train", str(ratings), "-o", str(tmp_path / "m.npz"), option, *extra])
    assert result.exit_code == 2 and not (tmp_path / "m.npz").exists()
    assert result.stderr.splitlines() == [f"Error: {option} goes before the command: mrec-warp {shown} train ... "
                                          "(see 'mrec-warp --help')"]


def test_the_log_file_gets_the_result_lines_also_with_quiet(ratings, tmp_path):
    log = tmp_path / "run.log"
    result = _train(ratings, tmp_path, "-q", before=("--log-file", str(log)))
    assert result.stdout == "" and result.stderr == ""
    assert f"] wrote {tmp_path / 'm.npz'}: warp model of 15 users x 9 items, 2 epochs" in log.read_text()
    shown = CliRunner().invoke(main, ["--log-file", str(log), "recommend", str(tmp_path / "m.npz"),
                                      "-o", str(tmp_path / "recs.tsv")])
    assert shown.exit_code == 0 and shown.stdout.count("wrote ") == 1  # shown once, not also as a log line
    assert f"wrote {tmp_path / 'recs.tsv'}: 75 recommendations for 15 users" in log.read_text()
