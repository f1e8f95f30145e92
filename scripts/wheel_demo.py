"""Install a wheel where no compiler can be reached and run `make demo`'s pipeline from it.

    python scripts/wheel_demo.py dist/mrec_warp-0.1.0-cp311-cp311-manylinux_2_17_x86_64.whl

What a user without a C compiler gets (`make dist` runs it): a new virtual environment in
a temporary folder outside the source tree, PATH holding only that environment's bin/ (no
gcc, cc, c++ or clang), CC=false and CXX=false, and `pip install --only-binary :all:`, so
neither the wheel nor any dependency can be compiled. Then the same commands as `make demo`
(the Makefile's demo-steps target, run with that PATH) from that install. Prints the wheel
size, how long `pip install` took, and the time from the start of `pip install` to the
first recommendations file written. Exit 0, or non-zero with the step that failed.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import venv
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
COMPILERS = ("gcc", "cc", "c++", "g++", "clang", "x86_64-linux-gnu-gcc")


def run(cmd: list[str], env: dict[str, str], cwd: Path) -> None:
    print("+", " ".join(cmd), flush=True)
    if subprocess.run(cmd, env=env, cwd=cwd).returncode:
        sys.exit(f"wheel_demo: `{' '.join(cmd)}` failed")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("wheel", type=Path)
    parser.add_argument("--extras", default="plot", help="extras to install with the wheel [plot: demo's curves.png]")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder and print it")
    args = parser.parse_args(argv)
    wheel = args.wheel.resolve()
    make = shutil.which("make")  # found now, with the caller's PATH; the demo's PATH will not have it
    if make is None:
        sys.exit("wheel_demo: `make` is not on PATH")

    tmp = Path(tempfile.mkdtemp(prefix="mrec-warp-wheel-"))
    try:
        env_dir = tmp / "venv"
        venv.create(env_dir, with_pip=True)
        bindir = env_dir / "bin"
        # Only the environment's own bin/: a compiler cannot be found even by a build backend
        # that looks for one, and CC/CXX name a command that fails.
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("CC", "CXX", "CFLAGS", "LDFLAGS", "VIRTUAL_ENV", "PYTHON"))}
        env.update(PATH=str(bindir), CC="false", CXX="false", VIRTUAL_ENV=str(env_dir))
        found = [c for c in COMPILERS if shutil.which(c, path=env["PATH"])]
        if found:
            sys.exit(f"wheel_demo: a compiler is still reachable: {', '.join(found)}")

        start = time.time()
        spec = f"{wheel}[{args.extras}]" if args.extras else str(wheel)
        run([str(bindir / "python"), "-m", "pip", "install", "--quiet", "--only-binary", ":all:", spec], env, tmp)
        installed = time.time()
        where = subprocess.run([str(bindir / "python"), "-c", "import mrec_warp; print(mrec_warp.__file__)"],
                               env=env, cwd=tmp, capture_output=True, text=True, check=True).stdout.strip()
        if not Path(where).resolve().is_relative_to(env_dir.resolve()):
            sys.exit(f"wheel_demo: mrec_warp imported from {where}, not from the new environment")
        version = subprocess.run([str(bindir / "mrec-warp"), "--version"], env=env, cwd=tmp,
                                 capture_output=True, text=True, check=True).stdout.strip()
        print(f"{version}, imported from {Path(where).parent}", flush=True)

        out = tmp / "demo-out"
        run([make, "--no-print-directory", "-f", str(PROJECT / "Makefile"), "demo-steps",
             f"MW={bindir / 'mrec-warp'}", f"OUT={out}", f"SAMPLE={PROJECT / 'data' / 'sample' / 'ratings.tsv'}"],
            env, tmp)
        done = time.time()
        first = min((out / name).stat().st_mtime for name in ("recs-popularity.tsv", "recs-warp.tsv"))
        print(f"wheel: {wheel.name}, {wheel.stat().st_size / 1e6:.2f} MB")
        print(f"no compiler on PATH (CC=false CXX=false); pip install (with dependencies, --only-binary :all:): "
              f"{installed - start:.1f} s")
        print(f"pip install -> first recommendations written: {first - start:.1f} s; whole demo: {done - start:.1f} s")
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
