"""Control characters in paths and ids are never echoed raw (issue 20, item 6): an escape
sequence in a file name or an id could rewrite the terminal's title or hide the rest of the
line. Error lines, log lines and notes show them escaped as ``repr`` does; printable
non-ASCII text (accents, emoji) is shown as it is."""
from __future__ import annotations

import pytest
from click.testing import CliRunner

from mrec_warp.cli import main
from mrec_warp.errors import InputError, printable
from mrec_warp.progress import Progress

TITLE = "\x1b]0;pwned\x07"  # OSC 0: set the terminal's title


def raw_controls(text: str) -> list:
    return [c for c in text if ord(c) < 0x20 and c != "\n" or 0x7f <= ord(c) <= 0x9f]


def test_printable_escapes_controls_and_keeps_other_text():
    assert printable(f"a{TITLE}b") == "a\\x1b]0;pwned\\x07b"
    assert printable("j\u00f6rg \U0001F600 caf\u00e9") == "j\u00f6rg \U0001F600 caf\u00e9"
    assert printable("\x00\x7f\x9b\u202e\udcff") == "\\x00\\x7f\\x9b\\u202e\\xff"
    line = str(InputError(f"user {TITLE} unknown", path=f"in{TITLE}.tsv", line=2, hint=f"fix {TITLE}"))
    assert raw_controls(line) == [] and line.startswith("in\\x1b]0;pwned\\x07.tsv:2: user \\x1b")


def test_log_lines_show_a_path_escaped(capsys):
    Progress(verbose=True).log(f"read {TITLE}.tsv")
    err = capsys.readouterr().err
    assert raw_controls(err) == [] and "\\x1b]0;pwned\\x07.tsv" in err


@pytest.fixture()
def model(tmp_path):
    (tmp_path / "t.tsv").write_text("".join(f"u{u}\ti{(u + j) % 5}\n" for u in range(12) for j in range(2)))
    result = CliRunner().invoke(main, ["train", str(tmp_path / "t.tsv"), "-o", str(tmp_path / "m.npz"),
                                       "--model", "warp", "--epochs", "1", "-q"])
    assert result.exit_code == 0, result.output
    return tmp_path / "m.npz"


def test_error_lines_show_a_hostile_path_and_id_escaped(model, tmp_path):
    (tmp_path / "users.txt").write_text(f"u1{TITLE}\n")
    runner = CliRunner()
    cases = [
        ["recommend", str(tmp_path / f"m{TITLE}.npz"), "-o", str(tmp_path / "r.tsv")],  # a path
        ["recommend", str(model), "-o", str(tmp_path / "r.tsv"), "--users", str(tmp_path / "users.txt")],  # an id
        ["similar", str(model), "--items", f"x{TITLE}"],  # an id on the command line
    ]
    for args in cases:
        result = runner.invoke(main, args)
        assert result.exit_code == 2, result.output
        assert raw_controls(result.stderr) == [] and "\\x1b]0;pwned\\x07" in result.stderr, result.stderr
        assert len(result.stderr.splitlines()) == 1


def test_log_lines_of_a_command_show_a_hostile_file_name_escaped(tmp_path):
    data = tmp_path / f"t{TITLE}.tsv"
    data.write_text("".join(f"u{u}\ti{(u + j) % 5}\n" for u in range(12) for j in range(2)))
    result = CliRunner().invoke(main, ["train", str(data), "-o", str(tmp_path / "m.npz"), "--model", "popularity",
                                       "-v"])
    assert result.exit_code == 0, result.output
    assert raw_controls(result.stderr) == [] and "t\\x1b]0;pwned\\x07.tsv" in result.stderr


def test_wrote_lines_show_a_hostile_output_name_escaped(tmp_path):
    data = tmp_path / "t.tsv"
    data.write_text("".join(f"u{u}\ti{(u + j) % 5}\n" for u in range(12) for j in range(2)))
    runner = CliRunner()
    result = runner.invoke(main, ["train", str(data), "-o", str(tmp_path / f"m{TITLE}.npz"), "--model", "popularity"])
    assert result.exit_code == 0 and (tmp_path / f"m{TITLE}.npz").exists()  # the file keeps its name
    assert raw_controls(result.stdout) == [] and "m\\x1b]0;pwned\\x07.npz" in result.stdout
    result = runner.invoke(main, ["prepare", str(data), "-o", str(tmp_path / f"split{TITLE}"), "--leave-out", "1"])
    assert result.exit_code == 0, result.output
    assert raw_controls(result.stdout) == [] and "split\\x1b]0;pwned\\x07" in result.stdout


def test_an_error_line_keeps_an_ids_own_spaces(tmp_path):
    # two items differ only by a run of spaces; the message must show what was typed
    err = InputError("user 'a  b\u00a0c ' is not in the model", path="x.tsv", line=2, hint="did you mean\n  'a b'?")
    assert str(err) == "x.tsv:2: user 'a  b\u00a0c ' is not in the model (did you mean 'a b'?)"
    ratings = tmp_path / "r.tsv"
    ratings.write_text("u1\titem 01\nu1\titem  01\nu2\titem 01\nu2\tb\nu3\tb\nu3\titem  01\n", encoding="utf-8")
    model = tmp_path / "m.npz"
    runner = CliRunner()
    assert runner.invoke(main, ["train", str(ratings), "--model", "itemknn", "-o", str(model), "--quiet"]).exit_code == 0
    res = runner.invoke(main, ["similar", str(model), "--items", "item   01"])
    assert res.exit_code == 2
    assert "item 'item   01' is not in the model" in res.output
