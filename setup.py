"""Build script for the Cython extensions; project metadata lives in pyproject.toml."""
import sys
from pathlib import Path

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup

# Portable speed flags: let the compiler reassociate float sums so dot-product loops
# vectorise (doubles the WARP inner loop here). No -march=native: wheels must run anywhere.
# GCC and clang (Linux, macOS) take the same flags. None of them assumes finite values, so a
# NaN still fails every comparison (topk's `v == v` keeps NaN scores out of the top k).
# MSVC has no such fine-grained switch: /fp:fast also drops IEEE NaN semantics (NaN may
# compare equal), which would let NaN scores rank, so Windows builds use /fp:precise and
# rely on the kernels' explicit SSE code (mw_adagrad.h) for speed.
if sys.platform == "win32":
    COMPILE_ARGS = ["/O2", "/fp:precise"]
else:
    COMPILE_ARGS = [
        "-O3",
        "-fno-math-errno",
        "-fassociative-math",
        "-fno-signed-zeros",
        "-fno-trapping-math",
    ]


KERNELS = Path("mrec_warp") / "kernels"
# Every kernel is rebuilt when a shared .pxd or C header changes.
SHARED = sorted(str(p) for p in [*KERNELS.glob("*.pxd"), *KERNELS.glob("*.h")])


def extension(name: str) -> Extension:
    return Extension(
        f"mrec_warp.kernels.{name}",
        [str(KERNELS / f"{name}.pyx")],
        include_dirs=[np.get_include(), str(KERNELS)],
        depends=SHARED,
        extra_compile_args=COMPILE_ARGS,
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
    )


setup(
    ext_modules=cythonize(
        [
            extension("rng"),
            extension("warp"),
            extension("hybrid"),
            extension("als"),
            extension("slim"),
            extension("gram"),
            extension("topk"),
            extension("itemsim"),
        ],
        compiler_directives={
            "language_level": 3,
            "boundscheck": False,
            "wraparound": False,
            "cdivision": True,
            "initializedcheck": False,
        },
    ),
)
