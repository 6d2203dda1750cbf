"""FSDP: the per-unit life cycle of sharded parameters, and the memory it leaves live.

FSDP2's ``fully_shard`` shards every parameter of a wrapped module (a *unit*)
on dim 0 across the data-parallel ranks. Before a unit computes, one
all-gather rebuilds its full parameters; after backward, one reduce-scatter
leaves each rank the gradient shard it owns. This module lists those events
in the order FSDP2 (PyTorch 2.13) issues them and counts the full-size
parameters alive at each moment.

>>> units = [Unit("layer0", ((6, 4),)), Unit("layer1", ((8, 6),)), Unit("layer2", ((10, 8),))]
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
from infralens.sharding import chunk_sizes, padded_shard_size

__all__ = [
    "Event",
    "Footprint",
    "Unit",
    "footprint",
    "gradient_buffer_peak",
    "peak_live_units",
    "peak_unsharded_bytes",
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
            raise ValueError(f"param_shapes of unit {unit} must hold at least one shape")
        for shape in self.param_shapes:
            if not shape:
                raise ValueError(f"param_shapes of unit {unit} must not hold a 0-d shape")
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
    w = positive_int("world_size", world_size)
    return sum(padded_shard_size(s[0], w) * _prod(s[1:]) for s in unit.param_shapes)


@typed
def unit_padded_numel(unit: Unit, world_size: int) -> int:
    """Elements one all-gather of *unit* produces: ``world_size * unit_shard_numel``.

    >>> unit_padded_numel(Unit("lin", ((5, 3), (5,))), 4)   # 20 real elements, 12 of padding
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


