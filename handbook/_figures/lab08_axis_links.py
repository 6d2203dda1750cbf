"""Lab 08 figure: for each axis of the starter plan, which collective crosses which link.

Plan tp=8, pp=4, dp=2 on eight DGX H100 nodes; a Llama 2 70B-shaped model,
micro-batch 1 of 4,096 tokens, 256 micro-batches per step, sequence
parallelism and ZeRO-1. Each call's link is ``Cluster.tier_of`` of the axis's
first group and its time ``infralens.nccl.predict`` on that group.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
from _draw import PALETTE
from matplotlib.patches import FancyBboxPatch

from infralens.batch import grad_accum_steps_for
from infralens.nccl import predict
from infralens.plan import ParallelPlan
from infralens.topology import Cluster

cluster = Cluster.from_node_shape("8_nodes_x_8_gpus", "dgx-h100")
plan = ParallelPlan(tp=8, pp=4, dp=2)
B, S, H, LAYERS, PSI = 1, 4096, 8192, 80, 68_976_648_192
m = grad_accum_steps_for(global_batch_size=512, micro_batch_size=B, dp_size=plan.dp)
act = B * S * H * 2  # the b*s*h activation in bf16
local = PSI // (plan.tp * plan.pp)  # parameters one GPU holds
stage_layers = LAYERS // plan.pp
rows = [  # axis, op, bytes per call, calls per step, label
    ("tp", "all_gather", act, 4 * stage_layers * m, "TP all-gather"),
    ("tp", "reduce_scatter", act, 4 * stage_layers * m, "TP reduce-scatter"),
    ("pp", "send_recv", act // plan.tp, 2 * m, "PP send/recv"),
    ("dp", "reduce_scatter", 4 * local, 1, "DP reduce-scatter"),
    ("dp", "all_gather", 2 * local, 1, "DP all-gather"),
]
TIERS = ["nvlink", "network"]

fig, (grid, bars) = plt.subplots(2, 1, figsize=(6.2, 4.6), height_ratios=[1.2, 1])
per_step = []
for k, (axis, op, nbytes, calls, _label) in enumerate(rows):
    group = plan.groups(axis)[0][:2] if axis == "pp" else plan.groups(axis)[0]
    tier = cluster.tier_of(group).name
    call = predict(op, nbytes, cluster, group)
    per_step.append(call.seconds * calls)
    y = len(rows) - 1 - k
    x = TIERS.index(tier)
    grid.add_patch(
        FancyBboxPatch(
            (x + 0.04, y + 0.12),
            0.92,
            0.76,
            boxstyle="round,pad=0.0,rounding_size=0.08",
            facecolor=PALETTE[TIERS.index(tier)],
            alpha=0.85,
        )
    )
    size = f"{nbytes / 2**20:,.0f} MiB" if nbytes < 2**30 else f"{nbytes / 10**9:.1f} GB"
    grid.text(
        x + 0.5,
        y + 0.5,
        f"{size}, {call.seconds * 1e3:.2f} ms\n{calls:,} per step, {call.bus_bandwidth:.0f} GB/s",
        ha="center",
        va="center",
        fontsize=7,
        color="white",
    )
grid.set_xlim(0, 2)
grid.set_ylim(0, len(rows))
grid.set_xticks([0.5, 1.5], ["NVLink (inside a node)", "network (between nodes)"], fontsize=8)
grid.set_yticks([len(rows) - 0.5 - k for k in range(len(rows))], [r[4] for r in rows], fontsize=7)
grid.tick_params(length=0)
for side in grid.spines.values():
    side.set_visible(False)
grid.set_title("link each call crosses: size, time, calls, busbw", fontsize=9)

bars.barh(
    range(len(rows)),
    per_step,
    color=[PALETTE[TIERS.index(cluster.tier_of(plan.groups(r[0])[0][:2]).name)] for r in rows],
)
tier_names = {"nvlink": "NVLink", "network": "network"}
for k, value in enumerate(per_step):
    tier = tier_names[cluster.tier_of(plan.groups(rows[k][0])[0][:2]).name]
    bars.text(value * 1.15, k, f"{value:.2f} s ({tier})", va="center", fontsize=7)
bars.set_yticks(range(len(rows)), [r[4] for r in rows], fontsize=7)
bars.invert_yaxis()
bars.set_xscale("log")
bars.set_xlim(0.02, 30)
bars.set_xlabel("seconds per step if none were hidden", fontsize=8)
bars.tick_params(labelsize=7)
bars.set_title("calls x time, per GPU", fontsize=9)
