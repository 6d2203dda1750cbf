"""infralens.compute and infralens.planner.step against papers, NCCL's model and published runs."""

from __future__ import annotations

import csv
from dataclasses import replace
from pathlib import Path
from typing import Any
from unittest.mock import patch

import pytest

from infralens.attention_kernels import (
    MATERIALIZED_SCORE_BYTES,
    attention_flops_per_token,
    attention_seconds,
)
from infralens.compute import (
    gemm_flops_per_token,
    hardware_flops_per_token,
    mfu,
    model_flops_per_token,
)
from infralens.elementwise import elementwise_bytes, loss_bytes
from infralens.hardware import GPUS, MAMF_BF16, SYSTEMS, matmul_ceiling, preset_key
from infralens.megatron_formulas import megatron_flops_per_iteration
from infralens.model import PRESETS, TransformerConfig
from infralens.nccl import predict
from infralens.plan import ParallelPlan
from infralens.planner._step_terms import column_gemms, row_gemms
from infralens.planner.calibration import refit
from infralens.planner.fit import _gpu_memory
from infralens.planner.job import Job
from infralens.planner.step import estimate, group_of
from infralens.planner.step_accuracy import (
    accuracy,
    held_out_errors,
    share_of_median,
    uncalibrated,
)
from infralens.planner.step_validation import check_run, load_runs
from infralens.sustained import FITTED, IDEAL, POWER_LIMITED
from infralens.topology import Cluster

DATA = Path(__file__).parent / "data" / "training_runs.csv"
H100 = GPUS["h100-sxm5-80gb"]


@pytest.mark.parametrize(("layers", "hidden", "heads"), [(24, 2304, 24), (80, 12288, 96)])
def test_full_recompute_flops_match_megatron_eq_3(layers: int, hidden: int, heads: int) -> None:
    gpt = TransformerConfig(layers=layers, hidden=hidden, heads=heads, kv_heads=heads,
                            ffn_hidden=4 * hidden, vocab_size=51200, seq_len=2048,
                            tied_embeddings=True, bias=True, learned_positions=True)  # fmt: skip
    ours = hardware_flops_per_token(gpt, seq_len=2048, recompute="full", causal=False) * 2048
    paper = megatron_flops_per_iteration(batch_size=1, seq_len=2048, layers=layers,
                                         hidden=hidden, vocab_size=51200)  # fmt: skip
    # Eq. 3 leaves out biases and norms (13h per layer), which cost well under 0.1 %.
    assert ours == pytest.approx(paper, rel=1e-3)
    assert ours > paper


@pytest.mark.parametrize(("tflops", "printed_mfu"), [(430, 43), (400, 41), (380, 38)])
def test_llama3_table_4_mfu_divides_by_the_dense_peak(tflops: int, printed_mfu: int) -> None:
    # Dubey et al. 2024, Table 4: TFLOPs/GPU and BF16 MFU printed side by side, both
    # rounded; only the dense peak makes them agree, the sparse one halves the MFU.
    assert abs(100 * mfu(tflops * 1e12, H100.bf16_flops) - printed_mfu) <= 1
    assert abs(100 * mfu(tflops * 1e12, 2 * H100.bf16_flops) - printed_mfu) > printed_mfu / 3


def test_a_sparse_rate_over_the_dense_peak_is_rejected() -> None:
    with pytest.raises(ValueError, match="MFU above 1"):
        mfu(2 * 0.6 * H100.bf16_flops, H100.bf16_flops)


def test_flash_attention_counts_half_the_scores_and_five_backward_matmuls() -> None:
    # Materialized: 4·s·h forward, 8·s·h backward per token and layer (PaLM's 12·L·h·s).
    # FlashAttention: 2·s·h forward (causal half), 2.5 × that backward (QKᵀ recomputed).
    m = PRESETS["llama3-8b"]
    full = hardware_flops_per_token(m, seq_len=8192, recompute="none", causal=False)
    causal = hardware_flops_per_token(m, seq_len=8192, recompute="none")
    assert full == model_flops_per_token(m, seq_len=8192)
    assert full - causal == (12 - 7) * m.layers * m.hidden * 8192


def test_attention_runs_at_its_kernel_ceiling_not_the_matmul_ceiling() -> None:
    m = PRESETS["llama3-8b"]
    fwd, bwd = attention_flops_per_token(m, seq_len=8192)
    t = attention_seconds(m, seq_len=8192, tokens=1000, gpu="h100-sxm5-80gb")
    assert t == pytest.approx(1000 * (fwd / 335e12 + bwd / 322e12))
    # FlashAttention-2 on an H100 sustains well under half the matmul ceiling.
    assert t > 2 * 1000 * (fwd + bwd) / MAMF_BF16["h100-sxm5-80gb"]
    h200 = attention_seconds(m, seq_len=8192, tokens=1000, gpu="h200-sxm-141gb")
    assert h200 == t


