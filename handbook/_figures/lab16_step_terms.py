"""Lab 16 figure: one predicted step's terms stacked on one clock, for three 70B plans on 64 H100s.

Each bar is :func:`infralens.planner.step.estimate`'s breakdown (compute, exposed TP, bubble,
point-to-point sends, exposed DP, optimizer) for Llama 2 70B on 8 DGX H100 nodes; the
hatched grey span is where a measured step of the plan would fall at even odds: the
prediction times one plus each quartile of the model's out-of-sample errors on the
published runs (:data:`infralens.planner.ranking.BAND`, the validation page's rows).
"""

from __future__ import annotations

from dataclasses import replace

import matplotlib.pyplot as plt
from _draw import PALETTE

from infralens.plan import ParallelPlan
from infralens.planner.job import Job
from infralens.planner.ranking import BAND, rank_plans
from infralens.planner.step import estimate
from infralens.topology import Cluster

low, high = BAND["bf16"]  # out-of-sample error quartiles: predicted / published - 1

cluster = Cluster.from_node_shape("8_nodes_x_8_gpus", "dgx-h100")
batch = dict(seq_len=4096, global_batch_size=512, micro_batch_size=1)
best = rank_plans("llama2-70b", cluster, top=1, **batch)[0]
starter = Job("llama2-70b", ParallelPlan(tp=8, pp=4, dp=2), cluster, **batch)
plans = [
    ("starter: tp 8, pp 4, dp 2\n1F1B", estimate(starter)),
    ("tp 4, pp 4, dp 4\ninterleaved, v = 5",
     estimate(replace(starter, plan=ParallelPlan(tp=4, pp=4, dp=4), schedule="interleaved",
                      chunks=5))),
    (f"ranked first: tp {best.plan.tp}, cp {best.plan.cp}, pp {best.plan.pp}, "
     f"dp {best.plan.dp}\n"
     f"{best.schedule}, v = {best.chunks}", best.estimate),
]  # fmt: skip
terms = ["compute", "tp", "pp_bubble", "pp_p2p", "dp", "optimizer"]
names = {"compute": "compute", "tp": "exposed TP", "pp_bubble": "pipeline bubble",
         "pp_p2p": "stage sends", "dp": "exposed DP", "optimizer": "optimizer"}  # fmt: skip

fig, ax = plt.subplots(figsize=(6.2, 3.4))
for y, (_, e) in enumerate(reversed(plans)):
    left = 0.0
    parts = dict(e.breakdown.items())
    for k, term in enumerate(terms):
        ax.barh(y, parts[term], left=left, color=PALETTE[k], height=0.55,
                label=names[term] if y == 0 else None)  # fmt: skip
        left += parts[term]
    # error e = predicted tokens/s / measured - 1, so a measured step is seconds · (1 + e)
    fast, slow = e.seconds * (1 + low), e.seconds * (1 + high)
    ax.barh(y, slow - fast, left=fast, color="0.85", height=0.25, hatch="///",
            edgecolor="0.6", linewidth=0, alpha=0.8,
            label="likely measured (middle half of held-out misses)" if y == 0 else None,
            )  # fmt: skip
    ax.text(slow + 0.4, y,
            f"{e.seconds:.1f} s, MFU {e.mfu:.2f}\n"
            f"likely {fast:.1f} to {slow:.1f} s",
            va="center", fontsize=7)  # fmt: skip
for y, (label, _) in enumerate(reversed(plans)):  # each plan's name above its bar
    ax.text(0.4, y + 0.32, label.replace("\n", ", "), va="bottom", fontsize=7)
ax.set_yticks([])
ax.set_ylim(-0.5, len(plans) - 0.1)
# room right of the slowest plan's band for its two-line label
ax.set_xlim(0, 1.4 * max(e.seconds for _, e in plans) * (1 + high))
ax.set_xlabel("seconds per step (Llama 2 70B, 64 H100s, 512 × 4,096 tokens)")
ax.legend(fontsize=7, frameon=False, ncol=3, loc="upper center", bbox_to_anchor=(0.5, -0.25))
for side in ("top", "right"):
    ax.spines[side].set_visible(False)
fig.tight_layout()
