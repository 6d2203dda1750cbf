"""Incidents in a running job: GPU Xid events, loss spikes, and sums that change with the order.

Three things an operator of a long training run meets, each reduced to a rule
the job can act on:

- an **Xid** event in the kernel log: what failed, how far it reaches (one
  process, one GPU, the node) and what to do (restart the process, reset the
  GPU, drain the node) — :data:`XID` and :func:`node_response`;
- a **loss spike**: PaLM's recipe, rewind to a checkpoint about 100 steps before
  the spike and skip 200 to 500 batches in all, the replayed ones included —
  :func:`spike_rewind`;
- **non-determinism**: floating-point addition is not associative, so a ring
  that starts each chunk's sum at a different rank gives different bits for
  different world sizes or chunkings — :func:`ring_order` and :func:`ring_sum`.

>>> XID[95].scope, XID[95].action
('gpu', 'reset_gpu')
>>> node_response([94, 94, 79])
'drain_node'
>>> ring_sum([1e16, 1.0, -1e16, 1.0], chunk=0), ring_sum([1e16, 1.0, -1e16, 1.0], chunk=1)
(1.0, 0.0)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from infralens._typecheck import typed
from infralens._validate import nonnegative_int, positive_int, ranks_cap

__all__ = [
    "ACTIONS",
    "XID",
    "XidEvent",
    "node_response",
    "ring_order",
    "ring_sum",
    "spike_rewind",
]

ACTIONS = ("none", "restart_process", "reset_gpu", "drain_node")
"""What the job does, mildest first: nothing (log and count it); restart the
failed process(es) from the last checkpoint on the same GPUs; reset the GPU
before it runs again; take the node out (reboot, test, repair)."""


@dataclass(frozen=True)
class XidEvent:
    """One Xid code: its meaning, how far it reaches (``process``, ``gpu``, ``node``),
    NVIDIA's immediate resolution bucket for it (``nvidia``, as the Xid catalog
    spells it) and the action a training job takes (one of :data:`ACTIONS`)."""

    code: int
    meaning: str
    scope: str
    nvidia: str
    action: str


XID: dict[int, XidEvent] = {
    e.code: e
    for e in (
        # NVIDIA's Xid catalog (Ampere and later), immediate-action column, and
        # GPU Memory Error Management for the ECC and row-remapping codes.
        XidEvent(
            13,
            "graphics engine exception (often an illegal access in a kernel)",
            "process",
            "RESTART_APP",
            "restart_process",
        ),
        XidEvent(
            31,
            "GPU memory page fault (MMU fault)",
            "process",
            "RESTART_APP",
            "restart_process",
        ),
        XidEvent(
            43,
            "GPU stopped processing: the faulting channel was reset",
            "process",
            "IGNORE",
            "none",
        ),
        XidEvent(
            48,
            "double-bit (uncorrectable) ECC error in GPU memory",
            "gpu",
            "WORKFLOW_XID_48",
            "reset_gpu",
        ),
        XidEvent(
            63,
            "row-remapping event: a row is marked for remapping at the next reset",
            "gpu",
            "IGNORE",
            "none",
        ),
        XidEvent(64, "row-remapping failure", "gpu", "RESET_GPU", "drain_node"),
        XidEvent(
            74,
            "NVLink error between the GPU and a peer or NVSwitch",
            "gpu",
            "WORKFLOW_NVLINK_ERR",
            "reset_gpu",
        ),
        XidEvent(
            79,
            "GPU has fallen off the bus: the host cannot reach it",
            "node",
            "RESTART_BM",
            "drain_node",
        ),
        XidEvent(
            94,
            "contained ECC error: only the process using the memory is hit",
            "process",
            "RESTART_APP",
            "restart_process",
        ),
        XidEvent(
            95,
            "uncontained ECC error: every process on the GPU is hit",
            "gpu",
            "RESET_GPU",
            "reset_gpu",
        ),
        XidEvent(
            119,
            "GSP RPC timeout: the GPU System Processor stopped answering",
            "gpu",
            "RESET_GPU",
            "reset_gpu",
        ),
        XidEvent(120, "GSP error", "gpu", "RESET_GPU", "reset_gpu"),
        XidEvent(140, "unrecovered ECC error", "gpu", "RESET_GPU", "reset_gpu"),
        XidEvent(
            155,
            "NVLink software-defined error (Blackwell)",
            "gpu",
            "RESET_GPU",
            "reset_gpu",
        ),
    )
}
"""The Xid codes a training operator meets most, by code."""


@typed
def node_response(codes: Sequence[int]) -> str:
    """The action for a node that logged *codes*: the strongest any of them asks for.

    none < restart_process < reset_gpu < drain_node; a code outside :data:`XID`
    is not guessed at and raises. An empty list needs no action and returns
    ``"none"``.

    >>> node_response([94])
    'restart_process'
    >>> node_response([94, 48])
    'reset_gpu'
    >>> node_response([])
    'none'
    >>> node_response([63, 43])
    'none'
    >>> node_response([12])
    Traceback (most recent call last):
    ...
    ValueError: codes[0] must be one of the 14 Xid codes in XID; got 12

    Raises ``ValueError`` for a code not in :data:`XID`.
    """
    worst = -1
    for i, code in enumerate(codes):
        if code not in XID:
            raise ValueError(
                f"codes[{i}] must be one of the {len(XID)} Xid codes in XID; got {code}"
            )
        worst = max(worst, ACTIONS.index(XID[code].action))
    return ACTIONS[max(worst, 0)]


@typed
def spike_rewind(
    spike_step: int, *, checkpoint_every: int, lookback: int = 100, skip: int = 200
) -> tuple[int, range]:
    """PaLM's loss-spike recipe: the checkpoint to restart from and the batches to skip.

    restart = the last checkpoint at or before spike_step - lookback
    skipped = range(restart, restart + (spike_step - restart) + skip)

    Chowdhery et al. (PaLM, §5.1) restarted about 100 steps before a spike and
    skipped about 200 to 500 batches, "which cover the batches that were seen
    before and during the spike": the count is ``len(skipped)``, the batches
    between the restart and the spike included. The steps from the restart to
    the spike are computed again with other data.

    >>> restart, skipped = spike_rewind(12_345, checkpoint_every=200)
    >>> restart, skipped, len(skipped)
    (12200, range(12200, 12545), 345)
    >>> spike_rewind(50, checkpoint_every=1000)   # before the first checkpoint
    (0, range(0, 250))
    >>> spike_rewind(1000, checkpoint_every=0)
    Traceback (most recent call last):
    ...
    ValueError: checkpoint_every must be >= 1, got 0

    Raises ``ValueError`` for a negative step, lookback or skip, or *checkpoint_every* < 1.
    """
    s = nonnegative_int("spike_step", spike_step)
    every = positive_int("checkpoint_every", checkpoint_every)
    back = nonnegative_int("lookback", lookback)
    more = nonnegative_int("skip", skip)
    restart = max(0, s - back) // every * every
    return restart, range(restart, s + more)


@typed
def ring_order(world_size: int, chunk: int) -> tuple[int, ...]:
    """The ranks whose contributions a ring reduce-scatter adds to *chunk*, in order.

    Chunk c starts on rank c mod n and travels the ring: c, c + 1, ..., c + n - 1
    (mod n). Every chunk starts elsewhere, so element i is summed in an order
    that depends on which chunk holds it: on the world size and the buffer size.

    >>> ring_order(4, 0), ring_order(4, 2)
    ((0, 1, 2, 3), (2, 3, 0, 1))
    >>> ring_order(0, 0)
    Traceback (most recent call last):
    ...
    ValueError: world_size must be >= 1, got 0

    Raises ``ValueError`` for *world_size* < 1 or above 2**24, or a negative *chunk*.
    """
    n = ranks_cap("world_size", world_size)
    c = nonnegative_int("chunk", chunk) % n
    return tuple((c + k) % n for k in range(n))


@typed
def ring_sum(per_rank: Sequence[float], *, chunk: int) -> float:
    """Add one float per rank in :func:`ring_order`, as a ring does in float arithmetic.

    >>> ring_sum([0.1, 0.2, 0.3], chunk=0), ring_sum([0.1, 0.2, 0.3], chunk=1)
    (0.6000000000000001, 0.6)
    >>> ring_sum([], chunk=0)
    Traceback (most recent call last):
    ...
    ValueError: per_rank must hold one value per rank, got none

    Raises ``ValueError`` for an empty *per_rank* or a negative *chunk*.
    """
    if not per_rank:
        raise ValueError("per_rank must hold one value per rank, got none")
    order = ring_order(len(per_rank), chunk)
    total = float(per_rank[order[0]])
    for r in order[1:]:
        total += float(per_rank[r])
    return total
