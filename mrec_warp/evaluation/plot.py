"""A study's metrics@k plotted against k (PNG), when matplotlib is installed."""
from __future__ import annotations

import io
from typing import Any, Dict, Optional

import numpy as np

from ..errors import InputError
from ..files import PathLike
from .result import AT_K_METRICS


def check_plot_available(path: Optional[PathLike] = None) -> None:
    """Fail early, in one line, when a plot is asked for and matplotlib is missing."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise InputError("plotting needs matplotlib, which is not installed", path=None if path is None else str(path),
                         hint="pip install mrec-warp[plot]") from None


def render_plot(data: Dict[str, Any]) -> bytes:
    """PNG of every metric@k against k, one line per recommendations file, with error bars."""
    check_plot_available()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure  # no pyplot: no global state, no display needed

    families = list(AT_K_METRICS) + ["coverage"]
    ks = data["ks"]
    fig = Figure(figsize=(12, 7), dpi=100)
    FigureCanvasAgg(fig)
    axes = fig.subplots(2, 3).ravel()
    for ax, family in zip(axes, families):
        for r in data["runs"]:
            stats = [r["summary"][f"{family}@{k}"] for k in ks]
            mean = [np.nan if s["mean"] is None else s["mean"] for s in stats]
            err = [0.0 if s["plus_minus"] is None else s["plus_minus"] for s in stats]
            ax.errorbar(ks, mean, yerr=err, marker="o", capsize=3, label=r["name"])
        ax.set_title(f"{family}@k")
        ax.set_xlabel("k")
        ax.set_xticks(ks)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize="small")
    bars = "standard error over splits" if data["uncertainty"] == "se" else "95% CI over users"
    fig.suptitle(f"Ranking metrics at k (bars: {bars})")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()
