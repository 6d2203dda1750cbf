"""Drawing helpers shared by the figure scripts (matplotlib only; data comes from infralens)."""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from matplotlib.axes import Axes
from matplotlib.patches import Rectangle

PALETTE = ["#4C78A8", "#F58518", "#54A24B", "#E45756", "#72B7B2", "#B279A2", "#FF9DA6", "#9D755D"]


def fmt(value: object) -> str:
    """Short label for an exact value: ints as is, fractions as a/b."""
    if isinstance(value, Fraction) and value.denominator != 1:
        return f"{value.numerator}/{value.denominator}"
    return str(int(value)) if isinstance(value, Fraction) else str(value)


def draw_buffers(
    ax: Axes,
    per_rank: Sequence[Sequence[object] | None],
    title: str,
    colors: Sequence[Sequence[str]] | None = None,
) -> None:
    """Draw one row of cells per rank, each cell labelled with its value."""
    width = max((len(row) for row in per_rank if row is not None), default=1)
    for r, row in enumerate(per_rank):
        y = len(per_rank) - 1 - r
        ax.text(-0.3, y + 0.5, f"rank {r}", ha="right", va="center", fontsize=9)
        if row is None:
            ax.text(
                width / 2,
                y + 0.5,
                "(unspecified)",
                ha="center",
                va="center",
                fontsize=8,
                color="0.4",
            )
            continue
        for i, value in enumerate(row):
            face = colors[r][i] if colors is not None else "#DDE6F0"
            ax.add_patch(Rectangle((i, y + 0.1), 0.95, 0.8, facecolor=face, edgecolor="0.3"))
            ax.text(i + 0.475, y + 0.5, fmt(value), ha="center", va="center", fontsize=9)
    ax.set_xlim(-1.6, width + 0.1)
    ax.set_ylim(-0.1, len(per_rank) + 0.1)
    ax.set_title(title, fontsize=10)
    ax.set_axis_off()
