"""Lab 11 figure: top-2 routing of 16 tokens to 8 experts on 4 EP ranks, and the send counts."""

from __future__ import annotations

import random

import matplotlib.pyplot as plt
from _draw import PALETTE
from matplotlib.patches import Rectangle

from infralens.expert_dispatch import expert_rank, send_counts
from infralens.experts import top_k_experts

EP, EXPERTS, TOKENS, K = 4, 8, 4, 2
PER_RANK = EXPERTS // EP
rng = random.Random(11)
# router scores per source rank; expert 0 gets a bonus, so it is a little hot
scores = [
    [[rng.randint(0, 9) + 4 * (x == 0) for x in range(EXPERTS)] for _ in range(TOKENS)]
    for _ in range(EP)
]
routes = [top_k_experts(s, K) for s in scores]
counts = send_counts(routes, EXPERTS, EP)

fig, (left, right) = plt.subplots(1, 2, figsize=(6.2, 3.6), width_ratios=[1.25, 1])
rows = [(src, t, chosen) for src in range(EP) for t, chosen in enumerate(routes[src])]
for y, (_, _, chosen) in enumerate(reversed(rows)):
    for x in range(EXPERTS):
        face = PALETTE[expert_rank(x, EXPERTS, EP)] if x in chosen else "#F2F2F2"
        left.add_patch(Rectangle((x, y), 0.92, 0.88, facecolor=face, edgecolor="0.75"))
        if x in chosen:
            label = str(chosen.index(x) + 1)
            left.text(
                x + 0.46, y + 0.44, label, ha="center", va="center", fontsize=7, color="white"
            )
left.set_xlim(0, EXPERTS)
left.set_ylim(0, len(rows))
left.set_xticks([x + 0.46 for x in range(EXPERTS)], [f"e{x}" for x in range(EXPERTS)], fontsize=7)
left.set_yticks(
    [len(rows) - 1 - i + 0.44 for i in range(len(rows))],
    [f"r{s} t{t}" for s, t, _ in rows],
    fontsize=7,
)
left.tick_params(length=0)
for spine in left.spines.values():
    spine.set_visible(False)
for r in range(EP):
    left.text(
        PER_RANK * r + PER_RANK / 2 - 0.04,
        len(rows) + 0.3,
        f"EP rank {r}",
        ha="center",
        fontsize=7,
        color=PALETTE[r],
    )
left.set_title("token → top-2 experts (1 = first choice)", fontsize=9, pad=14)

im = right.imshow(counts, cmap="Blues", vmin=0)
for i in range(EP):
    for j in range(EP):
        dark = counts[i][j] > max(max(row) for row in counts) / 2
        right.text(
            j,
            i,
            str(counts[i][j]),
            ha="center",
            va="center",
            fontsize=9,
            color="white" if dark else "black",
        )
right.set_xticks(range(EP), [f"to {j}" for j in range(EP)], fontsize=7)
right.set_yticks(range(EP), [f"from {i}" for i in range(EP)], fontsize=7)
right.set_title("dispatch send counts\n(combine = transpose)", fontsize=9)
fig.colorbar(im, ax=right, shrink=0.7, label="token copies")
fig.tight_layout()