@typed
def step_events(
    units: Sequence[Unit], *, reshard_after_forward: bool = True, backward_prefetch: bool = True
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

    for i in range(n):
        gather(i)
        events.append(Event("forward", i))
        if reshard_after_forward:
            free(i)
    for i in reversed(range(n)):
        gather(i)
        if backward_prefetch and i > 0:
            gather(i - 1)
        events.append(Event("backward", i))
        free(i)
        events.append(Event("reduce_scatter", i))
    return events


def _live_sizes(units: Sequence[Unit], events: Sequence[Event], weight: Sequence[int]) -> int:
    live: set[int] = set()
    peak = 0
    for e in events:
        if e.op == "all_gather":
            live.add(e.unit)
        elif e.op == "free":
            live.discard(e.unit)
        peak = max(peak, sum(weight[i] for i in live))
    return peak


@typed
def peak_live_units(
    units: Sequence[Unit], *, reshard_after_forward: bool = True, backward_prefetch: bool = True
) -> int:
    """The most units whose full parameters are live at once during a step.

    >>> layers = [Unit(f"l{i}", ((4, 4),)) for i in range(8)]
    >>> peak_live_units(layers), peak_live_units(layers, backward_prefetch=False)
    (2, 1)
    >>> peak_live_units(layers, reshard_after_forward=False)   # every layer stays gathered
    8
    """
    events = step_events(
        units, reshard_after_forward=reshard_after_forward, backward_prefetch=backward_prefetch
    )
    return _live_sizes(units, events, [1] * len(units))


@typed
def peak_unsharded_bytes(
    units: Sequence[Unit],
    world_size: int,
    *,
    bytes_per_param: int = 2,
    reshard_after_forward: bool = True,
    backward_prefetch: bool = True,
) -> int:
    """Peak bytes of all-gathered (full, padded) parameters live on one rank.

    This is FSDP's memory on top of the sharded model states: the largest sum
    of ``unit_padded_numel * bytes_per_param`` over units live at once.

    >>> layers = [Unit(f"l{i}", ((1024, 1024),)) for i in range(8)]
    >>> peak_unsharded_bytes(layers, 8)                       # two layers of bf16
    4194304
    >>> peak_unsharded_bytes(layers, 8, reshard_after_forward=False)
    16777216

    Raises ``ValueError`` if *world_size* or *bytes_per_param* is below 1.
    """
    b = positive_int("bytes_per_param", bytes_per_param)
    sizes = [unit_padded_numel(u, world_size) * b for u in units]
    events = step_events(
        units, reshard_after_forward=reshard_after_forward, backward_prefetch=backward_prefetch
    )
    return _live_sizes(units, events, sizes)


@typed
def gradient_buffer_peak(
    root: Unit,
    units: Sequence[Unit],
    world_size: int,
    *,
    head_params: int = 0,
    compute_bytes: int = 2,
) -> int:
    """Peak bytes of FSDP2's transient gradient buffers in backward (PyTorch 2.13).

    With ``MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32)`` and
    fp32 parameters, each unit's backward leaves *unsharded* gradients,
    compute_bytes · numel. Its post-backward hook then drops the previous
    unit's reduce-scatter input (one buffer is kept by default), allocates
    its own, 4 · :func:`unit_padded_numel` in the reduce dtype, copies the
    gradients in and frees them; the reduce-scatter output becomes the fp32
    gradient shard, counted in :class:`Footprint` ``gradients``. The root
    unit reduces last, and the gradients of its last *head_params*
    parameters (the output layer, first in backward) live from the start.
    Walking units last to first, with H the head's gradients and P the
    previous reduce-scatter input:

        peak = max over units of  H + P + grad(u),  H + grad(u) + rs_input(u)

    >>> layers = [Unit(f"l{i}", ((1024, 1024),)) for i in range(4)]
    >>> gradient_buffer_peak(Unit("r", ((8, 1024),)), layers, 8)   # 2 + 4 bytes per element
    6291456
    >>> gradient_buffer_peak(Unit("r", ((8, 4),)), [], 1, head_params=2)
    Traceback (most recent call last):
    ...
    ValueError: head_params must be in range(0, 2), got 2

    Raises ``ValueError`` for a *world_size* or *compute_bytes* below 1 or
    *head_params* above the root's parameter count.
    """
    w = positive_int("world_size", world_size)
    e = positive_int("compute_bytes", compute_bytes)
    n = len(root.param_shapes)
    if nonnegative_int("head_params", head_params) > n:
        raise ValueError(f"head_params must be in range(0, {n + 1}), got {head_params}")
    head = e * sum(_prod(s) for s in root.param_shapes[n - head_params :])
    peak, held = head, 0
    for u in reversed(units):
        grad = e * u.numel
        peak = max(peak, head + held + grad, head + grad + 4 * unit_padded_numel(u, w))
        held = 4 * unit_padded_numel(u, w)
    grad = e * root.numel  # the root's post-backward reduces all of its gradients
    return max(peak, held + grad, grad + 4 * unit_padded_numel(root, w))


@dataclass(frozen=True)
class Footprint:
    """Bytes one FSDP2 rank holds during a step, by what holds them."""

    parameters: int
    gradients: int
    optimizer: int
    root: int
    peak_units: int
    grad_buffers: int

    @property
    def total(self) -> int:
        """An upper bound on the peak: persistent state, root, gathered units, gradient buffers.

        The gathered units and the gradient buffers peak at different moments
        of backward, so their sum bounds the step's peak from above.
        """
        return (
            self.parameters
            + self.gradients
            + self.optimizer
            + self.root
            + self.peak_units
            + self.grad_buffers
        )


@typed
def footprint(
    root: Unit,
    units: Sequence[Unit],
    world_size: int,
    *,
    rank: int = 0,
    compute_bytes: int = 2,
    head_params: int = 0,
) -> Footprint:
    """What ``fully_shard`` (PyTorch 2.13) leaves on *rank*: fp32 shards, Adam, root and units.

    With fp32 parameters and ``MixedPrecisionPolicy(param_dtype=bf16,
    reduce_dtype=fp32)``:

    - parameters and gradients: 4 bytes per padded shard element
      (:func:`unit_shard_numel`; each unit's gradients are views of one
      reduce-scatter output);
    - Adam momentum and variance: 8 bytes per element of the rank's unpadded
      ``torch.chunk`` share (``zeros_like`` of the local tensor);
    - root: the root unit's all-gathered parameters in the compute dtype,
      kept from forward to the end of backward (``reshard_after_forward``
      defaults to False for the root);
    - peak_units: :func:`peak_unsharded_bytes` of the other units;
    - grad_buffers: :func:`gradient_buffer_peak`, the unsharded gradients
      and reduce-scatter inputs of backward (*head_params* as there).

    >>> emb = Unit("root", ((128256, 4096), (128256, 4096)))   # Llama 3 8B: embedding, output
    >>> footprint(emb, [], 8).root / 10**9
    2.101346304
    >>> footprint(Unit("r", ((6, 4),)), [Unit("l", ((6, 4),))], 4, rank=3)
    Footprint(parameters=64, gradients=64, optimizer=0, root=64, peak_units=64, grad_buffers=176)

    Raises ``ValueError`` for a *world_size* or *compute_bytes* below 1 or a
    *rank* outside the world.
    """
    w = positive_int("world_size", world_size)
    e = positive_int("compute_bytes", compute_bytes)
    if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < w:
        raise ValueError(f"rank must be in range(0, {w}), got {rank!r}")
    everything = [root, *units]
    shard = sum(unit_shard_numel(u, w) for u in everything)
    owned = sum(
        chunk_sizes(s[0], w)[rank] * _prod(s[1:]) for u in everything for s in u.param_shapes
    )
    return Footprint(
        parameters=4 * shard,
        gradients=4 * shard,
        optimizer=8 * owned,
        root=e * unit_padded_numel(root, w),
        peak_units=peak_unsharded_bytes(units, w, bytes_per_param=e) if units else 0,
        grad_buffers=gradient_buffer_peak(root, units, w, head_params=head_params, compute_bytes=e),
    )
