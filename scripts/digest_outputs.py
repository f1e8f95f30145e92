"""Digests of every family's outputs, to prove that a structural change changed no result.

Runs the pipeline through the command line (so it does not depend on where code lives inside
the package) on the shipped sample, one seed, one thread: for each family a model file, the
recommendations for every user, similar items where the family has them, and for the factor
families a fold-in of new users' histories. Prints one line per output (its SHA-256) and writes
them as JSON; ``--compare`` checks a second run against a saved one and exits 1 on any
difference. ``--models DIR`` also recommends from model files an earlier release wrote (kept
with ``--keep``), so old files are shown to load and give the same lists.

Usage (by hand, never in the tests)::

    python scripts/digest_outputs.py --out /tmp/before --keep /tmp/before-models
    # ... the change ...
    python scripts/digest_outputs.py --out /tmp/after --compare /tmp/before/digests.json \
        --models /tmp/before-models
"""
from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "data" / "sample" / "ratings.tsv"
TAGS = ROOT / "data" / "sample" / "item_tags.tsv"

#: family -> extra train options; every run uses --seed 7 --n-jobs 1.
RUNS = {
    "popularity": ["--model", "popularity"],
    "warp": ["--model", "warp"],
    "warp-epochs": ["--model", "warp", "--epochs", "8"],
    "warp-confidence": ["--model", "warp", "--epochs", "6", "--confidence", "log"],
    "warp-submodels": ["--model", "warp", "--epochs", "5", "--sub-models", "2", "--factors", "16"],
    "hybrid": ["--model", "hybrid", "--item-features", str(TAGS)],
    "hybrid-epochs": ["--model", "hybrid", "--epochs", "6", "--item-features", str(TAGS)],
    "wrmf": ["--model", "wrmf"],
    "wrmf-small": ["--model", "wrmf", "--factors", "16", "--regularization", "10", "--confidence", "log"],
    "itemknn": ["--model", "itemknn"],
    "slim": ["--model", "slim"],
    "ease": ["--model", "ease"],
    "rp3beta": ["--model", "rp3beta"],
}
FACTOR_RUNS = {"warp", "warp-epochs", "hybrid", "wrmf", "wrmf-small"}


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def cli(*args: str) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "mrec_warp", *args], capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"mrec-warp {' '.join(args)} failed ({done.returncode}):\n{done.stderr}")
    return done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path, help="work folder (replaced)")
    parser.add_argument("--keep", type=Path, help="copy the model files here")
    parser.add_argument("--compare", type=Path, help="digests.json of an earlier run")
    parser.add_argument("--models", type=Path, help="model files an earlier release wrote (--keep)")
    parser.add_argument("--only", nargs="*", help="run only these (names of RUNS)")
    opts = parser.parse_args()

    out = opts.out
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    cli("prepare", str(SAMPLE), "-o", str(out / "split"), "--min-rating", "4", "--seed", "7", "-q")
    train, test = out / "split" / "train.tsv", out / "split" / "test.tsv"
    # a few test users' rows as the histories of "new" users (renamed) to fold in
    lines = test.read_text(encoding="utf-8").splitlines()[:200]
    (out / "history.tsv").write_text("".join("new-" + line + "\n" for line in lines), encoding="utf-8")
    items = sorted({line.split("\t")[1] for line in lines})[:20]
    (out / "items.txt").write_text("".join(i + "\n" for i in items), encoding="utf-8")

    digests = {"split/train.tsv": sha(train), "split/test.tsv": sha(test)}
    for name, extra in RUNS.items():
        if opts.only and name not in opts.only:
            continue
        model = out / f"{name}.npz"
        cli("train", str(train), "-o", str(model), "--seed", "7", "--n-jobs", "1", "-q", *extra)
        digests[f"{name}.npz"] = sha(model)
        recs = out / f"{name}.recs.tsv"
        cli("recommend", str(model), "-o", str(recs), "-k", "10", "--n-jobs", "1", "-q")
        digests[f"{name}.recs.tsv"] = sha(recs)
        similar = out / f"{name}.similar.tsv"
        done = subprocess.run([sys.executable, "-m", "mrec_warp", "similar", str(model), "--items-file",
                               str(out / "items.txt"), "-o", str(similar), "-q"], capture_output=True, text=True)
        if done.returncode == 0:
            digests[f"{name}.similar.tsv"] = sha(similar)
        if name in FACTOR_RUNS:
            folded = out / f"{name}.foldin.tsv"
            cli("recommend", str(model), "-o", str(folded), "-k", "10", "--n-jobs", "1", "-q",
                "--history", str(out / "history.tsv"))
            digests[f"{name}.foldin.tsv"] = sha(folded)
        if opts.keep:
            opts.keep.mkdir(parents=True, exist_ok=True)
            shutil.copy(model, opts.keep / model.name)
        print(f"{name:18s} {digests[f'{name}.npz'][:16]}  {digests[f'{name}.recs.tsv'][:16]}", flush=True)

    if opts.models:
        for model in sorted(opts.models.glob("*.npz")):
            recs = out / f"old-{model.stem}.recs.tsv"
            cli("recommend", str(model), "-o", str(recs), "-k", "10", "--n-jobs", "1", "-q")
            digests[f"old-{model.stem}.recs.tsv"] = sha(recs)
            same = digests.get(f"{model.stem}.recs.tsv") == digests[f"old-{model.stem}.recs.tsv"]
            print(f"old {model.name:14s} loads; its lists {'equal' if same else 'DIFFER from'} this release's")

    (out / "digests.json").write_text(json.dumps(digests, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"{len(digests)} outputs -> {out / 'digests.json'}")
    if opts.compare:
        before = json.loads(opts.compare.read_text(encoding="utf-8"))
        differ = sorted(k for k in before if k in digests and before[k] != digests[k])
        missing = sorted(k for k in before if k not in digests and not k.startswith("old-"))
        for key in differ:
            print(f"DIFFERS: {key}")
        for key in missing:
            print(f"MISSING: {key}")
        same = len([k for k in before if k in digests]) - len(differ)
        print(f"{same} identical, {len(differ)} differ, {len(missing)} missing")
        sys.exit(1 if differ or missing else 0)


if __name__ == "__main__":
    main()
