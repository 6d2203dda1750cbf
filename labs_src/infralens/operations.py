"""Operating a large job: which rank hangs it and which rank or link slows it down.

Every collective a process group issues gets the next sequence number on
every member, so a job in which one rank skipped or never reached a
collective shows it in the numbers: the other ranks have started sequence
``k + 1`` and wait in it, the culprit is still at ``k``. The rank that
reports the timeout first is one of those waiting, a victim. PyTorch's flight
recorder keeps these records per rank (``collective_seq_id``,
``profiling_name``, ``input_sizes``; PyTorch 2.13 records them for gloo too,
checked on gloo in the tests).

>>> hang_culprits({0: 41, 1: 41, 2: 40, 3: 41})
[2]
>>> find_straggler({0: 0.6, 1: 0.6, 2: 0.95, 3: 0.6}, {0: 0.4, 1: 0.4, 2: 0.05, 3: 0.4},
...                groups=[[0, 1, 2, 3]]).ranks
(2,)

What failures cost and how often to checkpoint lives in :mod:`infralens.goodput`;
:func:`optimal_checkpoint_interval` is re-exported here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import median

from infralens._typecheck import check_fields
from infralens._validate import nonnegative_int, nonnegative_number, positive_number
from infralens.goodput import optimal_checkpoint_interval

__all__ = [
    "CollectiveRecord",
    "Hang",
    "Straggler",
    "find_hang",
    "find_straggler",
    "hang_culprits",
    "optimal_checkpoint_interval",
]


def _rank_map(name: str, values: Mapping[int, object]) -> dict[int, int]:
    if not isinstance(values, Mapping) or len(values) == 0:
        raise ValueError(f"{name} must map at least one rank to a sequence number")
    return {
        nonnegative_int(f"{name} rank", r): nonnegative_int(f"{name}[{r}]", s)
        for r, s in values.items()
    }


def hang_culprits(last_started: Mapping[int, int]) -> list[int]:
    """Ranks that never started the collective the others wait in, sorted.

    With ``last_started[r]`` the sequence number of the last collective rank
    ``r`` started, the first collective not started everywhere is
    ``min + 1``; the culprits are the ranks still at ``min``. A rank between
    the minimum and the maximum is a victim too: it waits in ``min + 1``.

    >>> hang_culprits({0: 7, 1: 7, 2: 7})          # everyone is in one collective
    []
    >>> hang_culprits({0: 9, 1: 8, 2: 6, 3: 9})    # rank 1 waits for rank 2 as well
    [2]

    Raises ``ValueError`` for an empty mapping or a negative rank or number.
    """
    seqs = _rank_map("last_started", last_started)
    low, high = min(seqs.values()), max(seqs.values())
    return [] if low == high else sorted(r for r, s in seqs.items() if s == low)


@dataclass(frozen=True)
class CollectiveRecord:
    """One flight-recorder entry of one rank: sequence number, op, bytes, completed."""

    seq: int
    op: str
    nbytes: int
    completed: bool = False

    def __post_init__(self) -> None:
        check_fields(self)


@dataclass(frozen=True)
class Hang:
    """The first collective not completed everywhere, and who is where.

    ``missing`` never started it (the culprits); ``waiting`` started it and
    did not finish; ``mismatched`` is true when the ranks that started it
    disagree on the op or the size (a desync: the code paths diverged).
    """

    seq: int
    op: str
    nbytes: int
    missing: tuple[int, ...]
    waiting: tuple[int, ...]
    mismatched: bool

    def __post_init__(self) -> None:
        check_fields(self)


def find_hang(records: Mapping[int, Sequence[CollectiveRecord]]) -> Hang | None:
    """Find the first collective that did not complete on every rank.

    Walk the sequence numbers from the oldest recorded. A number older than a
    rank's oldest record counts as completed there (the ring buffer dropped
    it); a number newer than its newest record was never started there.
    Return ``None`` if every recorded collective completed everywhere with one
    op and size.

    >>> done = [CollectiveRecord(s, "all_reduce", 16, True) for s in (1, 2)]
    >>> hang = find_hang({0: done + [CollectiveRecord(3, "all_reduce", 32)],
    ...                   1: done + [CollectiveRecord(3, "all_reduce", 32)], 2: done})
    >>> hang.seq, hang.op, hang.nbytes, hang.missing, hang.waiting, hang.mismatched
    (3, 'all_reduce', 32, (2,), (0, 1), False)
    >>> find_hang({0: done, 1: done[1:]}) is None   # rank 1's buffer lost seq 1
    True
    >>> find_hang({0: [CollectiveRecord(1, "all_reduce", 16)],
    ...            1: [CollectiveRecord(1, "all_gather", 16)]}).mismatched
    True

    A rank with no records has started no collective (PyTorch numbers them
    from 1):

    >>> find_hang({0: [CollectiveRecord(1, "broadcast", 8)], 1: []}).missing
    (1,)

    Raises ``ValueError`` if *records* is empty or a rank records one
    sequence number twice.
    """
    if not isinstance(records, Mapping) or len(records) == 0:
        raise ValueError(
            "records must map at least one rank to its collective records"
        )
    by_rank: dict[int, dict[int, CollectiveRecord]] = {}
    for rank, entries in records.items():
        nonnegative_int("records rank", rank)
        seen: dict[int, CollectiveRecord] = {}
        for e in entries:
            if nonnegative_int(f"seq of rank {rank}", e.seq) in seen:
                raise ValueError(
                    f"rank {rank} records sequence number {e.seq} twice"
                )
            seen[e.seq] = e
        by_rank[rank] = seen
    # [start:walk]
    # [start:walk-range]
    # PyTorch numbers a group's collectives from 1:
    # a rank with no record started none
    last = {r: max(s, default=0) for r, s in by_rank.items()}
    firsts = [min(s) for s in by_rank.values() if s]
    # Between recorded numbers nothing changes except where the shortest
    # rank stops: walk the recorded ones and the first after it, never
    # every number in between.
    lo, hi = min(firsts, default=1), max(last.values())
    steps = {q for s in by_rank.values() for q in s} | {min(last.values()) + 1, lo}
    # [end:walk-range]
    # [start:walk-first-gap]
    for seq in sorted(q for q in steps if lo <= q <= hi):
        present = {r: s[seq] for r, s in by_rank.items() if seq in s}
        missing = tuple(sorted(r for r in by_rank if seq > last[r]))
        waiting = tuple(sorted(r for r, e in present.items() if not e.completed))
        kinds = {(e.op, e.nbytes) for e in present.values()}
        if missing or waiting or len(kinds) > 1:
            ref = present[min(present)] if present else CollectiveRecord(seq, "", 0)
            return Hang(seq, ref.op, ref.nbytes, missing, waiting, len(kinds) > 1)
    return None
    # [end:walk-first-gap]
    # [end:walk]


@dataclass(frozen=True)
class Straggler:
    """A verdict ('slow rank', 'slow link' or 'none'), the ranks it names, and why."""

    kind: str
    ranks: tuple[int, ...]
    evidence: str

    def __post_init__(self) -> None:
        check_fields(self)


def _seconds(name: str, values: Mapping[int, float]) -> dict[int, float]:
    if not isinstance(values, Mapping) or len(values) == 0:
        raise ValueError(f"{name} must map at least one rank to seconds")
    return {
        r: float(nonnegative_number(f"{name}[{r}]", t)) for r, t in values.items()
    }


def find_straggler(
    compute_s: Mapping[int, float],
    comm_s: Mapping[int, float],
    *,
    groups: Sequence[Sequence[int]],
    ratio: float = 1.2,
) -> Straggler:
    """Tell a slow rank from a slow link, from per-rank medians over steps.

    *compute_s* and *comm_s* hold each rank's compute and exposed collective
    seconds; *groups* are disjoint process groups that run the same
    collective on the same bytes (say the data-parallel groups), together
    covering every rank. The checks, in order:

    1. **slow rank**: the slowest rank computes more than ``ratio`` times the
       median of the others, and the rest of its group waits longer than it
       does in collectives (they wait for it);
    2. **slow link**: one group's median collective time is more than
       ``ratio`` times the median of the other groups' while its members
       compute normally: every member is slow in the collective, so the path
       they share is;
    3. otherwise **none**.

    >>> compute = {r: 0.6 for r in range(8)}
    >>> comm = {r: (0.5 if r in (4, 5, 6, 7) else 0.2) for r in range(8)}
    >>> verdict = find_straggler(compute, comm, groups=[[0, 1, 2, 3], [4, 5, 6, 7]])
    >>> verdict.kind, verdict.ranks
    ('slow link', (4, 5, 6, 7))
    >>> for part in verdict.evidence.split("; "):
    ...     print(part)
    group [4, 5, 6, 7] spends 0.5 s in collectives against 0.2 s elsewhere
    it computes 0.6 s
    >>> find_straggler({0: 1.0}, {0: 0.0}, groups=[[0]]).kind   # nothing to compare
    'none'

    Raises ``ValueError`` if the groups overlap, miss a rank or name an
    unknown one, or a time is negative.
    """
    compute, comm = _seconds("compute_s", compute_s), _seconds("comm_s", comm_s)
    limit = float(positive_number("ratio", ratio))
    ranks = sorted(compute)
    members = [sorted(nonnegative_int("groups rank", r) for r in g) for g in groups]
    flat = sorted(r for g in members for r in g)
    if sorted(comm) != ranks or flat != ranks:
        raise ValueError(
            f"compute_s, comm_s and groups must cover the same ranks once each: "
            f"{ranks}, {sorted(comm)}, {flat}"
        )
    # [start:verdict]
    # [start:slow-rank]
    # 1. slow rank: compute > ratio × the others' median,
    #    and its peers wait longer than it
    if len(ranks) > 1:
        slow = max(ranks, key=lambda r: compute[r])
        typical = median(compute[r] for r in ranks if r != slow)
        peers = [r for g in members if slow in g for r in g if r != slow]
        waiting = median(comm[r] for r in peers) if peers else 0.0
        if compute[slow] > limit * typical and waiting > comm[slow]:
            return Straggler(
                "slow rank",
                (slow,),
                f"rank {slow} computes {round(compute[slow], 3)} s "
                f"against a median of {round(typical, 3)} s; "
                f"its group waits {round(waiting, 3)} s in collectives",
            )
    # [end:slow-rank]
    # [start:slow-link]
    # 2. slow link: one group's collectives > ratio × the other groups',
    #    its compute normal
    if len(members) > 1:
        medians = [median(comm[r] for r in g) for g in members]
        worst = max(range(len(members)), key=lambda i: medians[i])
        others = median(m for i, m in enumerate(medians) if i != worst)
        group_compute = median(compute[r] for r in members[worst])
        if medians[worst] > limit * others and group_compute <= limit * median(
            compute.values()
        ):
            return Straggler(
                "slow link",
                tuple(members[worst]),
                f"group {members[worst]} spends {round(medians[worst], 3)} s "
                f"in collectives against {round(others, 3)} s elsewhere; "
                f"it computes {round(group_compute, 3)} s",
            )
    return Straggler(
        "none", (), "no rank computes slowly and no group's collectives stand out"
    )
    # [end:slow-link]
    # [end:verdict]
