"""Lab 12 figure: the starter plan on 8 nodes x 8 GPUs, with the link each axis's groups cross."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import matplotlib.pyplot as plt
from _draw import PALETTE
from matplotlib.patches import Rectangle

from infralens.planner.design import fill_worksheet
from infralens.planner.plan_file import load_plan_file
from infralens.planner.worksheet_tables import LINK_WORDS

plan, cluster, work = load_plan_file(Path("../../labs_src/starters/parallelism_plan.yaml"))
assert work is not None
sheet = fill_worksheet(work)
NODES, GPUS = cluster.nodes, cluster.gpus_per_node
placement = {row.axis: row.placement for row in sheet.axes}
seconds = {
    axis: float(sum(r.seconds_per_step for r in sheet.comms if r.axis == axis))
    for axis in ("tp", "pp", "dp")
}


def y_of(node: int) -> float:
    return NODES - 1 - node


fig, ax = plt.subplots(figsize=(6.2, 5.4))
for rank in range(plan.world_size):
    node, gpu = divmod(rank, GPUS)
    c = plan.coords(rank)
    ax.add_patch(
        Rectangle(
            (gpu + 0.05, y_of(node) + 0.1),
            0.9,
            0.8,
            facecolor=PALETTE[c["pp"]],
            alpha=1.0 if c["dp"] == 0 else 0.55,
            edgecolor="none",
        )
    )
    ax.text(gpu + 0.5, y_of(node) + 0.5, str(rank), ha="center", va="center", fontsize=7,
            color="white")  # fmt: skip
# Each TP group: the ranks of one group, outlined (they are one node's eight GPUs).
for group in plan.groups("tp"):
    nodes = {cluster.node_of(r) for r in group}
    for node in nodes:
        first = min(r % GPUS for r in group if cluster.node_of(r) == node)
        last = max(r % GPUS for r in group if cluster.node_of(r) == node)
        ax.add_patch(
            Rectangle((first, y_of(node) + 0.03), last - first + 1, 0.94, fill=False,
                      edgecolor="0.15", linewidth=1.2)
        )  # fmt: skip
for node in range(NODES):
    c = plan.coords(node * GPUS)
    ax.text(-0.15, y_of(node) + 0.5, f"node {node}\nstage {c['pp']}, replica {c['dp']}",
            ha="right", va="center", fontsize=7)  # fmt: skip
# The PP and DP groups of the last GPU column, in lanes beside the grid (every column's
# groups look the same): a dot marks each member node, an arrow each hop between nodes.
lanes = [("dp", 0, GPUS + 0.35), ("pp", 0, GPUS + 0.8), ("pp", 1, GPUS + 1.15)]
color = {"pp": PALETTE[7], "dp": PALETTE[5]}
for axis, replica, x in lanes:
    for group in plan.groups(axis):
        last = group[0] % GPUS == GPUS - 1
        if not last or (axis == "pp" and plan.coords(group[0])["dp"] != replica):
            continue
        ys = [y_of(cluster.node_of(r)) + 0.5 for r in group]
        ax.plot([x] * len(ys), ys, "o", color=color[axis], markersize=3)
        for ya, yb in pairwise(ys):
            ax.annotate("", xy=(x, yb), xytext=(x, ya),
                        arrowprops={"arrowstyle": "<|-|>" if axis == "dp" else "-|>",
                                    "color": color[axis], "linewidth": 1, "mutation_scale": 7,
                                    "shrinkA": 2, "shrinkB": 2})  # fmt: skip
legend = [
    ("0.15", "TP group (outlined)", "tp"),
    (color["dp"], "DP reduce-scatter + all-gather (first lane)", "dp"),
    (color["pp"], "PP send/recv (a lane per replica)", "pp"),
]
# The key under the grid, one line per group kind.
for k, (shade, what, axis) in enumerate(legend):
    ax.text(-2.6, -0.5 - 0.5 * k,
            f"{what}: {LINK_WORDS[placement[axis]]}, {seconds[axis]:.2f} s per step",
            color=shade, fontsize=7, va="top")  # fmt: skip
ax.text(-2.6, -2.0, "fill colour: pipeline stage; lighter: second replica; number: rank",
        fontsize=7, va="top", color="0.3")  # fmt: skip
ax.set_xlim(-2.6, GPUS + 1.4)
ax.set_ylim(-2.5, NODES + 0.1)
ax.set_aspect("equal")
ax.xaxis.tick_top()
ax.set_xticks([g + 0.5 for g in range(GPUS)], [f"GPU {g}" for g in range(GPUS)], fontsize=7)
ax.set_yticks([])
ax.tick_params(length=0)
for side in ax.spines.values():
    side.set_visible(False)
ax.set_title(
    f"tp={plan.tp}, pp={plan.pp}, dp={plan.dp} ({plan.order}) on {NODES} nodes x {GPUS} GPUs",
    fontsize=9,
    pad=16,
)