@pytest.mark.parametrize(("hidden", "heads"), [(2304, 24), (8192, 64), (25600, 160)])
def test_materialized_scores_are_bound_by_hbm_traffic_at_megatron_head_dims(
    hidden: int, heads: int
) -> None:
    # Narayanan et al.'s head dims (96, 128, 160): every score crosses HBM 45 times under full
    # recomputation, which takes longer on an A100 than the score matmuls' FLOPs.
    m = TransformerConfig(layers=2, hidden=hidden, heads=heads, kv_heads=heads,
                          ffn_hidden=4 * hidden, vocab_size=51200, seq_len=2048)  # fmt: skip
    a100 = "a100-sxm4-80gb"
    kw = dict(seq_len=2048, recompute="full", kernel="materialized")
    t = attention_seconds(m, tokens=100, gpu=a100, **kw)
    f_bytes, b_bytes = MATERIALIZED_SCORE_BYTES
    scores = 100 * 2 * heads * 2048
    assert t == pytest.approx(scores * (2 * f_bytes + b_bytes) / GPUS[a100].hbm_bytes_per_s)
    fwd, bwd = attention_flops_per_token(m, **kw)
    assert t > 100 * (fwd + bwd) / MAMF_BF16[a100]
    # The H200's faster HBM moves the same bytes sooner: no borrowing of the H100's figures.
    h100 = attention_seconds(m, tokens=100, gpu="h100-sxm5-80gb", **kw)
    assert attention_seconds(m, tokens=100, gpu="h200-sxm-141gb", **kw) < h100


def test_torchtitan_selective_recomputes_k_o_and_w3() -> None:
    m = PRESETS["llama3-8b"]
    extra = gemm_flops_per_token(m, stack="pytorch") - gemm_flops_per_token(m)
    h, kv, f = m.hidden, m.kv_heads * m.head_dim, m.ffn_hidden
    assert extra == 2 * m.layers * (h * kv + h * h + h * f)
    assert gemm_flops_per_token(m, stack="pytorch", recompute="full") == gemm_flops_per_token(
        m, recompute="full"
    )


def _c(nodes: int, preset: str = "dgx-h100") -> Cluster:
    return Cluster(nodes, 8, SYSTEMS[preset])


def test_breakdown_adds_up_and_tp_is_priced_by_nccl() -> None:
    e = estimate(Job("llama2-70b", ParallelPlan(tp=8, pp=4, dp=2), _c(8), seq_len=4096,
                 global_batch_size=512, micro_batch_size=1))  # fmt: skip
    assert e.seconds == pytest.approx(e.breakdown.total)
    g = group_of(ParallelPlan(tp=8, pp=4, dp=2), "tp")
    act = 4096 * 8192 * 2
    ag = predict("all_gather", act, _c(8), g).seconds
    rs = predict("reduce_scatter", act, _c(8), g).seconds
    # forward: 2 (AG+RS) pairs that block; backward: the row-parallel linears' 2 gradient
    # gathers block, and the column-parallel ones' re-gathers and reduce-scatters run
    # under their dgrad and wgrad GEMMs, exposed only where longer than the GEMM
    gemms = column_gemms(PRESETS["llama2-70b"], "h100-sxm5-80gb", tokens=4096, tp=8,
                         fp8=False, sustained=FITTED)  # fmt: skip
    late = sum(max(0.0, x - g) for x in (ag, rs) for g in gemms)
    assert late < ag + rs  # the MLP's GEMMs hide both; QKV's only part
    assert e.breakdown.tp == pytest.approx((2 * (ag + rs) + 2 * ag + late) * 20 * 256)
    assert e.bottleneck == "compute"
    assert 0 < e.mfu < 1


def test_more_microbatches_shrink_the_bubble_share() -> None:
    kw = dict(seq_len=4096, micro_batch_size=1)
    small = estimate(
        Job("llama2-70b", ParallelPlan(tp=8, pp=4, dp=2), _c(8), global_batch_size=16, **kw)
    )
    large = estimate(
        Job("llama2-70b", ParallelPlan(tp=8, pp=4, dp=2), _c(8), global_batch_size=512, **kw)
    )
    assert small.breakdown.pp_bubble / small.seconds > large.breakdown.pp_bubble / large.seconds
    inter = estimate(Job("llama2-70b", ParallelPlan(tp=8, pp=4, dp=2), _c(8), global_batch_size=16,
                     schedule="interleaved", chunks=5, **kw))  # fmt: skip
    assert inter.breakdown.pp_bubble < small.breakdown.pp_bubble


