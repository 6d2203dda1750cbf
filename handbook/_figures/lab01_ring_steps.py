"""Lab 01 figure: a ring all-reduce on four ranks, step by step (reduce-scatter, then all-gather).

The step-by-step ring is simulated here; its end states are checked against
``infralens.collectives`` (``reduce_scatter`` after the first pass, ``all_reduce``
after the second) and the chunks each rank sends against ``ring_bytes_sent``.
"""

from __future__ import annotations

from fractions import Fraction

import matplotlib.pyplot as plt
from _draw import PALETTE
from matplotlib.axes import Axes
from matplotlib.patches import Rectangle

from infralens.collectives import all_reduce, reduce_scatter, ring_bytes_sent

N = 4
# Rank r's gradient, one number per chunk: the digits say which ranks a partial sum holds.
LOCAL = [[(c + 1) * 10**r for c in range(N)] for r in range(N)]
SHADES = ["#EEF2F7", "#C6D5E8", "#8FADD3", PALETTE[0]]  # 1, 2, 3, 4 ranks summed in a cell

Cell = tuple[int, frozenset[int]]  # (value, ranks whose contribution it holds)


def ring_all_reduce() -> tuple[list[tuple[str, list[list[Cell]], set[tuple[int, int]]]], int]:
    """Every state of the ring, the cells received at each step, and chunks sent per rank."""
    state = [[(v, frozenset({r})) for v in row] for r, row in enumerate(LOCAL)]
    frames = [("start: local gradients", [list(row) for row in state], set())]
    sent = 0
    for step in range(N - 1):  # reduce-scatter: rank r sends chunk (r - step - 1) to rank r + 1
        out = [(r, (r - step - 1) % N, state[r][(r - step - 1) % N]) for r in range(N)]
        for r, c, (v, who) in out:
            dst = (r + 1) % N
            mine = state[dst][c]
            state[dst][c] = (mine[0] + v, mine[1] | who)
        sent += 1
        frames.append(
            (
                f"reduce-scatter {step + 1}",
                [list(row) for row in state],
                {((r + 1) % N, c) for r, c, _ in out},
            )
        )
    done = [[state[r][r][0]] for r in range(N)]
    assert done == reduce_scatter(LOCAL), done
    for step in range(N - 1):  # all-gather: rank r forwards the finished chunk (r - step)
        out = [(r, (r - step) % N, state[r][(r - step) % N]) for r in range(N)]
        for r, c, cell in out:
            state[(r + 1) % N][c] = cell
        sent += 1
        frames.append(
            (
                f"all-gather {step + 1}",
                [list(row) for row in state],
                {((r + 1) % N, c) for r, c, _ in out},
            )
        )
    assert [[v for v, _ in row] for row in state] == all_reduce(LOCAL)
    return frames, sent


def draw(
    ax: Axes, title: str, cells: list[list[Cell]], new: set[tuple[int, int]], left: bool
) -> None:
    for r, row in enumerate(cells):
        y = N - 1 - r
        if left:
            ax.text(-0.2, y + 0.45, f"rank {r}", ha="right", va="center", fontsize=7)
        for c, (value, who) in enumerate(row):
            edge, width = (PALETTE[1], 2.0) if (r, c) in new else ("0.45", 0.6)
            face = SHADES[len(who) - 1]
            ax.add_patch(Rectangle((c, y), 0.92, 0.86, facecolor=face, edgecolor=edge, lw=width))
            ink = "white" if len(who) == N else "black"
            ax.text(c + 0.46, y + 0.43, str(value), ha="center", va="center", fontsize=7, color=ink)
    ax.set_xlim(-1.3 if left else -0.1, N)
    ax.set_ylim(-0.1, N)
    ax.set_title(title, fontsize=9)
    ax.set_axis_off()


frames, chunks_sent = ring_all_reduce()
S = 4_000_000  # a 4 MB gradient: each chunk is S / N bytes
assert chunks_sent * Fraction(S, N) == ring_bytes_sent("all_reduce", S, N)

fig, axes = plt.subplots(3, 3, figsize=(6.2, 5.4), width_ratios=[1.3, 1, 1])
for i, (title, cells, new) in enumerate(frames):
    draw(axes[i // 3][i % 3], title, cells, new, left=i % 3 == 0)
note = axes[2][1]
note.set_axis_off()
axes[2][2].set_axis_off()
note.text(
    0.0,
    0.5,
    f"each step: every rank sends\none chunk (S/{N}) to rank + 1\n\n"
    f"{chunks_sent} steps × S/{N} = "
    f"{ring_bytes_sent('all_reduce', S, N) / S} S\n= 2(N−1)/N · S\n\n"
    "orange edge: received\nthis step; darker: more\nranks summed",
    fontsize=8,
    va="center",
)
