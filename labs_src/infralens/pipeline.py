"""Pipeline parallelism in closed form: layers per stage and the bubble formulas.

A model of L layers is cut into p stages (for the interleaved schedule, into
p·v chunks, v per stage) and a batch into m microbatches. This module
answers which layers sit on which stage and what the published formulas
say the bubble costs: Narayanan et al.'s idle time over compute time, the
idle share of the step (GPipe's form), and ZB-H1's bubble (Qi et al. 2024).

The per-stage orders for GPipe, 1F1B, interleaved 1F1B and ZB-H1 live in
``infralens.pipeline_orders``; the simulator that times them to check these formulas
(timelines, measured bubbles, activations in flight) in ``infralens.pipeline_schedules``.

>>> from infralens.pipeline import assign_layers, bubble_fraction, idle_fraction
>>> bubble_fraction(stages=4, microbatches=8), idle_fraction(stages=4, microbatches=8)
(Fraction(3, 8), Fraction(3, 11))
>>> from infralens.pipeline import zb_h1_bubble_fraction
>>> bubble_fraction(stages=4, microbatches=8, chunks=2)  # interleaving, v = 2: halved
Fraction(3, 16)
>>> zb_h1_bubble_fraction(stages=4, microbatches=8)  # ZB-H1: a third of 1F1B's
Fraction(1, 8)
>>> assign_layers(4, stages=2)
((range(0, 2),), (range(2, 4),))
"""

from __future__ import annotations

from fractions import Fraction

from infralens._validate import MAX_RANKS, positive_int, positive_number, ranks_cap

__all__ = [
    "assign_layers",
    "bubble_fraction",
    "idle_fraction",
    "zb_h1_bubble_fraction",
]


def assign_layers(
    layers: int, *, stages: int, chunks: int = 1
) -> tuple[tuple[range, ...], ...]:
    """Layers held by each stage, one ``range`` per chunk: ``result[stage][chunk]``.

    Layers go in order to the p·v virtual stages; virtual stage k = c·p + s
    lives on stage s, so stage s holds chunks s, s + p, s + 2p, ... When p·v
    does not divide L, the first L mod (p·v) virtual stages take one layer
    more (sizes differ by at most one; the slowest stage sets the pace).

    >>> assign_layers(8, stages=2, chunks=2)
    ((range(0, 2), range(4, 6)), (range(2, 4), range(6, 8)))
    >>> [sum(map(len, s)) for s in assign_layers(10, stages=4)]  # uneven: 10 over 4
    [3, 3, 2, 2]
    >>> assign_layers(3, stages=2, chunks=2)
    Traceback (most recent call last):
    ...
    ValueError: layers must be >= stages * chunks = 4 (no empty chunk), got 3

    Raises ``ValueError`` for a size below 1, fewer layers than chunks, or
    more than 2**17 chunks in all (one range is listed per chunk).
    """
    n = positive_int("layers", layers)
    p = ranks_cap("stages", stages)
    v = ranks_cap("chunks", chunks)
    if p * v > MAX_RANKS:
        raise ValueError(
            f"stages * chunks must be <= 2**17 to list every chunk, got {p * v}"
        )
    if n < p * v:
        raise ValueError(
            f"layers must be >= stages * chunks = {p * v} (no empty chunk), got {n}"
        )
    base, extra = divmod(n, p * v)
    bounds = [0]
    for k in range(p * v):
        bounds.append(bounds[-1] + base + (k < extra))
    return tuple(
        tuple(range(bounds[c * p + s], bounds[c * p + s + 1]) for c in range(v))
        for s in range(p)
    )


def _times(
    forward: object, backward: object, weight: object
) -> tuple[Fraction, ...]:
    """Check the durations: forward, backward > 0, 0 < weight (default backward / 2) < backward."""
    out: list[Fraction] = []
    for name, value in (
        ("forward", forward),
        ("backward", backward),
        ("weight", weight),
    ):
        if name == "weight" and value is None:
            value = out[1] / 2
        if isinstance(
            value, float
        ):  # durations stay exact: pass an int or a Fraction
            raise TypeError(
                f"{name} must be an int or Fraction, not a float, got {value}"
            )
        out.append(positive_number(name, value))
    if out[2] >= out[1]:
        raise ValueError(f"weight must be < backward = {backward}, got {weight}")
    return tuple(out)


def bubble_fraction(*, stages: int, microbatches: int, chunks: int = 1) -> Fraction:
    """Narayanan et al.'s bubble: idle time over ideal compute time, (p - 1) / (v·m).

    This is not the idle share of the step: see ``idle_fraction``.

    >>> bubble_fraction(stages=4, microbatches=8)
    Fraction(3, 8)
    >>> bubble_fraction(stages=4, microbatches=8, chunks=2)  # interleaving: over v
    Fraction(3, 16)
    >>> bubble_fraction(stages=1, microbatches=1)  # one stage never waits
    Fraction(0, 1)

    Raises ``ValueError`` for a size below 1.
    """
    # [start:bubble-formula]
    p = positive_int("stages", stages)
    # bubble = (p - 1) / (v · m)
    return Fraction(
        p - 1,
        positive_int("chunks", chunks) * positive_int("microbatches", microbatches),
    )
    # [end:bubble-formula]


def idle_fraction(*, stages: int, microbatches: int, chunks: int = 1) -> Fraction:
    """Share of the step a stage is idle: (p - 1) / (v·m + p - 1).

    For GPipe (v = 1) that is (p - 1) / (m + p - 1); it equals b / (1 + b)
    for b = ``bubble_fraction``.

    >>> idle_fraction(stages=4, microbatches=8)
    Fraction(3, 11)
    >>> idle_fraction(stages=4, microbatches=1)  # one microbatch: idle 3/4 of the time
    Fraction(3, 4)

    Raises ``ValueError`` for a size below 1.
    """
    b = bubble_fraction(stages=stages, microbatches=microbatches, chunks=chunks)
    return b / (1 + b)


def zb_h1_bubble_fraction(
    *,
    stages: int,
    microbatches: int,
    forward: int | Fraction = 1,
    backward: int | Fraction = 2,
    weight: int | Fraction = 1,
) -> Fraction:
    """ZB-H1's bubble over compute time: (p - 1)(T_F + T_B - T_W) / (m (T_F + T_B + T_W)).

    Qi et al. 2024, Table 2, with T_B = backward - weight (input gradient)
    and T_W = weight; 1F1B's bubble there is (p - 1)(T_F + T_B + T_W).
    ``infralens.pipeline_schedules.simulate("zb-h1", ...)`` matches it when
    m >= p and T_W <= T_F, T_B (the paper designs ZB-H1 for T_F = T_B = T_W).

    >>> zb_h1_bubble_fraction(stages=4, microbatches=8)   # a third of 1F1B's
    Fraction(1, 8)
    >>> zb_h1_bubble_fraction(stages=4, microbatches=8, weight=2)
    Traceback (most recent call last):
    ...
    ValueError: weight must be < backward = 2, got 2

    Raises ``ValueError`` for a size below 1 or times out of range.
    """
    p = positive_int("stages", stages)
    m = positive_int("microbatches", microbatches)
    t_f, full, t_w = _times(forward, backward, weight)
    t_b = full - t_w
    return (p - 1) * (t_f + t_b - t_w) / (m * (t_f + t_b + t_w))
