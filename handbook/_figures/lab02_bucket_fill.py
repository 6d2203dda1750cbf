"""Lab 02 figure: buckets fill in gradient-ready order and their all-reduces overlap backward.

An eight-layer model (assumed sizes and times): backward produces the gradients
last layer first; ``ddp_rebuilt_buckets`` groups them with DDP's default limits
(1 MiB, then 25 MiB) and ``overlap`` starts each bucket's all-reduce when its
last gradient is ready and the previous all-reduce is done.
"""

from __future__ import annotations

from fractions import Fraction

import matplotlib.pyplot as plt
from _draw import PALETTE

from infralens.buckets import MIB, assign_buckets, ddp_bucket_limits, ddp_rebuilt_buckets, overlap

SIZES_MIB = [12, 8, 8, 8, 8, 8, 8, 1]  # gradient of layer i, registration order
READY = list(range(len(SIZES_MIB)))[::-1]  # backward: last layer's gradient first
BACKWARD_S = [Fraction(2, 1000)] * len(READY)  # 2 ms of backward per layer
WORLD, BANDWIDTH, LATENCY = 8, 25 * 10**9, Fraction(1, 2000)

sizes = [s * MIB for s in SIZES_MIB]
buckets = ddp_rebuilt_buckets(sizes, READY)
in_ready_order = [sizes[i] for i in READY]
# overlap() buckets its layers (given in backward order) with the same rule: same buckets.
assert [
    [READY[p] for p in b] for b in assign_buckets(in_ready_order, ddp_bucket_limits())
] == buckets
result = overlap(
    BACKWARD_S,
    in_ready_order,
    ddp_bucket_limits(),
    world_size=WORLD,
    bandwidth_bytes_per_s=BANDWIDTH,
    latency_s=LATENCY,
)
assert [sum(SIZES_MIB[i] for i in b) for b in buckets] == [1, 32, 28]  # the caption's sizes
bucket_of = {layer: k for k, bucket in enumerate(buckets) for layer in bucket}
color = {layer: PALETTE[k] for layer, k in bucket_of.items()}

fig, ax = plt.subplots(figsize=(6.2, 2.9))
clock = Fraction(0)
for layer, t in zip(READY, BACKWARD_S, strict=True):
    left, width = float(clock) * 1000, float(t) * 1000
    ax.barh(1, width, left=left, height=0.7, color=color[layer], edgecolor="white")
    ax.text(
        left + width / 2,
        1,
        f"L{layer}\n{SIZES_MIB[layer]} MiB\nb{bucket_of[layer]}",
        ha="center",
        va="center",
        fontsize=7,
        color="white",
    )
    clock += t
for k, ((start, end), bucket) in enumerate(zip(result.allreduce_spans, buckets, strict=True)):
    left, width = float(start) * 1000, float(end - start) * 1000
    ax.barh(0, width, left=left, height=0.55, color=PALETTE[k], edgecolor="0.3")
    total = sum(SIZES_MIB[i] for i in bucket)
    ax.text(
        left + width / 2, -0.5, f"bucket {k}: {total} MiB", ha="center", va="center", fontsize=7
    )
end_ms = float(result.backward_end) * 1000
ax.axvline(end_ms, color="0.3", lw=0.8, ls="--")
ax.axvspan(end_ms, end_ms + float(result.exposed) * 1000, color=PALETTE[3], alpha=0.15, zorder=0)
ax.text(end_ms + 0.1, 1.45, f"exposed {float(result.exposed) * 1000:.2f} ms", fontsize=7)
ax.set_yticks([0, 1], ["all-reduce", "backward\n(gradient ready)"], fontsize=8)
ax.set_ylim(-0.85, 1.7)
ax.set_xlabel("time (ms); a bucket's colour and bN mark the gradients it holds")
ax.set_title(
    "buckets close at ≥ 1 MiB, then ≥ 25 MiB, in the order gradients become ready", fontsize=9
)
