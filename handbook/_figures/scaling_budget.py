"""Section 00 figure: the compute-optimal frontier, Table 3's rows and two Llama 3 models."""

from __future__ import annotations

import matplotlib.pyplot as plt
from _draw import PALETTE

from infralens.compute_budget import chinchilla_budget, compute_optimal

# Hoffmann et al. 2022, Table 3: parameters and the printed tokens.
TABLE_3 = [
    (400e6, 8.0e9),
    (1e9, 20.2e9),
    (10e9, 205.1e9),
    (67e9, 1.5e12),
    (175e9, 3.7e12),
    (280e9, 5.9e12),
    (520e9, 11.0e12),
    (1e12, 21.2e12),
    (10e12, 216.2e12),
]
budgets = [10 ** (18 + k / 4) for k in range(0, 41)]
frontier = [compute_optimal(c) for c in budgets]

fig, ax = plt.subplots(figsize=(6.2, 3.6))
ax.loglog(
    [n for n, _ in frontier],
    [d for _, d in frontier],
    color=PALETTE[0],
    label="compute-optimal (Approach 1, C = 6ND)",
)
ax.scatter(
    [n for n, _ in TABLE_3],
    [d for _, d in TABLE_3],
    color=PALETTE[1],
    zorder=3,
    s=18,
    label="Hoffmann et al., Table 3",
)
for name, n, d, dx, dy in (
    ("Llama 3 8B", 8e9, 15e12, 6, 4),
    ("Llama 3 405B", 405e9, 15.6e12, 8, 6),
):
    ax.scatter([n], [d], color=PALETTE[3], marker="^", zorder=3, s=28)
    ax.annotate(
        f"{name}: {d / chinchilla_budget(n)[1]:.0f}x",
        (n, d),
        fontsize=7,
        xytext=(dx, dy),
        textcoords="offset points",
    )
ax.set_xlabel("parameters N")
ax.set_ylabel("training tokens D")
ax.set_title("About 20 tokens per parameter; Llama 3 trains small models far past it", fontsize=9)
ax.legend(fontsize=7, loc="upper left")
fig.tight_layout()
