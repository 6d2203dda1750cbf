"""ParallelPlan placement, published plans, and enumeration."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infralens.hardware import SYSTEMS
from infralens.plan import AXES, ParallelPlan, enumerate_plans
from infralens.topology import Cluster

degrees = st.sampled_from([1, 2, 3, 4])
orders = st.sampled_from(["tp-cp-dp-pp", "tp-cp-pp-dp", "pp-dp-cp-tp", "dp-tp-pp-cp"])


@st.composite
def plans(draw: st.DrawFn) -> ParallelPlan:
    dp = draw(degrees)
    ep = draw(st.sampled_from([d for d in (1, 2, 3, 4) if dp % d == 0]))
    return ParallelPlan(
        tp=draw(degrees), pp=draw(degrees), dp=dp, cp=draw(degrees), ep=ep, order=draw(orders)
    )


@given(plans())
def test_every_rank_is_in_exactly_one_group_per_axis(plan: ParallelPlan) -> None:
    for axis in AXES:
        groups = plan.groups(axis)
        members = sorted(r for g in groups for r in g)
        assert members == list(range(plan.world_size)), axis
        assert all(len(g) == getattr(plan, axis) for g in groups), axis


@given(plans(), st.data())
def test_coords_and_rank_are_inverse(plan: ParallelPlan, data: st.DataObject) -> None:
    r = data.draw(st.integers(0, plan.world_size - 1))
    c = plan.coords(r)
    assert plan.rank(**{a: c[a] for a in ("tp", "cp", "dp", "pp")}) == r


def test_tp8_pp4_dp2_on_8_nodes_keeps_each_tp_group_in_one_node() -> None:
    plan = ParallelPlan(tp=8, pp=4, dp=2)
    cluster = Cluster.from_node_shape("8_nodes_x_8_gpus", "dgx-h100")
    plan.check_world_size(cluster.world_size)
    for group in plan.groups("tp"):
        assert {cluster.node_of(r) for r in group} == {cluster.node_of(group[0])}
        assert len(group) == cluster.gpus_per_node
    assert all(cluster.tier_of(g).name == "network" for g in plan.groups("pp"))


# Narayanan et al. 2021, Table 1: (t, p, GPUs); d = GPUs / (t * p).
MEGATRON_TABLE_1 = [
    (1, 1, 32), (2, 1, 64), (4, 1, 128), (8, 1, 256), (8, 2, 512),
    (8, 4, 1024), (8, 8, 1536), (8, 16, 1920), (8, 35, 2520), (8, 64, 3072),
]  # fmt: skip
# Llama 3 paper (Dubey et al. 2024), Table 4: (GPUs, TP, CP, PP, DP) for Llama 3 405B.
# The long-context row prints DP 4 in at least one version of the paper, which
# fills only 8,192 GPUs; DP 8 follows from its 16,384 GPUs and from 16 sequences
# of 131,072 tokens per DP rank making its 16M-token batch. lab-07 says so.
LLAMA3_TABLE_4 = [(8192, 8, 1, 16, 64), (16384, 8, 1, 16, 128), (16384, 8, 16, 16, 8)]


@pytest.mark.parametrize(("t", "p", "n"), MEGATRON_TABLE_1)
def test_megatron_table_1_rows_are_valid_plans_with_tp_inside_a_dgx_a100(
    t: int, p: int, n: int
) -> None:
    assert n % (t * p) == 0
    plan = ParallelPlan(tp=t, pp=p, dp=n // (t * p))
    plan.check_world_size(n)
    cluster = Cluster(n // 8, 8, SYSTEMS["dgx-a100"])
    assert all(cluster.tier_of(g).name == "nvlink" for g in plan.groups("tp"))


@pytest.mark.parametrize(("n", "tp", "cp", "pp", "dp"), LLAMA3_TABLE_4)
def test_llama3_table_4_configurations_are_valid_plans(
    n: int, tp: int, cp: int, pp: int, dp: int
) -> None:
    plan = ParallelPlan(tp=tp, cp=cp, pp=pp, dp=dp, order="tp-cp-pp-dp")
    plan.check_world_size(n)
    assert plan.groups("tp")[0] == list(range(tp))  # TP innermost, inside one 8-GPU node
    if cp > 1:
        assert plan.groups("cp")[0][:2] == [0, tp]  # CP next, then PP, then DP outermost
    assert plan.groups("dp")[0][1] == tp * cp * pp


def test_enumerate_plans_covers_every_factorisation() -> None:
    found = {(p.tp, p.cp, p.pp, p.dp) for p in enumerate_plans(64, 8)}
    expected = {
        (tp, cp, pp, 64 // (tp * cp * pp))
        for tp in (1, 2, 4, 8)
        for cp in range(1, 65)
        for pp in range(1, 65)
        if 64 % (tp * cp * pp) == 0
    }
    assert found == expected
    assert all(p.cp <= 2 for p in enumerate_plans(64, 8, max_cp=2))


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: ParallelPlan(tp=0), "tp must be >= 1, got 0"),
        (lambda: ParallelPlan(dp=4, ep=3), "ep must divide dp"),
        (lambda: ParallelPlan(order="tp-dp-pp"), "order must be a permutation"),
        (
            lambda: ParallelPlan(tp=8, pp=4, dp=3).check_world_size(64),
            "8 \\* 1 \\* 4 \\* 3 = 96 != 64",
        ),
        (lambda: ParallelPlan(tp=2).coords(2), "rank must be < world_size 2"),
        (lambda: ParallelPlan(tp=2).rank(tp=2), "tp coordinate must be < 2"),
        (lambda: ParallelPlan(tp=2).rank(xp=0), "coordinate axis must be one of"),
        (lambda: ParallelPlan(tp=2).groups("sp"), "axis must be one of"),
        (lambda: list(enumerate_plans(0, 8)), "world_size must be >= 1"),
    ],
)
def test_bad_input_names_the_argument(call: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()  # type: ignore[operator]
