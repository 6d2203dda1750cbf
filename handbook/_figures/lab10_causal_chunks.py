"""Lab 10 figure: causal-mask blocks each rank computes, contiguous versus load-balanced."""

from __future__ import annotations

import matplotlib.pyplot as plt
from _draw import PALETTE
from matplotlib.patches import Rectangle

from infralens.context_parallel import LAYOUTS, causal_work, token_ranges

CP = 4
BLOCKS = 2 * CP  # one "token" per block, so causal_work counts block pairs

fig, axes = plt.subplots(1, 2, figsize=(6.2, 3.9))
for ax, layout in zip(axes, LAYOUTS, strict=True):
    owner = {
        q: r
        for r, spans in enumerate(token_ranges(BLOCKS, CP, layout))
        for a, b in spans
        for q in range(a, b)
    }
    for q in range(BLOCKS):
        for k in range(BLOCKS):
            y = BLOCKS - 1 - q
            if k <= q:
                ax.add_patch(Rectangle((k, y), 0.95, 0.95, color=PALETTE[owner[q]]))
            else:
                ax.add_patch(Rectangle((k, y), 0.95, 0.95, facecolor="white", edgecolor="0.85"))
        ax.text(-0.2, BLOCKS - 1 - q + 0.47, f"r{owner[q]}", ha="right", va="center", fontsize=8)
    work = causal_work(BLOCKS, CP, layout)
    ax.set_title(f"{layout.replace('_', '-')}:\nblock pairs per rank {list(work)}", fontsize=9)
    ax.set_xlim(-1.0, BLOCKS)
    ax.set_ylim(-0.6, BLOCKS)
    ax.set_aspect("equal")
    ax.set_xticks([k + 0.47 for k in range(BLOCKS)], [str(k) for k in range(BLOCKS)], fontsize=7)
    ax.set_yticks([])
    ax.set_xlabel("key block", fontsize=8)
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
axes[0].set_ylabel("query block (owning rank)", fontsize=8)
fig.tight_layout()
