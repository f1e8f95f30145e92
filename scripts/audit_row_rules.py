"""Audit of what a row means, end to end, on two exports nobody cleaned.

Writes two files shaped like public exports the test suite never reads:

* a book-ratings dump in its published layout: ``"user";"isbn";"rating"``, every field
  quoted, CRLF, a BOM, ratings 0-10 where 0 means "interacted, no rating", ids holding
  ``;`` and accents inside their quotes;
* a retail invoice log: ``customer,item,quantity,date`` with repeated invoice lines, returns
  as negative quantities and ids with gaps written as floats by pandas (``17850.0``).

Each goes through ``prepare`` (what the summary says was kept, merged, dropped), then every
model family (and every confidence mode a family takes) is trained on the train file, and
``recommend`` is run WITHOUT ``--train``: the model's own exclusions must keep every item a
user has in training out of the lists. The table counts the already-seen items per family
(the only right answer is 0) and the JSON keeps every figure.

Run by hand::

    .venv/bin/python scripts/audit_row_rules.py --out bench-out/row-rules
"""
from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Dict, List, Sequence, Set, Tuple

MW = [sys.executable, "-m", "mrec_warp"]

#: (label, train options): every family, every confidence mode it takes; few epochs, since
#: only the exclusions are audited here.
RUNS: Sequence[Tuple[str, List[str]]] = (
    ("popularity", ["--model", "popularity"]),
    ("warp", ["--model", "warp", "--epochs", "5"]),
    ("warp linear", ["--model", "warp", "--epochs", "5", "--confidence", "linear"]),
    ("warp log", ["--model", "warp", "--epochs", "5", "--confidence", "log"]),
    ("wrmf", ["--model", "wrmf"]),
    ("wrmf linear", ["--model", "wrmf", "--confidence", "linear"]),
    ("wrmf log", ["--model", "wrmf", "--confidence", "log"]),
    ("itemknn", ["--model", "itemknn"]),
    ("slim", ["--model", "slim"]),
    ("ease", ["--model", "ease"]),
)


def write_book_dump(path: Path, rng: random.Random) -> None:
    """Quoted ``;`` fields, CRLF, BOM, 0 = 'interacted, no rating', awkward ids."""
    users = [f"{276725 + u}" for u in range(300)]
    isbns = [f"{rng.randrange(10**9):09d}X" for _ in range(600)]
    isbns[:4] = ["034545104X", "Le Petit Prince; édition", 'say "hi"', "🙂 emoji"]
    lines = ['"User-ID";"ISBN";"Book-Rating"']
    for user in users:
        for isbn in rng.sample(isbns[: 200 + rng.randrange(400)], 8 + rng.randrange(25)):
            rating = 0 if rng.random() < 0.6 else rng.randrange(1, 11)
            quoted = isbn.replace('"', '""')
            lines.append(f'"{user}";"{quoted}";"{rating}"')
    path.write_bytes(("\ufeff" + "\r\n".join(lines) + "\r\n").encode("utf-8"))


def write_invoice_log(path: Path, rng: random.Random) -> None:
    """Repeated invoice lines, returns as negative quantities, float-written customer ids."""
    lines = ["customer,item,quantity,date"]
    items = [f"{85000 + i}{'A' if i % 7 == 0 else ''}" for i in range(400)]
    for c in range(250):
        customer = f"{12346 + c}.0"  # pandas writes ids with gaps as floats
        bought = rng.sample(items, 5 + rng.randrange(20))
        for item in bought:
            for _ in range(1 + (rng.random() < 0.3) * rng.randrange(1, 4)):  # repeated lines
                day = 1 + rng.randrange(28)
                lines.append(f"{customer},{item},{1 + rng.randrange(12)},2011-03-{day:02d}")
            if rng.random() < 0.1:  # a return of part of it
                lines.append(f"{customer},{item},-{1 + rng.randrange(3)},2011-04-01")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def run(args: List[str], check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(MW + args, capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise SystemExit(f"failed ({proc.returncode}): {' '.join(args)}\n{proc.stderr}")
    return proc


def read_pairs(path: Path) -> Dict[str, Set[str]]:
    """user -> items of a headerless TSV written by prepare (ids as written, byte for byte)."""
    seen: Dict[str, Set[str]] = defaultdict(set)
    with open(path, encoding="utf-8", newline="") as fh:
        for line in fh:
            fields = line.rstrip("\n").split("\t")
            seen[fields[0]].add(fields[1])
    return seen


def audit(name: str, source: Path, prepare_opts: List[str], out: Path) -> dict:
    split = out / f"{name}-split"
    run(["prepare", str(source), "-o", str(split), "--seed", "1", "-q"] + prepare_opts)
    summary = json.loads((split / "summary.json").read_text())
    train = split / "train.tsv"
    seen = read_pairs(train)
    zero_pairs = sum(1 for line in open(train, encoding="utf-8") if line.rstrip("\n").split("\t")[2:3] == ["0"])
    families = {}
    for label, opts in RUNS:
        model = out / f"{name}-{label.replace(' ', '-')}.npz"
        recs = out / f"{name}-{label.replace(' ', '-')}.tsv"
        run(["train", str(train), "-o", str(model), "--seed", "1", "-q"] + opts)
        run(["recommend", str(model), "-o", str(recs), "-k", "20", "-q"])
        already = total = 0
        for user, items in read_pairs(recs).items():
            total += len(items)
            already += len(items & seen.get(user, set()))
        families[label] = {"recommended": total, "already_seen": already}
    return {"summary": summary, "train_zero_valued_pairs": zero_pairs, "families": families}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("bench-out/row-rules"))
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    if args.out.exists():
        shutil.rmtree(args.out)
    args.out.mkdir(parents=True)
    rng = random.Random(args.seed)
    books, invoices = args.out / "book-ratings.csv", args.out / "invoices.csv"
    write_book_dump(books, rng)
    write_invoice_log(invoices, rng)
    results = {
        "books": audit("books", books, ["--sep", ";"], args.out),
        "invoices": audit("invoices", invoices, ["--negatives", "net", "--duplicates", "sum"], args.out),
    }
    (args.out / "audit.json").write_text(json.dumps(results, indent=2, default=str))
    print(f"{'set':<10} {'family':<12} {'recommended':>11} {'already seen':>12}")
    for name, res in results.items():
        for label, fam in res["families"].items():
            print(f"{name:<10} {label:<12} {fam['recommended']:>11} {fam['already_seen']:>12}")
    for name, res in results.items():
        print(f"\n{name}: summary.json counts")
        print(json.dumps({k: v for k, v in res["summary"].items() if not isinstance(v, (dict, list))}, indent=1))
        print(f"zero-valued pairs in train.tsv: {res['train_zero_valued_pairs']}")
    print(f"\nwrote {args.out / 'audit.json'}")


if __name__ == "__main__":
    main()
