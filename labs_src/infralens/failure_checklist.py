"""What to collect and read first, on every rank, when a multi-node job fails.

A failed or hung job leaves its evidence on every rank and node, and a
restart overwrites most of it. :data:`COLLECT_FIRST` lists what to gather
before anyone restarts; :data:`FAILURE_CHECKLIST` pairs each common failure
with what to read first and why rank 0's log is not enough: the ranks that
report a timeout are waiting, and the rank that failed may report nothing.
Telling a slow rank from a slow link in per-rank step times is
:mod:`infralens.diagnosis`; finding a hang's culprit from collective
sequence numbers is :func:`infralens.operations.hang_culprits`.

>>> [what for what, _ in COLLECT_FIRST][:2]
['flight-recorder dumps from every rank', 'NCCL_DEBUG=INFO output from every rank']
>>> [failure for failure, _, _ in FAILURE_CHECKLIST][:3]
['hang or NCCL timeout', 'GPU fault', 'launch mismatch']
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "COLLECT_FIRST",
    "FAILURE_CHECKLIST",
]

COLLECT_FIRST: Sequence[tuple[str, str]] = (
    (
        "flight-recorder dumps from every rank",
        "TORCH_NCCL_DUMP_ON_TIMEOUT=1 with TORCH_NCCL_ENABLE_MONITORING=1 writes them on a "
        "watchdog timeout (PyTorch 2.13); torchfrtrace finds the first collective not started "
        "everywhere and the ranks missing from it",
    ),
    (
        "NCCL_DEBUG=INFO output from every rank",
        "NCCL's version, topology detection, algorithm and network choices, and the warnings "
        "and errors it reports; NCCL_DEBUG_FILE writes one file per host and process",
    ),
    (
        "GPU error logs from every node",
        "Xid lines in the kernel log, ECC error counts and row-remapping failures "
        "and pending remaps (nvidia-smi, NVML)",
    ),
    (
        "per-rank step times",
        "compute, collective wait and data wait per rank and step, to tell a slow rank from a "
        "slow link",
    ),
)
"""(what to collect, what it shows): gather these before restarting, from all ranks."""

# [start:checklist]
# [start:checklist-silent-rank]
FAILURE_CHECKLIST: Sequence[tuple[str, str, str]] = (
    (
        "hang or NCCL timeout",
        "every rank's flight-recorder dump: the first collective sequence number "
        "not started everywhere, and the ranks missing from it",
        "the ranks that report the timeout are waiting; the culprit may report "
        "nothing",
    ),
    (
        "GPU fault",
        "the kernel log's Xid lines and the ECC and row-remapping counters on "
        "every node",
        "the faulty GPU's rank may die silently; the others only time out in a "
        "collective",
    ),
    (
        "launch mismatch",
        "every rank's launch line: world size, rank, master address and port",
        "rank 0 only shows it is waiting for peers that never joined",
    ),
    # [end:checklist-silent-rank]
    # [start:checklist-other-rank]
    (
        "one rank out of memory",
        "per-rank logs for the OOM message and that rank's batch and stage",
        "the other ranks only report a broken or timed-out collective",
    ),
    (
        "slow step or straggler",
        "per-rank step times split into compute, collective wait and data wait",
        "every rank's step is equally long; only the split shows which rank or "
        "link is slow",
    ),
    (
        "checkpoint corruption",
        "the checkpoint metadata: every tensor's chunks must tile its shape",
        "rank 0 loads its own shard fine; the broken chunk belongs to another rank",
    ),
)
"""(failure, what to read first, why rank 0's log is not enough)."""
# [end:checklist-other-rank]
# [end:checklist]
