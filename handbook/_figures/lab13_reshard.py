"""Lab 13 figure: rows of a 10-row tensor saved by 4 ranks and read back by 2."""

from __future__ import annotations

import matplotlib.pyplot as plt
from _draw import PALETTE
from matplotlib.patches import Rectangle

from infralens.checkpoint import reshard_reads, save_layout

layout = save_layout({"w": (10, 3)}, 4)
fig, ax = plt.subplots(figsize=(6.2, 2.4))
for c in layout["w"]:
    if c.length:
        ax.add_patch(Rectangle((c.offset, 1.2), c.length - 0.05, 0.7, color=PALETTE[c.rank]))
        ax.text(
            c.offset + c.length / 2,
            1.55,
            f"rank {c.rank}",
            ha="center",
            va="center",
            fontsize=7,
            color="white",
        )
for rank, reads in enumerate(reshard_reads(layout, 2)):
    start = min(r.saved_offset + r.row_in_chunk for r in reads)
    for r in reads:
        left = r.saved_offset + r.row_in_chunk
        owner = next(c.rank for c in layout["w"] if c.offset == r.saved_offset and c.length)
        ax.add_patch(Rectangle((left, 0.1), r.rows - 0.05, 0.7, color=PALETTE[owner], alpha=0.55))
        ax.annotate(
            "",
            xy=(left + r.rows / 2, 0.8),
            xytext=(left + r.rows / 2, 1.2),
            arrowprops={"arrowstyle": "->", "color": "0.3"},
        )
    ax.text(start + 0.1, 0.45, f"rank {rank}", va="center", fontsize=7)
ax.set_xlim(0, 10)
ax.set_ylim(0, 2)
ax.set_xticks(range(11))
ax.set_yticks([0.45, 1.55], ["load (2 ranks)", "save (4 ranks)"], fontsize=8)
ax.set_xlabel("row of the global tensor")
