"""Find the first non-finite or spiking layer and rank in per-rank, per-layer statistics.

A NaN spreads: once one layer's gradient is non-finite, every layer the
backward pass reaches after it is too, and the data-parallel all-reduce
copies it to every rank. So the evidence is in the *local* statistics a
rank logs before the reduction (per-layer gradient norms, or activation
maxima in the forward pass), and the answer is the first step, and in it the
first layer in execution order, where something went wrong:

- **non-finite**: a NaN or an infinity;
- **spike**: a value more than *factor* times the median of the same rank
  and layer over the previous *window* steps.

``stats[step][rank][layer]`` holds one number per layer per rank per step.
In the backward pass the last layer runs first, so ``order="backward"``
(the default, for gradient norms) looks from the last layer down;
``order="forward"`` (for activations) from the first layer up.

>>> ok = [[1.0, 1.0, 1.0]] * 2                     # 2 ranks, 3 layers
>>> bad = [[1.0, float("nan"), float("nan")], [1.0, 1.0, 1.0]]
>>> first_fault([ok, ok, bad])
Fault(step=2, kind='nonfinite', layer=2, ranks=(0,), value='nan')
>>> verdict(first_fault([ok, ok, bad]), world_size=2)
'one rank: check its GPU and its data shard'
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

from infralens._typecheck import check_fields, typed
from infralens._validate import (
    MAX_ITEMS,
    check_choice,
    positive_int,
    positive_number,
)

__all__ = ["ORDERS", "Fault", "first_fault", "verdict"]

ORDERS = ("backward", "forward")
"""Execution orders: gradients run from the last layer down, activations up."""


@dataclass(frozen=True)
class Fault:
    """The first fault: its ``step``, ``kind`` (``nonfinite`` or ``spike``), the
    ``layer`` it starts in, the ``ranks`` that show it there and the value seen
    on the first of them, as ``repr`` writes it (``'nan'``, ``'inf'``, ``'50.0'``)."""

    step: int
    kind: str
    layer: int
    ranks: tuple[int, ...]
    value: str

    def __post_init__(self) -> None:
        check_fields(self)


def _length(name: str, value: object) -> int:
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise TypeError(f"{name} must be a sequence, got {type(value).__name__}")
    try:
        n = len(value)
    except OverflowError:
        n = MAX_ITEMS + 1
    if n > MAX_ITEMS:
        raise ValueError(f"{name} must hold at most {MAX_ITEMS} items")
    return n


def _shape(stats: object) -> tuple[int, int]:
    steps = _length("stats", stats)
    stats = cast(Sequence[Sequence[Sequence[object]]], stats)
    if steps == 0 or _length("stats[0]", stats[0]) == 0:
        raise ValueError("stats must hold at least one step, rank and layer")
    ranks = len(stats[0])
    layers = _length("stats[0][0]", stats[0][0])
    if layers == 0:
        raise ValueError("stats must hold at least one step, rank and layer")
    for t, step in enumerate(stats):
        if _length(f"stats[{t}]", step) != ranks or any(
            _length(f"stats[{t}][{r}]", row) != layers for r, row in enumerate(step)
        ):
            raise ValueError(
                f"stats[{t}] must hold {ranks} ranks of {layers} layers, like stats[0]"
            )
        for r, row in enumerate(step):
            for x in row:
                # NaN and infinities are data here, not errors
                if isinstance(x, bool) or not isinstance(x, int | float):
                    raise TypeError(
                        f"stats[{t}][{r}] must hold numbers, got {type(x).__name__}"
                    )
    return ranks, layers


def first_fault(
    stats: Sequence[Sequence[Sequence[float]]],
    *,
    order: str = "backward",
    factor: float = 10.0,
    window: int = 8,
) -> Fault | None:
    """The first step, layer and ranks where a value is non-finite or spikes.

    Steps are read in order and, within a step, layers in execution *order*;
    the first layer that holds a non-finite value or a spike (value > factor
    * median of the same rank and layer over the previous *window* steps,
    once that many exist) is the origin, and ``ranks`` are the ranks that
    show it there. ``None`` if nothing is wrong.

    >>> calm = [[1.0, 2.0]] * 3                    # 3 ranks, 2 layers
    >>> steps = [calm] * 8 + [[[1.0, 2.0], [1.0, 50.0], [1.0, 2.0]]]
    >>> first_fault(steps)
    Fault(step=8, kind='spike', layer=1, ranks=(1,), value='50.0')
    >>> first_fault(steps, factor=30.0) is None
    True
    >>> first_fault([[[1.0, 2.0]], [[1.0]]])
    Traceback (most recent call last):
    ...
    ValueError: stats[1] must hold 1 ranks of 2 layers, like stats[0]

    Raises ``ValueError`` for empty or ragged *stats*, an unknown *order*,
    *factor* not > 1 or *window* < 1.
    """
    ranks, layers = _shape(stats)
    check_choice("order", order, ORDERS)
    if not positive_number("factor", factor) > 1:
        raise ValueError(f"factor must be > 1, got {factor}")
    w = positive_int("window", window)
    layer_order = (
        range(layers - 1, -1, -1) if order == "backward" else range(layers)
    )
    for t, step in enumerate(stats):
        for layer in layer_order:
            # [start:nonfinite]
            hit = [r for r in range(ranks) if not math.isfinite(step[r][layer])]
            if hit:
                value = repr(step[hit[0]][layer])
                return Fault(t, "nonfinite", layer, tuple(hit), value)
            # [end:nonfinite]
            if t < w:
                continue
            # [start:spike]
            hit = []
            for r in range(ranks):
                # the same rank and layer over the previous `window` steps
                past = statistics.median(s[r][layer] for s in stats[t - w : t])
                if past > 0 and step[r][layer] > factor * past:
                    hit.append(r)
            if hit:
                return Fault(
                    t, "spike", layer, tuple(hit), repr(step[hit[0]][layer])
                )
            # [end:spike]
    return None


@typed
def verdict(fault: Fault | None, *, world_size: int) -> str:
    """Where to look first, from how many of *world_size* ranks show the fault.

    One rank alone points at that rank: its GPU (silent data corruption,
    confirmed by replaying the step elsewhere) or the micro-batch it read.
    Every rank at once points at something they share: the batch's
    statistics against the parameter state, the learning rate, the model.

    >>> verdict(Fault(5, "spike", 3, (0, 1, 2, 3), "9.0"), world_size=4)
    'every rank: the shared state (data, learning rate, numerics)'
    >>> verdict(Fault(5, "spike", 3, (1, 2), "9.0"), world_size=4)
    'some ranks: check what they share (a node, a pipeline stage, a batch)'
    >>> verdict(None, world_size=4)
    'no fault'
    >>> verdict(Fault(5, "spike", 3, (4,), "9.0"), world_size=4)
    Traceback (most recent call last):
    ...
    ValueError: fault.ranks must lie in range(4), got (4,)

    Raises ``ValueError`` for *world_size* < 1 or a rank outside it.
    """
    n = positive_int("world_size", world_size)
    if fault is None:
        return "no fault"
    if any(not 0 <= r < n for r in fault.ranks):
        raise ValueError(f"fault.ranks must lie in range({n}), got {fault.ranks}")
    if len(fault.ranks) == 1 and n > 1:
        return "one rank: check its GPU and its data shard"
    if len(fault.ranks) == n:
        return "every rank: the shared state (data, learning rate, numerics)"
    return "some ranks: check what they share (a node, a pipeline stage, a batch)"
