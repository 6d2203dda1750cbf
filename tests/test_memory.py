"""Recipes and activation counts of infralens.memory against the papers and docs they follow."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from infralens.head_memory import head_activation_bytes, logits_bytes
from infralens.memory import (
    activation_bytes,
    activation_bytes_per_layer,
    bytes_per_parameter,
)
from infralens.model import PRESETS, TransformerConfig
from infralens.zero import model_state_bytes


@pytest.mark.parametrize("d", [1, 2, 8, 64, 1000])
def test_megatron_recipes_reproduce_the_distributed_optimizer_table(d: int) -> None:
    # docs/user-guide/features/dist_optimizer.md: bf16 params, fp32 grads: 18 and 6 + 12/d.
    assert bytes_per_parameter("megatron-bf16", dp_size=d) == 18
    assert bytes_per_parameter("megatron-bf16-distopt", dp_size=d) == 6 + Fraction(12, d)
    # FP8 compute parameters save one byte of the two.
    assert bytes_per_parameter("megatron-fp8-distopt", dp_size=d) == 5 + Fraction(12, d)


@pytest.mark.parametrize("psi", [1000, 7_500_000_000])
def test_zero_paper_recipe_is_zero_stage_0(psi: int) -> None:
    assert bytes_per_parameter("zero-paper") * psi == model_state_bytes(psi, dp_size=4, stage=0)


@pytest.mark.parametrize("d", [1, 4, 64])
def test_fsdp2_is_zero_3_with_fp32_parameters_and_gradients(d: int) -> None:
    # fp32 parameter and gradient shards, Adam's two fp32 moments, no separate master copy.
    psi = 64 * 1000
    zero3 = model_state_bytes(psi, dp_size=d, stage=3, optimizer_multiplier=8)  # 2 + 2 + 8
    assert bytes_per_parameter("fsdp2", dp_size=d) * psi == zero3 + 4 * psi // d


def test_ddp_bucket_view_saves_one_gradient_copy() -> None:
    assert bytes_per_parameter("ddp") - bytes_per_parameter("ddp-bucket-view") == 4


def _gpt(h: int, a: int) -> TransformerConfig:
    return TransformerConfig(
        layers=1,
        hidden=h,
        heads=a,
        kv_heads=a,
        ffn_hidden=4 * h,
        vocab_size=8,
        seq_len=8,
        bias=True,
    )


@pytest.mark.parametrize("t", [1, 2, 8])
@pytest.mark.parametrize("sp", [False, True])
@pytest.mark.parametrize("mode", ["none", "selective"])
@pytest.mark.parametrize(("s", "h", "a"), [(2048, 12288, 96), (64, 256, 8), (512, 20480, 128)])
def test_megatron_gpt_case_is_table_2_plus_norm_statistics(
    t: int, sp: bool, mode: str, s: int, h: int, a: int
) -> None:
    b = 2
    got = activation_bytes(
        _gpt(h, a),
        seq_len=s,
        micro_batch_size=b,
        tp=t,
        sequence_parallel=sp,
        recompute=mode,
        attention="materialized",
        dropout=True,
    )
    table2 = activation_bytes_per_layer(
        seq_len=s,
        micro_batch_size=b,
        hidden=h,
        heads=a,
        tp=t,
        sequence_parallel=sp,
        recompute=mode,
    )
    # Korthikanti et al. leave out LayerNorm's fp32 mean and rstd: 2 norms x 8 bytes per token.
    assert got - table2 == 16 * s * b // (t if sp else 1)


def test_full_recompute_keeps_the_layer_input() -> None:
    kw = {"seq_len": 4096, "micro_batch_size": 2, "recompute": "full"}
    assert activation_bytes("llama3-70b", **kw) == 2 * 4096 * 2 * 8192
    assert activation_bytes("llama3-70b", tp=8, sequence_parallel=True, **kw) == 2 * 4096 * 2 * 1024


def test_flash_drops_every_s_squared_term() -> None:
    def grow(attention: str) -> int:
        a, b = (
            activation_bytes("llama3-8b", seq_len=s, micro_batch_size=1, attention=attention)
            for s in (1024, 2048)
        )
        return b - 2 * a

    assert grow("flash") == 0  # linear in s
    assert grow("materialized") == 2 * 32 * 2 * 1024 * 1024  # e*a*s^2 grows by 2*a*s^2*e


def test_sequence_parallel_differs_by_the_gathered_column_inputs() -> None:
    kw = {"seq_len": 8192, "micro_batch_size": 1, "tp": 8, "sequence_parallel": True}
    gap = activation_bytes("llama3-70b", stack="pytorch", **kw) - activation_bytes(
        "llama3-70b", stack="megatron", **kw
    )
    s, h, f, t = 8192, 8192, 28672, 8
    # two full inputs (attention and MLP) instead of their 1/t shards; one more e*s*f/t in eager MLP
    assert gap == 2 * 2 * s * h * (t - 1) // t + 2 * s * f // t


def test_pytorch_selective_sits_between_full_and_none() -> None:
    # torchtitan's policy keeps a strict subset of what eager autograd saves, and more than
    # the layer input that full recomputation keeps.
    run = {"seq_len": 4096, "micro_batch_size": 2, "stack": "pytorch"}
    for model in ("llama3-8b", "llama3-70b"):
        none = activation_bytes(model, **run)  # type: ignore[arg-type]
        sel = activation_bytes(model, recompute="selective", **run)  # type: ignore[arg-type]
        full = activation_bytes(model, recompute="full", **run)  # type: ignore[arg-type]
        assert full < sel < none


def test_logits_are_fp32_per_vocabulary_entry() -> None:
    v = PRESETS["llama3-8b"].vocab_size
    assert logits_bytes("llama3-8b", seq_len=8192, micro_batch_size=1, tp=8) == 8192 * v // 2


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"attention": "paged"}, "attention must be one of"),
        ({"recompute": "half"}, "recompute must be one of"),
        ({"tp": 16}, "heads must be divisible by tp"),
        ({"tp": 3}, "heads must be divisible by tp"),
        ({"seq_len": -1}, "seq_len must be >= 1"),
        ({"stack": "jax"}, "stack must be one of"),
        ({"stack": "pytorch", "recompute": "selective", "tp": 2}, "selective"),
        ({"stack": "pytorch", "recompute": "selective", "dropout": True}, "selective"),
        ({"stack": "pytorch", "recompute": "selective", "attention": "materialized"}, "flash"),
        ({"tp": 2, "sequence_parallel": True, "seq_len": 7}, "seq_len must be divisible by tp"),
    ],
)
def test_bad_input_names_the_argument(kw: dict[str, object], message: str) -> None:
    args: dict[str, object] = {"seq_len": 8, "micro_batch_size": 1, **kw}
    with pytest.raises(ValueError, match=message):
        activation_bytes("llama3-8b", **args)  # type: ignore[arg-type]


def test_unknown_model_and_recipe() -> None:
    with pytest.raises(ValueError, match="model must be one of"):
        activation_bytes("llama4", seq_len=8, micro_batch_size=1)
    with pytest.raises(ValueError, match="recipe must be one of"):
        bytes_per_parameter("apex")
    with pytest.raises(TypeError, match="dp_size must be an int"):
        bytes_per_parameter("fsdp2", dp_size=True)


def test_gpu_memory_without_pipeline_holds_every_parameter() -> None:
    from infralens.plan import ParallelPlan
    from infralens.planner.fit import _gpu_memory

    for name in ("llama3-8b", "llama3-70b"):
        n = PRESETS[name].num_params()
        b = _gpu_memory(name, ParallelPlan(dp=8), "megatron-bf16", seq_len=1024, micro_batch_size=1)
        assert b.model_states == 18 * n
        assert b.activations == PRESETS[name].layers * activation_bytes(
            name, seq_len=1024, micro_batch_size=1
        ) + head_activation_bytes(name, seq_len=1024, micro_batch_size=1)
        assert b.logits == logits_bytes(name, seq_len=1024, micro_batch_size=1)


def test_gpu_memory_pipeline_stages_split_the_parameters() -> None:
    from infralens.pipeline_memory import in_flight
    from infralens.plan import ParallelPlan
    from infralens.planner.fit import _stage
    from infralens.precision import RECIPES

    m = PRESETS["llama3-70b"]
    plan = ParallelPlan(tp=2, pp=4, dp=1)
    act = 1000
    paper = RECIPES["zero-paper"]
    first, last = (
        _stage(m, plan, paper, rank, 20, in_flight(rank, 4) * 20, act, 7) for rank in (0, 3)
    )
    # first + last + two middle stages of 20 layers hold the model over t = 2 (all sizes even)
    middle = 20 * m.layer_params() // 2
    assert (first.model_states + last.model_states) // 16 + 2 * middle == m.num_params() // 2
    assert (first.activations, last.activations) == (20 * act * 4, 20 * act)
    assert (first.logits, last.logits) == (0, 7)
    assert (first.stage, last.stage, first.recipe) == ("first", "last", "zero-paper")


def test_shortfall_and_bad_gpu() -> None:
    from infralens.planner.fit import Breakdown, shortfall

    breakdown = Breakdown("first", 70 * 10**9, 0, 5 * 10**9, 0)
    assert shortfall(breakdown, "h100-sxm5-80gb") == -5 * 10**9
    with pytest.raises(ValueError, match="gpu must be one of"):
        shortfall(Breakdown("first", 0, 0, 0, 0), "b200")


def _work(plan: object = None, **kw: object) -> Any:
    from infralens.plan import ParallelPlan
    from infralens.planner.job import Job
    from infralens.topology import Cluster

    cluster = Cluster.from_node_shape("8_nodes_x_8_gpus", "dgx-h100")
    plan = plan or ParallelPlan(tp=8, pp=4, dp=2)
    return Job("llama2-70b", plan, cluster, seq_len=4096, global_batch_size=512, **kw)  # type: ignore[arg-type]


def test_worksheet_memory_follows_the_recipe() -> None:
    from infralens.plan import ParallelPlan
    from infralens.planner.design import fill_worksheet, render_markdown
    from infralens.sharding import padded_shard_size

    plan = ParallelPlan(tp=8, pp=4, dp=2)
    params = padded_shard_size(68_976_648_192, 32)
    paper = fill_worksheet(_work(plan, zero_stage=1, recipe="zero-paper"))
    megatron = fill_worksheet(_work(plan, recipe="megatron-bf16-distopt"))
    # the first stage holds 20 layers and the embedding: 4 + 12/2 bytes against 6 + 12/2
    m = _work().config
    first = 20 * m.layer_params() // 8 + m.embedding_params() // 8
    assert (paper.model_state_bytes, megatron.model_state_bytes) == (10 * first, 12 * first)
    assert (paper.recipe, megatron.recipe) == ("zero-paper-1", "megatron-bf16-distopt")
    assert megatron.activation_bytes == paper.activation_bytes
    assert first > params  # the first stage holds the embedding too: more than 1/32
    wide = ParallelPlan(tp=8, pp=1, dp=8)  # 8.6B parameters per GPU at 18 bytes
    small = fill_worksheet(_work(wide, zero_stage=0, recipe="megatron-bf16"))
    over = (small.memory_bytes - 80 * 10**9) / 1e9
    assert over > 0
    text = render_markdown(small)
    assert "(megatron-bf16 recipe)" in text
    assert f"does not fit by {over:.1f} GB" in text


def test_worksheet_recipe_must_match_the_stage() -> None:
    with pytest.raises(ValueError, match="shards like ZeRO stage 3; set zero_stage to 3"):
        _work(zero_stage=1, recipe="fsdp2")
    with pytest.raises(ValueError, match="recipe must be one of"):
        _work(recipe="apex")
