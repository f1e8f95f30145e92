"""Smoke test of an installed mrec-warp: synth -> prepare -> train -> recommend, checked.

cibuildwheel runs it after installing each wheel (pyproject.toml, [tool.cibuildwheel]
test-command); it is plain Python so that it runs the same on Linux, macOS and Windows.
It works in a temporary folder and runs the CLI as ``python -m mrec_warp`` with the
interpreter that runs it, so it tests the installed package, never a source tree.
Takes a few seconds. Exit 0, or an AssertionError naming what is wrong.
"""
from __future__ import annotations

import csv
import importlib
import importlib.metadata
import subprocess
import sys
import tempfile
from pathlib import Path

KERNELS = ("rng", "warp", "hybrid", "als", "slim", "gram", "topk")
PROJECT = Path(__file__).resolve().parents[1]


def cli(*args: str, cwd: Path) -> str:
    done = subprocess.run([sys.executable, "-m", "mrec_warp", *args], cwd=cwd, capture_output=True, text=True)
    assert done.returncode == 0, f"mrec-warp {' '.join(args)} failed:\n{done.stdout}{done.stderr}"
    return done.stdout + done.stderr


def rows(path: Path) -> list[list[str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.reader(f, delimiter="\t"))


def main() -> None:
    import mrec_warp

    where = Path(mrec_warp.__file__).resolve()
    assert PROJECT not in where.parents, f"mrec_warp imported from the source tree ({where}), not the wheel"
    for name in KERNELS:  # each compiled module loads on this platform
        importlib.import_module(f"mrec_warp.kernels.{name}")
    version = importlib.metadata.version("mrec-warp")
    assert version == mrec_warp.__version__, f"metadata says {version}, mrec_warp.__version__ {mrec_warp.__version__}"

    with tempfile.TemporaryDirectory(prefix="mrec-warp-smoke-") as tmp:
        work = Path(tmp)
        assert version in cli("--version", cwd=work)
        cli("synth", "-o", "syn", "--users", "300", "--items", "200", "--interactions", "6000", "--seed", "1", cwd=work)
        cli("prepare", "syn/ratings.tsv", "-o", "split", "--min-rating", "1", "--test-fraction", "0.2",
            "--seed", "1", cwd=work)
        train = rows(work / "split" / "train.tsv")
        seen = {(r[0], r[1]) for r in train}
        users = {r[0] for r in train}
        items = {r[1] for r in rows(work / "syn" / "ratings.tsv")}
        for model, extra in (("warp", ["--epochs", "5"]), ("wrmf", [])):
            cli("train", "split/train.tsv", "-o", f"{model}.npz", "--model", model, "--seed", "1", *extra, cwd=work)
            cli("recommend", f"{model}.npz", "-o", f"recs-{model}.tsv", "-k", "5", cwd=work)
            recs = rows(work / f"recs-{model}.tsv")
            assert {r[0] for r in recs} == users, f"{model}: not every training user got recommendations"
            assert len(recs) == 5 * len(users), f"{model}: {len(recs)} rows, expected 5 per user"
            assert all(r[1] in items for r in recs), f"{model}: an item id that the data does not have"
            assert not any((r[0], r[1]) in seen for r in recs), f"{model}: recommends an item the user has"
    print(f"mrec-warp {version} from {where.parent}: kernels load, synth -> train -> recommend OK")


if __name__ == "__main__":
    main()
