"""Lab 11 figure: per-rank tokens and layer time for balanced and hot-expert routing (EP = 8)."""

from __future__ import annotations

import matplotlib.pyplot as plt
from _draw import PALETTE

from infralens.expert_dispatch import layer_seconds, rank_tokens
from infralens.experts import expert_capacity, route

EP, EXPERTS, COPIES = 8, 16, 1024
PER_RANK = EXPERTS // EP
balanced = [COPIES // EXPERTS] * EXPERTS
hot = [304] + [48] * (EXPERTS - 1)  # expert 0 wins 304 of 1024 copies
cap = expert_capacity(COPIES, EXPERTS, capacity_factor=1.25)

fig, (left, right) = plt.subplots(1, 2, figsize=(6.2, 3.2), width_ratios=[1.6, 1])
x = range(EP)
left.bar([i - 0.2 for i in x], rank_tokens(balanced, EP), 0.4, color=PALETTE[0], label="balanced")
left.bar([i + 0.2 for i in x], rank_tokens(hot, EP), 0.4, color=PALETTE[1], label="hot expert 0",
         hatch="////", edgecolor="white", linewidth=0)  # fmt: skip
left.axhline(PER_RANK * cap, color="0.3", linestyle="--", linewidth=1)
left.text(
    EP - 0.5,
    PER_RANK * cap + 6,
    f"capacity buffer: {PER_RANK} experts × {cap} slots",
    ha="right",
    fontsize=7,
    color="0.3",
)
left.set_xticks(list(x), [str(i) for i in x])
left.set_xlabel(f"EP rank (holds {PER_RANK} experts)")
left.set_ylabel("token copies processed (dropless)")
left.legend(fontsize=7, frameon=False)

base = layer_seconds(balanced, EP, 1, 1)
labels = ["balanced\ndropless", "hot\ndropless", f"hot, cap {cap}\n(padded)"]
times = [
    layer_seconds(balanced, EP, 1, 1) / base,
    layer_seconds(hot, EP, 1, 1) / base,
    layer_seconds(hot, EP, 1, 1, capacity=cap) / base,
]
right.bar(range(3), [float(t) for t in times], color=[PALETTE[0], PALETTE[1], PALETTE[2]])
for i, t in enumerate(times):
    right.text(i, float(t) + 0.05, f"{float(t):.2f}×", ha="center", fontsize=8)
right.set_xticks(range(3), labels, fontsize=7)
right.set_ylabel("layer time / balanced")
right.set_ylim(0, float(max(times)) * 1.15)
dropped = route([(e,) for e, n in enumerate(hot) for _ in range(n)], EXPERTS, cap).dropped
right.set_title(f"hot expert drops\n{dropped[0]} copies at cap", fontsize=9)
fig.tight_layout()
