"""Lab 14 figure: median seconds per rank by activity, for the four shipped traces."""

from __future__ import annotations

import matplotlib.pyplot as plt
from _draw import PALETTE

from infralens.diagnosis import STARTER_TRACES, classify, load_trace

names = ["compute_bound", "communication_bound", "straggler", "input_stall"]
fig, axes = plt.subplots(1, 4, figsize=(6.2, 2.9), sharey=True)
for ax, name in zip(axes, names, strict=True):
    trace = load_trace(STARTER_TRACES / f"{name}.json")
    bottom = [0.0] * trace.world_size
    for k, (field, label) in enumerate(
        (("compute_s", "compute"), ("comm_s", "exposed collectives"), ("data_wait_s", "data wait"))
    ):
        values = trace.per_rank(field)
        ax.bar(range(trace.world_size), values, bottom=bottom, color=PALETTE[k], label=label,
               hatch=(None, "////", "....")[k], edgecolor="white", linewidth=0.3)  # fmt: skip
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    ax.set_title(classify(trace).kind, fontsize=9)
    ax.set_xticks(range(trace.world_size))
    ax.set_xlabel("rank", fontsize=7)
axes[0].set_ylabel("seconds per step (median)")
fig.legend(
    *axes[0].get_legend_handles_labels(), fontsize=7, frameon=False, loc="lower center", ncol=3
)
fig.tight_layout(rect=(0, 0.07, 1, 1))
