"""FSDP memory: the bytes one FSDP2 rank holds during a step, by what holds them.

:mod:`infralens.fsdp` says which units are gathered when; this module prices
it on one rank with ``fully_shard``'s defaults (PyTorch 2.13): the window of
all-gathered units (:func:`peak_unsharded_bytes`), the transient gradient
buffers of backward (:func:`gradient_buffer_peak`), and the whole
:class:`Footprint` of fp32 shards, Adam state, the root unit and both peaks
(:func:`footprint`).

>>> layers = [Unit(f"l{i}", ((1024, 1024),)) for i in range(8)]
>>> peak_unsharded_bytes(layers, 8)
4194304
>>> peak_unsharded_bytes(layers, 8, backward_prefetch=False)
2097152
>>> footprint(Unit("r", ((6, 4),)), layers, 8, rank=8)
Traceback (most recent call last):
...
ValueError: rank must be in range(0, 8), got 8
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from infralens._typecheck import check_fields, typed
from infralens._validate import nonnegative_int, positive_int
from infralens.fsdp import (
    Unit,
    _live_sizes,
    _prod,
    step_events,
    unit_padded_numel,
    unit_shard_numel,
)
from infralens.sharding import chunk_sizes

__all__ = [
    "Footprint",
    "footprint",
    "gradient_buffer_peak",
    "peak_unsharded_bytes",
]


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
        units,
        reshard_after_forward=reshard_after_forward,
        backward_prefetch=backward_prefetch,
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
    its own, 4 · :func:`~infralens.fsdp.unit_padded_numel` in the reduce dtype, copies the
    gradients in and frees them; the reduce-scatter output becomes the fp32
    gradient shard, counted in :class:`Footprint` ``gradients``. The root
    unit reduces last, and the gradients of its last *head_params*
    parameters (the output layer, first in backward) live from the start.
    Walking units last to first, with H the head's gradients and P the
    previous reduce-scatter input:

        peak = max over units of  H + P + grad(u),  H + grad(u) + rs_input(u)

    >>> layers = [Unit(f"l{i}", ((1024, 1024),)) for i in range(4)]
    >>> gradient_buffer_peak(Unit("r", ((8, 1024),)), layers, 8)   # 2 + 4 B per element
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
        raise ValueError(
            f"head_params must be in range(0, {n + 1}), got {head_params}"
        )
    head = e * sum(_prod(s) for s in root.param_shapes[n - head_params :])
    peak, held = head, 0
    rs_input: dict[
        Unit, int
    ] = {}  # a model repeats one layer's unit: pad each kind once
    for u in reversed(units):
        grad = e * u.numel
        if u not in rs_input:
            rs_input[u] = 4 * unit_padded_numel(u, w)
        peak = max(peak, head + held + grad, head + grad + rs_input[u])
        held = rs_input[u]
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

    def __post_init__(self) -> None:
        check_fields(self)

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
      (:func:`~infralens.fsdp.unit_shard_numel`; each unit's gradients are views of one
      reduce-scatter output);
    - Adam momentum and variance: 8 bytes per element of the rank's unpadded
      ``torch.chunk`` share (``zeros_like`` of the local tensor);
    - root: the root unit's all-gathered parameters in the compute dtype,
      kept from forward to the end of backward (``reshard_after_forward``
      defaults to False for the root);
    - peak_units: :func:`peak_unsharded_bytes` of the other units;
    - grad_buffers: :func:`gradient_buffer_peak`, the unsharded gradients
      and reduce-scatter inputs of backward (*head_params* as there).

    >>> # Llama 3 8B's embedding and output layer
    >>> emb = Unit("root", ((128256, 4096), (128256, 4096)))
    >>> footprint(emb, [], 8).root / 10**9
    2.101346304
    >>> f = footprint(Unit("r", ((6, 4),)), [Unit("l", ((6, 4),))], 4, rank=3)
    >>> f.parameters, f.gradients, f.optimizer, f.root, f.peak_units, f.grad_buffers
    (64, 64, 0, 64, 64, 176)

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
        chunk_sizes(s[0], w)[rank] * _prod(s[1:])
        for u in everything
        for s in u.param_shapes
    )
    return Footprint(
        parameters=4 * shard,
        gradients=4 * shard,
        optimizer=8 * owned,
        root=e * unit_padded_numel(root, w),
        peak_units=peak_unsharded_bytes(units, w, bytes_per_param=e)
        if units
        else 0,
        grad_buffers=gradient_buffer_peak(
            root, units, w, head_params=head_params, compute_bytes=e
        ),
    )