@pytest.mark.parametrize(
    ("plan", "kwargs", "message"),
    [
        (ParallelPlan(tp=8, pp=4, dp=3), {}, "must equal world_size"),
        (ParallelPlan(tp=8, pp=4, dp=2), {"global_batch_size": 511}, "must divide"),
        (ParallelPlan(tp=8, pp=4, dp=2), {"schedule": "zb"}, "schedule must be one of"),
        (ParallelPlan(tp=8, pp=4, dp=2), {"recompute": "most"}, "recompute must be one of"),
        (ParallelPlan(tp=1, pp=1, dp=64), {"zero_stage": 0}, "does not fit"),
        (ParallelPlan(tp=8, pp=4, dp=2), {"chunks": 2}, "chunks must be 1"),
        (
            ParallelPlan(tp=8, pp=1, dp=8),
            {"zero_stage": 3, "overlap_grad_reduce": False},
            "FSDP2 always overlaps",
        ),
    ],
)
def test_bad_input_is_one_clear_error(plan: ParallelPlan, kwargs: dict, message: str) -> None:
    args = dict(seq_len=4096, global_batch_size=512, micro_batch_size=1) | kwargs
    with pytest.raises(ValueError, match=message):
        estimate(Job("llama2-70b", plan, _c(8), **args))


def test_a_gpu_that_is_no_preset_is_refused_by_name() -> None:
    # A Cluster may carry any GPU; the step model prices only parts whose ceilings were
    # measured, and says so instead of leaking StopIteration from the preset lookup.
    custom = replace(SYSTEMS["dgx-h100"], gpu=replace(H100, name="H100 PCIe"))
    with pytest.raises(ValueError, match="gpu 'H100 PCIe' is not a preset"):
        estimate(Job("llama3-8b", ParallelPlan(dp=8), Cluster(1, 8, custom), seq_len=8192,
                 global_batch_size=16, micro_batch_size=2, zero_stage=3))  # fmt: skip


def test_the_500w_hbm2e_h100_differs_from_the_sxm_only_in_its_hbm() -> None:
    # Its matmul and attention ceilings stand in from the 700 W SXM part (an upper bound),
    # so with the same sustained share a GEMM-only difference would be a bug; what changes
    # is every HBM-bound term. Held to 500 W it holds a lower clock, so its share is lower.
    kw = dict(seq_len=8192, global_batch_size=16, micro_batch_size=2, zero_stage=3,
              elementwise="eager")  # fmt: skip
    sxm = estimate(Job("llama3-8b", ParallelPlan(dp=8), _c(1, "dgx-h100"), **kw),
                   check_memory=False)  # fmt: skip
    held = estimate(Job("llama3-8b", ParallelPlan(dp=8), _c(1, "grand-teton-h100-hbm2e"), **kw),
                    check_memory=False)  # fmt: skip
    with patch.dict(POWER_LIMITED, clear=True):  # the same board at its rated power
        hbm2e = estimate(Job("llama3-8b", ParallelPlan(dp=8), _c(1, "grand-teton-h100-hbm2e"),
                             **kw), check_memory=False)  # fmt: skip
    assert FITTED.share("h100-hbm2e-96gb") < FITTED.hopper and held.seconds > hbm2e.seconds
    assert matmul_ceiling("h100-hbm2e-96gb") == MAMF_BF16["h100-sxm5-80gb"]
    assert "h100-hbm2e-96gb" not in MAMF_BF16  # no measurement is claimed for it
    slower = hbm2e.breakdown.compute - sxm.breakdown.compute
    bandwidth = GPUS["h100-hbm2e-96gb"].hbm_bytes_per_s
    eager_bytes = slower / (1 / bandwidth - 1 / H100.hbm_bytes_per_s)
    # the whole difference is HBM traffic: 32 layers of the eager count and the loss's
    # passes over the logits (PyTorch's cross_entropy, the FSDP2 recipe's)
    per_layer = elementwise_bytes("llama3-8b", seq_len=8192, micro_batch_size=2,
                                  kernels="eager", recompute="selective")  # fmt: skip
    loss = loss_bytes("llama3-8b", seq_len=8192, micro_batch_size=2, loss="eager")
    assert eager_bytes == pytest.approx(32 * per_layer + loss, rel=1e-9)


