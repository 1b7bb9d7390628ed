"""Plots for the course: one small function per figure, each drawing on a matplotlib Axes
and returning it (pass ``ax=`` to place it in your own figure).  Nothing is drawn on import.

Colours are the Okabe-Ito palette, readable with the common colour-vision deficiencies.
"""
from __future__ import annotations

from typing import Sequence

from .params import count_params
from .shapes import ModelShape

PARTS = (
    ("token_embedding", "token embedding", "#0072B2"),
    ("position_embedding", "position embedding", "#56B4E9"),
    ("attention", "attention", "#E69F00"),
    ("feed_forward", "feed-forward", "#009E73"),
    ("router", "router", "#CC79A7"),
    ("norms", "norms", "#999999"),
    ("output_head", "output head (untied)", "#D55E00"),
)
"""The parts of a model, in drawing order: ``(ParamCounts field, label, colour)``."""


def human_count(n: float) -> str:
    """A count in words a reader takes in at a glance: ``350.0M``, ``6.74B``, ``3,072``."""
    for scale, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")):
        if abs(n) >= scale:
            value = n / scale
            return f"{value:.3g}{suffix}" if value < 100 else f"{value:.1f}{suffix}"
    return f"{n:,.0f}"


def parts_of(shape: ModelShape) -> dict:
    """``{part label: parameters}`` for one model, in :data:`PARTS` order (zeros kept)."""
    counts = count_params(shape)
    return {label: getattr(counts, field) for field, label, _ in PARTS}


def params_by_part(shapes: Sequence[ModelShape], *, share: bool = True, ax=None):
    """Stacked horizontal bars of parameters by part, one bar per model (top to bottom in the
    order given).

    Args:
        shapes: the models; each bar is labelled with ``shape.name`` and its total.
        share: True draws each bar as 100% of its model (so small and large models compare);
            False draws parameter counts (in millions) on one axis.
        ax: a matplotlib Axes to draw on; a new figure when None.
    Returns:
        The Axes.  Parts no model has (a router in dense models) are left out of the legend.
    Raises:
        ValueError: no shapes.
    """
    import matplotlib.pyplot as plt

    if not shapes:
        raise ValueError("shapes is empty: give at least one ModelShape")
    if ax is None:
        _, ax = plt.subplots(figsize=(9, 0.8 * len(shapes) + 1.8))
    rows = [parts_of(s) for s in shapes]
    totals = [sum(r.values()) for r in rows]
    y = list(range(len(shapes)))[::-1]  # first model on top
    left = [0.0] * len(shapes)
    for _, label, colour in PARTS:
        values = [r[label] for r in rows]
        if not any(values):
            continue
        widths = [100 * v / t if share else v / 1e6 for v, t in zip(values, totals)]
        bars = ax.barh(y, widths, left=left, color=colour, label=label, edgecolor="white")
        if share:
            ax.bar_label(bars, labels=[f"{w:.0f}%" if w >= 6 else "" for w in widths],
                         label_type="center", fontsize=9, color="white", fontweight="bold")
        left = [a + b for a, b in zip(left, widths)]
    ax.set_yticks(y, [f"{s.name or s.model_type}\n{human_count(t)} params"
                      for s, t in zip(shapes, totals)])
    ax.set_xlabel("share of parameters (%)" if share else "parameters (millions)")
    if share:
        ax.set_xlim(0, 100)
    ax.set_title("Where the parameters are: each model's share by part" if share
                 else "Where the parameters are: every model on one scale")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16),
              ncol=min(4, len(ax.get_legend_handles_labels()[1])), frameon=False, fontsize=9)
    ax.spines[["top", "right"]].set_visible(False)
    ax.figure.tight_layout()
    return ax
