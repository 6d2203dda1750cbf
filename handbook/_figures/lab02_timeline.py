"""Lab 02 figure: backward compute and bucketed all-reduces on one timeline, exposed part marked."""

from __future__ import annotations

from fractions import Fraction

import matplotlib.pyplot as plt
from _draw import PALETTE
from lab02_scenario import BACKWARD_S, BANDWIDTH, GRAD_BYTES, WORLD

from infralens.buckets import overlap

fig, axes = plt.subplots(2, 1, figsize=(6.2, 3.4), sharex=True)
for ax, cap in zip(axes, (40 * 10**6, 240 * 10**6), strict=True):
    result = overlap(
        BACKWARD_S,
        GRAD_BYTES,
        [cap],
        world_size=WORLD,
        bandwidth_bytes_per_s=BANDWIDTH,
        latency_s=Fraction(1, 2000),
    )
    clock = Fraction(0)
    for i, t in enumerate(BACKWARD_S):
        ax.barh(1, float(t) * 1000, left=float(clock) * 1000, color=PALETTE[i % 2], height=0.6)
        clock += t
    for k, (start, end) in enumerate(result.allreduce_spans):
        ax.barh(
            0,
            float(end - start) * 1000,
            left=float(start) * 1000,
            height=0.6,
            color=PALETTE[2 + k % 2],
            edgecolor="0.3",
        )
    end = float(result.backward_end) * 1000
    ax.axvspan(end, end + float(result.exposed) * 1000, color=PALETTE[3], alpha=0.25)
    ax.set_yticks([0, 1], ["all-reduce", "backward"], fontsize=8)
    ax.set_title(
        f"bucket cap {cap // 10**6} MB: exposed {float(result.exposed) * 1000:.1f} ms",
        fontsize=9,
    )
axes[1].set_xlabel("time (ms); shaded = communication after backward ends")
