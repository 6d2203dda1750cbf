"""Sharded checkpoints: who writes which rows, who reads them back, and what else to save.

A tensor sharded on dim 0 over N ranks (DTensor ``Shard(0)``, FSDP2) is saved
as one chunk per rank: rows ``[offset, offset + length)`` of the global
tensor, as :func:`infralens.sharding.chunk_sizes` splits them. Loading on M
ranks is a resharding: each new rank reads the overlap of its own row range
with every saved chunk. PyTorch's Distributed Checkpoint records the same
chunks in its metadata and plans the same reads (checked on gloo, 2.13);
its planning uses object collectives, and its ``FileSystemReader`` loads
each needed chunk whole before narrowing it to the overlap.

>>> layout = save_layout({"w": (10, 3)}, world_size=4)
>>> [(c.rank, c.offset, c.length) for c in layout["w"]]
[(0, 0, 3), (1, 3, 3), (2, 6, 3), (3, 9, 1)]
>>> reads = reshard_reads(layout, 2)[1]          # what rank 1 of 2 reads
>>> [(r.saved_offset, r.row_in_chunk, r.row_in_dest, r.rows) for r in reads]
[(3, 2, 0, 1), (6, 0, 1, 3), (9, 0, 4, 1)]

Weights are not enough to resume: :data:`REQUIRED_STATE` lists the rest, and
:class:`RolloutCursor` rejects stale or duplicated experience in online RL.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from infralens._typecheck import check_fields, typed
from infralens._validate import describe, nonnegative_int, positive_int, ranks_cap
from infralens.sharding import chunk_offsets, chunk_sizes

__all__ = [
    "REQUIRED_STATE",
    "Chunk",
    "Read",
    "RolloutCursor",
    "check_complete",
    "reshard_reads",
    "save_layout",
]


@dataclass(frozen=True)
class Chunk:
    """Rows ``[offset, offset + length)`` of a tensor, written by ``rank``."""

    rank: int
    offset: int
    length: int

    def __post_init__(self) -> None:
        nonnegative_int("rank", self.rank)
        nonnegative_int("offset", self.offset)
        nonnegative_int("length", self.length)
        check_fields(self)


@dataclass(frozen=True)
class Read:
    """One read of a loading rank: ``rows`` rows of a saved chunk.

    ``saved_offset`` identifies the chunk (its global first row);
    ``row_in_chunk`` is where the read starts inside it and ``row_in_dest``
    where it lands in the loading rank's local shard.
    """

    tensor: str
    saved_offset: int
    row_in_chunk: int
    row_in_dest: int
    rows: int

    def __post_init__(self) -> None:
        check_fields(self)


@typed
def save_layout(
    shapes: Mapping[str, Sequence[int]], world_size: int
) -> dict[str, list[Chunk]]:
    """The chunks N ranks write for tensors sharded on dim 0, one per rank.

    A rank whose shard is empty still records a chunk of length 0 at the end
    of the tensor, as DCP's metadata does (PyTorch 2.13).

    >>> [(c.offset, c.length) for c in save_layout({"b": (2,)}, world_size=4)["b"]]
    [(0, 1), (1, 1), (2, 0), (2, 0)]

    Raises ``ValueError`` for an empty shape, a negative dimension or
    *world_size* < 1.
    """
    # [start:save-chunks]
    w = positive_int("world_size", world_size)
    layout = {}
    for name, shape in shapes.items():
        if len(shape) == 0:
            raise ValueError(f"shape of {name!r} must have at least one dimension")
        rows = nonnegative_int(f"shape of {name!r}", shape[0])
        sizes, offsets = chunk_sizes(rows, w), chunk_offsets(rows, w)
        layout[name] = [Chunk(r, offsets[r], sizes[r]) for r in range(w)]
    return layout
    # [end:save-chunks]


def reshard_reads(
    layout: Mapping[str, Sequence[Chunk]], world_size: int
) -> list[list[Read]]:
    """For each of M loading ranks, the reads that fill its dim-0 shard.

    A loading rank owns rows ``[o, o + n)`` by
    :func:`~infralens.sharding.chunk_sizes` over M;
    it reads the intersection with every saved chunk, in chunk order.

    >>> for reads in reshard_reads({"v": [Chunk(0, 0, 4)]}, 2):   # one chunk, two readers
    ...     print(reads)
    [Read(tensor='v', saved_offset=0, row_in_chunk=0, row_in_dest=0, rows=2)]
    [Read(tensor='v', saved_offset=0, row_in_chunk=2, row_in_dest=0, rows=2)]

    Raises ``ValueError`` if *world_size* < 1 or a tensor's chunks overlap or
    leave a gap.
    """
    m = ranks_cap("world_size", world_size)
    if not isinstance(layout, Mapping):
        raise TypeError(
            f"layout must be a mapping of tensor name to chunks, got {describe(layout)}"
        )
    reads: list[list[Read]] = [[] for _ in range(m)]
    for name, chunks in layout.items():
        if isinstance(chunks, str | bytes) or not isinstance(chunks, Sequence):
            raise TypeError(f"layout[{describe(name)}] must be a sequence of Chunk")
        for c in chunks:
            if not isinstance(c, Chunk):
                raise TypeError(
                    f"layout[{describe(name)}] must hold Chunk, got {describe(c)}"
                )
        # [start:reshard-tiling]
        ordered = sorted(chunks, key=lambda c: c.offset)
        expected = 0
        for c in ordered:
            if c.offset != expected:
                raise ValueError(
                    f"chunks of layout[{describe(name)}] must tile the rows without gaps "
                    "or overlaps: "
                    f"a chunk starts at {c.offset}, expected {expected}"
                )
            expected = c.offset + c.length
        # [end:reshard-tiling]
        # [start:reshard-overlap]
        sizes, offsets = chunk_sizes(expected, m), chunk_offsets(expected, m)
        for r in range(m):
            lo, hi = offsets[r], offsets[r] + sizes[r]
            for c in ordered:
                # overlap = [max(lo, chunk start), min(hi, chunk end)), read if not empty
                start, stop = max(lo, c.offset), min(hi, c.offset + c.length)
                if start < stop:
                    reads[r].append(
                        Read(
                            name,
                            c.offset,
                            start - c.offset,
                            start - lo,
                            stop - start,
                        )
                    )
        # [end:reshard-overlap]
    return reads


REQUIRED_STATE = ("model", "optimizer", "step", "lr_scheduler", "rng", "dataloader")
"""What a resumable checkpoint must hold: weights alone restart a different run."""

ONLINE_RL_STATE = ("policy_version", "rollout_cursor")


@typed
def check_complete(saved_keys: Iterable[str], *, online_rl: bool = False) -> None:
    """Raise ``ValueError`` naming every part a resume needs that *saved_keys* lacks.

    >>> base = ["model", "optimizer", "step", "lr_scheduler", "rng"]
    >>> check_complete([*base, "dataloader"])
    >>> check_complete(base, online_rl=True)
    Traceback (most recent call last):
    ...
    ValueError: saved_keys: checkpoint lacks dataloader, policy_version, rollout_cursor
    """
    # [start:check-missing]
    have = set(saved_keys)
    needed = REQUIRED_STATE + (ONLINE_RL_STATE if online_rl else ())
    missing = [k for k in needed if k not in have]
    if missing:
        raise ValueError("saved_keys: checkpoint lacks " + ", ".join(missing))
    # [end:check-missing]


@dataclass(frozen=True)
class RolloutCursor:
    """Online-RL recovery state: the policy version and the next rollout index to consume.

    >>> cursor = RolloutCursor(policy_version=7, next_rollout=120, max_staleness=1)
    >>> cursor.accept(rollout=120, policy_version=6)
    RolloutCursor(policy_version=7, next_rollout=121, max_staleness=1)
    >>> cursor.accept(rollout=119, policy_version=7)
    Traceback (most recent call last):
    ...
    ValueError: rollout 119 was already consumed (next is 120)
    >>> cursor.accept(rollout=120, policy_version=5)
    Traceback (most recent call last):
    ...
    ValueError: rollout 120 is stale: policy 5 is more than 1 behind 7
    """

    policy_version: int
    next_rollout: int
    max_staleness: int = 0

    def __post_init__(self) -> None:
        nonnegative_int("policy_version", self.policy_version)
        nonnegative_int("next_rollout", self.next_rollout)
        nonnegative_int("max_staleness", self.max_staleness)
        check_fields(self)

    def accept(self, *, rollout: int, policy_version: int) -> RolloutCursor:
        """The cursor after *rollout*; ValueError if duplicated, skipping or stale."""
        r = nonnegative_int("rollout", rollout)
        v = nonnegative_int("policy_version", policy_version)
        if r < self.next_rollout:
            raise ValueError(
                f"rollout {r} was already consumed (next is {self.next_rollout})"
            )
        if r > self.next_rollout:
            raise ValueError(
                f"rollout {r} skips ahead of the cursor (next is {self.next_rollout})"
            )
        if self.policy_version - v > self.max_staleness:
            raise ValueError(
                f"rollout {r} is stale: policy {v} is more than {self.max_staleness} "
                f"behind {self.policy_version}"
            )
        return RolloutCursor(self.policy_version, r + 1, self.max_staleness)
