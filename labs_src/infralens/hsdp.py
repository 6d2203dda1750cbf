"""HSDP: FSDP2's collectives per step on a ``(replicate, shard)`` mesh, and model state per GPU.

HSDP is FSDP2 on a 2-D mesh ``(replicate, shard)``: parameters, gradients and
optimizer state are sharded over the inner dimension and replicated over the
outer one; gradients are reduce-scattered inside a shard group and the shards
all-reduced across replicas (hybrid sharding in Zhao et al. 2023). A shard
group of every GPU is plain FSDP2. The groups of each mesh dimension, and
the link they cross, come from :func:`infralens.device_mesh.mesh_dims`.

>>> c = Cluster.from_node_shape("2_nodes_x_8_gpus", "dgx-h100")
>>> step = sharding_step(c, [Unit("block", ((4096, 4096),))] * 4, shard=8)
>>> step.replicate, step.shard
(2, 8)
>>> [(x.dim, x.op) for x in step.collectives]
[('shard', 'all_gather'), ('shard', 'reduce_scatter'), ('replicate', 'all_reduce')]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from math import ceil

from infralens._typecheck import typed
from infralens._validate import divisible, positive_int
from infralens.device_mesh import mesh_dims
from infralens.fsdp import Unit, unit_padded_numel
from infralens.memory import bytes_per_parameter
from infralens.nccl import predict
from infralens.topology import Cluster

__all__ = [
    "MeshCollective",
    "ShardingStep",
    "sharding_step",
]


@dataclass(frozen=True)
class MeshCollective:
    """One kind of NCCL call a step issues on one mesh dimension.

    ``nbytes`` is one call's nccl-tests size; ``seconds`` is all ``calls``
    of it, priced with :func:`infralens.nccl.predict` on one group.
    """

    dim: str
    op: str
    nbytes: int
    calls: int
    group_size: int
    link: str
    seconds: float


@dataclass(frozen=True)
class ShardingStep:
    """FSDP2's collectives in one step on a ``(replicate, shard)`` mesh, and its state per GPU."""

    replicate: int
    shard: int
    collectives: tuple[MeshCollective, ...]
    state_bytes: int

    @property
    def seconds(self) -> float:
        """Time of every collective, none overlapped."""
        return sum(c.seconds for c in self.collectives)


@typed
def sharding_step(
    cluster: Cluster,
    units: Sequence[Unit],
    *,
    shard: int,
    param_bytes: int = 2,
    reduce_bytes: int = 4,
    reshard_after_forward: bool = True,
) -> ShardingStep:
    """Collectives and per-GPU model state of one step of FSDP2 (``shard`` = all GPUs) or HSDP.

    The mesh is ``(replicate, shard)`` with ``replicate = world / shard``.
    Per unit and step, over the shard group: an all-gather of the padded unit
    in ``param_bytes`` before forward and again before backward (once without
    *reshard_after_forward*), and a reduce-scatter of its gradient in
    ``reduce_bytes``; with ``replicate > 1`` also an all-reduce of the
    gradient shard (``padded / shard`` elements) over the replicate group.
    ``state_bytes`` is the ``"fsdp2"`` recipe's 16 bytes per parameter
    divided by ``shard``, not by the world (:func:`infralens.memory.bytes_per_parameter`).

    >>> c = Cluster.from_node_shape("2_nodes_x_8_gpus", "dgx-h100")
    >>> hsdp = sharding_step(c, [Unit("block", ((4096, 4096),))] * 4, shard=8)
    >>> for x in hsdp.collectives:
    ...     print(x.dim, x.op, x.nbytes, x.calls, x.group_size, x.link)
    shard all_gather 33554432 8 8 nvlink
    shard reduce_scatter 67108864 4 8 nvlink
    replicate all_reduce 8388608 4 2 network
    >>> full = sharding_step(c, [Unit("block", ((4096, 4096),))] * 4, shard=16)
    >>> full.replicate, [x.op for x in full.collectives]
    (1, ['all_gather', 'reduce_scatter'])
    >>> full.state_bytes * 2 == hsdp.state_bytes
    True
    >>> sharding_step(c, [Unit("block", ((8,),))], shard=6)
    Traceback (most recent call last):
    ...
    ValueError: world_size must be divisible by shard: 16 % 6 = 4

    Raises ``ValueError`` for *shard* below 1 or not dividing the cluster's
    GPUs, no units, or byte sizes below 1.
    """
    world = cluster.world_size
    s = positive_int("shard", shard)
    divisible("world_size", world, "shard", s)
    if not units:
        raise ValueError("units must hold at least one Unit")
    pb, rb = (
        positive_int("param_bytes", param_bytes),
        positive_int("reduce_bytes", reduce_bytes),
    )
    r = world // s
    replicate_dim, shard_dim = mesh_dims(cluster, (r, s), ("replicate", "shard"))
    where = {d.name: (d.groups[0], d.link) for d in (replicate_dim, shard_dim)}
    gathers = 2 if reshard_after_forward else 1
    totals: dict[tuple[str, str, int], int] = {}
    for unit in units:
        padded = unit_padded_numel(unit, s)
        calls = [("shard", "all_gather", padded * pb, gathers)]
        calls.append(("shard", "reduce_scatter", padded * rb, 1))
        if r > 1:
            calls.append(("replicate", "all_reduce", padded // s * rb, 1))
        for dim, op, nbytes, n in calls:
            totals[(dim, op, nbytes)] = totals.get((dim, op, nbytes), 0) + n
    out = []
    for (dim, op, nbytes), n in totals.items():
        group, link = where[dim]
        seconds = n * predict(op, nbytes, cluster, group).seconds
        out.append(MeshCollective(dim, op, nbytes, n, len(group), link, seconds))
    params = sum(u.numel for u in units)
    state = ceil(bytes_per_parameter("fsdp2", dp_size=s) * params)
    return ShardingStep(r, s, tuple(out), state)
