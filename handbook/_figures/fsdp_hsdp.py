"""Section 04 figure: FSDP2 collective time per step and state per GPU against shard group size."""

from __future__ import annotations

import matplotlib.pyplot as plt
from _draw import PALETTE

from infralens.fsdp import Unit
from infralens.hsdp import sharding_step
from infralens.topology import Cluster

# Llama 3 8B's 32 decoder layers, one unit each (the section's running example)
layers = [Unit(f"layer{i}", ((218_112_000,),)) for i in range(32)]
shards = [8, 16, 32, 64, 128, 256, 512, 1024]

fig, (left, right) = plt.subplots(1, 2, figsize=(6.2, 3.2))
# A marker and a line style per cluster as well as a colour (legible in greyscale).
for color, marker, style, nodes in zip(
    PALETTE, "os^", ("-", "--", ":"), (8, 32, 128), strict=False
):
    cluster = Cluster.from_node_shape(f"{nodes}_nodes_x_8_gpus", "dgx-h100")
    xs = [s for s in shards if s <= cluster.world_size]
    steps = [sharding_step(cluster, layers, shard=s) for s in xs]
    left.plot(xs, [st.seconds * 1e3 for st in steps], style, marker=marker, markersize=3,
              color=color, label=f"{nodes * 8} GPUs")  # fmt: skip
    full = steps[-1].seconds * 1e3
    left.scatter([xs[-1]], [full], s=40, facecolors="none", edgecolors=color)
states = [sharding_step(Cluster(128, 8), layers, shard=s).state_bytes / 10**9 for s in shards]
right.plot(shards, states, marker="o", markersize=3, color="0.2")
for ax in (left, right):
    ax.set_xscale("log", base=2)
    ax.set_xlabel("shard group size (GPUs); circled = full sharding")
left.set_ylabel("collective time per step (ms)")
left.set_title("all-gather, reduce-scatter, all-reduce", fontsize=9)
left.legend(fontsize=8, frameon=False)
right.set_yscale("log")
right.set_ylabel("model state per GPU (GB, 10⁹ bytes)")
right.set_title("16 bytes per parameter / shard", fontsize=9)
right.set_xlabel("shard group size (GPUs)")
fig.tight_layout()
