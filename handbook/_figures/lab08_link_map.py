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
fig = plt.figure(figsize=(6.2, 5.0))
layout = fig.add_gridspec(2, 2, height_ratios=[1.7, 1])
busbw, left = fig.add_subplot(layout[0, 0]), fig.add_subplot(layout[0, 1])
right = fig.add_subplot(layout[1, :])
MARKERS = ("o", "s", "^", "v")  # with the colours: the lines stay apart in greyscale

curves = [
    ("all-reduce, 1 node", "all_reduce", shape[1], "-"),
    ("all-reduce, 2 nodes", "all_reduce", shape[2], "-"),
    ("all-reduce, 8 nodes", "all_reduce", shape[8], "-"),
    ("all-to-all, 2 nodes", "all_to_all", shape[2], ":"),
]
for k, (label, op, cluster, style) in enumerate(curves):
    values = [predict(op, s, cluster).bus_bandwidth for s in sizes]
    busbw.plot(sizes, values, style, color=PALETTE[k], marker=MARKERS[k], markersize=3, label=label)
busbw.set_xscale("log", base=2)
busbw.set_yscale("log")
busbw.set_xlabel("message size (bytes)")
busbw.set_ylabel("bus bandwidth (GB/s)")
busbw.set_title("bus bandwidth by message size", fontsize=9)
busbw.legend(fontsize=7, frameon=False, loc="lower right")

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
        marker=MARKERS[k],
        markersize=3,
        color=PALETTE[k + 4],
        label=label,
    )
left.set_xscale("log", base=2)
left.set_yscale("log")
left.set_xlabel("all-reduce size (bytes)")
left.set_title("all-reduce over 64 GPUs", fontsize=9)
left.set_ylabel("time (ms)")
left.legend(fontsize=7, frameon=False, loc="upper left")

plan = ParallelPlan(tp=8, pp=4, dp=2)
rows = [("tp", "all_reduce"), ("pp", "send_recv"), ("dp", "all_reduce")]
for k, (axis, op) in enumerate(rows):
    group = plan.groups(axis)[0]
    value = predict(op, 2**28, c8, group).bus_bandwidth
    right.barh(k, value, color=PALETTE[k])
    right.text(value + 10, k, f"{c8.tier_of(group).name}, {value:.0f}", va="center", fontsize=7)
right.set_yticks(range(len(rows)), [f"{a.upper()} {op}" for a, op in rows], fontsize=8)
right.set_xlim(0, 720)
right.set_xlabel("busbw at 256 MiB (GB/s)")
right.set_title("first group of each axis, tp=8, pp=4, dp=2", fontsize=9)