def test_a_published_fsdp_run_is_not_refused_as_out_of_memory() -> None:
    # torchtitan ran Llama 3.1 8B, FSDP over 8 GPUs, batch 2 x 8192 with its op-level
    # selective checkpointing, on 96 GB H100s (82.4 GiB reserved). The memory check must
    # count what that policy saves (infralens.memory's "pytorch" stack), not Megatron's
    # selective recomputation, which keeps far more and would refuse the run.
    node = _c(1, "grand-teton-h100-hbm2e")
    e = estimate(Job("llama3-8b", ParallelPlan(dp=8), node, seq_len=8192, global_batch_size=16,
                 micro_batch_size=2, zero_stage=3, elementwise="eager"))  # fmt: skip
    titan = _gpu_memory("llama3-8b", ParallelPlan(dp=8), "fsdp2", seq_len=8192,
                       micro_batch_size=2, recompute="selective", stack="pytorch")  # fmt: skip
    assert e.memory_bytes == titan.total
    with open(DATA.parent / "memory_measurements.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    reserved = next(float(r["value"]) for r in rows if r["parallelism"] == "FSDP 8")
    assert e.memory_bytes < reserved * 2**30  # below what the run reserved, as the model is


def test_fsdp_traffic_hides_behind_compute_when_shorter() -> None:
    e = estimate(Job("llama3-8b", ParallelPlan(dp=64), _c(8, "dgx-a100"), seq_len=8192,
                 global_batch_size=64, micro_batch_size=1, zero_stage=3))  # fmt: skip
    assert e.breakdown.dp < 0.05 * e.breakdown.compute


def _megatron_2021(**flags: bool):  # type: ignore[no-untyped-def]
    # Narayanan et al.'s 39.1B shape: tp 8 fills a node, pp 2, dp 4 across nodes.
    m = TransformerConfig(layers=48, hidden=8192, heads=64, kv_heads=64, ffn_hidden=4 * 8192,
                          vocab_size=51200, seq_len=2048, tied_embeddings=True, bias=True,
                          learned_positions=True)  # fmt: skip
    plan = ParallelPlan(tp=8, pp=2, dp=4)
    e = estimate(Job(m, plan, _c(8, "dgx-a100"), seq_len=2048, global_batch_size=64,
                 micro_batch_size=1, sequence_parallel=False, recompute="full", zero_stage=0,
                 attention="materialized", **flags))  # fmt: skip
    return m, plan, e


def test_materialized_attention_cannot_split_a_sequence() -> None:
    # Megatron-Core's unfused DotProductAttention asserts context_parallel_size == 1:
    # the ring of K/V exchanges lives inside Transformer Engine's fused attention.
    c = _c(8, "dgx-a100")
    kw: dict[str, Any] = dict(seq_len=4096, global_batch_size=64, recompute="full",
                              sequence_parallel=False, zero_stage=0)  # fmt: skip
    assert estimate(Job("llama2-13b", ParallelPlan(tp=8, dp=8), c,
                        attention="materialized", **kw)).seconds > 0  # fmt: skip
    split = ParallelPlan(tp=8, cp=2, dp=4)
    assert estimate(Job("llama2-13b", split, c, attention="flash2", **kw)).seconds > 0
    with pytest.raises(ValueError, match="'materialized' cannot split a sequence over cp = 2"):
        estimate(Job("llama2-13b", split, c, attention="materialized", **kw))


def test_gradients_reduced_after_backward_are_exposed_whole_in_their_dtype() -> None:
    # Megatron-LM's 2021 local DDP all-reduces after the pipeline flush; nothing hides it.
    m, plan, overlapped = _megatron_2021()
    local = m.num_params() // (plan.tp * plan.pp)
    whole: dict[bool, float] = {}
    for fp32, nbytes in ((True, 4), (False, 2)):
        _, _, e = _megatron_2021(overlap_grad_reduce=False, grad_reduce_in_fp32=fp32)
        ar = predict("all_reduce", local * nbytes, _c(8, "dgx-a100"), group_of(plan, "dp"))
        whole[fp32] = ar.seconds
        assert e.breakdown.dp == pytest.approx(ar.seconds, rel=1e-6)
        # the overlapped reduction slows the backward it runs beside
        assert e.breakdown.compute < overlapped.breakdown.compute
    assert whole[False] < whole[True]
    assert overlapped.breakdown.dp < whole[True]  # the overlap hides part of the fp32 one


def test_scatter_gather_sends_a_tp_shard_and_gathers_it_on_nvlink() -> None:
    m, plan, full = _megatron_2021()
    _, _, sg = _megatron_2021(scatter_gather_p2p=True)
    act, c = 2048 * m.hidden * 2, _c(8, "dgx-a100")
    pair, tp = group_of(plan, "pp")[:2], group_of(plan, "tp")
    # 1F1B on two stages: each is an end stage, one exchange (its send and its receive
    # together) per micro-batch; a middle stage would make two.
    sends = sg.microbatches
    one = predict("send_recv", act // 8, c, pair).seconds
    one += predict("all_gather", act, c, tp).seconds
    assert sg.breakdown.pp_p2p == pytest.approx(sends * one)
    assert sg.breakdown.pp_p2p < full.breakdown.pp_p2p  # IB carries 1/8 of the bytes


def test_flags_must_be_bools() -> None:
    with pytest.raises(TypeError, match="overlap_grad_reduce must be a bool"):
        _megatron_2021(overlap_grad_reduce="no")  # type: ignore[arg-type]


RUNS = load_runs(DATA)


def test_every_source_family_is_shipped() -> None:
    every = load_runs(DATA, unpriced=True)
    assert len(every) >= 60 and len({r.family for r in every}) >= 6
    ids = [r.run_id for r in RUNS]
    assert sum(i.startswith("narayanan-") for i in ids) >= 5
    assert sum(i.startswith("llama3-405b") for i in ids) == 3
    assert any(i.startswith("torchtitan-h100") for i in ids)
    assert {r.precision for r in RUNS} == {"bf16", "fp8"}
    gpus = {preset_key(SYSTEMS[r.system].gpu) for r in every}
    assert gpus >= {"a100-sxm4-80gb", "h100-sxm5-80gb", "h200-sxm-141gb", "b200-gb200"}
    # rows the model cannot price stay in the data, each with its reason
    assert all(r.unpriced for r in every if r not in RUNS)
    # sources reserved for independent checks are never shipped
    reserved = ("dgxc-benchmarking", "docs.nvidia.com/nemo", "Megatron-Bridge", "llm-foundry")
    assert not any(word in r.url for r in every for word in reserved)


def test_the_megatron_readme_rows_agree_with_the_tables_own_columns() -> None:
    # The table is an image, transcribed by hand; its other columns check each row: the
    # degrees multiply to the GPUs, per-GPU TFLOP/s times GPUs is the aggregate PFLOP/s
    # it prints, and per-GPU TFLOP/s over 989 (H100's dense BF16 TFLOP/s as the
    # datasheet prints it) rounds half up to its MFU.
    aggregate = [19.6, 44.7, 93.9, 176.5, 322.3, 645.9, 997.2, 1457.4, 2825.6]
    mfu = [41, 47, 49, 46, 42, 43, 44, 48, 47]
    rows = [r for r in RUNS if r.family == "mcore"]
    assert len(rows) == 9
    assert int(GPUS["h100-sxm5-80gb"].bf16_flops / 1e12) == 989
    for r, pf, pct in zip(rows, aggregate, mfu, strict=True):
        assert r.tp * r.pp * r.cp * r.dp == r.gpus
        assert round(r.published * r.gpus / 1000, 1) == pytest.approx(pf, abs=0.051)
        assert int(100 * r.published / 989 + 0.5) == pct
        assert r.tp_comm_overlap == (r.tp > 1) and r.sequence_parallel == (r.tp > 1)


def test_the_megatron_readme_pipelines_interleave_with_the_fewest_even_chunks() -> None:
    # PP overlap is on in the README's runs, and Megatron-LM turns it off unless the
    # schedule is interleaved; the chunk count is not printed, so each PP row takes the
    # fewest virtual stages (at least 2) that split its stage's layers evenly.
    rows = [r for r in RUNS if r.family == "mcore"]
    for r in rows:
        per_stage = int(r.model.split(":")[1]) // r.pp
        if r.pp == 1:
            assert (r.schedule, r.chunks) == ("1f1b", 1)
            continue
        fewest = min(v for v in range(2, per_stage + 1) if per_stage % v == 0)
        assert (r.schedule, r.chunks) == ("interleaved", fewest), r.run_id
    assert [r.chunks for r in rows if r.pp > 1] == [2, 23, 2, 2, 7]


def test_the_korthikanti_times_reproduce_the_mfu_megatrons_readme_prints() -> None:
    # Table 5's iteration times, transcribed by hand, against the MFU the Megatron-LM
    # README (841f789) prints for the same runs: Megatron's count without recomputation
    # over A100's 312 dense TFLOP/s, one replica each.
    rows = [r for r in RUNS if r.family == "korthikanti"]
    assert [r.run_id.split("-")[1] for r in rows] == ["22b", "175b", "530b", "1t"]
    peak = GPUS["a100-sxm4-80gb"].bf16_flops
    assert peak == 312e12
    for r, pct in zip(rows, [41.5, 51.4, 56.0, 56.3], strict=True):
        m = r.config()
        flops = megatron_flops_per_iteration(
            batch_size=r.global_batch, seq_len=r.seq_len, layers=m.layers,
            hidden=m.hidden, vocab_size=m.vocab_size, recompute=False,
        )  # fmt: skip
        assert (r.dp, r.cp, r.tp * r.pp, r.metric) == (1, 1, r.gpus, "step_s")
        # the times print to 0.01 s and the MFU to 0.1 %: the two intervals must meet
        slow, fast = (100 * flops / (r.gpus * (r.published + d) * peak) for d in (0.005, -0.005))
        assert slow - 0.05 <= pct <= fast + 0.05, r.run_id


def test_the_narayanan_rows_take_the_authors_scripts_micro_batches_and_chunks() -> None:
    # Megatron-LM's examples/sc21/run_table_1.sh (de7dc40) gives what Table 1 leaves out;
    # each micro-batch must divide a replica's share of the batch and each chunk count a
    # stage's layers; the script runs PyTorch's DDP, whose reduce overlaps the last
    # backward, for exactly the unpipelined runs (up to 18B) and Megatron's local DDP above.
    rows = [r for r in RUNS if r.family == "narayanan"]
    assert [r.micro_batch for r in rows] == [16, 16, 16, 8, 4, 2, 2, 1, 1, 1]
    for r in rows:
        per_stage = int(r.model.split(":")[1]) // r.pp
        assert r.global_batch % (r.micro_batch * r.dp) == 0, r.run_id
        assert per_stage % r.chunks == 0 and (r.chunks > 1) == (r.schedule == "interleaved")
        assert r.overlap_grad_reduce == (r.pp == 1), r.run_id
    assert [r.chunks for r in rows] == [1, 1, 1, 1, 1, 3, 2, 2, 3, 1]


def test_vtrains_cluster_has_the_800_gbps_per_node_its_configs_give() -> None:
    s = SYSTEMS["vtrain-a100"]
    assert s.nics_per_node * s.nic_bits_per_s == 800 * 10**9
    assert s.gpu == SYSTEMS["dgx-a100"].gpu and s.nvlink_domain == s.gpus_per_node == 8
    assert {r.system for r in RUNS if r.family == "vtrain"} == {"vtrain-a100"}


@pytest.mark.parametrize(("size", "rows", "plans"), [("3.6", 26, 6), ("39.1", 47, 9)])
def test_a_vtrain_sweep_holds_the_shipped_rows_at_micro_batch_2(
    size: str, rows: int, plans: int
) -> None:
    # A sweep is one model's rows of vTrain's file; the shipped rows are its plans at
    # micro-batch 2, so each must be there with the same iteration time.
    path = DATA.parent / f"vtrain_sweep_{size}b.csv"
    with open(path, newline="", encoding="utf-8") as f:
        sweep = list(csv.DictReader(f))
    assert len(sweep) == rows and {r["params_billion"] for r in sweep} == {size}
    at2 = {(int(r["tp"]), int(r["pp"]), int(r["dp"])): float(r["step_ms"])
           for r in sweep if r["micro_batch"] == "2"}  # fmt: skip
    shipped = [r for r in RUNS if r.run_id.startswith(f"vtrain-{size}b-")]
    assert len(shipped) == len(at2) == plans
    for r in shipped:
        assert at2[(r.tp, r.pp, r.dp)] == r.published and r.micro_batch == 2


def test_vtrain_all_reduce_tables_hold_the_tp_sizes_as_nccl_tests_prints_them() -> None:
    # One activation all-reduce per shipped vTrain plan size (micro-batch x sequence x
    # hidden x 2 bytes) and 1 GiB, for 2, 4 and 8 GPUs; each bus bandwidth is nccl-tests'
    # algorithm bandwidth (bytes / time) times 2(n - 1)/n, so a mistyped cell shows.
    with open(DATA.parent / "vtrain_allreduce_a100.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    vtrain = [r for r in RUNS if r.family == "vtrain"]
    sizes = {r.micro_batch * r.seq_len * r.config().hidden * 2 for r in vtrain} | {2**30}
    assert len(sizes) == 5
    assert sorted((int(r["gpus"]), int(r["bytes"])) for r in rows) == sorted(
        (g, n) for g in (2, 4, 8) for n in sizes
    )
    for r in rows:
        gpus, n = int(r["gpus"]), int(r["bytes"])
        for time, bus in (("time_ns", "busbw_gbs"), ("in_place_time_ns", "in_place_busbw_gbs")):
            algbw = n / (int(r[time]) * 1e-9) / 1e9
            assert float(r[bus]) == pytest.approx(algbw * 2 * (gpus - 1) / gpus, rel=0.005)


def test_dp_on_the_network_runs_beside_tp_on_nvlink() -> None:
    # Megatron-Core reduces gradients on the DP communicator's own stream. A DP group
    # that crosses nodes shares no link with TP inside each node, so it may use the
    # layers' whole time; inside one node it shares NVLink and gets only their free time.
    import infralens.planner.step as step_module

    def dp(job: Job, *, shared: bool) -> float:
        if not shared:
            return estimate(job, check_memory=False).breakdown.dp
        with patch.object(step_module, "spans", lambda cluster, group: False):
            return estimate(job, check_memory=False).breakdown.dp

    across = replace(_tp_job(tp_comm_overlap=True), global_batch_size=32)
    assert dp(across, shared=False) < 0.1 * dp(across, shared=True)
    inside = Job("llama3-8b", ParallelPlan(tp=4, dp=2), _c(1), seq_len=8192,
                 global_batch_size=4)  # fmt: skip
    assert dp(inside, shared=False) == dp(inside, shared=True) > 0


def _tp_job(**kw: object) -> Job:
    return Job("llama3-70b", ParallelPlan(tp=8, dp=8), _c(8, "dgx-h100"), seq_len=8192,
               global_batch_size=64, **kw)  # type: ignore[arg-type]  # fmt: skip


def test_tp_comm_overlap_hides_the_tp_collectives_behind_their_gemms() -> None:
    # With Transformer Engine's userbuffers every TP collective runs beside a GEMM of its
    # own linear, so only what outlasts that GEMM waits; without, the forward ones block.
    plain = estimate(_tp_job(), check_memory=False)
    over = estimate(_tp_job(tp_comm_overlap=True), check_memory=False)
    assert over.breakdown.tp < plain.breakdown.tp and over.seconds < plain.seconds
    # what waits is each collective's excess over its GEMM: with GQA the QKV and
    # projection GEMMs are shorter than an all-gather or reduce-scatter of the layer's
    # activation, the MLP's are longer
    m = PRESETS["llama3-70b"]
    qkv, mlp = column_gemms(m, "h100-sxm5-80gb", tokens=8192, tp=8, fp8=False,
                            sustained=FITTED)  # fmt: skip
    proj, out = row_gemms(m, (qkv, mlp))
    assert proj == pytest.approx(qkv * 64 / (64 + 2 * 8))  # a / (a + 2 kv), GQA
    assert out == pytest.approx(mlp / 2)  # SwiGLU's first GEMM is two wide
    act = 8192 * m.hidden * 2
    tp8 = list(range(8))
    ag = predict("all_gather", act, _c(8), tp8).seconds
    rs = predict("reduce_scatter", act, _c(8), tp8).seconds
    assert min(mlp, out) > max(ag, rs) > max(qkv, proj)
    forward = (ag - qkv) + (rs - proj)  # AG under QKV, RS under the projection
    backward = 2 * (ag - qkv) + (ag - proj)  # re-gather, RS under QKV; dgrad's gather
    assert over.breakdown.tp == pytest.approx((forward + backward) * m.layers * 8)
    assert over.breakdown.compute > plain.breakdown.compute  # kernels beside traffic


def test_async_tp_under_fsdp_fuses_each_collective_and_regathers_nothing() -> None:
    # PyTorch's asynchronous TP (zero_stage=3 with tp_comm_overlap): torch.compile fuses
    # each all-gather into the matmul it feeds and each reduce-scatter into the one that
    # feeds it, forward and backward; autograd kept the gathered input, so backward has
    # the two output-gradient gathers and the two input-gradient reduce-scatters only.
    job = _tp_job(zero_stage=3, elementwise="fused")
    plain = estimate(job, check_memory=False)
    fused = estimate(replace(job, tp_comm_overlap=True), check_memory=False)
    m = PRESETS["llama3-70b"]
    qkv, mlp = column_gemms(m, "h100-sxm5-80gb", tokens=8192, tp=8, fp8=False,
                            sustained=FITTED)  # fmt: skip
    proj, _ = row_gemms(m, (qkv, mlp))
    act, tp8 = 8192 * m.hidden * 2, list(range(8))
    ag = predict("all_gather", act, _c(8), tp8).seconds
    rs = predict("reduce_scatter", act, _c(8), tp8).seconds
    # DTensor's collectives all wait: four forward, four backward
    assert plain.breakdown.tp == pytest.approx(4 * (ag + rs) * m.layers * 8)
    forward = (ag - qkv) + (rs - proj)  # the MLP's GEMMs outlast their collectives
    backward = (rs - qkv) + (ag - proj)  # no re-gather under QKV's dgrad
    assert fused.breakdown.tp == pytest.approx((forward + backward) * m.layers * 8)
    megatron = estimate(_tp_job(tp_comm_overlap=True), check_memory=False)
    assert fused.breakdown.tp < megatron.breakdown.tp  # TE re-gathers the saved input


def test_tp_comm_overlap_is_refused_where_megatron_refuses_it() -> None:
    with pytest.raises(ValueError, match="tp_comm_overlap needs tp > 1 and sequence_par"):
        estimate(_tp_job(tp_comm_overlap=True, sequence_parallel=False), check_memory=False)
    # under FSDP it is PyTorch's async TP, a torch.compile pass: not with eager kernels
    with pytest.raises(ValueError, match="asynchronous TP, which needs torch"):
        estimate(_tp_job(tp_comm_overlap=True, zero_stage=3, elementwise="eager"),
                 check_memory=False)  # fmt: skip
    with pytest.raises(TypeError, match="tp_comm_overlap must be a bool"):
        _tp_job(tp_comm_overlap=1)
    one = Job("llama3-8b", ParallelPlan(dp=8), _c(1, "dgx-h100"), seq_len=8192,
              global_batch_size=8, tp_comm_overlap=True)  # fmt: skip
    with pytest.raises(ValueError, match="tp_comm_overlap needs tp > 1"):
        estimate(one, check_memory=False)  # Megatron turns sequence parallelism off at tp 1


@pytest.mark.parametrize("row", RUNS, ids=lambda r: r.run_id)
def test_the_model_bounds_every_published_run_from_above(row) -> None:  # type: ignore[no-untyped-def]
    # At the isolated kernel rates (no sustained share) the compute term runs at the
    # measured matmul ceiling and nothing else is charged more than its physical time, so
    # no real run may beat that prediction by more than noise (5 %). A row below would mean
    # a wrong row or a term priced too high; the calibrated model need not bound anything.
    c = check_run(row, IDEAL)
    assert c.error > -0.05, (row.run_id, c.predicted, row.published)


def test_torch_compile_saves_what_the_elementwise_model_says() -> None:
    # torchtitan published each H100 configuration with and without torch.compile. Only the
    # element-wise kernels differ between the two rows of a pair (GEMMs, SDPA's attention and
    # FSDP2's collectives are the same calls), so the published difference in time per token
    # tests infralens.elementwise alone, free of the compute shortfall both rows share.
    # 15 %: the fused count is Megatron's minimum of passes, which Inductor need not reach.
    runs = {r.run_id: r for r in RUNS}
    pairs = [(k, k + "-compile") for k in runs if k + "-compile" in runs]
    assert len(pairs) == 2
    for eager, compiled in pairs:
        a, b = check_run(runs[eager]), check_run(runs[compiled])
        predicted = 1 / a.predicted - 1 / b.predicted  # seconds per token per GPU
        published = 1 / a.row.published - 1 / b.row.published
        assert published > 0
        assert abs(predicted / published - 1) <= 0.15, (eager, predicted, published)


@pytest.mark.xfail(
    strict=True,
    reason="vTrain's small-model TP rows and Megatron's CI rows "
    "miss by more than the shared factor: see validation.md",
)
def test_the_misses_are_mostly_one_shared_factor() -> None:
    # The model is not scaled by any factor; this checks its *relative* accuracy. Divided
    # by the median predicted/published ratio, 80 % of rows must land within 15 % and none
    # beyond 30 %, the accuracy goal applied to the ratios. A term mispriced for one source,
    # GPU or plan shape (not the shared GEMM shortfall the validation page describes)
    # spreads the ratios and fails this.
    ratios = sorted(1 + check_run(r).error for r in RUNS)
    shared = ratios[len(ratios) // 2]
    off = [abs(r / shared - 1) for r in ratios]
    assert sum(e <= 0.15 for e in off) >= 0.8 * len(off)
    assert max(off) <= 0.30


def _misses(reason: str) -> pytest.MarkDecorator:
    return pytest.mark.xfail(strict=True, reason=reason + ": see validation.md")


@pytest.mark.parametrize(
    "precision, criterion",
    [
        ("bf16", "within"),
        ("bf16", "median"),
        pytest.param("bf16", "worst", marks=_misses(
            "vTrain's 3.6B and 18.4B TP rows at micro-batch 2 and 39.1B TP 2 miss by more")),
        ("fp8", "within"),
        ("fp8", "median"),
        ("fp8", "worst"),
    ],
)  # fmt: skip
def test_accuracy_goal_out_of_sample(precision: str, criterion: str) -> None:
    # Leave one source out: at least 80 % within 15 %, median |error| at most 8 %, none
    # beyond 30 %, BF16 and FP8 apart, with the sustained shares refitted on the
    # other sources (infralens.planner.calibration.refit). Each criterion is its own
    # case, so one that holds guards against a regression while another is still missed.
    checks = [check_run(r) for r in RUNS]
    a = accuracy(checks, refit, precision=precision, held_out=True)
    holds = {
        "within": a.within >= 0.8,
        "median": a.median_abs <= 0.08,
        "worst": abs(a.worst_error) <= 0.30,
    }
    assert holds[criterion], (a.within, a.median_abs, a.worst_error)


def test_a_source_never_grades_a_constant_it_helped_fit() -> None:
    checks = [check_run(r) for r in RUNS]
    # no refit (uncalibrated): out of sample is in sample
    assert held_out_errors(checks, uncalibrated) == {c.row.run_id: c.error for c in checks}
    # a shared factor fitted without a source moves that source's errors, and only
    # by what the other sources' median says
    held = held_out_errors(checks, share_of_median)
    for family in {c.row.family for c in checks}:
        others = [1 + c.error for c in checks if c.row.family != family]
        shared = sorted(others)[len(others) // 2] if len(others) % 2 else None
        for c in checks:
            if c.row.family == family and shared is not None:
                assert held[c.row.run_id] == pytest.approx((1 + c.error) / shared - 1)


def test_the_run_table_gives_each_error_second() -> None:
    # The table is wider than the page: the error, its point, comes right after the run.
    from infralens.planner.step_validation import markdown_report

    row = next(r for r in RUNS if r.run_id == "llama3-405b-128k-16384")
    c = check_run(row)
    head, _, line = markdown_report([c]).splitlines()
    assert [h.strip() for h in head.split("|")[1:4]] == ["run", "error", "published"]
    cells = [x.strip() for x in line.split("|")[1:-1]]
    assert cells[0] == row.run_id and len(cells) == 11
    assert cells[1] == " or ".join(f"{100 * e:+.0f} % ({k})" for k, e in c.readings)
    assert cells[-1].startswith(f"[{row.source}](")
