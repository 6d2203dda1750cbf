"""Lab 05 figure: one layer's TP communication, packed or split over two nodes, and its compute."""

from __future__ import annotations

import matplotlib.pyplot as plt
from _draw import PALETTE

from infralens.hardware import MAMF_BF16
from infralens.tensor_parallel_comm import layer_seconds
from infralens.topology import Cluster

# A GPT-3 175B layer (h = 12288, s = 2048, b = 1, 12·h² parameters) on DGX H100
# nodes, GEMMs at the H100 SXM's measured BF16 matmul ceiling; collectives priced by
# infralens.nccl.
cluster = Cluster.from_node_shape("8_nodes_x_8_gpus", "dgx-h100")
hidden = 12288
layer = dict(
    cluster=cluster,
    params_per_layer=12 * hidden**2,
    seq_len=2048,
    micro_batch_size=1,
    hidden=hidden,
    matmul_flops_per_s=MAMF_BF16["h100-sxm5-80gb"],
)
degrees = [2, 4, 8, 16, 32, 64]
compute, packed, split = [], [], []
for tp in degrees:
    together = layer_seconds(tp_group=range(tp), **layer)  # t/8 nodes, one node up to t = 8
    compute.append(float(together.compute) * 1e3)
    packed.append(float(together.communication) * 1e3)
    if tp <= 16:
        half = list(range(tp // 2)) + list(range(8, 8 + tp // 2))  # half on each of two nodes
        split.append(float(layer_seconds(tp_group=half, **layer).communication) * 1e3)
    else:
        split.append(float("nan"))  # more than 16 GPUs do not fit on two nodes

fig, ax = plt.subplots(figsize=(6.2, 3.2))
x = range(len(degrees))
width = 0.27
ax.bar(
    [i - width for i in x], compute, width, color=PALETTE[2], label="compute at the matmul ceiling"
)
ax.bar(list(x), packed, width, color=PALETTE[0], label="TP comm, group packed (t/8 nodes)",
       hatch="////", edgecolor="white", linewidth=0)  # fmt: skip
ax.bar([i + width for i in x], split, width, color=PALETTE[3], label="TP comm, split over 2 nodes",
       hatch="....", edgecolor="white", linewidth=0)  # fmt: skip
ax.set_xticks(list(x), [f"tp={t}" for t in degrees])
ax.set_yscale("log")
ax.set_ylabel("ms per layer (forward + backward)")
rate = MAMF_BF16["h100-sxm5-80gb"] / 1e12
ax.set_title(f"GPT-3 175B layer, b=1, s=2048, DGX H100, GEMMs at {rate:.0f} TFLOP/s", fontsize=10)
ax.legend(fontsize=8, frameon=False)
