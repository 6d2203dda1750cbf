"""Lab 08 figures: time of a ring all-reduce by message size on each tier, and each axis's link."""

from __future__ import annotations

import matplotlib.pyplot as plt
from _draw import PALETTE

from infralens.plan import ParallelPlan
from infralens.topology import Cluster, collective_seconds, hierarchical_all_reduce_seconds

cluster = Cluster.from_node_shape("8_nodes_x_8_gpus", "dgx-h100")
sizes = [2**k for k in range(10, 33, 2)]  # 1 KiB .. 4 GiB
fig, (left, right) = plt.subplots(1, 2, figsize=(7.2, 3.0))
cases = [
    ("8 GPUs, one node (NVLink)", lambda n: collective_seconds("all_reduce", n, range(8), cluster)),
    ("64 GPUs, flat ring", lambda n: collective_seconds("all_reduce", n, range(64), cluster)),
    ("64 GPUs, hierarchical", lambda n: hierarchical_all_reduce_seconds(n, cluster)),
]
for k, (label, seconds) in enumerate(cases):
    left.plot(
        sizes,
        [float(seconds(n)) * 1e3 for n in sizes],
        marker="o",
        markersize=2.5,
        color=PALETTE[k],
        label=label,
    )
left.set_xscale("log", base=2)
left.set_yscale("log")
left.set_xlabel("all-reduce size (bytes)")
left.set_ylabel("time (ms), alpha-beta model")
left.legend(fontsize=7, frameon=False)

plan = ParallelPlan(tp=8, pp=4, dp=2)
axes = ["tp", "pp", "dp"]
for k, axis in enumerate(axes):
    group = plan.groups(axis)[0]
    tier = cluster.tier_of(group)
    right.barh(k, tier.bandwidth_bytes_per_s / 1e9, color=PALETTE[k])
    right.text(
        tier.bandwidth_bytes_per_s / 1e9 + 5,
        k,
        f"{tier.name}: group {group[:4]}",
        va="center",
        fontsize=7,
    )
right.set_yticks(range(len(axes)), [a.upper() for a in axes])
right.set_xlim(0, 700)
right.set_xlabel("GB/s per GPU per direction")
right.set_title("tp=8, pp=4, dp=2 on 8x8 DGX H100", fontsize=9)
