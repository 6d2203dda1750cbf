"""FSDP: the per-unit life cycle of sharded parameters, and the memory it leaves live.

FSDP2's ``fully_shard`` shards every parameter of a wrapped module (a *unit*)
on dim 0 across the data-parallel ranks. Before a unit computes, one
all-gather rebuilds its full parameters; after backward, one reduce-scatter
leaves each rank the gradient shard it owns. This module lists those events
in the order FSDP2 (PyTorch 2.13) issues them and counts the full-size
parameters alive at each moment; :mod:`infralens.fsdp_memory` turns those
moments into the bytes a rank holds.

>>> shapes = ((6, 4), (8, 6), (10, 8))
>>> units = [Unit(f"layer{i}", (shape,)) for i, shape in enumerate(shapes)]
>>> short = {"all_gather": "AG", "reduce_scatter": "RS"}
>>> " ".join(f"{short[e.op]}{e.unit}" for e in step_events(units) if e.op in short)
'AG0 AG1 AG2 AG2 AG1 RS2 AG0 RS1 RS0'
>>> peak_live_units(units), peak_live_units(units, reshard_after_forward=False)
(2, 3)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from infralens._typecheck import check_fields, typed
from infralens._validate import describe, nonnegative_int, positive_int
from infralens.sharding import padded_shard_size

__all__ = [
    "Event",
    "Unit",
    "peak_live_units",
    "step_events",
    "unit_padded_numel",
    "unit_shard_numel",
]


@dataclass(frozen=True)
class Unit:
    """One module wrapped with ``fully_shard``: a name and its parameters' shapes."""

    name: str
    param_shapes: tuple[tuple[int, ...], ...]

    def __post_init__(self) -> None:
        check_fields(self)
        unit = describe(self.name)
        if not self.param_shapes:
            raise ValueError(
                f"param_shapes of unit {unit} must hold at least one shape"
            )
        for shape in self.param_shapes:
            if not shape:
                raise ValueError(
                    f"param_shapes of unit {unit} must not hold a 0-d shape"
                )
            for d in shape:
                nonnegative_int(f"param_shapes of unit {unit}", d)

    @property
    def numel(self) -> int:
        """Elements of the unit's unsharded parameters.

        >>> Unit("lin", ((5, 3), (5,))).numel
        20
        """
        return sum(_prod(s) for s in self.param_shapes)


def _prod(shape: Sequence[int]) -> int:
    out = 1
    for d in shape:
        out *= d
    return out


@typed
def unit_shard_numel(unit: Unit, world_size: int) -> int:
    """Elements each rank stores for *unit*: every parameter's padded dim-0 shard.

    ``sum(ceil(dim0 / w) * prod(rest))`` over the unit's parameters: FSDP2
    pads each parameter separately (it shards per parameter on dim 0), not
    one flat buffer.

    >>> unit_shard_numel(Unit("lin", ((5, 3), (5,))), 4)   # ceil(5/4) = 2 rows of each
    8
    >>> unit_shard_numel(Unit("lin", ((5, 3),)), 1)
    15

    Raises ``ValueError`` if *world_size* < 1.
    """
    # [start:shard-per-parameter]
    w = positive_int("world_size", world_size)
    # shard = Σ over parameters of ceil(dim0 / w) · prod(other dims)
    return sum(padded_shard_size(s[0], w) * _prod(s[1:]) for s in unit.param_shapes)
    # [end:shard-per-parameter]


@typed
def unit_padded_numel(unit: Unit, world_size: int) -> int:
    """Elements one all-gather of *unit* produces: ``world_size * unit_shard_numel``.

    >>> unit_padded_numel(Unit("lin", ((5, 3), (5,))), 4)   # 20 real, 12 of padding
    32

    Raises ``ValueError`` if *world_size* < 1.
    """
    return world_size * unit_shard_numel(unit, world_size)


@dataclass(frozen=True)
class Event:
    """One step of the life cycle: ``op`` applied to unit index ``unit``.

    ``op`` is one of ``"all_gather"`` (full parameters become live),
    ``"forward"``, ``"backward"``, ``"free"`` (full parameters released) and
    ``"reduce_scatter"`` (gradients summed and sharded).
    """

    op: str
    unit: int

    def __post_init__(self) -> None:
        check_fields(self)


@typed
def step_events(
    units: Sequence[Unit],
    *,
    reshard_after_forward: bool = True,
    backward_prefetch: bool = True,
) -> list[Event]:
    """The events of one forward and backward pass, in FSDP2's issue order.

    Forward: for each unit, all-gather, compute, and (if
    *reshard_after_forward*) free. Backward, last unit first: all-gather it
    if it was freed; with *backward_prefetch*, also all-gather the next unit
    to run (the previous one) before computing, so that all-gather overlaps
    this unit's backward; compute; free; reduce-scatter its gradients.

    >>> two = [Unit("a", ((2,),)), Unit("b", ((2,),))]
    >>> for e in step_events(two, reshard_after_forward=False):
    ...     print(e.op, e.unit)
    all_gather 0
    forward 0
    all_gather 1
    forward 1
    backward 1
    free 1
    reduce_scatter 1
    backward 0
    free 0
    reduce_scatter 0
    >>> step_events([])
    []
    """
    # [start:live-flags]
    n = len(units)
    live = [False] * n
    events: list[Event] = []

    def gather(i: int) -> None:
        if not live[i]:
            events.append(Event("all_gather", i))
            live[i] = True

    def free(i: int) -> None:
        events.append(Event("free", i))
        live[i] = False

    # [end:live-flags]

    # [start:forward-pass]
    for i in range(n):  # forward, first unit first
        gather(i)
        events.append(Event("forward", i))
        if reshard_after_forward:
            free(i)
    # [end:forward-pass]
    # [start:backward-pass]
    for i in reversed(range(n)):  # backward, last unit first
        gather(i)  # a no-op if the unit stayed gathered
        if backward_prefetch and i > 0:
            gather(i - 1)  # issued now, so it overlaps unit i's backward
        events.append(Event("backward", i))
        free(i)
        events.append(Event("reduce_scatter", i))
    return events
    # [end:backward-pass]


def _live_sizes(
    units: Sequence[Unit], events: Sequence[Event], weight: Sequence[int]
) -> int:
    live: set[int] = set()
    peak = 0
    for e in events:
        if e.op == "all_gather":
            live.add(e.unit)
        elif e.op == "free":
            live.discard(e.unit)
        peak = max(
            peak, sum(weight[i] for i in live)
        )  # Σ weights of the live units
    return peak


@typed
def peak_live_units(
    units: Sequence[Unit],
    *,
    reshard_after_forward: bool = True,
    backward_prefetch: bool = True,
) -> int:
    """The most units whose full parameters are live at once during a step.

    >>> layers = [Unit(f"l{i}", ((4, 4),)) for i in range(8)]
    >>> peak_live_units(layers), peak_live_units(layers, backward_prefetch=False)
    (2, 1)
    >>> peak_live_units(layers, reshard_after_forward=False)   # all stay gathered
    8
    """
    events = step_events(
        units,
        reshard_after_forward=reshard_after_forward,
        backward_prefetch=backward_prefetch,
    )
    return _live_sizes(units, events, [1] * len(units))
