"""Validation figure: the step model's held-out error on every published training run.

Each source's runs are predicted with the sustained shares fitted on the other sources
(:func:`infralens.planner.calibration.refit`), the figure the accuracy goal is judged on.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
from _draw import PALETTE

from infralens.planner.calibration import refit
from infralens.planner.step_accuracy import held_out_errors
from infralens.planner.step_validation import check_run, load_runs

# The plot directive runs this script from handbook/_figures.
checks = [check_run(r) for r in load_runs(Path("../../tests/data/training_runs.csv"))]
held = held_out_errors(checks, refit)
families = list(dict.fromkeys(c.row.family for c in checks))  # in the data's order
fig, ax = plt.subplots(figsize=(6.2, 8.4))
for y, c in enumerate(reversed(checks)):
    k = families.index(c.row.family)
    e = 100 * held[c.row.run_id]
    ax.barh(y, e, color=PALETTE[k], height=0.7)
    ax.text(e + (1 if e >= 0 else -1), y, f"{e:+.0f} %", va="center", fontsize=7,
            ha="left" if e >= 0 else "right")  # fmt: skip
ax.set_yticks(range(len(checks)), [c.row.run_id for c in reversed(checks)], fontsize=7)
for bound, style in ((15, ":"), (30, "--")):
    for sign in (-1, 1):
        ax.axvline(sign * bound, color="k", linestyle=style, linewidth=0.6)
ax.axvline(0, color="k", linewidth=0.6)
ax.set_xlim(-45, 100)
ax.set_xlabel("held-out error (%): predicted / published tokens/s − 1")
fig.tight_layout()
