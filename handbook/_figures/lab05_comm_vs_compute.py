"""Lab 05 figure: one layer's TP communication in one node and across two, next to its compute."""

from __future__ import annotations

import matplotlib.pyplot as plt
from _draw import PALETTE

from infralens.tensor_parallel import layer_seconds
from infralens.topology import Cluster

# A GPT-3 175B layer (h = 12288, s = 2048, b = 1, 12·h² parameters) on DGX H100
# nodes, at the H100 SXM's dense BF16 peak. Nothing overlapped.
cluster = Cluster.from_node_shape("2_nodes_x_8_gpus", "dgx-h100")
hidden = 12288
layer = dict(
    cluster=cluster,
    params_per_layer=12 * hidden**2,
    seq_len=2048,
    micro_batch_size=1,
    hidden=hidden,
    peak_flops_per_s=989 * 10**12,
)
degrees = [2, 4, 8, 16]
compute, inside, across = [], [], []
for tp in degrees:
    half = tp // 2
    straddle = list(range(half)) + list(range(8, 8 + half))  # half the group on each node
    across.append(float(layer_seconds(tp_group=straddle, **layer).communication) * 1e3)
    if tp <= cluster.gpus_per_node:
        one_node = layer_seconds(tp_group=range(tp), **layer)
        inside.append(float(one_node.communication) * 1e3)
    else:
        one_node = layer_seconds(tp_group=straddle, **layer)
        inside.append(float("nan"))  # sixteen GPUs do not fit in one DGX H100 node
    compute.append(float(one_node.compute) * 1e3)

fig, ax = plt.subplots(figsize=(6.4, 3.2))
x = range(len(degrees))
width = 0.27
ax.bar([i - width for i in x], compute, width, color=PALETTE[2], label="compute at peak")
ax.bar(list(x), inside, width, color=PALETTE[0], label="TP comm, one node (NVLink)")
ax.bar(
    [i + width for i in x], across, width, color=PALETTE[3], label="TP comm, two nodes (network)"
)
ax.text(3, 0.15, "n/a", ha="center", fontsize=7, color="0.3")  # no 16-GPU node
ax.set_xticks(list(x), [f"tp={t}" for t in degrees])
ax.set_ylabel("ms per layer (forward + backward)")
ax.set_title("GPT-3 175B layer, b=1, s=2048, DGX H100, 989 TFLOP/s peak", fontsize=10)
ax.legend(fontsize=8, frameon=False)
