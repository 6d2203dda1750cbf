"""Lab 06 figure: per-stage timelines of GPipe, 1F1B, interleaved 1F1B and ZB-H1, simulated."""

from __future__ import annotations

import matplotlib.pyplot as plt
from _draw import PALETTE, fmt
from matplotlib.patches import Rectangle

from infralens.pipeline_schedules import measured_bubble, simulate

P, M = 4, 8
runs = [
    ("GPipe", simulate("gpipe", stages=P, microbatches=M)),
    ("1F1B (PipeDream-Flush)", simulate("1f1b", stages=P, microbatches=M)),
    ("interleaved 1F1B, v = 2", simulate("interleaved", stages=P, microbatches=M, chunks=2)),
    ("ZB-H1, backward split into B = 1 and W = 1", simulate("zb-h1", stages=P, microbatches=M)),
]
end = max(t.makespan for _, t in runs)

fig, axes = plt.subplots(len(runs), 1, figsize=(6.2, 7.2), sharex=True)
for ax, (title, t) in zip(axes, runs, strict=True):
    for s, row in enumerate(t.rows):
        y = P - 1 - s
        ax.add_patch(Rectangle((0, y + 0.08), t.makespan, 0.84, facecolor="0.93", lw=0))
        for slot in row:
            width = float(slot.end - slot.start)
            color = PALETTE[1] if slot.kind == "W" else PALETTE[2] if slot.chunk else PALETTE[0]
            # Apart in greyscale too: a second chunk is pale with a reversed hatch,
            # W cells carry dark digits.
            face = "white" if slot.kind == "B" else color
            if slot.chunk and slot.kind != "B":
                face = "#B7DAB2"
            ax.add_patch(
                Rectangle(
                    (float(slot.start), y + 0.08),
                    width,
                    0.84,
                    facecolor=face,
                    edgecolor=color,
                    hatch=("\\\\\\" if slot.chunk else "///") if slot.kind == "B" else None,
                    lw=0.8,
                )
            )
            ax.text(
                float(slot.start) + width / 2,
                y + 0.5,
                str(slot.microbatch),
                ha="center",
                va="center",
                fontsize=7,
                color="white" if slot.kind == "F" and not slot.chunk else "black",
            )
    ax.set_yticks([P - 1 - s + 0.5 for s in range(P)], [f"stage {s}" for s in range(P)], fontsize=8)
    ax.set_ylim(0, P)
    ax.set_xlim(0, float(end))
    bubble = fmt(measured_bubble(t))
    ax.set_title(f"{title}: step {fmt(t.makespan)} units, bubble / compute = {bubble}", fontsize=9)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
axes[-1].set_xlabel(
    "time (forward of one stage = 1, backward = 2); solid = forward, hatched = backward, "
    "grey = idle;\nnumber = microbatch; pale green or \\\\\\ = second chunk; "
    "orange = weight gradient (W)",
    fontsize=8,
)
fig.tight_layout()
