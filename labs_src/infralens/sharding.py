"""Shard arithmetic: how many elements of a tensor each rank owns.

Three conventions appear in PyTorch and ZeRO-style code, and they disagree on
uneven sizes:

* ``torch.chunk`` / DTensor ``Shard(dim)`` / FSDP2: every rank takes
  ``ceil(numel / world_size)`` until the tensor runs out, so the tail ranks
  can own fewer elements, or none.
* FSDP2 also *allocates* that ceiling on every rank (the padded shard), so
  one all-gather of equal-sized buffers rebuilds the tensor.
* ZeRO-style flat partitions need equal partitions: either the size divides
  by the world size or the buffer is padded up to a multiple of it.

>>> chunk_sizes(6, 4)
[2, 2, 2, 0]
>>> chunk_offsets(6, 4)
[0, 2, 4, 6]
>>> padded_shard_size(6, 4), padding(6, 4)
(2, 2)
"""

from __future__ import annotations

from collections.abc import Sequence

from infralens._typecheck import typed
from infralens._validate import (
    flag,
    nonnegative_int,
    positive_int,
    rank_in,
    ranks_cap,
)

__all__ = [
    "chunk_offsets",
    "chunk_size",
    "chunk_sizes",
    "even_partition_size",
    "padded_shard_size",
    "padding",
    "shard_shape",
]


def padded_shard_size(numel: int, world_size: int) -> int:
    """Elements every rank allocates for its shard: ``ceil(numel / world_size)``.

    This is the size FSDP2 gives each rank's sharded buffer along dim 0, and
    the largest shard any rank holds under ``torch.chunk`` semantics.

    >>> padded_shard_size(10, 4)
    3
    >>> padded_shard_size(0, 4)   # an empty tensor needs no storage
    0

    Raises ``ValueError`` if *numel* < 0 or *world_size* < 1.
    """
    n = nonnegative_int("numel", numel)
    w = positive_int("world_size", world_size)
    return -(-n // w)


def chunk_sizes(numel: int, world_size: int) -> list[int]:
    """Elements each rank owns under ``torch.chunk`` / DTensor ``Shard`` rules.

    Rank r owns ``clamp(numel - r * c, 0, c)`` elements, where
    ``c = ceil(numel / world_size)``. Earlier ranks are never smaller than
    later ones, and trailing ranks may own nothing.

    >>> chunk_sizes(8, 4)
    [2, 2, 2, 2]
    >>> chunk_sizes(6, 4)         # not [2, 2, 1, 1]
    [2, 2, 2, 0]
    >>> chunk_sizes(2, 4)         # fewer elements than ranks
    [1, 1, 0, 0]

    Raises ``ValueError`` if *numel* < 0 or *world_size* < 1.
    """
    c = padded_shard_size(numel, world_size)
    return [
        max(0, min(c, numel - r * c))
        for r in range(ranks_cap("world_size", world_size))
    ]


def chunk_offsets(numel: int, world_size: int) -> list[int]:
    """Index of each rank's first element: ``min(r * c, numel)``.

    An empty shard's offset is clamped to *numel*, which is what DTensor
    reports as the global offset of an empty local shard.

    >>> chunk_offsets(10, 4)
    [0, 3, 6, 9]
    >>> chunk_offsets(5, 4)       # rank 3 is empty and sits at the end
    [0, 2, 4, 5]

    Raises ``ValueError`` if *numel* < 0 or *world_size* < 1.
    """
    c = padded_shard_size(numel, world_size)
    return [min(r * c, numel) for r in range(ranks_cap("world_size", world_size))]


def padding(numel: int, world_size: int) -> int:
    """Elements of padding added so that every rank's shard is equal.

    ``padding = ceil(numel / world_size) * world_size - numel``.

    >>> padding(10, 4)
    2
    >>> padding(12, 4)
    0

    Raises ``ValueError`` if *numel* < 0 or *world_size* < 1.
    """
    return padded_shard_size(numel, world_size) * world_size - numel


def even_partition_size(numel: int, world_size: int, *, pad: bool = False) -> int:
    """Size of each rank's partition when every partition must be equal.

    With ``pad=False`` the sizes must divide and the result is
    ``numel // world_size``; with ``pad=True`` the buffer is padded (see
    :func:`padding`) and the result is :func:`padded_shard_size`.

    >>> even_partition_size(12, 4)
    3
    >>> even_partition_size(10, 4, pad=True)
    3
    >>> even_partition_size(10, 4)
    Traceback (most recent call last):
    ...
    ValueError: numel must be divisible by world_size without pad=True: 10 % 4 = 2

    Raises ``ValueError`` if *numel* < 0, *world_size* < 1, or the division
    leaves a remainder and *pad* is false.
    """
    size = padded_shard_size(numel, world_size)
    flag("pad", pad)
    remainder = numel % world_size
    if remainder and not pad:
        raise ValueError(
            "numel must be divisible by world_size without pad=True: "
            f"{numel} % {world_size} = {remainder}"
        )
    return size


@typed
def shard_shape(
    shape: Sequence[int], world_size: int, rank: int
) -> tuple[int, ...]:
    """Local shape of *rank*'s shard when a tensor is split on dim 0.

    Dim 0 follows :func:`chunk_sizes`; other dims are unchanged. This is the
    local shape of ``distribute_tensor(t, mesh, [Shard(0)])`` and of an FSDP2
    parameter's local tensor.

    >>> shard_shape((6, 5), 4, 0)
    (2, 5)
    >>> shard_shape((6, 5), 4, 3)
    (0, 5)

    Raises ``ValueError`` for an empty shape, a negative dimension, or a rank
    outside ``range(world_size)``.
    """
    dims = tuple(nonnegative_int(f"shape[{i}]", d) for i, d in enumerate(shape))
    if not dims:
        raise ValueError("shape must have at least one dimension to shard dim 0")
    w = positive_int("world_size", world_size)
    r = rank_in("rank", rank, w)
    return (chunk_size(dims[0], w, r), *dims[1:])


def chunk_size(numel: int, world_size: int, rank: int) -> int:
    """Elements *rank* owns under :func:`chunk_sizes`, without listing the other ranks.

    >>> chunk_size(6, 4, 3)
    0
    >>> chunk_size(1, 10**9, 0)   # constant work for any world size
    1

    Raises ``ValueError`` if *numel* < 0, *world_size* < 1 or *rank* is not in
    ``range(world_size)``.
    """
    c = padded_shard_size(numel, world_size)
    r = rank_in("rank", rank, world_size)
    return max(0, min(c, numel - r * c))
