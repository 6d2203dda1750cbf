"""Lab 17 figure: per-GPU bytes for Llama 3 8B and 70B on 8 and 64 H100s, by recipe."""

from __future__ import annotations

import matplotlib.pyplot as plt
from _draw import PALETTE

from infralens.plan import ParallelPlan
from infralens.planner.fit import HBM_BYTES, gpu_memory
from infralens.planner.job import Job
from infralens.topology import Cluster

RECIPES = ("zero-paper", "megatron-bf16", "megatron-bf16-distopt", "fsdp2")
CASES = [(m, n) for m in ("llama3-8b", "llama3-70b") for n in (8, 64)]
PARTS = ("model_states", "gathered", "grad_buffers", "activations", "logits")
LABELS = (
    "model states",
    "FSDP2 gathered root + 2 layers",
    "FSDP2 gradient buffers",
    "activations",
    "fp32 logits",
)

# A hatch per part as well as a colour: the parts stay apart in greyscale.
HATCHES = (None, "////", "....", "xxxx", "\\\\")

fig, grid = plt.subplots(2, 2, figsize=(6.2, 5.6), sharey=True, sharex=True)
axes = grid.flat
for ax, (model, gpus) in zip(axes, CASES, strict=True):
    bars = [
        gpu_memory(Job(model, ParallelPlan(dp=gpus), Cluster(gpus // 8, 8), seq_len=8192,
                       global_batch_size=gpus, recipe=r, recompute="full"))
        for r in RECIPES
    ]  # fmt: skip
    bottom = [0.0] * len(RECIPES)
    for colour, hatch, part, label in zip(PALETTE, HATCHES, PARTS, LABELS, strict=False):
        heights = [getattr(b, part) / 10**9 for b in bars]
        ax.bar(
            range(len(RECIPES)),
            heights,
            bottom=bottom,
            color=colour,
            hatch=hatch,
            edgecolor="white",
            linewidth=0.4,
            label=label,
        )
        bottom = [x + y for x, y in zip(bottom, heights, strict=True)]
    ax.axhline(HBM_BYTES["h100-sxm5-80gb"] / 10**9, color="black", linewidth=0.8, linestyle="--")
    ax.set_yscale("log")
    ax.set_ylim(1, 3000)
    ticks = ["ZeRO\npaper", "Megatron\nbf16", "Megatron\ndistopt", "FSDP2"]
    ax.set_xticks(range(len(RECIPES)), ticks, fontsize=8)
    ax.set_title(f"{model}, dp = {gpus}", fontsize=9)
for ax in grid[:, 0]:
    ax.set_ylabel("GB (10⁹ bytes) per GPU", fontsize=9)
fig.legend(
    *grid[0, 0].get_legend_handles_labels(), fontsize=7, frameon=False, loc="lower center", ncol=3
)
fig.suptitle("8,192 tokens, micro-batch 1, full recomputation; dashed: 80 GB H100 SXM", fontsize=9)
fig.tight_layout(rect=(0, 0.07, 1, 1))
