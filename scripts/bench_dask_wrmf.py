#!/usr/bin/env python
"""WRMF on partitions of a Dask cluster whose workers cannot hold the whole log.

Run by hand (minutes; memory-hungry on the client), e.g.
``PYTHONPATH=$PWD .venv/bin/python scripts/bench_dask_wrmf.py --interactions 30e6``:

1. a synthetic log (Zipf item popularity, log-normal user activity, binary), cached under
   ``bench-out/cache``;
2. the local fit (:class:`~mrec_warp.models.wrmf.WRMF`, one thread, fixed iterations) in a
   process of its own: seconds per iteration and peak RSS;
3. the partitioned fit (:func:`~mrec_warp.models.partitioned_wrmf.fit_partitioned`) on a
   ``LocalCluster`` of ``--workers`` single-threaded worker processes, each limited to
   ``--limit-fraction`` of the whole CSR (users x items, 8 bytes a pair plus 8 a row; the
   two orientations a local fit holds are twice that), spilling to disk off (what a worker
   holds is in its memory): seconds per iteration, each worker's largest memory as the
   scheduler reports it (sampled every 0.2 s) against its limit, the workers' restarts;
   the factors against the local fit's (largest difference, top-10 agreement on sampled users);
4. the same fit again, a worker killed (SIGKILL) at the second iteration: what the fit does.

Prints a table and writes ``bench-out/bench_dask_wrmf.json``. State the machine's load
(``uptime``) beside the numbers: the workers share its cores.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench-out"
CACHE = OUT / "cache"


def synthetic_log(n: int, users: int, items: int, seed: int = 1) -> Path:
    """A binary users x items CSR of about ``n`` distinct pairs, cached: item popularity
    Zipf-like (rank^-0.9), user activity log-normal. Built a slice of users at a time (the
    memory of the finished matrix, not of all the draws at once)."""
    path = CACHE / f"dask-wrmf-{n}-{users}-{items}.npz"
    if path.exists():
        return path
    rng = np.random.default_rng(seed)
    weights = rng.lognormal(0.0, 1.0, users)
    per_user = np.minimum(items, np.maximum(1, np.round(weights / weights.sum() * n * 1.04))).astype(np.int64)
    pop = 1.0 / np.arange(1, items + 1) ** 0.9
    cdf = np.cumsum(pop / pop.sum())
    counts = np.zeros(users, dtype=np.int64)
    columns = []
    step = max(1, users * 4_000_000 // max(int(per_user.sum()), 1))  # about 4M draws a slice
    for a in range(0, users, step):
        b = min(a + step, users)
        u = np.repeat(np.arange(a, b, dtype=np.int64), per_user[a:b])
        c = np.minimum(np.searchsorted(cdf, rng.random(len(u))), items - 1)
        key = np.unique(u * items + c)  # distinct pairs, by user then item
        counts[a:b] = np.bincount(key // items - a, minlength=b - a)
        columns.append((key % items).astype(np.int32))
    indices = np.concatenate(columns)
    del columns
    indptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    csr = sp.csr_matrix((np.ones(len(indices), np.float32), indices, indptr), shape=(users, items))
    CACHE.mkdir(parents=True, exist_ok=True)
    sp.save_npz(path, csr, compressed=False)
    return path


def csr_bytes(csr: sp.csr_matrix) -> int:
    """The users x items CSR: int32 indices and float32 values per pair, int64 row offsets."""
    return csr.nnz * 8 + (csr.shape[0] + 1) * 8


def params(args) -> dict:
    return dict(factors=args.factors, alpha=1.0, regularization=40.0, epochs=args.iterations, random_state=0)


# -- the local fit, in a process of its own -----------------------------------------------------------
def local_fit(matrix: Path, out: Path, args) -> None:
    import resource

    from mrec_warp.models.wrmf import WRMF

    csr = sp.load_npz(matrix).tocsr()
    cpu = time.process_time()
    model = WRMF(**params(args), n_jobs=1).fit(csr)
    cpu = time.process_time() - cpu  # the load of the machine inflates wall time, not this
    np.savez(out, user_factors=model.user_factors_, item_factors=model.item_factors_)
    seconds = [h["seconds"] for h in model.history_]
    print(json.dumps({"seconds": seconds, "cpu_seconds_per_iteration": cpu / args.iterations,
                      "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


# -- the partitioned fit on a memory-limited LocalCluster -------------------------------------------------
class MemoryWatch:
    """Each worker's largest memory (RSS, as the scheduler's heartbeats report it) while running."""

    def __init__(self, client, every: float = 0.2) -> None:
        self.client, self.every = client, every
        self.peak: dict = {}
        self.limits: dict = {}
        self.seen: set = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def _run(self):
        while not self._stop.is_set():
            try:
                for address, info in self.client.scheduler_info()["workers"].items():
                    self.seen.add(address)
                    self.limits[address] = info.get("memory_limit")
                    mem = info.get("metrics", {}).get("memory", 0)
                    self.peak[address] = max(self.peak.get(address, 0), mem)
            except Exception:  # noqa: BLE001 - a sample lost while the cluster changes
                pass
            self._stop.wait(self.every)


def cluster(args, limit: int):
    import dask
    import distributed

    dask.config.set({"distributed.worker.memory.target": False, "distributed.worker.memory.spill": False,
                     "distributed.worker.memory.pause": False, "distributed.worker.memory.terminate": 0.98})
    lc = distributed.LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  memory_limit=limit, dashboard_address="127.0.0.1:0", silence_logs=logging.CRITICAL)
    return lc, distributed.Client(lc)


def partitioned_fit(csr, args, limit: int, kill_at: int = 0):
    from mrec_warp.context import ExecutionContext
    from mrec_warp.models.partitioned_wrmf import fit_partitioned
    from mrec_warp.models.wrmf import WRMF
    from mrec_warp.progress import Progress

    lc, client = cluster(args, limit)

    class Kills(Progress):
        def log(self, message, *a, **k):
            print("   ", message, flush=True)
            if kill_at and f"iteration {kill_at:3d}" in message:
                victim = sorted(client.scheduler_info()["workers"])[-1]
                client.run(os._exit, 1, workers=[victim], on_error="ignore")

    result: dict = {}
    try:
        client.wait_for_workers(args.workers)
        baseline = {a: w["metrics"]["memory"] for a, w in client.scheduler_info()["workers"].items()}
        cpu_before = client.run(time.process_time)
        with MemoryWatch(client) as watch:
            t0 = time.perf_counter()
            try:
                with ExecutionContext("dask", client=client) as context:
                    model = fit_partitioned(WRMF(**params(args)), csr, context, args.partitions, progress=Kills(),
                                            exact_gram=args.exact_gram)
                result["outcome"] = "fitted"
                result["model"] = model
            except Exception as exc:  # noqa: BLE001 - what the fit does is the measurement
                result["outcome"] = f"{type(exc).__name__}: {exc}"
            result["wall_seconds"] = time.perf_counter() - t0
            time.sleep(1.0)  # a last heartbeat
        cpu_after = client.run(time.process_time, on_error="ignore")
        result["workers_cpu_seconds"] = sum(v - cpu_before.get(a, 0.0) for a, v in cpu_after.items()
                                            if isinstance(v, float))
        # each worker's own peak (VmHWM), which heartbeats between samples may miss
        peaks = client.run(_peak_rss, on_error="ignore")
        result["worker_maxrss_mb"] = {a: m / 2**20 for a, m in sorted(peaks.items()) if isinstance(m, (int, float))}
        result["worker_peak_mb"] = {a: m / 2**20 for a, m in sorted(watch.peak.items())}
        result["worker_baseline_mb"] = {a: m / 2**20 for a, m in sorted(baseline.items())}
        result["limit_mb"] = limit / 2**20
        result["over_limit"] = sum(m > limit for m in watch.peak.values()) \
            + sum(m * 2**20 > limit for m in result["worker_maxrss_mb"].values())
        result["workers_seen"] = len(watch.seen)  # more than --workers: a nanny restarted one
    finally:
        client.close()
        lc.close()
    return result


def _peak_rss() -> int:
    """On a worker: its process's peak resident memory, bytes (``VmHWM``: ``ru_maxrss`` would
    carry the peak of the process that spawned it across ``exec``)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def top10_agreement(a_users, a_items, b_users, b_items, csr, n: int = 20000) -> float:
    rng = np.random.default_rng(0)
    users = rng.choice(csr.shape[0], size=min(n, csr.shape[0]), replace=False)
    same = 0
    for s in range(0, len(users), 2000):
        u = users[s:s + 2000]
        lists = []
        for U, V in ((a_users, a_items), (b_users, b_items)):
            scores = U[u] @ V.T
            seen = csr[u]
            scores[np.repeat(np.arange(len(u)), np.diff(seen.indptr)), seen.indices] = -np.inf
            top = np.argpartition(-scores, 10, axis=1)[:, :10]
            lists.append(np.sort(top, axis=1))
        same += int((lists[0] == lists[1]).all(axis=1).sum())
    return same / len(users)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--interactions", type=float, default=30e6)
    ap.add_argument("--users", type=int, default=0, help="[interactions / 200]")
    ap.add_argument("--items", type=int, default=0, help="[interactions / 2000]")
    ap.add_argument("--factors", type=int, default=32)
    ap.add_argument("--iterations", type=int, default=3)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--limit-fraction", type=float, default=1 / 3,
                    help="each worker's memory limit, as a share of the whole CSR [1/3]")
    ap.add_argument("--exact-gram", action="store_true", help="the Gram matrices in one product (fit_partitioned's "
                    "exact_gram): the local fit's bits")
    ap.add_argument("--no-local", action="store_true", help="skip the local fit")
    ap.add_argument("--no-kill", action="store_true", help="skip the fit with a killed worker")
    ap.add_argument("--local-only", metavar="OUT", help=argparse.SUPPRESS)
    ap.add_argument("--matrix", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.local_only:
        local_fit(Path(args.matrix), Path(args.local_only), args)
        return
    n = int(args.interactions)
    users, items = args.users or n // 200, args.items or n // 2000
    t = time.perf_counter()
    matrix = synthetic_log(n, users, items)
    csr = sp.load_npz(matrix).tocsr()
    whole = csr_bytes(csr)
    limit = int(args.limit_fraction * whole)
    print(f"log: {csr.shape[0]:,} users x {csr.shape[1]:,} items, {csr.nnz:,} pairs, CSR {whole / 2**20:.0f} MB "
          f"(both orientations {2 * whole / 2**20:.0f} MB); worker limit {limit / 2**20:.0f} MB "
          f"({args.limit_fraction:.2f} of the CSR); ready in {time.perf_counter() - t:.0f}s; load {os.getloadavg()}",
          flush=True)
    report: dict = {"users": csr.shape[0], "items": csr.shape[1], "interactions": int(csr.nnz),
                    "factors": args.factors, "iterations": args.iterations, "workers": args.workers,
                    "partitions": args.partitions, "exact_gram": args.exact_gram, "csr_mb": whole / 2**20, "limit_fraction": args.limit_fraction,
                    "load_before": os.getloadavg()}
    local = None
    if not args.no_local:
        factors_file = CACHE / f"dask-wrmf-local-{n}.npz"
        proc = subprocess.run([sys.executable, __file__, "--local-only", str(factors_file), "--matrix", str(matrix),
                               "--factors", str(args.factors), "--iterations", str(args.iterations)],
                              capture_output=True, text=True, check=True, env={**os.environ, "OMP_NUM_THREADS": "1",
                                                                                "OPENBLAS_NUM_THREADS": "1"})
        report["local"] = json.loads(proc.stdout.strip().splitlines()[-1])
        local = np.load(factors_file)
        print(f"local fit: {report['local']}", flush=True)
    fit = partitioned_fit(csr, args, limit)
    model = fit.pop("model", None)
    if model is not None:
        fit["seconds"] = [h["seconds"] for h in model.history_]
        fit["workers_cpu_seconds_per_iteration"] = fit["workers_cpu_seconds"] / args.iterations
        if local is not None:
            fit["max_factor_diff"] = float(max(np.abs(model.user_factors_ - local["user_factors"]).max(),
                                               np.abs(model.item_factors_ - local["item_factors"]).max()))
            fit["largest_factor"] = float(max(np.abs(local["user_factors"]).max(), np.abs(local["item_factors"]).max()))
            fit["top10_agreement"] = top10_agreement(model.user_factors_, model.item_factors_, local["user_factors"],
                                                     local["item_factors"], csr)
    report["partitioned"] = fit
    print(f"partitioned fit: {fit}", flush=True)
    if not args.no_kill:
        killed = partitioned_fit(csr, args, limit, kill_at=2)
        killed.pop("model", None)
        report["killed_worker"] = killed
        print(f"killed worker: {killed['outcome']}", flush=True)
    report["load_after"] = os.getloadavg()

    rows = [("", "local (1 thread)", f"partitioned ({args.workers} workers, P={args.partitions})")]
    med = (lambda s: f"{np.median(s):.1f}" if s else "-")
    rows.append(("s / iteration (median)", med(report.get("local", {}).get("seconds", [])), med(fit.get("seconds", []))))
    rows.append(("CPU s / iteration (all processes)", f"{report.get('local', {}).get('cpu_seconds_per_iteration', 0):.1f}",
                 f"{fit.get('workers_cpu_seconds_per_iteration', 0):.1f} (workers; the whole fit incl. scatter)"))
    rows.append(("peak memory, MB", f"{report.get('local', {}).get('peak_rss_mb', 0):.0f} (process)",
                 f"{max(fit['worker_maxrss_mb'].values(), default=0):.0f} (largest worker's peak RSS; scheduler's "
                 f"samples {max(fit['worker_peak_mb'].values(), default=0):.0f}; limit {limit / 2**20:.0f})"))
    rows.append(("outcome", "fitted" if local is not None else "-", fit["outcome"]))
    if "max_factor_diff" in fit:
        rows.append(("max |factor diff| (of largest) / top-10 agree", "",
                     f"{fit['max_factor_diff']:.2e} (of {fit['largest_factor']:.2f}) / {fit['top10_agreement']:.4f}"))
    if "killed_worker" in report:
        rows.append(("a worker killed at iteration 2", "", report["killed_worker"]["outcome"][:90]))
    width = max(len(r[0]) for r in rows)
    for r in rows:
        print(f"{r[0]:<{width}}  {r[1]:<22}  {r[2]}")
    OUT.mkdir(exist_ok=True)
    (OUT / "bench_dask_wrmf.json").write_text(json.dumps(report, indent=2, default=str))
    print(f"wrote {OUT / 'bench_dask_wrmf.json'}")


if __name__ == "__main__":
    main()
