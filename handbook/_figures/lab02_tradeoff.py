"""Lab 02 figure: exposed all-reduce time against the bucket cap, for three per-call latencies."""

from __future__ import annotations

from fractions import Fraction

import matplotlib.pyplot as plt
from _draw import PALETTE
from lab02_scenario import BACKWARD_S, BANDWIDTH, GRAD_BYTES, WORLD

from infralens.buckets import overlap

caps_mb = [5, 10, 20, 40, 80, 120, 160, 240]
fig, ax = plt.subplots(figsize=(6.2, 3.0))
for k, latency in enumerate((Fraction(0), Fraction(1, 2000), Fraction(2, 1000))):
    exposed = [
        float(
            overlap(
                BACKWARD_S,
                GRAD_BYTES,
                [mb * 10**6],
                world_size=WORLD,
                bandwidth_bytes_per_s=BANDWIDTH,
                latency_s=latency,
            ).exposed
        )
        * 1000
        for mb in caps_mb
    ]
    ax.plot(
        caps_mb,
        exposed,
        marker="os^"[k],
        markersize=3,
        color=PALETTE[k],
        label=f"{float(latency) * 1000:g} ms per call",
    )
ax.set_xscale("log")
ax.set_xticks(caps_mb, [str(c) for c in caps_mb])
ax.set_xlabel("bucket cap (MB)")
ax.set_ylabel("exposed all-reduce (ms)")
ax.legend(fontsize=8, frameon=False)
