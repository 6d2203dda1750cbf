"""Lab 18 figure: the last collective each rank started; the culprit is the rank at the minimum."""

from __future__ import annotations

import matplotlib.pyplot as plt
from _draw import PALETTE

from infralens.operations import hang_culprits

# 16 ranks at step 40,000: rank 11 never entered collective 1_203_457; ranks 0-7 have
# already queued the one after it
LAST = {r: 1_203_457 for r in range(16)}
LAST.update({r: 1_203_458 for r in range(8)})
LAST[11] = 1_203_456
culprits = hang_culprits(LAST)
base = min(LAST.values()) - 1

fig, ax = plt.subplots(figsize=(6.2, 2.8))
ranks = sorted(LAST)
colors = [PALETTE[3] if r in culprits else PALETTE[0] for r in ranks]
ax.bar(ranks, [LAST[r] - base for r in ranks], color=colors)
ax.set_xticks(ranks, [str(r) for r in ranks], fontsize=7)
ax.set_yticks([1, 2, 3], [str(base + k) for k in (1, 2, 3)], fontsize=7)
ax.set_xlabel("rank")
ax.set_ylabel("last collective started")
ax.set_title(
    f"hang_culprits → {culprits}: every other rank waits in {min(LAST.values()) + 1} or later",
    fontsize=9,
)
fig.tight_layout()
