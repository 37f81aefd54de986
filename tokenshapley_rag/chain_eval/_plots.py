"""PNG plots of a chain report (matplotlib, imported only here).

Figures are built with ``matplotlib.figure.Figure`` directly, not ``pyplot``: no global
figure registry and no backend switch, so plotting is safe in a library and in threads.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from tokenshapley_rag.chain_eval._rows import QuestionRow

if TYPE_CHECKING:  # the report imports this module to draw its plots, not the other way round
    from tokenshapley_rag.chain_eval._report import ChainSummary

__all__ = ["supported_share_png", "utilization_png"]


def _figure() -> Any:
    try:
        from matplotlib.figure import Figure
    except ModuleNotFoundError as err:  # plots are optional; say which extra brings them
        raise ModuleNotFoundError(
            "the report's plots need matplotlib: pip install matplotlib (or write(plots=False), --no-plots)"
        ) from err
    return Figure(figsize=(5.5, 3.2))


def _png(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    return buf.getvalue()


def utilization_png(summary: ChainSummary) -> bytes:
    """Bar chart: share of answers that cite the source retrieved at each rank."""
    fig = _figure()
    ax = fig.add_subplot()
    ranks = [u.rank for u in summary.utilization]
    vals = [u.utilization or 0.0 for u in summary.utilization]
    bars = ax.bar(ranks, vals, color="#4c72b0")
    for bar, u in zip(bars, summary.utilization):
        ax.annotate(f"{u.n_used}/{u.n_retrieved}", (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                    ha="center", va="bottom", fontsize=8)
    ax.set_xticks(ranks)
    ax.set_ylim(0, 1.1)
    ax.set_xlabel("retrieval rank")
    ax.set_ylabel("share of answers citing it")
    ax.set_title("Source utilization by retrieval rank")
    return _png(fig)


def supported_share_png(rows: Sequence[QuestionRow]) -> bytes:
    """Histogram over answers of the share of their keywords that are supported."""
    fig = _figure()
    ax = fig.add_subplot()
    shares = [r.supported_share for r in rows if r.ok and r.supported_share is not None]
    ax.hist(shares, bins=np.linspace(0.0, 1.0, 11), color="#55a868", edgecolor="white")
    ax.set_xlim(0, 1)
    ax.set_xlabel("share of the answer's keywords supported")
    ax.set_ylabel("answers")
    from matplotlib.ticker import MaxNLocator

    ax.yaxis.set_major_locator(MaxNLocator(integer=True))  # counts of answers
    ax.set_title(f"Supported keywords per answer (n={len(shares)})")
    return _png(fig)
