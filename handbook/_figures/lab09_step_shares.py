"""Lab 09 figure: where the 70B scenario's step goes, term by term, and for the plan it tries next.

The starter plan file's workload and cluster (the shape of
``infralens.interview.seventy_b_on_64_gpus``: Llama 2 70B, 4,096 tokens,
global batch 512, eight DGX H100 nodes), priced by the Lab 12 worksheet's
step model for TP 8 x PP 4 x DP 2 and for TP 4 x PP 8 x DP 2.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import matplotlib.pyplot as plt
from _draw import PALETTE

from infralens.plan import ParallelPlan
from infralens.planner.design import fill_worksheet
from infralens.planner.plan_file import load_plan_file

STARTER = Path("../../labs_src/starters/parallelism_plan.yaml")  # figures run in _figures/
work = load_plan_file(STARTER)[2]
assert work is not None
plans = [("TP 8, PP 4, DP 2", ParallelPlan(tp=8, pp=4, dp=2))]
plans.append(("TP 4, PP 8, DP 2", ParallelPlan(tp=4, pp=8, dp=2)))
NAMES = {"compute": "compute", "tp": "exposed TP", "pp_bubble": "PP bubble"}

fig, ax = plt.subplots(figsize=(6.2, 2.5))
longest = 0.0
for row, (_label, plan) in enumerate(plans):
    step = fill_worksheet(replace(work, plan=plan)).step
    assert step is not None
    left = 0.0
    aside: list[str] = []
    for name, seconds in step.breakdown.items():
        if seconds <= 0:
            continue
        colour = PALETTE[list(NAMES).index(name)] if name in NAMES else "0.55"
        ax.barh(row, seconds, left=left, color=colour, edgecolor="white", linewidth=0.5)
        share = seconds / step.seconds
        label = f"{NAMES.get(name, name)}\n{seconds:.1f} s, {share:.0%}"
        if share > 0.2:
            ax.text(
                left + seconds / 2, row, label, ha="center", va="center", fontsize=7, color="white"
            )
        elif share > 0.1:  # too narrow for its label: it follows the step's total
            aside.append(f"{NAMES.get(name, name)} {seconds:.1f} s, {share:.0%}")
        left += seconds
    longest = max(longest, step.seconds)
    total = "\n".join([f"{step.seconds:.1f} s", *aside])
    ax.text(left + 0.3, row, total, va="center", fontsize=7)
ax.set_yticks(range(len(plans)), [p[0] for p in plans], fontsize=7)
ax.invert_yaxis()
ax.set_xlim(0, 1.2 * longest)  # room for each bar's total beside it
ax.set_xlabel("seconds per step (the terms add up to the step)", fontsize=7)
ax.tick_params(labelsize=7)
ax.bar(0, 0, color=PALETTE[2], label="PP bubble")
ax.bar(0, 0, color="0.55", label="PP send/recv, DP, optimizer")
ax.legend(fontsize=7, frameon=False, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=2)
