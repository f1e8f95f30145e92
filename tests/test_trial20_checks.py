"""Issue 20, hostile trial: usage errors in one line, model files checked as training checks
parameters, fits refusing infinite values or no matrix."""
from __future__ import annotations

import pytest
from click.testing import CliRunner

from mrec_warp.cli import main


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def usage_line(result, command):
    """One line, click's message, a pointer to the command's help, exit 2."""
    assert result.exit_code == 2, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("Error: ") and lines[0].endswith(f" (see 'mrec-warp {command} --help')"), lines[0]
    return lines[0]


def test_usage_errors_are_one_line_for_every_command(tmp_path):
    folder = tmp_path / "data"
    folder.mkdir()
    afile = tmp_path / "afile"
    afile.write_text("u\ti\n")
    assert "data' is a directory" in usage_line(run("train", folder, "-o", tmp_path / "x.npz"), "train")
    assert "--factors" in usage_line(run("train", afile, "-o", tmp_path / "x.npz", "--factors", "1e9"), "train")
    assert "-k" in usage_line(run("recommend", afile, "-o", tmp_path / "r.tsv", "-k", "1e12"), "recommend")
    usage_line(run("recommend", afile, "-o", folder), "recommend")
    usage_line(run("prepare", afile, "-o", afile), "prepare")
    usage_line(run("train", afile, "-o", tmp_path / "x.npz", "--workdir", afile), "train")
    assert "Missing argument" in usage_line(run("train"), "train")
    assert run("--bogus").stderr == "Error: No such option '--bogus'. (see 'mrec-warp --help')\n"
    assert run("nosuch").stderr == "Error: No such command 'nosuch'. (see 'mrec-warp --help')\n"
