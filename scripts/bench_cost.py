#!/usr/bin/env python
"""Cost curves from a text file: time and peak memory of every CLI stage at 1M, 10M, 50M rows.

Run by hand (minutes at 1M-10M, an hour or more at 50M on a loaded 2-core machine):

    python scripts/bench_cost.py --sizes 1M,10M
    .venv-bench/bin/python scripts/bench_cost.py --sizes 1M,10M,50M --plot   # + implicit's ALS

Each size is a synthetic log (``mrec-warp synth --values counts``: Zipf item popularity,
log-normal user activity; 50M rows ~ 2.5M users x 250k items, users and items scaled in
proportion at smaller sizes), written once as TSV (user, item, count, timestamp) into a scratch
folder outside the project (``--scratch``, default under /tmp) and reused while its parameters
are the same. Every stage then runs as its own process, as a user would run it, and is timed
with its peak resident memory (``wait4``'s ``ru_maxrss`` of that process):

* ``prepare`` (columns 0-2, random 80/20 split per user) -- and its rows read per second;
* ``train`` of WARP (``--epochs``, explicit parameters), WRMF (``--epochs`` iterations,
  explicit factors, alpha and regularisation: no selection of defaults runs), item-kNN and
  RP3beta (explicit neighbour counts);
* ``recommend -k 10`` for every user of the models in ``--recommend-models``;
* ``evaluate`` of WARP's recommendations;
* the lower bound of ``recommend``: WARP's factors, users x items product by blocks (BLAS,
  ``--threads`` threads) + a top-10 per user, nothing written, model loaded in the same way;
* with the bench environment (implicit installed): implicit's ALS fit and its ``recommend``
  for every user on the same train.tsv (OPENBLAS_NUM_THREADS=1, ``--threads`` threads).

Memory is compared with the in-memory CSR of the prepared pairs (float32 values, int32 item
indices, int64 row pointers); growth with the per-decade ratio t(10n)/t(n) (linear: 10,
target 7.5-12.5). Prints a table and the machine's load, writes ``bench-out/bench_cost.json``
and, with ``--plot``, a log-log PNG of CPU time (a sample of users scaled to all) and peak
memory against the interactions (on a shared machine CPU time is steadier than wall time).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
# the package the stages run: this project's, or --library's (set for the worker processes)
sys.path.insert(0, os.environ.get("MREC_WARP_BENCH_LIBRARY", str(ROOT)))

from _benchlib import load_avg  # noqa: E402

#: 50M interactions ~ 2.5M users x 250k items; smaller sizes scale both in proportion.
USERS_PER_ROW = 2_500_000 / 50_000_000
ITEMS_PER_ROW = 250_000 / 50_000_000
SEED = 1
#: Fixed, explicit parameters: no early stopping, no data-driven choice of defaults.
TRAIN_OPTIONS = {
    "warp": ["--factors", "64", "--learning-rate", "0.02", "--max-sampled", "50", "--loss", "warp"],
    "wrmf": ["--factors", "64", "--regularization", "40", "--alpha", "1", "--confidence", "linear"],
    "itemknn": ["--neighbours", "200", "--similarity", "tfidf"],
    "rp3beta": ["--neighbours", "200", "--alpha", "0.8", "--beta", "0.5"],
}
ITERATIVE = ("warp", "wrmf")


def parse_size(text: str) -> int:
    text = text.strip().upper()
    mult = {"K": 1_000, "M": 1_000_000}.get(text[-1:], 1)
    return int(float(text.rstrip("KM")) * mult)


def size_label(n: int) -> str:
    return f"{n / 1e6:g}M" if n >= 1_000_000 else f"{n / 1e3:g}k"


# -- data ------------------------------------------------------------------------------------------
def dataset(n: int, scratch: Path) -> Dict:
    """The synthetic log of ``n`` rows (generated once per parameter set) and its parameters."""
    params = {"interactions": n, "users": max(1000, round(n * USERS_PER_ROW)),
              "items": max(500, round(n * ITEMS_PER_ROW)), "values": "counts", "seed": SEED}
    folder = scratch / f"synth-{size_label(n)}"
    marker = folder / "params.json"
    if not (marker.exists() and json.loads(marker.read_text()) == params):
        from mrec_warp.data.synthetic import write_synthetic

        folder.mkdir(parents=True, exist_ok=True)
        marker.unlink(missing_ok=True)
        t = time.perf_counter()
        print(f"  generating {folder}/ratings.tsv ({params})", flush=True)
        info = write_synthetic(folder, n_users=params["users"], n_items=params["items"], n_interactions=n,
                               seed=SEED, values="counts")
        print(f"  {info['interactions']:,} rows in {time.perf_counter() - t:.0f} s", flush=True)
        marker.write_text(json.dumps(params))
    return {"folder": folder, "ratings": folder / "ratings.tsv", **params}


# -- running one stage -----------------------------------------------------------------------------
def run_stage(cmd: List[str], cwd: Path, env: Optional[Dict[str, str]] = None, log: Optional[Path] = None) -> Dict:
    """Run ``cmd`` as its own process: wall seconds, CPU seconds and peak RSS (MiB) of it."""
    load = load_avg()
    out = open(log, "w") if log else subprocess.DEVNULL
    t = time.perf_counter()
    # run outside the project: `python -m` puts the working folder first on the path
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT if log else subprocess.DEVNULL,
                            env={**os.environ, **(env or {})})
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - t
    proc.returncode = os.waitstatus_to_exitcode(status)
    if log:
        out.close()
    row = {"seconds": seconds, "cpu_seconds": usage.ru_utime + usage.ru_stime,
           "peak_rss_mib": usage.ru_maxrss / 1024, "exit": proc.returncode, "load_before": load}
    if proc.returncode != 0:
        tail = log.read_text()[-1500:] if log else ""
        print(f"    FAILED (exit {proc.returncode}): {' '.join(cmd)}\n{tail}", flush=True)
    return row


def cli(*args: str) -> List[str]:
    return [sys.executable, "-m", "mrec_warp", *args]


def csr_mib(pairs: int, users: int) -> float:
    """Bytes of a users x items CSR of ``pairs`` float32 values (int32 indices, int64 indptr)."""
    return (pairs * (4 + 4) + (users + 1) * 8) / 2**20


# -- the lower bound of recommend ------------------------------------------------------------------
def bare_topk_worker(model_path: str, threads: int, users: int = 0, k: int = 10, block: int = 2048) -> None:
    """Load the model, then score every user against every item by blocks (one BLAS call of
    ``threads`` threads each) and select a top-k with the library's heap kernel: the product
    and selection ``recommend`` cannot do without (no exclusion of seen items, no ids,
    nothing written). Prints the seconds of the product alone and of product + top-k."""
    from threadpoolctl import threadpool_limits

    from mrec_warp.kernels.topk import topk_masked
    from mrec_warp.models.base import load

    t0 = time.perf_counter()
    model = load(model_path)
    U, V = model.user_factors_, model.item_factors_
    U = U[:users] if users else U
    bias = getattr(model, "item_bias_", None)
    no_rows = np.full(block, -1, dtype=np.int64)
    indptr, indices, mask = np.zeros(1, np.int64), np.zeros(0, np.int32), np.zeros(0, np.uint8)
    items_out, scores_out = np.empty((block, k), np.int64), np.empty((block, k), np.float32)
    scores = np.empty((block, V.shape[0]), np.float32)
    t1, c1 = time.perf_counter(), time.process_time()
    with threadpool_limits(threads, user_api="blas"):
        for s in range(0, U.shape[0], block):
            n = min(block, U.shape[0] - s)
            np.matmul(U[s:s + n], V.T, out=scores[:n])
        t2, c2 = time.perf_counter(), time.process_time()
        for s in range(0, U.shape[0], block):
            n = min(block, U.shape[0] - s)
            np.matmul(U[s:s + n], V.T, out=scores[:n])
            if bias is not None:
                scores[:n] += bias
            topk_masked(scores[:n], no_rows[:n], indptr, indices, mask, items_out[:n], scores_out[:n])
    t3, c3 = time.perf_counter(), time.process_time()
    # the bound of a recommend process: this process without its product-alone pass
    print(json.dumps({"load_seconds": t1 - t0, "product_seconds": t2 - t1, "topk_seconds": t3 - t2,
                      "product_cpu_seconds": c2 - c1, "topk_cpu_seconds": c3 - c2}))


# -- implicit's ALS --------------------------------------------------------------------------------
def implicit_worker(train_path: str, threads: int, iterations: int, factors: int, users: int = 0) -> None:
    """implicit's ALS on prepare's train.tsv: read (pandas), fit, recommend 10 for every user."""
    import pandas as pd
    import scipy.sparse as sp
    from implicit.als import AlternatingLeastSquares

    t0 = time.perf_counter()
    df = pd.read_csv(train_path, sep="\t", header=None, usecols=[0, 1, 2], names=["u", "i", "v"],
                     dtype={"u": str, "i": str, "v": np.float32}, quoting=3, keep_default_na=False)
    u = df["u"].astype("category").cat.codes.to_numpy()
    i = df["i"].astype("category").cat.codes.to_numpy()
    X = sp.csr_matrix((np.ones(len(df), np.float32), (u, i)), shape=(u.max() + 1, i.max() + 1))
    del df
    t1 = time.perf_counter()
    model = AlternatingLeastSquares(factors=factors, regularization=0.01 * 40, alpha=1.0, iterations=iterations,
                                    num_threads=threads, random_state=0, calculate_training_loss=False)
    model.fit(X, show_progress=False)
    t2 = time.perf_counter()
    users = np.arange(users or X.shape[0])
    for s in range(0, len(users), 100_000):
        rows = users[s:s + 100_000]
        model.recommend(rows, X[rows], N=10, filter_already_liked_items=True)
    t3 = time.perf_counter()
    print(json.dumps({"read_seconds": t1 - t0, "fit_seconds": t2 - t1, "recommend_seconds": t3 - t2}))


def has_implicit() -> bool:
    try:
        import implicit  # noqa: F401

        return True
    except ImportError:
        return False


def log_path(work: Path, name: str) -> Path:
    return work / (name.replace(" ", "-").replace("+", "") + ".log")


def last_json(work: Path, name: str) -> Dict:
    """The JSON line a worker printed last."""
    return json.loads(log_path(work, name).read_text().strip().splitlines()[-1])


# -- one size --------------------------------------------------------------------------------------
def bench_size(n: int, args, scratch: Path, save) -> Dict:
    """Every stage on the log of ``n`` rows; ``save(result)`` after each (a 50M run takes hours)."""
    data = dataset(n, scratch)
    work = scratch / f"run-{size_label(n)}{'-' + args.tag if args.tag else ''}"
    work.mkdir(parents=True, exist_ok=True)
    split = work / "split"
    threads = str(args.threads)
    rows: Dict[str, Dict] = {}
    result: Dict = {"interactions": n, "stages": rows, "notes": []}

    def stage(name: str, cmd: List[str], **kw) -> Dict:
        row = run_stage(cmd, work, log=log_path(work, name), **kw)
        rows[name] = row
        print(f"    {name:<22} {row['seconds']:8.1f} s  {row['peak_rss_mib']:8.0f} MiB  "
              f"(cpu {row['cpu_seconds']:.0f} s, load {row['load_before']})", flush=True)
        save(result)
        return row

    def train(model: str) -> None:
        extra = ["--epochs", str(args.epochs)] if model in ITERATIVE else []
        stage(f"train {model}", cli("train", str(train_tsv), "-o", str(work / f"{model}.npz"), "--model", model,
                                    *TRAIN_OPTIONS[model], *extra, "--n-jobs", threads, "--seed", "42", "-q"))

    def recommend(model: str) -> None:
        stage(f"recommend {model}", cli("recommend", str(work / f"{model}.npz"), "-o", str(work / f"recs-{model}.tsv"),
                                        "-k", "10", "--n-jobs", threads, "-q", *users_option))

    print(f"\n== {size_label(n)} rows: {data['users']:,} users x {data['items']:,} items ==  "
          f"(load {load_avg()})", flush=True)
    stage("startup", cli("--version"))
    stage("prepare", cli("prepare", str(data["ratings"]), "-o", str(split), "--columns", "0,1,2",
                         "--test-fraction", "0.2", "--seed", "42", "-q"))
    summary = json.loads((split / "summary.json").read_text())
    users = summary["users"]["kept"]
    result.update({"rows_read": summary["rows_read"], "pairs": summary["pairs_kept"],
                   "train_pairs": summary["train"]["rows"], "users": users, "items": summary["items"]["kept"],
                   "csr_mib": csr_mib(summary["pairs_kept"], users),
                   "train_csr_mib": csr_mib(summary["train"]["rows"], users),
                   "prepare_rows_per_second": summary["rows_read"] / rows["prepare"]["seconds"]})
    train_tsv, test_tsv = split / "train.tsv", split / "test.tsv"
    # every user, or (--recommend-users) the first N of the model's: each user costs the same
    # (items x factors), so the time for all is the time for N scaled by users / N
    sample = args.recommend_users if 0 < args.recommend_users < users else 0
    users_option: List[str] = []
    result["recommended_users"] = sample or users
    if sample:
        result["notes"].append(f"recommend, evaluate and the bare bound ran on the first {sample:,} of {users:,} "
                               f"users; 'all users' columns scale their times by {users / sample:.1f}")
    ordered = [m for m in ("warp", "wrmf", "itemknn", "rp3beta") if m in args.models]
    for model in ordered:
        train(model)
        if sample and not users_option and rows[f"train {model}"]["exit"] == 0:
            # the sample of users, from the first model trained: every model's recommend takes it
            users_file = work / "users.txt"
            subprocess.run([sys.executable, __file__, "--users-worker", str(work / f"{model}.npz"),
                            "--users-count", str(sample), "--out-file", str(users_file)], check=True, cwd=work)
            users_option = ["--users", str(users_file)]
        if model == "warp" and rows["train warp"]["exit"] == 0:
            if "warp" in args.recommend_models:
                recommend("warp")
                test_for = test_tsv
                if sample:  # the test rows of the users recommended for
                    test_for = work / "test-sample.tsv"
                    with open(test_for, "w") as fh:
                        subprocess.run(["awk", "-F\t", "NR==FNR{u[$0];next} ($1 in u)", str(users_file), str(test_tsv)],
                                       stdout=fh, check=True)
                stage("evaluate", cli("evaluate", "--train", str(train_tsv), "--test", str(test_for), "--recs",
                                      str(work / "recs-warp.tsv"), "-k", "10", "--json", str(work / "eval.json"), "-q"))
                row = stage("bare product + top-k", [sys.executable, __file__, "--bare-topk-worker",
                                                    str(work / "warp.npz"), "--threads", threads,
                                                    "--users-count", str(sample)])
                if row["exit"] == 0:
                    row.update(last_json(work, "bare product + top-k"))
                    if "product_cpu_seconds" in row:  # the bound: the process less its product-alone pass
                        row["bound_seconds"] = row["seconds"] - row["product_seconds"]
                        row["bound_cpu_seconds"] = row["cpu_seconds"] - row["product_cpu_seconds"]
                    print(f"      (loading the model {row['load_seconds']:.1f} s; product alone "
                          f"{row['product_seconds']:.1f} s; product + top-k {row['topk_seconds']:.1f} s)", flush=True)
        if model == "wrmf":
            implicit(args, stage, train_tsv, threads, result, sample)
        if model != "warp" and model in args.recommend_models and rows[f"train {model}"]["exit"] == 0:
            recommend(model)
    return result


def implicit(args, stage, train_tsv: Path, threads: str, result: Dict, sample: int) -> None:
    """implicit's ALS in the bench environment, or a note saying why not."""
    bench_python = Path(args.bench_python) if args.bench_python else None
    if bench_python and bench_python.exists() and subprocess.run(
            [str(bench_python), "-c", "import implicit"], capture_output=True).returncode == 0:
        env = {"OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONPATH": ""}
        row = stage("implicit ALS", [str(bench_python), __file__, "--implicit-worker", str(train_tsv),
                                     "--threads", threads, "--epochs", str(args.epochs),
                                     "--users-count", str(sample)], env=env)
        if row["exit"] == 0:
            row.update(last_json(train_tsv.parent.parent, "implicit ALS"))
            print(f"      (read {row['read_seconds']:.1f} s, fit {row['fit_seconds']:.1f} s, "
                  f"recommend {row['recommend_seconds']:.1f} s)", flush=True)
    else:
        note = "implicit not run: no bench environment with implicit (--bench-python)"
        result["notes"].append(note)
        print(f"    {note}", flush=True)


