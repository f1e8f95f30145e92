#!/usr/bin/env python
"""Load test of ``mrec-warp serve``: a real server process, a real HTTP client (httpx).

For each catalogue size (``--items``, default 20k and 100k; 64 factors, random factors as
``bench_single_user.py`` makes them, 5,000 users) a model file is written, ``mrec-warp
serve`` started on a free port (``--workers``), and ``GET /recommend?user=ID&k=10`` for
random known users sent by 1, 8 and 64 concurrent clients (one asyncio event loop, keep-
alive connections) for ``--seconds`` each. Prints throughput and p50/p99 latency per level
and writes ``--json`` (default ``bench-out/serve.json``).

``--model FILE`` serves a trained model instead (e.g. ``bench-out/cache/ann-synth-100k-e10.npz``
from ``scripts/bench_ann.py``), and ``--search exact,ann`` measures each model twice: exact,
then with its ANN index (``mrec-warp index``, ``serve --ann``; the ``ann`` extra).

The client runs on the same machine as the server (2 cores here), so it takes CPU from it:
the numbers are what one machine does with both, a lower bound for a server on its own.
Needs the ``serve`` extra, and httpx to wait for the server to start.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _benchlib import load_avg  # noqa: E402
from bench_single_user import build  # noqa: E402

from mrec_warp.models import WARP  # noqa: E402


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(model_path: Path, workers: int, log, *extra: str) -> tuple:
    import httpx

    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "mrec_warp", "serve", str(model_path), "--port", str(port),
                             "--workers", str(workers), "--log-level", "warning", *extra], stdout=log,
                            stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            if httpx.get(base + "/health", timeout=5).status_code == 200:
                return proc, base
        except httpx.HTTPError:
            pass
        if proc.poll() is not None:
            break
        time.sleep(0.3)
    proc.kill()
    raise SystemExit(f"the server did not start; see {log.name}")


async def _client(host: str, port: int, user_ids, stop_at: float, rng, latencies: list, status: list) -> None:
    """One keep-alive HTTP/1.1 connection sending requests back to back until ``stop_at``."""
    reader, writer = await asyncio.open_connection(host, port)
    try:
        while time.perf_counter() < stop_at:
            user = urllib.parse.quote(str(user_ids[int(rng.integers(len(user_ids)))]), safe="")
            t = time.perf_counter()
            writer.write(f"GET /recommend?user={user}&k=10 HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length:"))
            await reader.readexactly(length)
            latencies.append(time.perf_counter() - t)
            status.append(int(head.split(b" ", 2)[1]))
    finally:
        writer.close()


async def load(base: str, user_ids, clients: int, seconds: float, seed: int) -> dict:
    """``clients`` connections at once for ``seconds``: throughput and latency percentiles.

    A minimal asyncio HTTP/1.1 client rather than httpx: httpx's async connection pool was
    the bottleneck here (64 connections: 63 requests/s on ``/health``, against 7,149 with
    this client), which would have measured the client, not the server.
    """
    host, port = urllib.parse.urlsplit(base).hostname, urllib.parse.urlsplit(base).port
    rng = np.random.default_rng(seed)
    latencies, status = [], []
    stop_at = time.perf_counter() + seconds
    start_t = time.perf_counter()
    await asyncio.gather(*(_client(host, port, user_ids, stop_at, rng, latencies, status) for _ in range(clients)))
    elapsed = time.perf_counter() - start_t
    lat = np.array(latencies) * 1e3
    return {"clients": clients, "requests": len(lat), "errors": int(sum(s != 200 for s in status)),
            "seconds": round(elapsed, 2), "requests_per_s": round(len(lat) / elapsed, 1),
            "p50_ms": round(float(np.percentile(lat, 50)), 2), "p99_ms": round(float(np.percentile(lat, 99)), 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--items", default="20000,100000", help="Catalogue sizes, comma-separated.")
    ap.add_argument("--users", type=int, default=5000)
    ap.add_argument("--factors", type=int, default=64)
    ap.add_argument("--clients", default="1,8,64")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--warmup", type=float, default=0.0,
                    help="Seconds of 8 clients before the measured levels, not recorded: the server's steady state "
                         "(a close call keeps its grid call's lists, so a cold server pays ~0.1-0.4 s per block of "
                         "256 users on 100k items until each block was scored once per worker).")
    ap.add_argument("--json", default="bench-out/serve.json")
    ap.add_argument("--search", default="exact", help="exact, ann or both (exact,ann): ann builds the model's index "
                                                      "(mrec-warp index) and serves with --ann.")
    ap.add_argument("--model", action="append", default=[],
                    help="Serve this model file (e.g. a trained one from scripts/bench_ann.py's cache) instead "
                         "of random factors; repeatable, replaces --items.")
    a = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        sources = a.model or [int(x) for x in a.items.split(",")]
        for source in sources:
            if isinstance(source, int):
                model = build(WARP, a.users, source, a.factors)
                path = Path(tmp) / f"warp-{source}.npz"
                model.save(path)
            else:
                from mrec_warp.models import load as load_model

                path = Path(tmp) / Path(source).name
                path.write_bytes(Path(source).read_bytes())
                model = load_model(path)
            n_items = model.n_items
            for search in a.search.split(","):
                extra = ()
                if search == "ann":
                    subprocess.run([sys.executable, "-m", "mrec_warp", "index", str(path), "-q"], check=True)
                    extra = ("--ann",)
                with open(Path(tmp) / f"serve-{n_items}-{search}.log", "w+") as log:
                    proc, base = start(path, a.workers, log, *extra)
                    try:
                        if a.warmup > 0:
                            asyncio.run(load(base, model.user_ids, 8, a.warmup, seed=0))
                        for clients in (int(x) for x in a.clients.split(",")):
                            result = asyncio.run(load(base, model.user_ids, clients, a.seconds, seed=clients))
                            rows.append({"items": n_items, "search": search, "workers": a.workers, "warmup_s": a.warmup,
                                         **result})
                            print(rows[-1], flush=True)
                    finally:
                        proc.terminate()
                        proc.wait(timeout=60)
    print(f"load average {load_avg()}")
    print(f"{'items':>7} {'search':6} {'warmup':>6} {'clients':>7} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} "
          f"{'errors':>6}")
    for r in rows:
        print(f"{r['items']:>7} {r['search']:6} {r['warmup_s']:>6} {r['clients']:>7} {r['requests_per_s']:>8} "
              f"{r['p50_ms']:>8} {r['p99_ms']:>8} {r['errors']:>6}")
    out = Path(a.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"load_avg": load_avg(), "factors": a.factors, "users": a.users, "results": rows},
                              indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
