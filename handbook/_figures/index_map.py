"""Landing-page map: each axis or topic group, its handbook sections and its labs.

Drawn from infralens.labs, the lab list the landing page and the tests use.
"""

from __future__ import annotations

import textwrap

import matplotlib.pyplot as plt
from _draw import PALETTE
from matplotlib.patches import FancyBboxPatch

from infralens.labs import AXES, labs_on_axis

columns = [(axis, labs_on_axis(axis)) for axis in AXES]
rows = max(len(labs) for _, labs in columns)
fig, ax = plt.subplots(figsize=(6.2, 1.0 + 0.78 * rows))
for x, (axis, labs) in enumerate(columns):
    color = PALETTE[x % len(PALETTE)]
    ax.text(x + 0.5, rows + 0.3, axis, ha="center", va="center", fontsize=7, weight="bold")
    for i, item in enumerate(labs):
        y = rows - 1 - i
        ax.add_patch(
            FancyBboxPatch(
                (x + 0.05, y + 0.06),
                0.9,
                0.86,
                boxstyle="round,pad=0,rounding_size=0.08",
                facecolor=color,
                edgecolor=color,
                alpha=0.3,
            )
        )
        topic = "\n".join(textwrap.wrap(item.topic, 10, break_long_words=False))
        label = f"{item.number:02d}\n{topic}"
        ax.text(x + 0.5, y + 0.49, label, ha="center", va="center", fontsize=7)
ax.text(
    0,
    -0.25,
    "NN: handbook section NN and Lab NN. Section 00 (model arithmetic) underlies every column.",
    fontsize=7,
    va="top",
)
parallel = AXES.index("EP") + 1
for x0, x1, text in ((0, parallel, "parallelism axes"), (parallel, len(AXES), "topics")):
    ax.plot([x0 + 0.08, x1 - 0.08], [rows + 0.62] * 2, color="0.4", lw=0.8)
    ax.text((x0 + x1) / 2, rows + 0.72, text, ha="center", va="bottom", fontsize=7, color="0.3")
ax.set_xlim(0, len(columns))
ax.set_ylim(-0.6, rows + 1.0)
ax.axis("off")
