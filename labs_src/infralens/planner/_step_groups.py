"""The rank groups :func:`infralens.planner.step.estimate` prices its collectives over.

Every collective is priced on real ranks, so :func:`infralens.nccl.predict` sees the
links between them: one axis's group through rank 0 (:func:`group_of`, exported by
:mod:`infralens.planner.step`), the hop that paces a ring over it (:func:`ring_hop`), and the
group delayed FP8 scaling reduces its amax over (:func:`amax_group`).

>>> from infralens.plan import ParallelPlan
>>> plan = ParallelPlan(tp=2, pp=2, dp=2)
>>> group_of(plan, "tp"), group_of(plan, "dp"), amax_group(plan)
([0, 1], [0, 2], [0, 1, 2, 3])
"""

from __future__ import annotations

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


def amax_group(plan: ParallelPlan) -> list[int]:
    """The ranks of pipeline stage 0 that share rank 0's TP × DP × CP group (Megatron-Core's
    amax-reduction group, ``parallel_state.get_amax_reduction_group``)."""
    return sorted(
        plan.rank(tp=i, cp=j, dp=k)
        for i in range(plan.tp)
        for j in range(plan.cp)
        for k in range(plan.dp)
    )
