"""Lab 10 figure: the ring's K/V schedule, and the Ulysses re-shard from tokens to heads."""

from __future__ import annotations

import matplotlib.pyplot as plt
from _draw import PALETTE
from matplotlib.patches import Rectangle

from infralens.context_parallel import token_ranges, ulysses_placement
from infralens.ring_attention import ring_schedule

CP, SEQ, HEADS = 4, 8, 4

fig, axes = plt.subplots(1, 3, figsize=(6.2, 3.0), gridspec_kw={"width_ratios": [1.1, 1, 1]})

ax = axes[0]
for r, row in enumerate(ring_schedule(CP)):
    for t, src in enumerate(row):
        y = CP - 1 - r
        ax.add_patch(Rectangle((t, y), 0.95, 0.9, color=PALETTE[src]))
        ax.text(t + 0.47, y + 0.45, f"KV{src}", ha="center", va="center", fontsize=7, color="white")
    ax.text(-0.15, CP - 1 - r + 0.45, f"rank {r}", ha="right", va="center", fontsize=8)
ax.set_title(f"ring: K/V block held at each step\n({CP - 1} transfers per pass)", fontsize=9)
ax.set_xticks([t + 0.47 for t in range(CP)], [str(t) for t in range(CP)], fontsize=7)
ax.set_xlabel("step", fontsize=8)


def grid(ax: plt.Axes, owner: dict[tuple[int, int], int], title: str) -> None:
    for (t, h), r in owner.items():
        ax.add_patch(Rectangle((h, SEQ - 1 - t), 0.95, 0.9, color=PALETTE[r]))
        # the owner's number as well as its colour: legible in greyscale
        ax.text(h + 0.47, SEQ - 1 - t + 0.45, f"r{r}", ha="center", va="center", fontsize=7,
                color="white")  # fmt: skip
    ax.set_title(title, fontsize=9)
    ax.set_xticks([h + 0.47 for h in range(HEADS)], [f"h{h}" for h in range(HEADS)], fontsize=7)
    ax.set_yticks(
        [SEQ - 1 - t + 0.45 for t in range(SEQ)], [f"t{t}" for t in range(SEQ)], fontsize=7
    )


before = {
    (t, h): r
    for r, spans in enumerate(token_ranges(SEQ, CP))
    for a, b in spans
    for t in range(a, b)
    for h in range(HEADS)
}
after = {pair: r for r, pairs in enumerate(ulysses_placement(SEQ, CP, HEADS)) for pair in pairs}
grid(axes[1], before, "Ulysses before: tokens\nsharded (colour = rank)")
grid(axes[2], after, "after all-to-all:\nheads sharded")
for ax in axes:
    ax.set_xlim(-0.1 if ax is not axes[0] else -1.3, (CP if ax is axes[0] else HEADS) + 0.05)
    ax.set_ylim(-0.1, (CP if ax is axes[0] else SEQ) + 0.05)
    for side in ("top", "right", "left", "bottom"):
        ax.spines[side].set_visible(False)
axes[0].set_yticks([])
fig.tight_layout()
