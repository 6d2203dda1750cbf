"""Gradient buckets: which gradients DDP all-reduces together, and what overlap hides.

DDP does not all-reduce each gradient on its own (too many small calls) nor
all of them at the end (nothing would overlap backward). It groups them into
buckets with the rule of ``torch.distributed._compute_bucket_assignment_by_size``
(PyTorch 2.13, ``torch/csrc/distributed/c10d/reducer.cpp``), reproduced by
:func:`assign_buckets`:

>>> assign_buckets([400, 20, 1200, 1000, 200, 2000, 40], [400, 1000],
...                dtypes=["f32", "f16", "f32", "f16", "f32", "f16", "f32"])
[[0], [1, 3], [2], [4, 6], [5]]

and starts each bucket's all-reduce when its last gradient is ready, which
:func:`overlap` turns into exposed communication time.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from fractions import Fraction

from infralens._typecheck import check_fields, typed
from infralens._validate import nonnegative_int, nonnegative_number, positive_int
from infralens.collectives import ring_bytes_sent

__all__ = [
    "DDP_DEFAULT_BUCKET_CAP_MIB",
    "DDP_FIRST_BUCKET_BYTES",
    "Overlap",
    "assign_buckets",
    "ddp_bucket_limits",
    "ddp_initial_buckets",
    "ddp_rebuilt_buckets",
    "overlap",
]

MIB = 2**20
DDP_DEFAULT_BUCKET_CAP_MIB = 25
"""``bucket_cap_mb``'s default; PyTorch's "MB" here is MiB (it multiplies by 1024 * 1024)."""
DDP_FIRST_BUCKET_BYTES = 1 * MIB
"""``dist._DEFAULT_FIRST_BUCKET_BYTES``: first rebuilt bucket cap if bucket_cap_mb is unset."""


def _walk(
    sizes_bytes: Sequence[int],
    bucket_limits: Sequence[int],
    dtypes: Sequence[Hashable] | None,
    labels: Sequence[int],
) -> tuple[list[list[int]], list[list[int]]]:
    """Core of the rule; returns (closed buckets in closing order, leftovers by first dtype)."""
    sizes = [
        nonnegative_int(f"sizes_bytes[{i}]", s) for i, s in enumerate(sizes_bytes)
    ]
    if len(bucket_limits) == 0:
        raise ValueError(
            "bucket_limits must hold at least one limit, got an empty list"
        )
    limits = [
        positive_int(f"bucket_limits[{i}]", b) for i, b in enumerate(bucket_limits)
    ]
    kinds = [None] * len(sizes) if dtypes is None else list(dtypes)
    if len(kinds) != len(sizes):
        raise ValueError(
            f"dtypes must hold one label per tensor: {len(kinds)} labels for {len(sizes)} sizes"
        )
    # [start:walk-state]
    closed: list[list[int]] = []
    open_: dict[Hashable, list[int]] = {}
    filled: dict[Hashable, int] = {}
    step: dict[Hashable, int] = {}
    # [end:walk-state]
    # [start:walk-close]
    for label, size, kind in zip(labels, sizes, kinds, strict=True):
        bucket = open_.setdefault(kind, [])
        bucket.append(label)
        filled[kind] = filled.get(kind, 0) + size
        limit = limits[step.setdefault(kind, 0)]
        # close once it reaches its limit: it may exceed it
        if filled[kind] >= limit:
            closed.append(bucket)
            open_[kind], filled[kind] = [], 0
            step[kind] = min(step[kind] + 1, len(limits) - 1)
    return closed, [b for b in open_.values() if b]
    # [end:walk-close]


@typed
def assign_buckets(
    sizes_bytes: Sequence[int],
    bucket_limits: Sequence[int],
    dtypes: Sequence[Hashable] | None = None,
) -> list[list[int]]:
    """Group tensors, given in order by their byte sizes, into buckets as PyTorch does.

    Walk the tensors in order. Each dtype fills its own open bucket; a bucket
    closes as soon as its bytes reach the current limit of its dtype, so a
    bucket can exceed its limit and a tensor is never split. After each
    close, that dtype moves to the next limit in *bucket_limits* (staying on
    the last). Buckets come back sorted by their smallest index.

    >>> assign_buckets([100, 100, 100, 100], [150])
    [[0, 1], [2, 3]]
    >>> assign_buckets([10, 300, 10], [100, 1000])   # 300 bytes overshoot the first limit
    [[0, 1], [2]]
    >>> assign_buckets([], [100])
    []

    Raises ``ValueError`` for a negative size, an empty or non-positive
    limit, or a *dtypes* list of another length than *sizes_bytes*.
    """
    closed, leftover = _walk(
        sizes_bytes, bucket_limits, dtypes, range(len(sizes_bytes))
    )
    return sorted(closed + leftover, key=min)


def ddp_bucket_limits(bucket_cap_mb: int | None = None) -> list[int]:
    """Byte limits DDP uses when it rebuilds buckets after the first iteration.

    ``[1 MiB, 25 MiB]`` when *bucket_cap_mb* is left unset; ``[cap MiB]``
    once you set it, even to 25 (the small first bucket applies only to the
    default, ``_BucketCapacityConfig`` in torch/nn/parallel/distributed.py).

    >>> ddp_bucket_limits()
    [1048576, 26214400]
    >>> ddp_bucket_limits(25)
    [26214400]

    Raises ``ValueError`` if *bucket_cap_mb* is set below 1.
    """
    if bucket_cap_mb is None:
        return [DDP_FIRST_BUCKET_BYTES, DDP_DEFAULT_BUCKET_CAP_MIB * MIB]
    return [positive_int("bucket_cap_mb", bucket_cap_mb) * MIB]


@typed
def ddp_initial_buckets(
    sizes_bytes: Sequence[int],
    dtypes: Sequence[Hashable] | None = None,
    *,
    static_graph: bool = False,
    find_unused_parameters: bool = False,
    bucket_cap_mb: int | None = None,
) -> list[list[int]]:
    """Buckets DDP uses in the first iteration (PyTorch 2.13).

    ``_BucketCapacityConfig.compute_bucket_size_limits`` (in
    torch/nn/parallel/distributed.py) puts every parameter of a dtype into
    one bucket (limit ``sys.maxsize``) when ``static_graph`` is set **or**
    ``find_unused_parameters`` is unset: those are the cases in which DDP
    rebuilds the buckets from the order the first backward produced
    gradients, so it does not trust registration order before that. Only
    with ``find_unused_parameters=True`` and no static graph does the first
    iteration walk registration order with :func:`ddp_bucket_limits`.

    >>> ddp_initial_buckets([4096, 16, 4096, 16])
    [[0, 1, 2, 3]]
    >>> ddp_initial_buckets([8, 8], dtypes=["f32", "bf16"])
    [[0], [1]]
    >>> big = [2**20, 2**20, 2**20]
    >>> ddp_initial_buckets(big, find_unused_parameters=True)
    [[0], [1, 2]]
    >>> ddp_initial_buckets(big, find_unused_parameters=True, static_graph=True)
    [[0, 1, 2]]

    Raises ``TypeError`` if a flag is not a bool, or as :func:`assign_buckets` does.
    """
    for name, flag in (
        ("static_graph", static_graph),
        ("find_unused_parameters", find_unused_parameters),
    ):
        if not isinstance(flag, bool):
            raise TypeError(f"{name} must be a bool, got {type(flag).__name__}")
    if static_graph or not find_unused_parameters:
        return assign_buckets(sizes_bytes, [2**63 - 1], dtypes)
    return assign_buckets(sizes_bytes, ddp_bucket_limits(bucket_cap_mb), dtypes)


@typed
def ddp_rebuilt_buckets(
    sizes_bytes: Sequence[int],
    ready_order: Sequence[int],
    bucket_cap_mb: int | None = None,
    dtypes: Sequence[Hashable] | None = None,
) -> list[list[int]]:
    """Buckets after DDP's rebuild: parameters walked in the order their gradients became ready.

    *sizes_bytes* and *dtypes* are indexed by parameter (registration order);
    *ready_order* lists parameter indices in the order the first backward
    produced their gradients. The walk uses :func:`ddp_bucket_limits`, and the
    buckets keep the order in which they closed (not sorted): bucket 0 holds
    the first gradients to be ready, usually the last layer's. Leftover
    buckets of several dtypes follow in the order the dtypes first appeared
    (PyTorch keeps them in a hash map, so their relative order there is
    unspecified).

    >>> ddp_rebuilt_buckets([2 * 2**20, 4096, 2 * 2**20, 4096], ready_order=[3, 2, 1, 0])
    [[3, 2], [1, 0]]

    Raises ``ValueError`` if *ready_order* is not a permutation of the
    parameter indices, or as :func:`assign_buckets` does.
    """
    if sorted(ready_order) != list(range(len(sizes_bytes))):
        raise ValueError(
            f"ready_order must list every parameter index 0..{len(sizes_bytes) - 1} once"
        )
    if dtypes is not None and len(dtypes) != len(sizes_bytes):
        raise ValueError(
            "dtypes must hold one label per tensor: "
            f"{len(dtypes)} labels for {len(sizes_bytes)} sizes"
        )
    # [start:rebuild]
    kinds = None if dtypes is None else [dtypes[i] for i in ready_order]
    closed, leftover = _walk(
        [sizes_bytes[i] for i in ready_order],
        ddp_bucket_limits(bucket_cap_mb),
        kinds,
        ready_order,
    )
    return closed + leftover  # closing order: bucket 0 is reduced first
    # [end:rebuild]


@dataclass(frozen=True)
class Overlap:
    """Timeline of one backward pass with bucketed all-reduces (seconds)."""

    backward_end: Fraction
    allreduce_spans: tuple[tuple[Fraction, Fraction], ...]

    def __post_init__(self) -> None:
        check_fields(self)

    @property
    def exposed(self) -> Fraction:
        """Communication left after backward ends: what the step waits for."""
        end = self.allreduce_spans[-1][1] if self.allreduce_spans else Fraction(0)
        return max(Fraction(0), end - self.backward_end)


@typed
def overlap(
    backward_seconds: Sequence[Fraction | int],
    grad_bytes: Sequence[int],
    bucket_limits: Sequence[int],
    *,
    world_size: int,
    bandwidth_bytes_per_s: int,
    latency_s: Fraction | int = 0,
) -> Overlap:
    """Simulate bucketed all-reduces against backward compute, layer by layer.

    Layers are given in backward order (last layer first) with their compute
    time and gradient bytes. Buckets follow :func:`assign_buckets` over that
    order. A bucket's all-reduce starts when its last layer's backward has
    finished and the previous all-reduce is done (one communication stream),
    and lasts ``latency_s + ring_bytes_sent("all_reduce", bytes, n) / bandwidth``.

    >>> result = overlap([1, 1, 1, 1], [100, 100, 100, 100], [200], world_size=2,
    ...                  bandwidth_bytes_per_s=100)
    >>> result.allreduce_spans
    ((Fraction(2, 1), Fraction(4, 1)), (Fraction(4, 1), Fraction(6, 1)))
    >>> result.exposed          # backward ends at 4; the second bucket ends at 6
    Fraction(2, 1)
    >>> overlap([1, 1], [100, 100], [10**9], world_size=1,
    ...         bandwidth_bytes_per_s=1).exposed     # one rank: nothing to reduce
    Fraction(0, 1)

    Raises ``ValueError`` if the two lists differ in length, a time or size is
    negative, or *world_size* or *bandwidth_bytes_per_s* is below 1.
    """
    if len(backward_seconds) != len(grad_bytes):
        raise ValueError(
            "backward_seconds and grad_bytes must have one entry per layer: "
            f"{len(backward_seconds)} != {len(grad_bytes)}"
        )
    n = positive_int("world_size", world_size)
    bandwidth = positive_int("bandwidth_bytes_per_s", bandwidth_bytes_per_s)
    alpha = Fraction(nonnegative_number("latency_s", latency_s))
    # [start:ready-times]
    ready: list[Fraction] = []
    clock = Fraction(0)
    for i, t in enumerate(backward_seconds):
        clock += Fraction(nonnegative_number(f"backward_seconds[{i}]", t))
        ready.append(clock)
    # [end:ready-times]
    # [start:bucket-spans]
    spans: list[tuple[Fraction, Fraction]] = []
    free_at = Fraction(0)
    for bucket in assign_buckets(grad_bytes, bucket_limits):
        start = max(ready[max(bucket)], free_at)
        nbytes = sum(grad_bytes[i] for i in bucket)
        # t = alpha + 2 (n-1)/n * bytes / bandwidth
        free_at = (
            start + alpha + ring_bytes_sent("all_reduce", nbytes, n) / bandwidth
        )
        spans.append((start, free_at))
    return Overlap(backward_end=clock, allreduce_spans=tuple(spans))
    # [end:bucket-spans]
