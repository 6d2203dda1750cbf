"""Who writes which shard of a 3-D-parallel checkpoint, and how long the write takes.

Under tensor (t), pipeline (p) and data (d) parallelism every rank holds a
piece of the state, and most pieces are held by several ranks: a tensor-
parallel shard of a weight sits on all d data-parallel replicas, a LayerNorm
weight on all t x d ranks of its stage. A checkpoint writes each distinct
piece once. Megatron-Core's dist-checkpointing marks one replica as the main
one (``replica_id`` 0) and, wrapped in ``FullyParallelSaveStrategyWrapper``,
spreads the writes over the ranks that hold a replica with a greedy rule
(``distribute_shards_to_ranks``: least-replicated shards first, larger first,
each to the least-loaded rank that has it). :func:`balanced_writers` follows
that rule; :func:`main_replica_writers` is the unbalanced default.

>>> shards = layout_shards(layers_per_stage=2, layer_bytes=800, norm_bytes=8,
...                        tp=2, pp=2, dp=2)
>>> main_replica_writers(shards, world_size=8)
(816, 800, 0, 0, 816, 800, 0, 0)
>>> balanced_writers(shards, world_size=8)
(408, 408, 400, 400, 408, 408, 400, 400)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from infralens._typecheck import check_fields, typed
from infralens._validate import divisible, positive_int, positive_number

__all__ = [
    "Shard",
    "balanced_writers",
    "layout_shards",
    "main_replica_writers",
    "write_seconds",
]


@dataclass(frozen=True)
class Shard:
    """A distinct piece of state: its ``name``, size in bytes, and the ranks that
    hold a replica of it (the first is the main replica, ``replica_id`` 0)."""

    name: str
    nbytes: int
    ranks: tuple[int, ...]

    def __post_init__(self) -> None:
        check_fields(self)
        if not self.ranks:
            raise ValueError(f"{self.name}: ranks must name at least one rank")


@typed
def layout_shards(
    *,
    layers_per_stage: int,
    layer_bytes: int,
    norm_bytes: int,
    tp: int,
    pp: int,
    dp: int,
) -> tuple[Shard, ...]:
    """The distinct shards of a stack of layers under tp x dp x pp, rank order tp-dp-pp.

    rank = tp_rank + tp * (dp_rank + dp * pp_rank). Each layer's matrices
    (*layer_bytes*) split into t shards, each held by the d replicas; its
    norms (*norm_bytes*) are one shard held by all t * d ranks of the stage.

    >>> [s.ranks for s in layout_shards(layers_per_stage=1, layer_bytes=8,
    ...                                  norm_bytes=2, tp=2, pp=1, dp=2)]
    [(0, 2), (1, 3), (0, 1, 2, 3)]
    >>> layout_shards(layers_per_stage=1, layer_bytes=9, norm_bytes=2, tp=2, pp=1, dp=1)
    Traceback (most recent call last):
    ...
    ValueError: layer_bytes must be divisible by tp: 9 % 2 = 1

    Raises ``ValueError`` for a size below 1 or *layer_bytes* not divisible by *tp*.
    """
    n = positive_int("layers_per_stage", layers_per_stage)
    t, p, d = positive_int("tp", tp), positive_int("pp", pp), positive_int("dp", dp)
    part = (
        divisible("layer_bytes", positive_int("layer_bytes", layer_bytes), "tp", t)
        // t
    )
    norms = positive_int("norm_bytes", norm_bytes)
    out: list[Shard] = []
    for stage in range(p):
        for layer in range(n):
            # [start:replicas]
            name = f"stage{stage}.layer{layer}"
            for tr in range(t):
                # the same tensor-parallel piece on every data-parallel replica
                held = tuple(tr + t * (dr + d * stage) for dr in range(d))
                out.append(Shard(f"{name}.tp{tr}", part, held))
            # a norm weight is replicated across tensor *and* data parallelism
            every = tuple(
                tr + t * (dr + d * stage) for dr in range(d) for tr in range(t)
            )
            out.append(Shard(f"{name}.norm", norms, every))
            # [end:replicas]
    return tuple(out)


def _loads(shards: Sequence[Shard], world_size: int) -> list[int]:
    n = positive_int("world_size", world_size)
    for s in shards:
        if any(not 0 <= r < n for r in s.ranks):
            raise ValueError(
                f"{s.name}: ranks must lie in range({n}), got {s.ranks}"
            )
    return [0] * n


@typed
def main_replica_writers(
    shards: Sequence[Shard], *, world_size: int
) -> tuple[int, ...]:
    """Bytes each rank writes when the main replica (first rank listed) writes each shard.

    >>> main_replica_writers([Shard("w", 4, (0, 1))], world_size=2)
    (4, 0)
    >>> main_replica_writers([Shard("w", 4, (2,))], world_size=2)
    Traceback (most recent call last):
    ...
    ValueError: w: ranks must lie in range(2), got (2,)

    Raises ``ValueError`` for a rank outside ``range(world_size)``.
    """
    load = _loads(shards, world_size)
    for s in shards:
        load[s.ranks[0]] += s.nbytes
    return tuple(load)


@typed
def balanced_writers(
    shards: Sequence[Shard], *, world_size: int
) -> tuple[int, ...]:
    """Bytes each rank writes under Megatron-Core's greedy save distribution.

    Shards sorted by (number of replicas, -size, name); each goes to the rank
    holding it with the fewest bytes so far (ties to the lower rank). Every
    shard is still written exactly once.

    >>> balanced_writers([Shard("a", 6, (0, 1)), Shard("b", 4, (0, 1))], world_size=2)
    (6, 4)
    >>> balanced_writers([], world_size=3)
    (0, 0, 0)

    Raises ``ValueError`` for a rank outside ``range(world_size)``.
    """
    load = _loads(shards, world_size)
    # [start:greedy]
    order = sorted(shards, key=lambda s: (len(s.ranks), -s.nbytes, s.name))
    for s in order:
        writer = min(s.ranks, key=lambda r: (load[r], r))  # least-loaded holder
        load[writer] += s.nbytes
    # [end:greedy]
    return tuple(load)


@typed
def write_seconds(
    per_rank_bytes: Sequence[int],
    *,
    gpus_per_node: int,
    node_gb_per_s: float,
    storage_gb_per_s: float,
) -> float:
    """Seconds a synchronous checkpoint write takes: the slower of the two limits.

    t = max(busiest node's bytes / node bandwidth, total bytes / storage bandwidth),
    with both bandwidths in GB/s (1e9 bytes a second).
    Staging to local NVMe first makes the pause the first term with the NVMe's
    bandwidth as *node_gb_per_s*; the copy to storage then runs in the background.

    >>> per_rank = [10**9] * 16                   # 1 GB per GPU, 2 nodes of 8
    >>> write_seconds(per_rank, gpus_per_node=8, node_gb_per_s=50, storage_gb_per_s=4)
    4.0
    >>> write_seconds(per_rank, gpus_per_node=8, node_gb_per_s=50, storage_gb_per_s=400)
    0.16
    >>> write_seconds([1, 2, 3], gpus_per_node=2, node_gb_per_s=1, storage_gb_per_s=1)
    Traceback (most recent call last):
    ...
    ValueError: len(per_rank_bytes) must be divisible by gpus_per_node: 3 % 2 = 1

    Raises ``ValueError`` for a negative byte count, bandwidths not > 0, or a
    rank count that does not fill whole nodes.
    """
    g = positive_int("gpus_per_node", gpus_per_node)
    divisible("len(per_rank_bytes)", len(per_rank_bytes), "gpus_per_node", g)
    if any(b < 0 for b in per_rank_bytes):
        raise ValueError("per_rank_bytes must be >= 0")
    node = float(positive_number("node_gb_per_s", node_gb_per_s)) * 1e9
    storage = float(positive_number("storage_gb_per_s", storage_gb_per_s)) * 1e9
    nodes = [
        sum(per_rank_bytes[i : i + g]) for i in range(0, len(per_rank_bytes), g)
    ]
    return max(max(nodes, default=0) / node, sum(per_rank_bytes) / storage)
