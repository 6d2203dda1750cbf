"""Lab 17 figure: bytes per parameter by buffer, for each recipe, without and with sharding."""

from __future__ import annotations

import matplotlib.pyplot as plt
from _draw import PALETTE, fmt
from matplotlib.patches import Patch

from infralens.precision import RECIPES, recipe_bytes

NAMES = ("zero-paper", "megatron-bf16", "megatron-bf16-distopt", "megatron-fp8-distopt")
NAMES += ("fsdp2", "ddp")
TICKS = ("ZeRO\npaper", "Megatron\nbf16", "Megatron\ndistopt", "Megatron\nFP8 params")
TICKS += ("FSDP2", "DDP")
# One colour per role of a buffer, read from the words of Buffer.holds.
ROLES = (
    ("compute copy or parameter", ("parameters",)),
    ("gradient", ("grad", "gradients")),
    ("all-reduce bucket copy", ("buckets",)),
    ("fp32 master weights", ("master",)),
    ("Adam momentum and variance", ("momentum", "variance")),
)


def role(holds: str) -> int:
    words = holds.replace("_", " ").split()
    return next(i for i, (_, keys) in enumerate(ROLES) if any(k in words for k in keys))


fig, axes = plt.subplots(1, 2, figsize=(9.6, 3.6), sharey=True)
for ax, d in zip(axes, (1, 8), strict=True):
    for x, name in enumerate(NAMES):
        bottom = 0.0
        for buf in RECIPES[name].buffers:
            height = buf.nbytes / d if buf.sharded else buf.nbytes
            ax.bar(
                x,
                height,
                bottom=bottom,
                color=PALETTE[role(buf.holds)],
                edgecolor="white",
                hatch="//" if buf.sharded else None,
                width=0.7,
            )
            bottom += height
        ax.text(x, bottom + 0.3, fmt(recipe_bytes(name, dp_size=d)), ha="center", fontsize=8)
    ax.set_xticks(range(len(NAMES)), TICKS, fontsize=7)
    ax.set_title(f"data-parallel degree d = {d}", fontsize=9)
    ax.set_ylim(0, 22.5)
axes[0].set_ylabel("bytes per parameter on one GPU")
handles = [Patch(color=PALETTE[i], label=label) for i, (label, _) in enumerate(ROLES)]
handles.append(Patch(facecolor="white", edgecolor="0.3", hatch="//", label="sharded over d"))
axes[1].legend(
    handles=handles, fontsize=6.5, frameon=False, loc="upper center", bbox_to_anchor=(0.6, 1.0)
)
fig.tight_layout()
