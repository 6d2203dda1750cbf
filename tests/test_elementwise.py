"""infralens.elementwise: fused bytes follow the saved activations, eager bytes the count."""

from __future__ import annotations

from dataclasses import replace

import pytest

import infralens.planner._step_terms as terms
from infralens.elementwise import LOSS_BYTES, elementwise_bytes, loss_bytes
from infralens.hardware import GPUS
from infralens.memory import activation_bytes
from infralens.model import PRESETS
from infralens.plan import ParallelPlan
from infralens.planner.job import Job
from infralens.planner.step import estimate
from infralens.sustained import Sustained
from infralens.topology import Cluster


@pytest.mark.parametrize("recompute, passes", [("none", 4), ("selective", 4), ("full", 5)])
def test_fused_is_passes_over_the_bytes_saved_outside_core_attention(
    recompute: str, passes: int
) -> None:
    saved = activation_bytes("llama3-8b", seq_len=4096, micro_batch_size=2, recompute="selective")
    got = elementwise_bytes("llama3-8b", seq_len=4096, micro_batch_size=2, recompute=recompute)
    assert got == passes * saved


def test_eager_counts_each_pass_per_token() -> None:
    m = PRESETS["llama3-70b"]
    h, qkv, f = m.hidden, (m.heads + m.kv_heads) * m.head_dim, m.ffn_hidden
    fwd = 84 * h + (20 + 4) * qkv + 10 * f + 48  # GQA: K and V are repeated
    bwd = 214 * h + (20 + 4) * qkv + 18 * f + 80
    tokens = 2 * 1024
    kw = {"seq_len": 1024, "micro_batch_size": 2, "kernels": "eager"}
    assert elementwise_bytes(m, recompute="none", **kw) == tokens * (fwd + bwd)
    assert elementwise_bytes(m, recompute="full", **kw) == tokens * (2 * fwd + bwd - 6 * h)


def test_tensor_parallel_splits_the_projections_and_sequence_parallel_the_norms() -> None:
    m = PRESETS["llama3-70b"]
    kw = {"seq_len": 1024, "micro_batch_size": 1, "kernels": "eager", "recompute": "none"}
    one, tp8 = elementwise_bytes(m, **kw), elementwise_bytes(m, tp=8, **kw)
    sp8 = elementwise_bytes(m, tp=8, sequence_parallel=True, **kw)
    assert one > tp8 > sp8
    assert sp8 - one / 8 == 1024 * (48 + 80) * 7 / 8  # only the per-token constant stays whole


def test_eager_slows_the_torchtitan_step() -> None:
    c = Cluster.from_node_shape("1_node_x_8_gpus", "dgx-h100")
    kw = {
        "seq_len": 8192,
        "global_batch_size": 16,
        "micro_batch_size": 2,
        "zero_stage": 3,
    }
    job = Job("llama3-8b", ParallelPlan(dp=8), c, **kw)
    fused = estimate(job, check_memory=False)
    eager = estimate(replace(job, elementwise="eager"), check_memory=False)
    assert eager.breakdown.compute > fused.breakdown.compute
    assert eager.breakdown.dp <= fused.breakdown.dp  # more compute hides more FSDP


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"kernels": "compiled"}, "kernels must be one of 'fused', 'eager'"),
        ({"recompute": "some"}, "recompute must be one of"),
        ({"tp": 0}, "tp must be"),
        ({"sequence_parallel": 1}, "sequence_parallel"),
    ],
)
def test_bad_input_names_the_argument(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises((ValueError, TypeError), match=message):
        elementwise_bytes("llama3-8b", seq_len=8, micro_batch_size=1, **kwargs)  # type: ignore[arg-type]


def test_eager_is_only_counted_for_the_llama_block_and_torchtitan_plans() -> None:
    with pytest.raises(ValueError, match="torchtitan's Llama block"):
        elementwise_bytes("gpt3-175b", seq_len=8, micro_batch_size=1, kernels="eager")
    c = Cluster.from_node_shape("1_node_x_8_gpus", "dgx-h100")
    with pytest.raises(ValueError, match="elementwise='eager' needs zero_stage=3"):
        estimate(Job("llama3-8b", ParallelPlan(dp=8), c, seq_len=8192, global_batch_size=16,
                 micro_batch_size=2, elementwise="eager"))  # fmt: skip
    with pytest.raises(ValueError, match="elementwise must be one of"):
        estimate(Job("llama3-8b", ParallelPlan(dp=8), c, seq_len=8192, global_batch_size=16,
                 micro_batch_size=2, elementwise="compiled"))  # fmt: skip


def test_the_loss_moves_its_bytes_per_logit_of_this_ranks_vocabulary_slice() -> None:
    m = PRESETS["llama3-70b"]
    logits = 4096 * 2 * m.vocab_size
    kw = {"seq_len": 4096, "micro_batch_size": 2}
    assert loss_bytes(m, **kw) == LOSS_BYTES["fused"] * logits
    assert loss_bytes(m, loss="eager", **kw) == LOSS_BYTES["eager"] * logits
    # sharded by vocabulary: Megatron's passes split eight ways; PyTorch's eager loss
    # becomes loss_parallel, whose extra passes cost more per logit
    assert loss_bytes(m, tp=8, **kw) == LOSS_BYTES["fused"] * logits // 8
    assert loss_bytes(m, tp=8, loss="eager", **kw) == LOSS_BYTES["loss_parallel"] * logits // 8
    with pytest.raises(ValueError, match="loss must be one of"):
        loss_bytes(m, loss="liger", **kw)
    with pytest.raises(ValueError, match="micro_batch_size must be >= 1"):
        loss_bytes(m, seq_len=8, micro_batch_size=0)


def test_the_loss_runs_once_per_micro_batch_at_hbm_bandwidth_on_the_last_stage(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    c = Cluster.from_node_shape("1_node_x_8_gpus", "dgx-h100")
    kw = {"seq_len": 4096, "global_batch_size": 32, "micro_batch_size": 2}
    job = Job("llama3-8b", ParallelPlan(dp=4, pp=2), c, **kw)
    price = {"tokens": 8192, "seq_len": 4096, "tp": 1, "cp": 1, "sequence_parallel": False,
             "recompute": "none", "stack": "megatron", "kernel": "flash2",
             "elementwise": "fused", "sustained": Sustained(0.7, 0.7, 0.0)}  # fmt: skip
    m = PRESETS["llama3-8b"]
    with_loss, _ = terms.stage_compute(m, (16, 16), "h100-sxm5-80gb", **price)
    before = estimate(job, check_memory=False)
    monkeypatch.setattr(terms, "loss_bytes", lambda *a, **k: 0)
    without, _ = terms.stage_compute(m, (16, 16), "h100-sxm5-80gb", **price)
    after = estimate(job, check_memory=False)
    one = loss_bytes(m, seq_len=4096, micro_batch_size=2) / GPUS["h100-sxm5-80gb"].hbm_bytes_per_s
    assert with_loss[0] == without[0]  # the first stage has no loss
    assert with_loss[1] - without[1] == pytest.approx(one, rel=1e-9)
    # the last stage paces this plan, so each of its micro-batches waits on the loss
    assert before.breakdown.compute - after.breakdown.compute == pytest.approx(
        before.microbatches * one, rel=1e-6
    )
