"""Lab 07 figure: the 8 nodes x 8 GPUs grid coloured by TP, PP and DP group (tp=8, pp=4, dp=2)."""

from __future__ import annotations

import matplotlib.pyplot as plt
from _draw import PALETTE
from matplotlib.patches import Rectangle

from infralens.plan import ParallelPlan

plan = ParallelPlan(tp=8, pp=4, dp=2)
NODES, GPUS = 8, 8
fig, axes = plt.subplots(1, 3, figsize=(7.2, 2.9))
for ax, axis in zip(axes, ("tp", "pp", "dp"), strict=True):
    group_of = {r: i for i, g in enumerate(plan.groups(axis)) for r in g}
    for rank in range(plan.world_size):
        node, gpu = divmod(rank, GPUS)
        c = plan.coords(rank)
        ax.add_patch(
            Rectangle(
                (gpu, NODES - 1 - node), 0.95, 0.95, color=PALETTE[group_of[rank] % len(PALETTE)]
            )
        )
        ax.text(
            gpu + 0.47,
            NODES - 1 - node + 0.47,
            str(c[axis]),
            ha="center",
            va="center",
            fontsize=6,
            color="white",
        )
    ax.set_xlim(0, GPUS)
    ax.set_ylim(0, NODES)
    ax.set_aspect("equal")
    ax.set_xticks([g + 0.47 for g in range(GPUS)], [str(g) for g in range(GPUS)], fontsize=6)
    ax.set_yticks(
        [NODES - 1 - n + 0.47 for n in range(NODES)],
        [f"node {n}" for n in range(NODES)],
        fontsize=6,
    )
    ax.tick_params(length=0)
    ax.set_title(f"{axis.upper()} groups ({len(plan.groups(axis))})", fontsize=9)
    ax.set_xlabel("GPU in node", fontsize=7)
