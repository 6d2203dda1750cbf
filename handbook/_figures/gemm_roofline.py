"""Section 00 figure: GEMMs on the H100 roofline, and wave quantisation as n grows."""

from __future__ import annotations

import matplotlib.pyplot as plt
from _draw import PALETTE

from infralens.gemm import arithmetic_intensity, quantisation, ridge_point

PEAK, HBM = 989_500 * 10**9, 3_350 * 10**9  # H100 SXM: dense BF16, HBM3
ridge = float(ridge_point(PEAK, HBM))

fig, (left, right) = plt.subplots(1, 2, figsize=(6.2, 3.0))
xs = sorted([2**i for i in range(0, 14)] + [ridge])
left.plot(xs, [min(PEAK, x * HBM) / 1e12 for x in xs], color="0.3", lw=1.2)
left.axvline(ridge, color="0.6", ls=":", lw=1)
left.text(ridge * 1.1, 40, f"ridge {ridge:.0f}", fontsize=8, color="0.4")
for i, (m, marker) in enumerate(zip((16, 128, 1024, 8192), "osD^", strict=True)):
    ai = float(arithmetic_intensity(m, 8192, 8192))  # a marker per m: greyscale-safe
    y = min(PEAK, ai * HBM) / 1e12
    left.plot(ai, y, marker, color=PALETTE[i], label=f"m = {m}")
left.set_xscale("log")
left.set_yscale("log")
left.set_xlabel("arithmetic intensity (FLOP/byte)")
left.set_ylabel("attainable TFLOP/s")
left.set_title("(m x 8192) · (8192 x 8192), bf16", fontsize=9)
left.legend(fontsize=7, frameon=False, loc="lower right")

ns = list(range(3584, 5120 + 1))
right.plot(ns, [float(quantisation(4096, n).efficiency) for n in ns], color=PALETTE[0], lw=1.2)
right.set_ylim(0.6, 1.02)
right.set_xlabel("n (m = 4096; 128 x 256 tiles,\n132 SMs)")
right.set_ylabel("useful share of tile slots")
right.set_title("tile and wave quantisation", fontsize=9)
fig.tight_layout()
