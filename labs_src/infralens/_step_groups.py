"""The rank groups :func:`infralens.step.estimate` prices its collectives over.

Every collective is priced on real ranks, so :func:`infralens.nccl.predict` sees the
links between them: one axis's group through rank 0 (:func:`group_of`, exported by
:mod:`infralens.step`), and the group delayed FP8 scaling reduces its amax over
(:func:`amax_group`).

>>> from infralens.plan import ParallelPlan
>>> plan = ParallelPlan(tp=2, pp=2, dp=2)
>>> group_of(plan, "tp"), group_of(plan, "dp"), amax_group(plan)
([0, 1], [0, 2], [0, 1, 2, 3])
"""

from __future__ import annotations

from infralens._typecheck import typed
from infralens._validate import check_choice
from infralens.plan import AXES, ParallelPlan


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


def amax_group(plan: ParallelPlan) -> list[int]:
    """The ranks of pipeline stage 0 that share rank 0's TP × DP × CP group (Megatron-Core's
    amax-reduction group, ``parallel_state.get_amax_reduction_group``)."""
    return sorted(
        plan.rank(tp=i, cp=j, dp=k)
        for i in range(plan.tp)
        for j in range(plan.cp)
        for k in range(plan.dp)
    )
