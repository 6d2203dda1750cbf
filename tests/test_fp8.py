"""FP8 in the planner against what torchtitan published and what the FP8 stacks do.

torchtitan's H100 benchmark prints Llama 3.1 8B with torch.compile, then again with
torchao's Float8 linears, on 8 and 128 GPUs (tests/data): throughput rose 28-29 % and
reserved memory barely moved. The planner prices the same runs with the
``torchtitan-bf16-compile`` and ``torchtitan-float8-compile`` recipes: the block GEMMs
at the measured FP8 matmul ceiling, the output layer and attention in BF16, and the
quantisation kernels at HBM bandwidth.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import infralens.planner.step_validation as sv
from infralens.fp8 import quantize_bytes, saved_activation_change
from infralens.hardware import MAMF_BF16, MAMF_FP8
from infralens.plan import ParallelPlan
from infralens.planner.fit import _gpu_memory
from infralens.planner.job import Job
from infralens.planner.step import estimate
from infralens.topology import Cluster
from tests.test_memory_measurements import GIB, rows

ROOT = Path(__file__).resolve().parent.parent
RUNS = {r.run_id: r for r in sv.load_runs(ROOT / "tests" / "data" / "training_runs.csv")}


@pytest.mark.parametrize("gpus", [8, 128])
def test_float8_speedup_within_ten_percent_of_torchtitans(gpus: int) -> None:
    bf16 = RUNS[f"torchtitan-h100-llama3.1-8b-{gpus}gpu-compile"]
    fp8 = RUNS[f"torchtitan-h100-llama3.1-8b-{gpus}gpu-compile-float8"]
    assert fp8.recipe == "torchtitan-float8-compile" and bf16.recipe == ""
    published = fp8.published / bf16.published
    predicted = sv.check_run(fp8).predicted / sv.check_run(bf16).predicted
    # the speed-up must come from FP8 GEMMs, and stay under the ceilings' ratio
    assert 1 < predicted < MAMF_FP8["h100-sxm5-80gb"] / MAMF_BF16["h100-sxm5-80gb"]
    assert abs(predicted / published - 1) < 0.10, (predicted, published)


COMPILED, FLOAT8 = "torch.compile, no Float8", "Float8 linears (torchao eab345c)"


@pytest.mark.parametrize("variant", [COMPILED, FLOAT8])
def test_compiled_and_float8_memory_within_ten_percent(variant: str) -> None:
    recipe = "torchtitan-float8-compile" if variant == FLOAT8 else "torchtitan-bf16-compile"
    for dp, measured in rows(variant).items():
        b = _gpu_memory("llama3-8b", ParallelPlan(dp=dp), recipe, seq_len=8192,
                       micro_batch_size=2, recompute="selective")  # fmt: skip
        assert abs(b.total / measured - 1) < 0.10, (dp, b.total / GIB, measured / GIB)


def test_torchao_float8_leaves_memory_as_bf16_leaves_it() -> None:
    # torchao saves the linears' BF16 inputs: Float8 moved reserved memory by 0.2 GiB
    compiled, float8 = rows("torch.compile, no Float8"), rows("Float8 linears (torchao eab345c)")
    for dp in (8, 128):
        kw = dict(seq_len=8192, micro_batch_size=2, recompute="selective")
        bf16 = _gpu_memory("llama3-8b", ParallelPlan(dp=dp), "torchtitan-bf16-compile", **kw)
        fp8 = _gpu_memory("llama3-8b", ParallelPlan(dp=dp), "torchtitan-float8-compile", **kw)
        assert bf16.total == fp8.total
        assert abs(compiled[dp] - float8[dp]) < 0.5 * GIB


def test_transformer_engine_saves_linear_inputs_in_fp8() -> None:
    kw = dict(seq_len=8192, micro_batch_size=1, recompute="selective")
    plan = ParallelPlan(cp=2, dp=4)
    bf16 = _gpu_memory("llama3-8b", plan, "megatron-core-bf16", **kw)
    fp8 = _gpu_memory("llama3-8b", plan, "megatron-core-fp8", **kw)
    # per layer at s/cp = 4096 tokens: the norm outputs (2·h) and the fc2 input (f) drop a
    # byte each, the projection's FP8 input copy adds h; one stage holds all 32 layers
    per_layer = 4096 * (4096 - 2 * 4096 - 14336)
    assert fp8.activations - bf16.activations == 32 * per_layer
    assert saved_activation_change("llama3-8b", seq_len=4096, micro_batch_size=1,
                                   scaling="delayed", recompute="full") == 0  # fmt: skip


def test_quantisation_costs_more_with_current_scaling_than_delayed() -> None:
    kw = dict(seq_len=4096, micro_batch_size=1, tp=2)
    delayed = quantize_bytes("llama3-70b", scaling="delayed", **kw)
    current = quantize_bytes("llama3-70b", scaling="current", **kw)
    assert current == pytest.approx(delayed * 6 / 4, rel=1e-9)


def test_fp8_on_a_gpu_without_fp8_is_refused() -> None:
    c = Cluster.from_node_shape("1_node_x_8_gpus", "dgx-a100")
    with pytest.raises(ValueError, match="gpu must be one of 'h100-sxm5-80gb'"):
        estimate(Job("llama3-8b", ParallelPlan(dp=8), c, seq_len=4096, global_batch_size=8,
                 micro_batch_size=1, recipe="megatron-core-fp8", recompute="full"))  # fmt: skip
    h100 = Cluster.from_node_shape("1_node_x_8_gpus", "dgx-h100")
    with pytest.raises(ValueError, match="needs a Blackwell GPU"):
        estimate(Job("llama3-8b", ParallelPlan(dp=8), h100, seq_len=4096, global_batch_size=8,
                 micro_batch_size=1, recipe="megatron-core-mxfp8", recompute="full"))  # fmt: skip


def test_delayed_scaling_pays_an_amax_all_reduce_and_fp8_gathers_halve() -> None:
    c = Cluster.from_node_shape("8_nodes_x_8_gpus", "dgx-h100")
    kw = dict(
        seq_len=8192,
        global_batch_size=512,
        micro_batch_size=1,
        schedule="interleaved",
        chunks=5,
        recompute="selective",
    )
    plan = ParallelPlan(tp=4, pp=4, cp=2, dp=2)
    bf16 = estimate(Job("llama3-70b", plan, c, recipe="megatron-core-bf16", **kw))
    fp8 = estimate(Job("llama3-70b", plan, c, recipe="megatron-core-fp8", **kw))
    assert fp8.breakdown.compute < bf16.breakdown.compute
    assert fp8.recipe == "megatron-core-fp8" and fp8.mfu < fp8.hfu <= 1


def run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "labs_src")}
    return subprocess.run([sys.executable, "-m", "infralens", *args], capture_output=True,
                          text=True, cwd=ROOT, env=env, check=False, timeout=120)  # fmt: skip


def test_every_command_accepts_an_fp8_recipe(tmp_path: Path) -> None:
    plan = tmp_path / "fp8.yaml"
    plan.write_text(
        "node_shape: 8_nodes_x_8_gpus\nworld_size: 64\n"
        "parallelism: {tp_size: 4, pp_size: 4, cp_size: 2, dp_size: 2}\n"
        "training: {model: llama3-70b, global_batch_size: 512, schedule: interleaved,"
        " chunks: 5, recipe: megatron-core-fp8, zero_stage: 1}\n",
        encoding="utf-8",
    )
    for args in (("plan", str(plan)), ("memory", "--plan", str(plan)),
                 ("rank", "--model", "llama3-70b", "--gpus", "64", "--seq-len", "8192",
                  "--global-batch", "512", "--recipe", "megatron-core-fp8")):  # fmt: skip
        out = run(*args)
        assert out.returncode == 0, (args, out.stderr)
        assert "megatron-core-fp8" in out.stdout, args
