"""Lab 01 figure: four DDP ranks' gradients before and after the all-reduce and average."""

from __future__ import annotations

from fractions import Fraction

import matplotlib.pyplot as plt
from _draw import PALETTE, draw_buffers

from infralens.collectives import all_reduce

# Local gradients of a 3-parameter model on 4 ranks (each rank saw different samples).
local = [[4, -2, 1], [0, 2, 3], [2, -6, 1], [6, 2, -1]]
summed = all_reduce(local)
averaged = [[Fraction(v, len(local)) for v in row] for row in summed]

fig, (left, right) = plt.subplots(1, 2, figsize=(6.2, 2.6))
draw_buffers(
    left,
    local,
    "before: local gradients",
    colors=[[PALETTE[r]] * len(row) for r, row in enumerate(local)],
)
draw_buffers(right, averaged, "after all-reduce (sum) ÷ 4")
fig.text(
    0.5,
    0.02,
    "every rank now applies the same update, so the replicas stay equal",
    ha="center",
    fontsize=8,
    color="0.3",
)
