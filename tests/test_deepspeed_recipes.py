"""DeepSpeed's bf16 ZeRO presets against a hand count of the buffers its source allocates.

The counts follow deepspeedai/DeepSpeed edaa722: deepspeed/runtime/zero/stage_1_and_2.py
(ZeRO-1 and -2), deepspeed/runtime/zero/stage3.py (ZeRO-3), the defaults of
deepspeed/runtime/zero/config.py and the bf16 dtypes deepspeed/runtime/engine.py picks.
"""

from __future__ import annotations

import os
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest

from infralens.model import PRESETS
from infralens.plan import ParallelPlan
from infralens.planner.fit import _gpu_memory
from infralens.precision import RECIPES, recipe_bytes
from infralens.recipe import Recipe

ROOT = Path(__file__).resolve().parent.parent
NAMES = ("deepspeed-zero1-bf16", "deepspeed-zero2-bf16", "deepspeed-zero3-bf16")

BF16, FP32 = 2, 4
REDUCE_BUCKET_SIZE = 500_000_000  # zero/config.py:113, elements
MAX_LIVE_PARAMETERS = 1_000_000_000  # zero/config.py:238, elements


def _hand_count(stage: int, d: int) -> Fraction:
    # fp32 master partition (stage_1_and_2.py:489-509, stage3.py:1119-1122) and Adam's
    # exp_avg and exp_avg_sq of that partition: 1/d of the parameters each.
    optimizer = Fraction(FP32 + FP32 + FP32, d)
    if stage == 1:
        # bit16_groups_flat holds every bf16 parameter (437-456); ZeRO-1 keeps every bf16
        # gradient until the accumulation boundary (1752-1754, 1764-1769).
        return BF16 + BF16 + optimizer
    if stage == 2:
        # the same whole bf16 parameters; only this rank's gradients stay, in the bf16
        # grads_in_partition (1670-1687, 1742-1751).
        return BF16 + Fraction(BF16, d) + optimizer
    # ZeRO-3: bf16 parameter partitions (stage3.py:917-924) and bf16 gradient
    # partitions, grad_partitions_flat_buffer (742-744).
    return Fraction(BF16, d) + Fraction(BF16, d) + optimizer


@pytest.mark.parametrize("d", [1, 8, 64])
@pytest.mark.parametrize("stage", [1, 2, 3])
def test_bytes_per_parameter_match_the_hand_count(stage: int, d: int) -> None:
    assert recipe_bytes(NAMES[stage - 1], dp_size=d) == _hand_count(stage, d)


def test_bytes_per_parameter_at_eight_ranks() -> None:
    # 2 + 2 + 12/8, 2 + 14/8, 16/8
    assert [recipe_bytes(n, dp_size=8) for n in NAMES] == [
        Fraction(11, 2),
        Fraction(15, 4),
        Fraction(2),
    ]


def test_fixed_bytes_are_the_bucket_and_the_live_parameters() -> None:
    # one bf16 reduce bucket (stage_1_and_2.py:2493-2516 without overlap_comm,
    # stage3.py:730-735); ZeRO-3 adds at most max_live_parameters gathered in bf16.
    bucket = BF16 * REDUCE_BUCKET_SIZE
    assert [RECIPES[n].fixed_bytes for n in NAMES] == [
        bucket,
        bucket,
        bucket + BF16 * MAX_LIVE_PARAMETERS,
    ]


def test_presets_run_as_deepspeed_does() -> None:
    for stage, name in enumerate(NAMES, start=1):
        r = RECIPES[name]
        assert r.zero_stage == stage and r.precision == "bf16"
        assert r.grad_reduce_in_fp32 is False  # bf16 communication_data_type
        assert r.stack == "megatron"  # not FSDP2's gathered units and gradient buffers
        assert "edaa7221267243c7be7fb49c5d5f5c4fb97b4641" in r.framework
        assert "deepspeed/runtime/zero/" in r.source


def test_zero3_memory_runs_and_adds_only_the_fixed_bytes() -> None:
    plan = ParallelPlan(dp=8)
    job = dict(seq_len=8192, micro_batch_size=1)
    ds = _gpu_memory("llama3-8b", plan, "deepspeed-zero3-bf16", **job)  # type: ignore[arg-type]
    paper = _gpu_memory("llama3-8b", plan, "zero-paper-3", **job)  # type: ignore[arg-type]
    n = PRESETS["llama3-8b"].num_params()
    assert ds.model_states == 2 * n + 3 * 10**9  # 16/8 bytes a parameter, then fixed
    assert ds.model_states - paper.model_states == 3 * 10**9
    assert (ds.gathered, ds.grad_buffers) == (0, 0)
    assert (ds.activations, ds.logits) == (paper.activations, paper.logits)
    assert ds.recipe == "deepspeed-zero3-bf16"


def test_fixed_bytes_must_be_a_nonnegative_int() -> None:
    base = RECIPES["deepspeed-zero2-bf16"]
    fields = dict(name="x", framework="x", source="x", buffers=base.buffers)
    assert Recipe(**fields).fixed_bytes == 0  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="fixed_bytes"):
        Recipe(**fields, fixed_bytes=-1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="fixed_bytes"):
        Recipe(**fields, fixed_bytes=1.5)  # type: ignore[arg-type]


def test_memory_help_lists_the_presets() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "labs_src")}
    done = subprocess.run(
        [sys.executable, "-m", "infralens", "memory", "--help"],
        capture_output=True, text=True, cwd=ROOT, env=env, check=False, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    for name in NAMES:
        assert name in done.stdout
