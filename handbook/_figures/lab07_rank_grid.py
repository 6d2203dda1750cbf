"""Lab 07 figure: the 8 nodes x 8 GPUs grid, each panel coloured by its own axis's groups.

Plan tp=8, pp=4, dp=2 in the default order tp-cp-dp-pp. In every panel one
colour is one group of that panel's axis, taken from ``ParallelPlan.groups``:
the hue is the group's index modulo 8 and the shade its index divided by 8,
so no two groups of a panel share a colour (16 PP groups, 32 DP groups).
"""

from __future__ import annotations

import matplotlib.pyplot as plt
from _draw import PALETTE
from matplotlib.colors import to_rgb
from matplotlib.patches import Rectangle

from infralens.plan import ParallelPlan

plan = ParallelPlan(tp=8, pp=4, dp=2)
NODES, GPUS = 8, 8
NAMES = {"tp": "TP index", "pp": "stage", "dp": "replica"}


def group_colour(index: int, count: int) -> tuple[tuple[float, float, float], str]:
    """A distinct fill for group *index* of *count*, and a text colour that reads on it."""
    hue = to_rgb(PALETTE[index % len(PALETTE)])
    shades = -(-count // len(PALETTE))
    light = 0.62 * (index // len(PALETTE)) / max(shades - 1, 1)
    fill = (
        hue[0] + (1 - hue[0]) * light,
        hue[1] + (1 - hue[1]) * light,
        hue[2] + (1 - hue[2]) * light,
    )
    return fill, ("white" if light < 0.3 else "black")


fig, axes = plt.subplots(1, 3, figsize=(6.2, 3.0))
for ax, axis in zip(axes, ("tp", "pp", "dp"), strict=True):
    groups = plan.groups(axis)
    group_of = {r: i for i, g in enumerate(groups) for r in g}
    for rank in range(plan.world_size):
        node, gpu = divmod(rank, GPUS)
        fill, ink = group_colour(group_of[rank], len(groups))
        ax.add_patch(Rectangle((gpu, NODES - 1 - node), 0.95, 0.95, color=fill))
        ax.text(
            gpu + 0.47,
            NODES - 1 - node + 0.47,
            str(plan.coords(rank)[axis]),
            ha="center",
            va="center",
            fontsize=7,
            color=ink,
        )
    ax.set_xlim(0, GPUS)
    ax.set_ylim(0, NODES)
    ax.set_aspect("equal")
    ax.set_xticks([g + 0.47 for g in range(GPUS)], [str(g) for g in range(GPUS)], fontsize=7)
    ax.set_yticks(
        [NODES - 1 - n + 0.47 for n in range(NODES)],
        [f"node {n}" for n in range(NODES)],
        fontsize=7,
    )
    ax.tick_params(length=0)
    ax.set_title(f"{len(groups)} {axis.upper()} groups of {len(groups[0])}", fontsize=9)
    ax.set_xlabel(f"GPU in node (label: {NAMES[axis]})", fontsize=7)
