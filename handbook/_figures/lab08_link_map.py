"""Lab 08 figures: bus bandwidth by size and placement, all-reduce time, and each axis's link."""

from __future__ import annotations

from dataclasses import replace

import matplotlib.pyplot as plt
from _draw import PALETTE

from infralens.nccl import predict
from infralens.plan import ParallelPlan
from infralens.topology import Cluster

shape = {n: Cluster.from_node_shape(f"{n}_nodes_x_8_gpus", "dgx-h100") for n in (1, 2, 8)}
sizes = [2**k for k in range(10, 33, 2)]  # 1 KiB .. 4 GiB
fig, (busbw, left, right) = plt.subplots(1, 3, figsize=(7.4, 2.9))

curves = [
    ("all-reduce, 1 node", "all_reduce", shape[1], "-"),
    ("all-reduce, 2 nodes", "all_reduce", shape[2], "-"),
    ("all-reduce, 8 nodes", "all_reduce", shape[8], "-"),
    ("all-to-all, 2 nodes", "all_to_all", shape[2], ":"),
]
for k, (label, op, cluster, style) in enumerate(curves):
    values = [predict(op, s, cluster).bus_bandwidth for s in sizes]
    busbw.plot(sizes, values, style, color=PALETTE[k], label=label)
busbw.set_xscale("log", base=2)
busbw.set_yscale("log")
busbw.set_xlabel("message size (bytes)")
busbw.set_ylabel("bus bandwidth (GB/s)")
busbw.legend(fontsize=5.5, frameon=False)

c8 = shape[8]
one_nic = Cluster(8, 8, replace(c8.system, nics_per_node=1))
cases = [
    ("NCCL's choice", lambda n: predict("all_reduce", n, c8)),
    ("NCCL_ALGO=Ring", lambda n: predict("all_reduce", n, c8, algorithm="ring")),
    ("one adapter per node", lambda n: predict("all_reduce", n, one_nic)),
]
for k, (label, call) in enumerate(cases):
    left.plot(
        sizes,
        [call(n).seconds * 1e3 for n in sizes],
        marker="o",
        markersize=2,
        color=PALETTE[k + 4],
        label=label,
    )
left.set_xscale("log", base=2)
left.set_yscale("log")
left.set_xlabel("all-reduce size, 64 GPUs (bytes)")
left.set_ylabel("time (ms)")
left.legend(fontsize=5.5, frameon=False)

plan = ParallelPlan(tp=8, pp=4, dp=2)
rows = [("tp", "all_reduce"), ("pp", "send_recv"), ("dp", "all_reduce")]
for k, (axis, op) in enumerate(rows):
    group = plan.groups(axis)[0]
    value = predict(op, 2**28, c8, group).bus_bandwidth
    right.barh(k, value, color=PALETTE[k])
    right.text(value + 10, k, f"{c8.tier_of(group).name}, {value:.0f}", va="center", fontsize=6)
right.set_yticks(range(len(rows)), [f"{a.upper()} {op}" for a, op in rows], fontsize=6)
right.set_xlim(0, 720)
right.set_xlabel("busbw at 256 MiB (GB/s)")
right.set_title("tp=8, pp=4, dp=2", fontsize=8)
