"""Lab 18 figure: goodput against checkpoint interval at Llama 3's interruption rate."""

from __future__ import annotations

import matplotlib.pyplot as plt
from _draw import PALETTE

from infralens.goodput import (
    checkpoint_cost,
    daly_interval,
    goodput,
    observed_mtbf_seconds,
    young_interval,
)

MTBF = observed_mtbf_seconds(interruptions=466, seconds=54 * 86_400)  # Llama 3, section 3.3.4
RESTART = 600.0  # an assumed 10-minute restart; the paper gives none
# 4 GB per GPU (the paper's upper end) on 16,384 GPUs at 2 TB/s sustained, paused for the write
BLOCKING = checkpoint_cost(
    total_bytes=4 * 10**9 * 16_384, gpus=16_384, storage_bytes_per_s=2 * 10**12
).blocking_s

fig, ax = plt.subplots(figsize=(6.2, 3.4))
minutes = [m / 4 for m in range(4, 4 * 120)]
for delta, color, style, label in (
    (BLOCKING, PALETTE[0], "-", f"blocking save, δ = {BLOCKING:.0f} s"),
    (BLOCKING / 10, PALETTE[1], "--", f"δ = {BLOCKING / 10:.1f} s (a ten times shorter pause)"),
):
    g = [
        goodput(
            interval_seconds=m * 60,
            checkpoint_seconds=delta,
            restart_seconds=RESTART,
            mtbf_seconds=MTBF,
        )
        for m in minutes
    ]
    ax.plot(minutes, [100 * x for x in g], style, color=color, label=label)
    for rule, marker, size in ((young_interval, "o", 11), (daly_interval, "s", 5)):
        tau = rule(checkpoint_seconds=delta, mtbf_seconds=MTBF)
        best = goodput(
            interval_seconds=tau,
            checkpoint_seconds=delta,
            restart_seconds=RESTART,
            mtbf_seconds=MTBF,
        )
        ax.plot(tau / 60, 100 * best, marker, color=color, markerfacecolor="none", markersize=size)
ax.plot([], [], "o", color="0.3", markerfacecolor="none", markersize=11, label="Young √(2δM)")
ax.plot([], [], "s", color="0.3", markerfacecolor="none", markersize=5, label="Daly (returned)")
ax.set_xlabel("minutes of training between checkpoints")
ax.set_ylabel("goodput (%)")
ax.set_title(
    f"M = {MTBF / 3600:.2f} h (466 interruptions in 54 days), restart {RESTART / 60:.0f} min",
    fontsize=9,
)
ax.legend(fontsize=7, frameon=False, loc="lower right")
fig.tight_layout()
