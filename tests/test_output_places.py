"""An output of the wrong kind (a folder where a file is written, a file where a folder is,
a file inside a file) is refused as every input is: one line naming the path, what is wrong
and what to do, exit 2, nothing written, no traceback; for every command that writes."""
from __future__ import annotations

import pytest

from mrec_warp.errors import InputError
from mrec_warp.files import check_output_place, check_outputs
from .conftest import run_ok, run_strict as run


@pytest.fixture
def made(tmp_path):
    """A ratings file, a popularity and an item-kNN model of it, recommendations, a folder and a file."""
    rows = "".join(f"u{u}\ti{(u * 7 + j) % 40}\t1\n" for u in range(60) for j in range(8))
    (tmp_path / "train.tsv").write_text(rows)
    (tmp_path / "test.tsv").write_text("".join(f"u{u}\ti{(u * 7 + 9) % 40}\t1\n" for u in range(60)))
    run_ok("train", tmp_path / "train.tsv", "--model", "popularity", "-o", tmp_path / "pop.npz", "-q")
    run_ok("train", tmp_path / "train.tsv", "--model", "itemknn", "--no-select", "-o", tmp_path / "knn.npz", "-q")
    run_ok("recommend", tmp_path / "pop.npz", "-o", tmp_path / "recs.tsv", "-q")
    (tmp_path / "folder").mkdir()
    (tmp_path / "afile").write_text("not a folder\n")
    return tmp_path


def _one_line(result, path, words):
    assert result.exit_code == 2, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    assert lines[0].startswith(f"Error: {path}: ") and words in lines[0], lines[0]
    return lines[0]


FILE_OUTPUTS = [
    ("train", ["{d}/train.tsv", "--model", "popularity"], "--output", "-o"),
    ("recommend", ["{d}/pop.npz"], "--output", "-o"),
    ("tune", ["{d}/train.tsv", "--models", "itemknn"], "--output", "-o"),
    ("tune", ["{d}/train.tsv", "--models", "itemknn"], "--table", "--table"),
    ("explain", ["{d}/pop.npz", "--user", "u1"], "--output", "-o"),
    ("similar", ["{d}/knn.npz", "--items", "i1"], "--output", "-o"),
    ("factors", ["--npz", "{d}/missing.npz"], "--output", "-o"),
    *[("evaluate", ["--train", "{d}/train.tsv", "--test", "{d}/test.tsv", "--recs", "{d}/recs.tsv"], flag, flag)
      for flag in ("--report", "--json", "--per-user", "--plot")],
]


@pytest.mark.parametrize("command,args,name,flag", FILE_OUTPUTS)
def test_a_folder_given_for_a_file_output_is_one_line(made, command, args, name, flag):
    before = sorted(p.name for p in made.iterdir())
    result = run(command, *[a.format(d=made) for a in args], flag, made / "folder")
    line = _one_line(result, made / "folder", f"{name} writes a file, and this is a folder")
    assert f"(name a file, e.g. {made / 'folder' / 'out'}; a folder is never replaced)" in line
    assert sorted(p.name for p in made.iterdir()) == before and not any((made / "folder").iterdir())


def test_convert_names_its_output_argument(made):
    _one_line(run("convert", made / "train.tsv", made / "folder"), made / "folder",
              "OUTPUT writes a file, and this is a folder")


@pytest.mark.parametrize("command,args,flag", [
    ("prepare", ["{d}/train.tsv"], "-o"), ("synth", [], "-o"),
    ("recommend", ["{d}/pop.npz", "-o", "{d}/r.tsv"], "--workdir"),
])
def test_a_file_given_for_a_folder_output_is_one_line(made, command, args, flag):
    result = run(command, *[a.format(d=made) for a in args], flag, made / "afile")
    line = _one_line(result, made / "afile", "writes into this as a folder, and it is a file")
    assert line.endswith("(name a folder, or move that file away)")
    assert (made / "afile").read_text() == "not a folder\n" and not (made / "r.tsv").exists()


def test_a_file_output_inside_a_file_names_that_file(made):
    result = run("train", made / "train.tsv", "--model", "popularity", "-o", made / "afile" / "sub" / "m.npz")
    line = _one_line(result, made / "afile", "--output writes inside this as a folder, and it is a file")
    assert line.endswith("(give a path in a folder, or move that file away)")


def test_a_log_file_that_is_a_folder_is_one_line(made):
    result = run("--log-file", made / "folder", "train", made / "train.tsv", "--model", "popularity",
                 "-o", made / "m.npz")
    _one_line(result, made / "folder", "--log-file writes a file, and this is a folder")
    assert not (made / "m.npz").exists()


def test_the_library_refuses_a_folder_output_in_its_own_words(tmp_path):
    with pytest.raises(InputError, match=r"`output` writes a file, and this is a folder") as err:
        check_outputs({"`output`": tmp_path}, [])
    assert err.value.path == str(tmp_path)
    for fine in ("-", "/dev/stdout", tmp_path / "new" / "deeper" / "m.npz"):  # streams; missing folders
        check_output_place("`output`", fine)
    check_output_place("`outdir`", tmp_path, folder=True)
