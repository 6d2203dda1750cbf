"""Lab 06 figure: bubble fraction against the number of microbatches, formula and simulation."""

from __future__ import annotations

import matplotlib.pyplot as plt
from _draw import PALETTE

from infralens.pipeline import bubble_fraction, idle_fraction
from infralens.pipeline_schedules import measured_bubble, simulate

P = 8
counts = [8, 16, 24, 32, 48, 64]
fig, ax = plt.subplots(figsize=(6.2, 3.4))
for i, v in enumerate((1, 2, 4)):
    name = "1f1b" if v == 1 else "interleaved"
    formula = [float(bubble_fraction(stages=P, microbatches=m, chunks=v)) for m in counts]
    measured = [
        float(measured_bubble(simulate(name, stages=P, microbatches=m, chunks=v))) for m in counts
    ]
    ax.plot(counts, formula, ("-", "-.", ":")[i], color=PALETTE[i], label=f"(p − 1)/(v·m), v = {v}")
    ax.plot(counts, measured, "o", color=PALETTE[i], markersize=4)
share = [float(idle_fraction(stages=P, microbatches=m)) for m in counts]
ax.plot(counts, share, "--", color="0.4", label="idle share of the step, v = 1")
ax.set_xlabel("microbatches m (p = 8 stages)")
ax.set_ylabel("fraction")
ax.set_ylim(0, None)
ax.set_title("Lines: formulas; dots: idle / compute measured in the simulation", fontsize=10)
ax.legend(fontsize=8, frameon=False)
for side in ("top", "right"):
    ax.spines[side].set_visible(False)
fig.tight_layout()
