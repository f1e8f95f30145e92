"""Build script for the Cython extensions; project metadata lives in pyproject.toml."""
import sys

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup

# Portable speed flags: let the compiler reassociate float sums so dot-product loops
# vectorise (doubles the WARP inner loop here). No -march=native: wheels must run anywhere.
if sys.platform == "win32":
    COMPILE_ARGS = ["/O2", "/fp:fast"]
else:
    COMPILE_ARGS = [
        "-O3",
        "-fno-math-errno",
        "-fassociative-math",
        "-fno-signed-zeros",
        "-fno-trapping-math",
    ]


def extension(name: str) -> Extension:
    return Extension(
        name,
        [name.replace(".", "/") + ".pyx"],
        include_dirs=[np.get_include()],
        extra_compile_args=COMPILE_ARGS,
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
    )


setup(
    ext_modules=cythonize(
        [
            extension("mrec_warp._topk"),
            extension("mrec_warp.models._warp"),
            extension("mrec_warp.models._hybrid"),
            extension("mrec_warp.models._als"),
            extension("mrec_warp.models._slim"),
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
