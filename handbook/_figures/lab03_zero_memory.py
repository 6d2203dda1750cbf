"""Lab 03 figure: model-state bytes per GPU for each ZeRO stage against the data-parallel degree."""

from __future__ import annotations

import matplotlib.pyplot as plt
from _draw import PALETTE

from infralens.zero import STAGES, model_state_bytes

PSI = 7_500_000_000  # the ZeRO paper's worked example
degrees = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
labels = [
    "stage 0 (plain DP)",
    "stage 1 (optimizer)",
    "stage 2 (+ gradients)",
    "stage 3 (+ parameters)",
]

fig, ax = plt.subplots(figsize=(6.2, 3.4))
for stage, label in zip(STAGES, labels, strict=True):
    gb = [model_state_bytes(PSI, dp_size=d, stage=stage) / 10**9 for d in degrees]
    ax.plot(degrees, gb, marker="osv^"[stage], markersize=3, color=PALETTE[stage], label=label)
ax.set_xscale("log", base=2)
ax.set_yscale("log")
ax.set_xlabel("data-parallel degree N_d")
ax.set_ylabel("model states per GPU (GB, 10⁹ bytes)")
ax.set_title("7.5B parameters, mixed-precision Adam (K = 12)", fontsize=10)
ax.legend(fontsize=8, frameon=False)
