"""Lab 08 figures: bus bandwidth by message size and tier, all-reduce time, and each axis's link."""

from __future__ import annotations

import matplotlib.pyplot as plt
from _draw import PALETTE

from infralens.collectives import bus_bandwidth_factor
from infralens.plan import ParallelPlan
from infralens.topology import Cluster, collective_seconds, hierarchical_all_reduce_seconds

cluster = Cluster.from_node_shape("8_nodes_x_8_gpus", "dgx-h100")
sizes = [2**k for k in range(10, 33, 2)]  # 1 KiB .. 4 GiB
fig, (busbw, left, right) = plt.subplots(1, 3, figsize=(7.4, 2.9))

# Bus bandwidth = algorithm bandwidth x NCCL-tests' factor. In the ring model
# it is the same curve for every collective on a tier: the factor cancels the
# collective's ring bytes, which is why busbw compares collectives with links.
groups = {"NVLink (8 GPUs, 1 node)": range(8), "network (16 GPUs, 2 nodes)": range(16)}
for k, (tier, group) in enumerate(groups.items()):
    for style, op in zip(("-", ":", "--"), ("all_reduce", "all_gather", "all_to_all"), strict=True):
        n = len(group)
        values = [
            float(bus_bandwidth_factor(op, n) * s / collective_seconds(op, s, group, cluster)) / 1e9
            for s in sizes
        ]
        busbw.plot(
            sizes, values, style, color=PALETTE[k], label=tier if op == "all_reduce" else None
        )
busbw.set_xscale("log", base=2)
busbw.set_yscale("log")
busbw.set_xlabel("message size (bytes)")
busbw.set_ylabel("bus bandwidth (GB/s)")
busbw.legend(fontsize=6, frameon=False, title="all collectives", title_fontsize=6)

cases = [
    ("8 GPUs, one node", lambda n: collective_seconds("all_reduce", n, range(8), cluster)),
    ("64 GPUs, flat ring", lambda n: collective_seconds("all_reduce", n, range(64), cluster)),
    ("64 GPUs, hierarchical", lambda n: hierarchical_all_reduce_seconds(n, cluster)),
]
for k, (label, seconds) in enumerate(cases):
    left.plot(
        sizes,
        [float(seconds(n)) * 1e3 for n in sizes],
        marker="o",
        markersize=2,
        color=PALETTE[k + 3],
        label=label,
    )
left.set_xscale("log", base=2)
left.set_yscale("log")
left.set_xlabel("all-reduce size (bytes)")
left.set_ylabel("time (ms)")
left.legend(fontsize=5, frameon=False)

plan = ParallelPlan(tp=8, pp=4, dp=2)
axes = ["tp", "pp", "dp"]
for k, axis in enumerate(axes):
    group = plan.groups(axis)[0]
    tier = cluster.tier_of(group)
    right.barh(k, tier.bandwidth_bytes_per_s / 1e9, color=PALETTE[k])
    right.text(tier.bandwidth_bytes_per_s / 1e9 + 10, k, tier.name, va="center", fontsize=7)
right.set_yticks(range(len(axes)), [a.upper() for a in axes])
right.set_xlim(0, 650)
right.set_xlabel("GB/s per GPU, one way")
right.set_title("tp=8, pp=4, dp=2", fontsize=8)
