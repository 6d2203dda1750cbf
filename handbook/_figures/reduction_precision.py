"""Section 01 figure: relative error of a ring reduction, by data-parallel degree and mode."""

from __future__ import annotations

import matplotlib.pyplot as plt
from _draw import PALETTE

from infralens.reduction_precision import MODES, relative_error

degrees = [2**i for i in range(1, 13)]
labels = {
    "bf16": "bf16 wire, bf16 sum",
    "fp32-accumulate": "bf16 wire, fp32 sum",
    "fp32": "fp32 wire and sum",
}
fig, ax = plt.subplots(figsize=(6.4, 3.0))
styles = ["o-", "s--", "^:"]  # a marker and dash per mode: greyscale-safe
for i, mode in enumerate(MODES):
    errors = []
    for n in degrees:
        grads = [1 + (r % 7) / 64 for r in range(n)]  # same sign on every rank
        errors.append(max(abs(relative_error(grads, mode)), 1e-9))
    ax.plot(degrees, errors, styles[i], color=PALETTE[i], label=labels[mode], ms=4)
ax.set_xscale("log", base=2)
ax.set_yscale("log")
ax.set_ylim(5e-10, 2)
ax.set_xlabel("data-parallel ranks in the ring")
ax.set_ylabel("|relative error| of the sum")
ax.set_title("gradients in [1, 1.1) on every rank; 1e-9 marks an exact sum", fontsize=9)
ax.legend(fontsize=8, frameon=False)
fig.tight_layout()
