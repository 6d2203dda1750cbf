"""Device meshes: each rank's shard on an N-D mesh, and the groups and links of each mesh dimension.

``init_device_mesh("cuda", shape)`` lays ranks out row-major, as
``torch.arange(world).view(shape)`` does (PyTorch 2.13): the last mesh
dimension varies fastest, so its groups are runs of consecutive ranks and,
when its size divides the GPUs of a node, stay inside one NVLink domain.
A DTensor places a tensor on the mesh with one placement per mesh dimension:
``"R"`` (``Replicate()``) or ``"S(d)"`` (``Shard(d)``), which splits tensor
dim *d* with ``torch.chunk``'s rule (:mod:`infralens.sharding`).

One step of FSDP2 or HSDP on a ``(replicate, shard)`` mesh, its collectives
on each mesh dimension and its state per GPU, is :mod:`infralens.hsdp`.

>>> mesh_groups((2, 4), 1), mesh_groups((2, 4), 0)[:2]
([[0, 1, 2, 3], [4, 5, 6, 7]], [[0, 4], [1, 5]])
>>> local_shape((7, 5), (2, 2), ("S(0)", "S(1)"), (1, 1))
(3, 2)
>>> from infralens.topology import Cluster
>>> c = Cluster.from_node_shape("2_nodes_x_8_gpus", "dgx-h100")
>>> [(d.name, d.size, d.link) for d in mesh_dims(c, (2, 8), ("dp", "tp"))]
[('dp', 2, 'network'), ('tp', 8, 'nvlink')]
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from math import prod

from infralens._typecheck import typed
from infralens._validate import (
    describe,
    nonnegative_int,
    positive_int,
    rank_in,
    ranks_cap,
)
from infralens.plan import ParallelPlan
from infralens.sharding import chunk_size
from infralens.topology import Cluster

__all__ = [
    "MeshDim",
    "fsdp_tp_local_shape",
    "local_shape",
    "mesh_dims",
    "mesh_groups",
]

_SHARD = re.compile(r"^S\((\d+)\)$")
# mesh dims, innermost first, onto the plan axes in their default order (first varies fastest)
_AXES = ("tp", "cp", "dp", "pp")


def _mesh(mesh_shape: Sequence[int]) -> tuple[int, ...]:
    dims = tuple(
        positive_int(f"mesh_shape[{i}]", d) for i, d in enumerate(mesh_shape)
    )
    if not 1 <= len(dims) <= len(_AXES):
        raise ValueError(
            f"mesh_shape must have 1 to {len(_AXES)} dimensions, got {len(dims)}"
        )
    return dims


@typed
def mesh_groups(mesh_shape: Sequence[int], dim: int) -> list[list[int]]:
    """The process groups of mesh dimension *dim*: ranks that differ only in that coordinate.

    Rank ``r`` sits at the row-major coordinate of ``r`` in *mesh_shape*, so
    mesh dimension ``k`` has stride ``prod(mesh_shape[k+1:])``. The groups
    are :meth:`infralens.plan.ParallelPlan.groups` of a plan whose axes, fastest
    first, are the mesh dimensions from the last to the first.

    >>> mesh_groups((2, 2), 0), mesh_groups((2, 2), 1)
    ([[0, 2], [1, 3]], [[0, 1], [2, 3]])
    >>> mesh_groups((4,), 0)                  # a 1-D mesh: one group of every rank
    [[0, 1, 2, 3]]
    >>> mesh_groups((2, 2), 2)
    Traceback (most recent call last):
    ...
    ValueError: dim must be in range(0, 2), got 2

    Raises ``ValueError`` for a size below 1, more than four dimensions, more
    than 2**17 ranks in all, or *dim* outside ``range(len(mesh_shape))``.
    """
    dims = _mesh(mesh_shape)
    d = rank_in("dim", dim, len(dims))
    ranks_cap("mesh_shape's product", prod(dims))  # every rank is listed
    axes = _AXES[: len(dims)][::-1]  # axes[k] is mesh dimension k
    degrees: dict[str, int] = dict(zip(axes, dims, strict=True))
    plan = ParallelPlan(
        tp=degrees.get("tp", 1),
        cp=degrees.get("cp", 1),
        dp=degrees.get("dp", 1),
        pp=degrees.get("pp", 1),
    )
    return plan.groups(axes[d])


def _placement(index: int, placement: str, ndim: int) -> int | None:
    if placement == "R":
        return None
    match = _SHARD.match(placement) if isinstance(placement, str) else None
    if not match:
        raise ValueError(
            f"placements[{index}] must be 'R' or 'S(d)', got {describe(placement)}"
        )
    return rank_in(f"placements[{index}] tensor dim", int(match[1]), ndim)


@typed
def local_shape(
    global_shape: Sequence[int],
    mesh_shape: Sequence[int],
    placements: Sequence[str],
    coordinate: Sequence[int],
) -> tuple[int, ...]:
    """Shape of the local tensor at *coordinate* of ``distribute_tensor(t, mesh, placements)``.

    Mesh dimensions apply in order: ``S(d)`` on mesh dimension ``k`` keeps
    chunk ``coordinate[k]`` of the current size of tensor dim ``d`` split
    ``mesh_shape[k]`` ways (:func:`infralens.sharding.chunk_size`); ``R``
    keeps the size. Two mesh dimensions sharding one tensor dim split it
    twice, outer dimension first, as DTensor's ``Shard`` does.

    >>> local_shape((7, 5), (2, 2), ("S(0)", "S(1)"), (0, 1))
    (4, 2)
    >>> local_shape((7, 5), (2, 2), ("S(0)", "S(0)"), (1, 1))   # 7 -> 4, 3 -> 2, 1
    (1, 5)
    >>> local_shape((6, 4), (2, 4), ("R", "S(0)"), (1, 3))   # HSDP: torch.chunk's tail
    (0, 4)
    >>> local_shape((6, 4), (2, 4), ("R", "S(2)"), (0, 0))
    Traceback (most recent call last):
    ...
    ValueError: placements[1] tensor dim must be in range(0, 2), got 2

    Raises ``ValueError`` for a negative size, a placement that is not ``R``
    or ``S(d)`` with ``d`` a dim of the tensor, a coordinate outside its
    mesh dimension, or lengths of *placements* and *coordinate* other than
    the mesh's.
    """
    dims = _mesh(mesh_shape)
    shape = [
        nonnegative_int(f"global_shape[{i}]", d) for i, d in enumerate(global_shape)
    ]
    for name, seq in (("placements", placements), ("coordinate", coordinate)):
        if len(seq) != len(dims):
            raise ValueError(
                f"{name} must have one entry per mesh dimension ({len(dims)})"
            )
    for k, (size, p, c) in enumerate(
        zip(dims, placements, coordinate, strict=True)
    ):
        d = _placement(k, p, len(shape))
        at = rank_in(f"coordinate[{k}]", c, size)
        if d is not None:
            shape[d] = chunk_size(shape[d], size, at)
    return tuple(shape)


@typed
def fsdp_tp_local_shape(
    global_shape: Sequence[int],
    *,
    tp_dim: int | None,
    tp: int,
    dp: int,
    tp_rank: int,
    dp_rank: int,
) -> tuple[int, ...]:
    """Local shape of a parameter under tensor parallelism, then FSDP2, on a ``(dp, tp)`` mesh.

    TP places the weight first (``ColwiseParallel``: ``tp_dim=0``,
    ``RowwiseParallel``: ``tp_dim=1``, a replicated one: ``None``);
    ``fully_shard(..., mesh=mesh["dp"])`` then splits dim 0 of each TP shard
    ``dp`` ways. So a column-parallel dim is chunked by ``tp`` before ``dp``
    (FSDP2 records it as ``_StridedShard``), the reverse of
    :func:`local_shape` with ``("S(0)", "S(0)")``.

    >>> fsdp_tp_local_shape((6, 5), tp_dim=0, tp=2, dp=2,
    ...                     tp_rank=0, dp_rank=1)           # 6 -> 3 -> 1
    (1, 5)
    >>> local_shape((6, 5), (2, 2), ("S(0)", "S(0)"), (1, 0))  # dp first: 6 -> 3 -> 2
    (2, 5)
    >>> fsdp_tp_local_shape((6, 7), tp_dim=1, tp=2, dp=2, tp_rank=1, dp_rank=0)
    (3, 3)
    >>> fsdp_tp_local_shape((5,), tp_dim=None, tp=2, dp=4, tp_rank=0, dp_rank=3)
    (0,)

    Raises ``ValueError`` for a degree below 1, a rank outside its group, or
    *tp_dim* not a dim of the tensor.
    """
    n = len(global_shape)
    tp_place = "R" if tp_dim is None else f"S({rank_in('tp_dim', tp_dim, n)})"
    after_tp = local_shape(global_shape, (tp,), (tp_place,), (tp_rank,))
    return local_shape(after_tp, (dp,), ("S(0)",), (dp_rank,))


@dataclass(frozen=True)
class MeshDim:
    """One mesh dimension on a cluster: its name, size, groups and the slowest link they cross."""

    name: str
    size: int
    groups: tuple[tuple[int, ...], ...]
    link: str


@typed
def mesh_dims(
    cluster: Cluster, mesh_shape: Sequence[int], names: Sequence[str]
) -> tuple[MeshDim, ...]:
    """Each mesh dimension's groups on *cluster*, and the link (nvlink or network) they cross.

    The link is :meth:`infralens.topology.Cluster.tier_of` of the groups, the
    slowest over all of them.

    >>> c = Cluster.from_node_shape("4_nodes_x_8_gpus", "dgx-h100")
    >>> for d in mesh_dims(c, (4, 8), ("replicate", "shard")):
    ...     print(d.name, d.link, d.groups[0])
    replicate network (0, 8, 16, 24)
    shard nvlink (0, 1, 2, 3, 4, 5, 6, 7)
    >>> mesh_dims(c, (8, 8), ("dp", "tp"))
    Traceback (most recent call last):
    ...
    ValueError: mesh_shape must multiply to the cluster's 32 GPUs, got 64

    Raises ``ValueError`` for a mesh of another size than *cluster*, or
    *names* not one distinct name per dimension.
    """
    dims = _mesh(mesh_shape)
    if prod(dims) != cluster.world_size:
        raise ValueError(
            f"mesh_shape must multiply to the cluster's {cluster.world_size} GPUs, got {prod(dims)}"
        )
    if len(names) != len(dims) or len(set(names)) != len(names):
        raise ValueError(
            f"names must be {len(dims)} distinct names, got {list(names)}"
        )
    out = []
    for k, name in enumerate(names):
        groups = mesh_groups(dims, k)
        slow = any(cluster.tier_of(g).name == "network" for g in groups)
        link = "network" if slow else "nvlink"
        out.append(MeshDim(name, dims[k], tuple(tuple(g) for g in groups), link))
    return tuple(out)
