"""Lab 11 figure: the dispatch matrix of 16 EP ranks on two nodes, and what crosses between them."""

from __future__ import annotations

import matplotlib.pyplot as plt
from _draw import PALETTE
from matplotlib.patches import Rectangle

from infralens.collectives import ring_bytes_sent
from infralens.expert_dispatch import send_counts
from infralens.experts import top_k_experts
from infralens.nccl import predict
from infralens.topology import Cluster

EP, EXPERTS, TOKENS, K, NODE = 16, 16, 32, 2, 8
# balanced top-2 routing: token t of every rank picks experts t and t + 1 (mod 16)
scores = [
    [int(e in (t % EXPERTS, (t + 1) % EXPERTS)) for e in range(EXPERTS)] for t in range(TOKENS)
]
routes = [top_k_experts(scores, K)] * EP
counts = send_counts(routes, EXPERTS, EP)
buffer = TOKENS * K  # copies in one rank's dispatch buffer: S
crossing = sum(sum(row[NODE:]) for row in counts[:NODE]) // buffer  # 4: 8 ranks x S/2

fig, (left, right) = plt.subplots(1, 2, figsize=(6.2, 3.6), width_ratios=[1, 1.3])
for i in range(EP):
    for j in range(EP):
        crosses = (i < NODE) != (j < NODE)
        face = PALETTE[3] if crosses else PALETTE[0]
        left.add_patch(
            Rectangle((j, EP - 1 - i), 0.9, 0.9, facecolor=face, alpha=0.35 + counts[i][j] / 20)
        )
for qi, qj in ((0, 0), (0, 1), (1, 0), (1, 1)):
    total = sum(
        counts[i][j]
        for i in range(qi * NODE, (qi + 1) * NODE)
        for j in range(qj * NODE, (qj + 1) * NODE)
    )
    word = "crosses" if qi != qj else "stays in node"
    left.text(
        qj * NODE + NODE / 2 - 0.05,
        EP - (qi * NODE + NODE / 2) - 0.05,
        f"{word}\n{total} copies\n= {total // buffer} S",
        ha="center",
        va="center",
        fontsize=8,
        color="black",
        bbox={"facecolor": "white", "alpha": 0.85, "edgecolor": "none"},
    )
left.set_xlim(0, EP)
left.set_ylim(0, EP)
left.set_aspect("equal")
left.set_xticks([NODE / 2, NODE * 1.5], ["to node 0", "to node 1"], fontsize=8)
left.set_yticks([NODE * 1.5, NODE / 2], ["from node 0", "from node 1"], fontsize=8)
left.tick_params(length=0)
for spine in left.spines.values():
    spine.set_visible(False)
left.set_title(f"send_counts: {EP} ranks, top-{K},\nS = {buffer} copies per rank", fontsize=9)

two = Cluster.from_node_shape("2_nodes_x_8_gpus", "dgx-h100")
sizes = [2**k for k in range(20, 32, 2)]
lines = (
    (f"all-to-all (leaves a node: {crossing} S)", "all_to_all", None, PALETTE[3]),
    (
        f"all-reduce, ring ({ring_bytes_sent('all_reduce', 1, EP)} S)",
        "all_reduce",
        "ring",
        PALETTE[1],
    ),
    ("all-reduce, NCCL's choice (about S)", "all_reduce", None, PALETTE[0]),
)
for (label, op, algorithm, colour), marker in zip(lines, "s^o", strict=True):
    ms = [predict(op, n, two, algorithm=algorithm).seconds * 1e3 for n in sizes]
    right.plot(sizes, ms, marker=marker, ms=3, color=colour, label=label)
right.set_xscale("log", base=2)
right.set_yscale("log")
right.set_xlabel("bytes per GPU, S", fontsize=8)
right.set_ylabel("predicted milliseconds", fontsize=8)
right.set_title("two DGX H100 nodes (infralens.nccl)", fontsize=9)
right.legend(fontsize=7, frameon=False)
for side in ("top", "right"):
    right.spines[side].set_visible(False)
fig.tight_layout()
