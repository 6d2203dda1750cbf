"""Validation figure: the step model's error on every published training run."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
from _draw import PALETTE

from infralens.planner.step_validation import check_run, load_runs

# The plot directive runs this script from handbook/_figures.
checks = [check_run(r) for r in load_runs(Path("../../tests/data/training_runs.csv"))]
families = ["narayanan", "llama3", "torchtitan", "vtrain", "trainy", "megatron"]
fig, ax = plt.subplots(figsize=(6.2, 8.4))
for y, c in enumerate(reversed(checks)):
    k = families.index(c.row.family)
    ax.barh(y, 100 * c.error, color=PALETTE[k], height=0.7)
    ax.text(100 * c.error + 1, y, f"{100 * c.error:+.0f} %", va="center", fontsize=7)
ax.set_yticks(range(len(checks)), [c.row.run_id for c in reversed(checks)], fontsize=7)
for bound, style in ((15, ":"), (30, "--")):
    for sign in (-1, 1):
        ax.axvline(sign * bound, color="k", linestyle=style, linewidth=0.6)
ax.axvline(0, color="k", linewidth=0.6)
ax.set_xlim(-35, 125)
ax.set_xlabel("error (%), predicted / published tokens per second − 1")
fig.tight_layout()