def users_worker(model_path: str, count: int, out: str) -> None:
    """The first ``count`` user ids of the model, one per line (recommend --users)."""
    from mrec_warp.models.base import load

    ids = load(model_path).user_ids[:count]
    Path(out).write_text("".join(f"{u}\n" for u in ids))


# -- the report ------------------------------------------------------------------------------------
def per_decade(x1: float, x2: float, n1: int, n2: int) -> float:
    """The ratio over a tenfold increase of the interactions implied by two points."""
    return (x2 / x1) ** (1 / math.log10(n2 / n1)) if x1 > 0 and x2 > 0 else float("nan")


def report(results: List[Dict]) -> None:
    results = sorted(results, key=lambda r: r["interactions"])
    names = list(dict.fromkeys(s for r in results for s in r["stages"]))
    head = f"  {'stage':<22}" + "".join(f" {size_label(r['interactions']):>17}" for r in results)
    if len(results) > 1:
        head += "   per decade (time, memory)"
    print("\n== time (s) / peak RSS (MiB) per stage ==")
    print(head)
    for name in names:
        cells, pts = [], []
        for r in results:
            s = r["stages"].get(name)
            cells.append(f" {s['seconds']:8.1f} {s['peak_rss_mib']:7.0f}M" if s and s["exit"] == 0 else f" {'-':>17}")
            if s and s["exit"] == 0:
                pts.append((r["interactions"], s["seconds"], s["peak_rss_mib"]))
        line = f"  {name:<22}" + "".join(cells)
        if len(pts) > 1:
            growth = [f"{per_decade(a[1], b[1], a[0], b[0]):5.1f}x {per_decade(a[2], b[2], a[0], b[0]):5.1f}x"
                      for a, b in zip(pts, pts[1:])]
            line += "   " + " | ".join(growth)
        print(line)
    print(f"  {'CSR of the pairs':<22}" + "".join(f" {'':8} {r['csr_mib']:7.0f}M" for r in results))
    print("\n== targets ==")
    for r in results:
        st = r["stages"]
        lab = size_label(r["interactions"])
        if "prepare_rows_per_second" in r:
            print(f"  {lab}: prepare reads {r['prepare_rows_per_second'] / 1e6:.2f} M rows/s (target >= 1)")
        worst = max((s["peak_rss_mib"], k) for k, s in st.items() if s["exit"] == 0 and k != "startup")
        print(f"  {lab}: largest peak {worst[0]:.0f} MiB ({worst[1]}) = {worst[0] / r['csr_mib']:.2f}x the CSR "
              f"({r['csr_mib']:.0f} MiB; target <= 3)")
        for note in r.get("notes", []):
            print(f"  {lab}: {note}")
        rec, bare = st.get("recommend warp"), st.get("bare product + top-k")
        if rec and bare and rec["exit"] == 0 and bare["exit"] == 0 and "bound_cpu_seconds" in bare:
            print(f"  {lab}: recommend warp {rec['cpu_seconds']:.1f} CPU s = "
                  f"{rec['cpu_seconds'] / bare['bound_cpu_seconds']:.2f}x the bare product + top-k "
                  f"({bare['bound_cpu_seconds']:.1f} CPU s, same process shape; wall {rec['seconds']:.1f} vs "
                  f"{bare['bound_seconds']:.1f} s; target <= 1.3)")


