"""Lab 16 figure: one predicted step's terms stacked on one clock, for three 70B plans on 64 H100s.

Each bar is :func:`infralens.planner.step.estimate`'s breakdown (compute, exposed TP, bubble,
point-to-point sends, exposed DP, optimizer) for Llama 2 70B on 8 DGX H100 nodes; the
grey extension is the median miss of the step model on the published runs (the same
rows as the validation page), where a measured step of the plan would be expected.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import matplotlib.pyplot as plt
from _draw import PALETTE

from infralens.plan import ParallelPlan
from infralens.planner.job import Job
from infralens.planner.ranking import rank_plans
from infralens.planner.step import estimate
from infralens.planner.step_validation import check_run, load_runs, median_error
from infralens.topology import Cluster

# The plot directive runs this script from handbook/_figures.
checks = [check_run(r) for r in load_runs(Path("../../tests/data/training_runs.csv"))]
miss = 1 + median_error(checks)  # predicted / published, median

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
    ax.barh(y, e.seconds * (miss - 1), left=e.seconds, color="0.85", height=0.55,
            hatch="///", edgecolor="0.6", linewidth=0,
            label=f"median miss on published runs (×{miss:.2f})" if y == 0 else None)  # fmt: skip
    ax.text(e.seconds * miss + 0.4, y,
            f"{e.seconds:.1f} s, MFU {e.mfu:.2f}\n"
            f"≈ {e.seconds * miss:.1f} s, MFU {e.mfu / miss:.2f}\nat the median miss",
            va="center", fontsize=7)  # fmt: skip
for y, (label, _) in enumerate(reversed(plans)):  # each plan's name above its bar
    ax.text(0, y + 0.32, label.replace("\n", ", "), va="bottom", fontsize=7)
ax.set_yticks([])
ax.set_ylim(-0.5, len(plans) - 0.1)
ax.set_xlim(0, 56)
ax.set_xlabel("seconds per step (Llama 2 70B, 64 H100s, 512 × 4,096 tokens)")
ax.legend(fontsize=7, frameon=False, ncol=3, loc="upper center", bbox_to_anchor=(0.5, -0.25))
for side in ("top", "right"):
    ax.spines[side].set_visible(False)
fig.tight_layout()
