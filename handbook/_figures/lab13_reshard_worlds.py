"""Lab 13 figure: one 10-row tensor saved by 4 ranks, read back on 4, 3, 2 and 1 ranks."""

from __future__ import annotations

import matplotlib.pyplot as plt
from _draw import PALETTE
from matplotlib.patches import Rectangle

from infralens.checkpoint import reshard_reads, save_layout

ROWS, SAVED = 10, 4
layout = save_layout({"w": (ROWS, 3)}, SAVED)
owner = {c.offset: c.rank for c in layout["w"] if c.length}
length = {c.offset: c.length for c in layout["w"]}
worlds = (4, 3, 2, 1)

fig, ax = plt.subplots(figsize=(6.2, 3.4))
top = len(worlds) + 1
for c in layout["w"]:
    if c.length:
        ax.add_patch(Rectangle((c.offset, top), c.length - 0.06, 0.7, color=PALETTE[c.rank]))
        label = f"chunk {c.rank}"
        ax.text(c.offset + c.length / 2, top + 0.35, label, ha="center", va="center", fontsize=8)
for y, m in zip(range(len(worlds), 0, -1), worlds, strict=True):
    for reads in reshard_reads(layout, m):
        lo = min(r.saved_offset + r.row_in_chunk for r in reads)
        for r in reads:
            x = r.saved_offset + r.row_in_chunk
            ax.add_patch(
                Rectangle((x, y), r.rows, 0.7, color=PALETTE[owner[r.saved_offset]], alpha=0.6)
            )
        kept = sum(r.rows for r in reads)
        loaded = sum(length[r.saved_offset] for r in reads)
        ax.add_patch(Rectangle((lo, y), kept, 0.7, fill=False, edgecolor="0.15", lw=1.4))
        label = f"{len(reads)} read{'s' * (len(reads) > 1)}\n{loaded} → {kept}"
        ax.text(lo + kept / 2, y + 0.35, label, ha="center", va="center", fontsize=7)
    ax.text(-0.2, y + 0.35, f"load on {m}", ha="right", va="center", fontsize=8)
ax.text(-0.2, top + 0.35, f"save on {SAVED}", ha="right", va="center", fontsize=8)
ax.set_xlim(-1.9, ROWS)
ax.set_ylim(0.8, top + 0.9)
ax.set_xticks(range(ROWS + 1))
ax.set_yticks([])
ax.set_xlabel(
    "row of the global tensor; a box is one loading rank's shard, coloured by the chunks it"
    "\nreads; inside: its reads, and rows loaded (whole chunks) → rows kept",
    fontsize=8,
)
for side in ("top", "right", "left"):
    ax.spines[side].set_visible(False)
fig.tight_layout()
