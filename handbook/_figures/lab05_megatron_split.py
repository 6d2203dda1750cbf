"""Lab 05 figure: the weight slice each TP rank holds in Megatron's blocks; where f and g sit."""

from __future__ import annotations

import matplotlib.pyplot as plt
from _draw import PALETTE
from matplotlib.axes import Axes
from matplotlib.patches import Circle, FancyArrowPatch, Rectangle

from infralens.tensor_parallel import LocalLinear, attention_shards, mlp_shards
from infralens.tensor_parallel_comm import operators

TP, HIDDEN, FFN, HEADS, KV_HEADS = 4, 16, 64, 8, 4
BOX = 1.3  # every weight is drawn as a square; stripes are to scale within it


def weight(ax: Axes, x: float, shards: list[LocalLinear], label: str) -> None:
    """One (out, in) weight at x; colwise splits rows (dim 0), rowwise splits columns (dim 1)."""
    colwise = shards[0].style == "colwise"
    split = [s.weight[0] if colwise else s.weight[1] for s in shards]
    total = sum(split)
    out_f, in_f = (total, shards[0].weight[1]) if colwise else (shards[0].weight[0], total)
    offset = 0.0
    for rank, size in enumerate(split):
        part = BOX * size / total
        if colwise:
            xy, w, h = (x, BOX / 2 - offset - part), BOX, part
        else:
            xy, w, h = (x + offset, -BOX / 2), part, BOX
        ax.add_patch(Rectangle(xy, w, h, facecolor=PALETTE[rank], edgecolor="0.2"))
        # the rank's number in its slice: legible in greyscale
        ax.text(xy[0] + w / 2, xy[1] + h / 2, str(rank), ha="center", va="center", fontsize=7,
                color="white")  # fmt: skip
        offset += part
    ax.text(x + BOX / 2, BOX / 2 + 0.12, label, ha="center", va="bottom", fontsize=9)
    ax.text(
        x + BOX / 2,
        -BOX / 2 - 0.12,
        f"{shards[0].style}\nfull ({out_f}, {in_f})\nrank {shards[0].weight}",
        ha="center",
        va="top",
        fontsize=7,
    )


def operator(ax: Axes, x: float, name: str) -> None:
    f, g = operators(sequence_parallel=False)
    f_sp, g_sp = operators(sequence_parallel=True)
    op, op_sp = (f, f_sp) if name == "f" else (g, g_sp)
    ax.add_patch(Circle((x, 0), 0.3, facecolor="white", edgecolor="0.2"))
    ax.text(x, 0, name, ha="center", va="center", fontsize=11, style="italic")
    ax.text(
        x,
        -0.45,
        f"fwd {op.forward}\nbwd {op.backward}\n\n"
        f"with SP:\nfwd {op_sp.forward}\nbwd {op_sp.backward}",
        ha="center",
        va="top",
        fontsize=7,
    )


def arrow(ax: Axes, x0: float, x1: float) -> None:
    ax.add_patch(FancyArrowPatch((x0, 0), (x1, 0), arrowstyle="->", mutation_scale=8, color="0.4"))


mlp = [mlp_shards(hidden=HIDDEN, ffn_hidden=FFN, tp=TP, rank=r) for r in range(TP)]
attn = [
    attention_shards(hidden=HIDDEN, heads=HEADS, kv_heads=KV_HEADS, tp=TP, rank=r)
    for r in range(TP)
]
fig, (top, bottom) = plt.subplots(2, 1, figsize=(6.2, 5.4))

operator(top, 0.2, "f")
for i, name in enumerate(["q", "k", "v"]):
    weight(top, 1.2 + 1.75 * i, [a[i] for a in attn], name)
top.text(7.0, 0, "attention\nper local\nhead group", ha="center", va="center", fontsize=7)
arrow(top, 6.1, 6.5)
arrow(top, 7.5, 7.85)
weight(top, 7.9, [a[3] for a in attn], "o")
arrow(top, 9.3, 9.95)
operator(top, 10.3, "g")
top.set_title(
    f"Attention, {HEADS} query and {KV_HEADS} KV heads on tp={TP}: each rank owns whole heads",
    fontsize=9,
)

operator(bottom, 0.2, "f")
weight(bottom, 1.2, [m[0] for m in mlp], "fc1")
arrow(bottom, 2.6, 3.05)
bottom.text(3.5, 0, "GeLU\n(local)", ha="center", va="center", fontsize=7)
arrow(bottom, 4.0, 4.6)
weight(bottom, 4.7, [m[1] for m in mlp], "fc2")
bottom.text(7.3, 0, "partial sums\nY = Σ Y_r", ha="center", va="center", fontsize=7)
arrow(bottom, 6.1, 6.6)
arrow(bottom, 8.0, 9.9)
operator(bottom, 10.3, "g")
bottom.set_title(
    f"MLP, h={HIDDEN} and ffn={FFN} on tp={TP}: fc1 split by rows, fc2 by columns", fontsize=9
)

for ax in (top, bottom):
    ax.set_xlim(-0.6, 11.0)
    ax.set_ylim(-2.3, 1.3)
    ax.set_aspect("equal")
    ax.set_axis_off()
handles = [Rectangle((0, 0), 1, 1, facecolor=PALETTE[r]) for r in range(TP)]
fig.legend(
    handles,
    [f"rank {r}" for r in range(TP)],
    fontsize=8,
    frameon=False,
    loc="lower center",
    ncol=TP,
)
