"""Validation figure: vTrain's 3.6B sweep, measured and predicted step by micro-batch.

Each point is one row of ``tests/data/vtrain_sweep_3.6b.csv`` (64 A100s, global batch
512, one pipeline stage); each line is :func:`infralens.planner.step.estimate` for the
same plan and micro-batch (:func:`infralens.planner.step_validation.check_run`), one
colour per TP degree.
"""

from __future__ import annotations

import csv
from dataclasses import replace
from pathlib import Path

import matplotlib.pyplot as plt
from _draw import PALETTE

from infralens.planner.step_validation import check_run, load_runs

# The plot directive runs this script from handbook/_figures.
DATA = Path("../../tests/data")
base = next(r for r in load_runs(DATA / "training_runs.csv")
            if r.run_id == "vtrain-3.6b-tp1-pp1-dp64")  # fmt: skip
with open(DATA / "vtrain_sweep_3.6b.csv", newline="", encoding="utf-8") as f:
    sweep = [r for r in csv.DictReader(f) if r["pp"] == "1"]

fig, ax = plt.subplots(figsize=(6.2, 3.6))
for k, tp in enumerate((1, 2, 4, 8, 16)):
    rows = sorted((r for r in sweep if int(r["tp"]) == tp),
                  key=lambda r: int(r["micro_batch"]))  # fmt: skip
    b = [int(r["micro_batch"]) for r in rows]
    measured = [float(r["step_ms"]) / 1e3 for r in rows]
    predicted = [
        check_run(replace(base, tp=tp, dp=int(r["dp"]), micro_batch=mb,
                          published=float(r["step_ms"]))).seconds
        for r, mb in zip(rows, b, strict=True)
    ]  # fmt: skip
    ax.plot(b, measured, "o", color=PALETTE[k], markersize=4, label=f"TP {tp}")
    ax.plot(b, predicted, "-", color=PALETTE[k], linewidth=1)
ax.plot([], [], "o", color="0.35", markersize=4, label="measured")
ax.plot([], [], "-", color="0.35", linewidth=1, label="model")
ax.set_xscale("log", base=2)
ax.set_xticks([2, 4, 8, 16, 32, 64], ["2", "4", "8", "16", "32", "64"])
ax.set_ylim(0, None)
ax.set_xlabel("micro-batch (sequences); the shipped rows are at 2")
ax.set_ylabel("seconds per step")
ax.legend(fontsize=7, frameon=False, ncol=4, loc="upper center",
          bbox_to_anchor=(0.5, -0.22))  # fmt: skip
for side in ("top", "right"):
    ax.spines[side].set_visible(False)
fig.tight_layout()
