"""The step model's physics: each collective on the group it waits for, the dp·cp sync, one
critical path per layer, TP backward overlap as Megatron-Core runs it, FSDP2 under PP."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import replace

import pytest

from infralens.hardware import GPUS
from infralens.model import PRESETS
from infralens.nccl import predict
from infralens.plan import ParallelPlan, enumerate_plans
from infralens.planner import _step_groups, _step_terms
from infralens.planner._step_overlap import OVERLAP_SLOWDOWN, Phase, phase_exposed
from infralens.planner._step_terms import ADAM_BYTES_PER_PARAM, tensor_parallel
from infralens.planner.design import _slowest
from infralens.planner.fit import gpu_memory
from infralens.planner.job import Job
from infralens.planner.ranking import rank_plans
from infralens.planner.step import estimate
from infralens.sustained import IDEAL
from infralens.topology import Cluster


def _c(gpus: int, system: str = "dgx-h100") -> Cluster:
    return Cluster.from_node_shape(f"{gpus // 8}_nodes_x_8_gpus", system)


def _key(cluster: Cluster, group: list[int]) -> tuple[int, int, int]:
    counts = Counter(cluster.domain_of(r) for r in group).values()
    return len(counts), -min(counts), max(counts)


def _dp_cp_groups(plan: ParallelPlan) -> list[list[int]]:
    found: dict[tuple[int, int], list[int]] = {}
    for r in range(plan.world_size):
        c = plan.coords(r)
        found.setdefault((c["tp"], c["pp"]), []).append(r)
    return list(found.values())


# 1. every collective on the group it waits for


@pytest.mark.parametrize("gpus", [24, 40, 48, 96])
def test_the_slowest_group_is_the_worst_of_every_group(gpus: int) -> None:
    cluster = _c(gpus)
    for plan in enumerate_plans(gpus, 8, max_cp=8):
        for axis in ("tp", "cp", "pp", "dp"):
            worst = max(_key(cluster, g) for g in plan.groups(axis))
            assert _key(cluster, _step_groups.slowest_group(plan, cluster, (axis,))) == worst
        got = _step_groups.slowest_group(plan, cluster, ("dp", "cp"))
        assert sorted(got) in [sorted(g) for g in _dp_cp_groups(plan)]
        assert _key(cluster, got) == max(_key(cluster, g) for g in _dp_cp_groups(plan))


def test_the_worksheet_and_the_step_name_the_same_group() -> None:
    cluster, plan = _c(48), ParallelPlan(cp=6, pp=4, dp=2)
    # rank 0's CP group sits on one node; its sibling [6..11] crosses two
    assert cluster.tier_of(plan.groups("cp")[0]).name == "nvlink"
    assert _slowest(plan, "cp", cluster) == ("network", list(range(6, 12)))
    assert _slowest(plan, "dp", cluster)[1] == _step_groups.slowest_group(
        plan, cluster, ("dp", "cp")
    )


def test_a_step_waits_for_its_slowest_group() -> None:
    # dp 6 on 8-GPU nodes: rank 0's group [0..5] sits on one node, [6..11] crosses two
    m, cluster, plan = PRESETS["llama3-8b"], _c(48), ParallelPlan(dp=6, pp=8)
    e = estimate(Job(m, plan, cluster, seq_len=4096, global_batch_size=48, micro_batch_size=1,
                     recipe="megatron-bf16", overlap_grad_reduce=False))  # fmt: skip
    nbytes = int(m.num_params() / 8 * 4)  # fp32 gradients of one stage
    slow = predict("all_reduce", nbytes, cluster, list(range(6, 12))).seconds
    fast = predict("all_reduce", nbytes, cluster, list(range(6))).seconds
    assert e.breakdown.dp == pytest.approx(slow) and slow > 2 * fast


# 2. the sync spans dp·cp


def test_context_parallel_ranks_join_the_gradient_sync() -> None:
    # tp 4, cp 8, dp 1: model state sharded over the 8 CP ranks, so its sync is not free;
    # at the isolated kernel rates the compute is too short to hide it
    e = estimate(Job("llama3-70b", ParallelPlan(tp=4, cp=8), _c(32), seq_len=32768,
                     global_batch_size=16, micro_batch_size=1, recipe="fsdp2",
                     recompute="full", sustained=IDEAL), check_memory=False)  # fmt: skip
    assert e.breakdown.dp > 0.5
    for recipe in ("megatron-bf16-distopt", "megatron-bf16"):
        d = estimate(Job("llama3-8b", ParallelPlan(cp=8), _c(8), seq_len=32768,
                         global_batch_size=4, micro_batch_size=1, recipe=recipe,
                         overlap_grad_reduce=False), check_memory=False)  # fmt: skip
        assert d.breakdown.dp > 0


def test_the_optimizer_updates_the_dp_cp_shard() -> None:
    m, plan = PRESETS["llama3-8b"], ParallelPlan(tp=2, cp=4)
    e = estimate(Job(m, plan, _c(8), seq_len=32768, global_batch_size=4, micro_batch_size=1,
                     recipe="megatron-bf16-distopt"), check_memory=False)  # fmt: skip
    local = m.num_params() / 2
    want = local / 4 * ADAM_BYTES_PER_PARAM / GPUS["h100-sxm5-80gb"].hbm_bytes_per_s
    assert e.breakdown.optimizer == pytest.approx(want)


# 3. one critical path per layer


def test_the_critical_path_relations_hold_for_llama3_8b_on_256_gpus() -> None:
    plan, cluster = ParallelPlan(tp=4, cp=16, dp=4), _c(256)

    def t(**kw: object) -> float:
        job = Job(
            "llama3-8b",
            plan,
            cluster,
            seq_len=32768,
            global_batch_size=4,
            micro_batch_size=1,
            recipe="fsdp2",
        )
        return estimate(replace(job, **kw), check_memory=False).seconds

    assert t(seq_len=65536) > t()  # a longer sequence never shortens a step
    assert t(recompute="full") >= t(recompute="none")
    assert t(attention="flash3") <= t(attention="flash2")


def test_two_collectives_never_hide_behind_the_same_compute() -> None:
    alone = phase_exposed(Phase(compute=10.0, attention=6.0, ring=6.0))
    both = phase_exposed(Phase(compute=10.0, attention=6.0, ring=6.0, fsdp=8.0))
    assert alone.cp == 0.0 and alone.dp == 0.0
    assert both.dp == pytest.approx(4.0)  # 14 s of traffic on one stream in 10 s
    assert both.slowdown == pytest.approx(OVERLAP_SLOWDOWN * 10.0)


def test_no_hidden_traffic_is_longer_than_the_compute_that_hides_it() -> None:
    rng = random.Random(7)
    for _ in range(2000):
        c, a = rng.uniform(0, 10), rng.uniform(0, 1)
        pairs = tuple((rng.uniform(0, 3), rng.uniform(0, 3)) for _ in range(rng.randint(0, 4)))
        ph = Phase(compute=c, attention=a * c, blocking=rng.uniform(0, 2),
                   under_gemm=pairs, ring=rng.uniform(0, 5), fsdp=rng.uniform(0, 5))  # fmt: skip
        e = phase_exposed(ph)
        traffic = ph.blocking + sum(x for x, _ in pairs) + ph.ring + ph.fsdp
        hidden = traffic - (e.tp + e.cp + e.dp)
        assert min(e.tp, e.cp, e.dp, e.slowdown, e.free) >= 0
        assert hidden <= c + 1e-12
        assert e.slowdown <= OVERLAP_SLOWDOWN * c + 1e-12


# 4. TP backward as Megatron-Core and Transformer Engine run it


def test_tp_backward_hides_under_its_gemms_and_gathers_fp8() -> None:
    cluster, g, act = _c(8), list(range(8)), 8192 * 8192 * 2
    ag = predict("all_gather", act, cluster, g).seconds
    ag8 = predict("all_gather", act // 2, cluster, g).seconds
    rs = predict("reduce_scatter", act, cluster, g).seconds
    big = tensor_parallel(act, cluster, g, sequence_parallel=True, gemms=(1.0, 1.0))
    assert big.forward == pytest.approx(2 * (ag + rs))
    assert big.backward == pytest.approx(2 * ag)  # the gradient gathers wait
    # the two re-gathers the old count left out, and the reduce-scatters, under GEMMs
    assert sorted(x for x, _ in big.under_gemm) == sorted([ag, ag, rs, rs])
    fp8 = tensor_parallel(act, cluster, g, sequence_parallel=True, fp8_gathers=True,
                          gemms=(1.0, 1.0))  # fmt: skip
    assert fp8.backward == pytest.approx(2 * ag8)  # backward's gathers move FP8 too
    assert sorted(x for x, _ in fp8.under_gemm) == sorted([ag8, ag8, rs, rs])
    # torchao's Float8 (PyTorch's DTensor TP, nothing under GEMMs) gathers FP8 forward
    # only: the blocking forward halves its gathers, backward's gradients stay bf16
    dtensor = tensor_parallel(act, cluster, g, sequence_parallel=True)
    titan = tensor_parallel(act, cluster, g, sequence_parallel=True, fp8_forward=True)
    assert dtensor.forward == dtensor.backward == pytest.approx(2 * (ag + rs))
    assert titan.forward == pytest.approx(2 * (ag8 + rs))
    assert titan.backward == dtensor.backward and not titan.under_gemm


def test_a_torchtitan_float8_step_gathers_its_tp_inputs_in_fp8() -> None:
    # the same FP8 job with and without the FP8 forward gathers: estimate must pass the
    # flag for a PyTorch-stack FP8 recipe, and only the TP term may move
    job = Job("llama3-70b", ParallelPlan(tp=8, dp=4), _c(32), seq_len=8192,
              global_batch_size=64, micro_batch_size=2, recipe="torchtitan-float8-compile",
              recompute="full")  # fmt: skip
    fp8 = estimate(job, check_memory=False)
    plain = _step_terms.tensor_parallel
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_step_terms, "tensor_parallel",
                   lambda *a, **k: plain(*a, **{**k, "fp8_forward": False}))  # fmt: skip
        bf16_gathers = estimate(job, check_memory=False)
    assert fp8.breakdown.tp < bf16_gathers.breakdown.tp
    assert fp8.breakdown.compute == bf16_gathers.breakdown.compute


# 5. FSDP2 under a pipeline, as torchtitan and torch.distributed.pipelining run it


def test_fsdp2_under_pp_gathers_and_reduces_once_a_step() -> None:
    plan, cluster = ParallelPlan(pp=2, dp=4), _c(8)

    def dp(batch: int) -> float:
        return estimate(Job("llama3-8b", plan, cluster, seq_len=4096, global_batch_size=batch,
                            micro_batch_size=1, recipe="fsdp2"),
                        check_memory=False).breakdown.dp  # fmt: skip

    assert dp(64) == pytest.approx(dp(32), rel=0.05)  # not once per micro-batch


def test_fsdp2_under_pp_holds_the_stage_unsharded() -> None:
    m = PRESETS["llama3-70b"]
    plan = ParallelPlan(cp=2, pp=2, dp=16)  # 16 micro-batches per replica
    job = Job(
        m,
        plan,
        _c(64),
        seq_len=8192,
        global_batch_size=16 * 16,
        micro_batch_size=1,
        recipe="fsdp2",
        recompute="selective",
        sequence_parallel=False,
    )
    assert job.microbatches == 16
    b = gpu_memory(job)
    stage = m.layers // 2 * m.layer_params()
    assert b.gathered >= 2 * stage  # bf16 parameters kept after forward
    assert b.grad_buffers >= 4 * stage  # fp32 gradients accumulated unsharded


def test_rank_proposes_no_fsdp2_pipeline_it_cannot_hold() -> None:
    m = PRESETS["llama3-70b"]
    rows = rank_plans(m, _c(64), seq_len=8192, global_batch_size=512, top=10)
    for r in rows:
        if r.recipe == "fsdp2" and r.plan.pp > 1:
            stage = m.layers // r.plan.pp * m.layer_params() // r.plan.tp
            assert r.estimate.memory_bytes >= 6 * stage
