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
# One colour and one letter per role of a buffer, read from the words of
# Buffer.holds; the letter tells the roles apart in greyscale too.
ROLES = (
    ("P", "compute copy or parameter", ("parameters",)),
    ("G", "gradient", ("grad", "gradients")),
    ("B", "all-reduce bucket copy", ("buckets",)),
    ("M", "fp32 master weights", ("master",)),
    ("A", "Adam momentum and variance", ("momentum", "variance")),
)


def role(holds: str) -> int:
    words = holds.replace("_", " ").split()
    return next(i for i, (_, _, keys) in enumerate(ROLES) if any(k in words for k in keys))


fig, axes = plt.subplots(2, 1, figsize=(6.2, 5.4), sharex=True)
for ax, d in zip(axes, (1, 8), strict=True):
    for x, name in enumerate(NAMES):
        bottom = 0.0
        for buf in RECIPES[name].buffers:
            height = buf.nbytes / d if buf.sharded else buf.nbytes
            kind = role(buf.holds)
            ax.bar(
                x,
                height,
                bottom=bottom,
                color=PALETTE[kind],
                edgecolor="white",
                hatch="//" if buf.sharded else None,
                width=0.7,
            )
            if height >= 1.5:  # room for the role's letter
                ax.text(
                    x - 0.3,
                    bottom + height / 2,
                    ROLES[kind][0],
                    ha="left",
                    va="center",
                    fontsize=7,
                    weight="bold",
                    bbox={"boxstyle": "square,pad=0.1", "facecolor": "white", "linewidth": 0},
                )
            bottom += height
        ax.text(x, bottom + 0.3, fmt(recipe_bytes(name, dp_size=d)), ha="center", fontsize=8)
    ax.set_title(f"data-parallel degree d = {d}", fontsize=9)
    ax.set_ylim(0, 22.5)
    ax.set_ylabel("bytes per parameter\non one GPU", fontsize=9)
axes[1].set_xticks(range(len(NAMES)), TICKS, fontsize=8)
handles = [Patch(color=PALETTE[i], label=f"{k}: {label}") for i, (k, label, _) in enumerate(ROLES)]
handles.append(Patch(facecolor="white", edgecolor="0.3", hatch="//", label="sharded over d"))
fig.legend(handles=handles, fontsize=7, frameon=False, loc="lower center", ncol=3)
fig.tight_layout(rect=(0, 0.1, 1, 1))
