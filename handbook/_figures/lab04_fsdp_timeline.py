"""Lab 04 figure: FSDP2's per-unit events for one step, and the full units live after each."""

from __future__ import annotations

import matplotlib.pyplot as plt
from _draw import PALETTE

from infralens.fsdp import Unit, step_events

units = [Unit(f"layer{i}", ((1024, 1024),)) for i in range(4)]
rows = {"all_gather": 2, "forward": 1, "backward": 1, "reduce_scatter": 0}
names = ["reduce-scatter", "compute", "all-gather"]

fig, (top, bottom) = plt.subplots(
    2, 1, figsize=(6.2, 3.6), sharex=True, gridspec_kw={"height_ratios": [3, 1.4]}
)
live: set[int] = set()
counts = []
for x, e in enumerate(step_events(units)):
    if e.op == "all_gather":
        live.add(e.unit)
    elif e.op == "free":
        live.discard(e.unit)
    counts.append(len(live))
    if e.op in rows:
        hatch = "//" if e.op == "backward" else None
        top.barh(rows[e.op], 0.9, left=x, color=PALETTE[e.unit], hatch=hatch, edgecolor="0.3")
        top.text(x + 0.45, rows[e.op], str(e.unit), ha="center", va="center", fontsize=7)
bottom.step(range(len(counts)), counts, where="post", color="0.2")
bottom.set_ylabel("full units\nlive", fontsize=8)
bottom.set_ylim(0, max(counts) + 0.5)
bottom.set_xlabel("event (issue order); hatched = backward compute; number = unit")
top.set_yticks([0, 1, 2], names, fontsize=8)
top.set_title("fully_shard per layer, reshard_after_forward=True, backward prefetch", fontsize=10)
