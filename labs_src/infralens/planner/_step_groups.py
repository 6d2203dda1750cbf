"""The rank groups :func:`infralens.planner.step.estimate` prices its collectives over.

Every collective is priced on real ranks, so :func:`infralens.nccl.predict` sees the
links between them: one axis's group through rank 0 (:func:`group_of`, exported by
:mod:`infralens.planner.step`), the group a collective over one or more axes waits for
(:func:`slowest_group`, which the step and the worksheet both price on), the hop that
paces a ring over it (:func:`ring_hop`), whether a group crosses the network
(:func:`spans`), and the group delayed FP8 scaling reduces its amax over
(:func:`amax_group`).

>>> from infralens.plan import ParallelPlan
>>> plan = ParallelPlan(tp=2, pp=2, dp=2)
>>> group_of(plan, "tp"), group_of(plan, "dp"), amax_group(plan)
([0, 1], [0, 2], [0, 1, 2, 3])
"""

from __future__ import annotations

from collections import Counter
from math import gcd, prod

from infralens._typecheck import typed
from infralens._validate import check_choice
from infralens.plan import AXES, ParallelPlan
from infralens.topology import Cluster


@typed
def group_of(plan: ParallelPlan, axis: str) -> list[int]:
    """The *axis* group through rank 0, built without listing every group.

    >>> group_of(ParallelPlan(tp=8, pp=4, dp=2), "pp")
    [0, 16, 32, 48]
    """
    if not isinstance(plan, ParallelPlan):
        raise TypeError(f"plan must be a ParallelPlan, got {type(plan).__name__}")
    check_choice("axis", axis, AXES)
    return [plan.rank(**{axis: i}) for i in range(getattr(plan, axis))]


@typed
def slowest_group(
    plan: ParallelPlan, cluster: Cluster, axes: tuple[str, ...]
) -> list[int]:
    """The group over *axes* (ranks that differ only in those coordinates) that a
    collective over them waits for: the one spread over the most NVLink domains, then with
    the fewest ranks in one domain (the fewest network adapters carry its traffic), then
    with the most ranks sharing one.

    key(group) = (domains, −fewest ranks in a domain, most ranks in a domain)

    All the groups of *axes* step together, so the axis runs at its slowest group's pace.
    A group's domain counts depend only on where its first rank falls in a domain
    (rank mod domain size), so one group per such offset is examined, never every group.
    Several axes name one group (``("dp", "cp")``: Megatron-Core's dp-cp group,
    torchtitan's ``dp_shard_cp`` mesh).

    >>> c = Cluster.from_node_shape("6_nodes_x_8_gpus", "dgx-h100")
    >>> plan = ParallelPlan(cp=6, pp=4, dp=2)
    >>> group_of(plan, "cp"), slowest_group(plan, c, ("cp",))
    ([0, 1, 2, 3, 4, 5], [6, 7, 8, 9, 10, 11])
    >>> slowest_group(ParallelPlan(tp=2, cp=2, dp=2), Cluster.from_node_shape(
    ...     "1_node_x_8_gpus"), ("dp", "cp"))
    [0, 2, 4, 6]
    >>> slowest_group(plan, c, ())
    Traceback (most recent call last):
    ...
    ValueError: axes must name one or more of tp, cp, dp, pp, each once

    Raises ``ValueError`` for no axis, an unknown one or one named twice.
    """
    if not axes or len(set(axes)) != len(axes):
        raise ValueError(
            "axes must name one or more of " + ", ".join(AXES[:4]) + ", each once"
        )
    for axis in axes:
        check_choice("axis", axis, AXES[:4])
    strides = {
        a: plan.rank(**{a: 1}) if getattr(plan, a) > 1 else 0 for a in AXES[:4]
    }
    offsets = [0]
    for a in axes:  # the group's ranks, relative to its first
        offsets = [
            o + i * strides[a] for o in offsets for i in range(getattr(plan, a))
        ]
    d = cluster.domain_size
    first = {
        0: 0
    }  # a first rank for each offset in a domain the groups can start at
    for a in AXES[:4]:
        if a in axes or getattr(plan, a) == 1:
            continue
        period = d // gcd(strides[a], d)
        first = {
            (r + i * strides[a]) % d: b + i * strides[a]
            for r, b in first.items()
            for i in reversed(range(min(getattr(plan, a), period)))
        }
    if len(first) == 1 or prod(getattr(plan, a) for a in axes) == 1:
        return [first[min(first)] + o for o in sorted(offsets)]

    def key(base: int) -> tuple[int, int, int]:
        counts = Counter((base + o) // d for o in offsets).values()
        return len(counts), -min(counts), max(counts)

    worst = max(sorted(first.values()), key=key)
    return sorted(worst + o for o in offsets)


@typed
def ring_hop(cluster: Cluster, group: list[int]) -> list[int]:
    """The slowest hop of a ring or chain over *group*: the first pair of neighbours (the
    last wrapping to the first) in different NVLink domains, else the first two ranks.

    Every hop of a ring sends at once and each step waits for the slowest, so a ring
    that leaves one NVLink domain runs at the network's pace; a pipeline's chain that
    spans domains has such a hop between two of its stages, and the stage beside it
    waits on it.

    >>> c = Cluster.from_node_shape("4_nodes_x_8_gpus", "dgx-h100")
    >>> ring_hop(c, [0, 4, 8, 12]), ring_hop(c, [0, 1]), ring_hop(c, [3])
    ([4, 8], [0, 1], [3])
    """
    hops = zip(group, group[1:] + group[:1], strict=True)
    slow = [[a, b] for a, b in hops if cluster.domain_of(a) != cluster.domain_of(b)]
    return slow[0] if slow else group[:2]


def spans(cluster: Cluster, group: list[int]) -> bool:
    """Whether *group* leaves one NVLink domain, so that its traffic crosses the network.

    >>> c = Cluster.from_node_shape("2_nodes_x_8_gpus", "dgx-h100")
    >>> spans(c, [0, 8]), spans(c, [0, 7])
    (True, False)
    """
    return len({cluster.domain_of(r) for r in group}) > 1


def amax_group(plan: ParallelPlan) -> list[int]:
    """The ranks of pipeline stage 0 that share rank 0's TP × DP × CP group (Megatron-Core's
    amax-reduction group, ``parallel_state.get_amax_reduction_group``)."""
    return sorted(
        plan.rank(tp=i, cp=j, dp=k)
        for i in range(plan.tp)
        for j in range(plan.cp)
        for k in range(plan.dp)
    )