#: Stages whose work is per recommended user: a run on a sample of users scales to all of them.
PER_USER = ("recommend warp", "recommend itemknn", "bare product + top-k")


def cpu_for_all(result: Dict, name: str) -> float:
    """CPU seconds of a stage (on a shared machine a steadier measure than wall time), scaled
    from a sample of users (``--recommend-users``) to every user for the per-user stages."""
    stage = result["stages"][name]
    scale = result["users"] / result.get("recommended_users", result["users"]) if name in PER_USER else 1
    return stage["cpu_seconds"] * scale


def plot(results: List[Dict], path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("  --plot needs matplotlib; skipped")
        return
    results = sorted(results, key=lambda r: r["interactions"])
    fig, axes = plt.subplots(1, 2, figsize=(12, 5))
    names = [n for n in dict.fromkeys(s for r in results for s in r["stages"]) if n != "startup"]
    for name in names:
        pts = [(r["interactions"], r["stages"][name]) for r in results
               if name in r["stages"] and r["stages"][name]["exit"] == 0]
        if not pts:
            continue
        x = [p[0] for p in pts]
        axes[0].plot(x, [cpu_for_all(r, name) for r in results if name in r["stages"]
                         and r["stages"][name]["exit"] == 0], "o-", label=name)
        axes[1].plot(x, [p[1]["peak_rss_mib"] for p in pts], "o-", label=name)
    x = [r["interactions"] for r in results]
    axes[1].plot(x, [3 * r["csr_mib"] for r in results], "k--", label="3x CSR (target)")
    if x:
        ref = axes[0].get_lines()[0].get_ydata()[0] if axes[0].get_lines() else 1
        axes[0].plot(x, [ref * xi / x[0] for xi in x], "k:", label="linear")
    for ax, what in zip(axes, ("CPU seconds (a sample of users scaled to all)", "peak RSS (MiB)")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("interactions")
        ax.set_ylabel(what)
        ax.grid(True, which="both", alpha=0.3)
    axes[1].legend(fontsize=7)
    fig.suptitle(f"mrec-warp cost curves (load {load_avg()})")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"  wrote {path}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="1M,10M,50M", help="comma-separated row counts, e.g. 1M,10M")
    ap.add_argument("--scratch", default="/tmp/mrec-warp-bench-cost",
                    help="folder for the generated logs and every stage's outputs (outside the project)")
    ap.add_argument("--out", default=str(ROOT / "bench-out" / "bench_cost.json"))
    ap.add_argument("--plot", nargs="?", const=str(ROOT / "bench-out" / "bench_cost.png"), default=None,
                    help="write a log-log PNG of time and memory [bench-out/bench_cost.png]")
    ap.add_argument("--threads", type=int, default=2, help="--n-jobs of every stage (implicit: num_threads)")
    ap.add_argument("--epochs", type=int, default=5, help="WARP epochs / WRMF and implicit ALS iterations")
    ap.add_argument("--models", default="warp,wrmf,itemknn,rp3beta")
    ap.add_argument("--recommend-models", default="warp,itemknn",
                    help="models whose recommendations for every user are timed (warp: also evaluate, bare bound)")
    ap.add_argument("--bench-python", default="/work/main/.venv-bench/bin/python" if not has_implicit() else sys.executable,
                    help="python with implicit installed, for implicit's ALS [this one if it has implicit]")
    ap.add_argument("--library", default=str(ROOT),
                    help="folder holding the mrec_warp package the stages run (e.g. an export of an older "
                         "commit, for a before/after table) [this project]")
    ap.add_argument("--recommend-users", type=int, default=0,
                    help="recommend for the first N users only and scale (0: every user)")
    ap.add_argument("--tag", default="", help="suffix of the run folders, e.g. before / after")
    ap.add_argument("--generate-only", action="store_true", help="write the logs, run nothing")
    ap.add_argument("--bare-topk-worker", help=argparse.SUPPRESS)
    ap.add_argument("--implicit-worker", help=argparse.SUPPRESS)
    ap.add_argument("--users-worker", help=argparse.SUPPRESS)
    ap.add_argument("--users-count", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--out-file", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.bare_topk_worker:
        bare_topk_worker(args.bare_topk_worker, args.threads, args.users_count)
        return
    if args.implicit_worker:
        implicit_worker(args.implicit_worker, args.threads, args.epochs, 64, args.users_count)
        return
    if args.users_worker:
        users_worker(args.users_worker, args.users_count, args.out_file)
        return
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [args.library, os.environ.get("PYTHONPATH")]))
    os.environ["MREC_WARP_BENCH_LIBRARY"] = args.library
    scratch = Path(args.scratch).resolve()
    if scratch == ROOT or ROOT in scratch.parents:
        raise SystemExit(f"--scratch {scratch} is inside the project: choose a folder outside it")
    args.models = [m for m in args.models.split(",") if m]
    args.recommend_models = [m for m in args.recommend_models.split(",") if m]
    sizes = [parse_size(s) for s in args.sizes.split(",")]
    if args.generate_only:
        for n in sizes:
            dataset(n, scratch)
        return
    print(f"load average {load_avg()}; {os.cpu_count()} cpus; threads {args.threads}; scratch {scratch}")
    out = Path(args.out)
    previous = json.loads(out.read_text()).get("sizes", []) if out.exists() else []
    results: List[Dict] = []

    def save(current: Dict) -> None:
        done = [r for r in results if r is not current] + [current]
        keep = [r for r in previous if r["interactions"] not in {x["interactions"] for x in done}]
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                                               "platform": platform.platform()},
                                   "threads": args.threads, "epochs": args.epochs, "library": args.library,
                                   "train_options": TRAIN_OPTIONS, "sizes": keep + done}, indent=2))

    for n in sizes:
        results.append(bench_size(n, args, scratch, save))
        save(results[-1])
    report(results)
    if args.plot:
        plot(json.loads(out.read_text())["sizes"], Path(args.plot))
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
