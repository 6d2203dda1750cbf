"""infralens.planner.fit against published peak memory (tests/data/memory_measurements.csv).

The rows are torchtitan's Llama 3.1 8B FSDP runs on 8 and 128 H100s (same
local batch, sequence and activation checkpointing), eager, compiled and with
Float8 linears. Two comparisons on the eager runs (the others in test_fp8.py):

- each measurement lies between the FSDP2 prediction with full recomputation
  and without recomputation, and above the prediction with torchtitan's
  op-level selective checkpointing, the policy the runs used; that
  prediction, with the eager fp32 loss's backward counted, is within 10 % of
  each row (2-3 % below when written: the measurement is reserved memory,
  which also holds the allocator's cache and the CUDA context), and
- the difference between the two runs, where activations, logits, the
  gathered root and the gradient buffers cancel, is the model-state saving
  of sharding 8 versus 128
  ways; the prediction must be within 10% of the measured difference. The
  miss is close to that bound (about 9% under, at the time of writing); the
  measurement is reserved memory, which also holds the allocator's cache,
  and the 10% was chosen after seeing it, so treat this as a check that the
  sharded-state model is in the right place, not as a validated accuracy.
"""

from __future__ import annotations

import csv
from pathlib import Path

from infralens.plan import ParallelPlan
from infralens.planner.fit import _gpu_memory

DATA = Path(__file__).parent / "data" / "memory_measurements.csv"
GIB = 2**30


def rows(variant: str = "no compile, no Float8") -> dict[int, float]:
    """Measured bytes by FSDP degree for the runs whose config ends with *variant*."""
    with DATA.open(newline="", encoding="utf-8") as f:
        out = {}
        for row in csv.DictReader(f):
            if row["config"].endswith(variant):
                assert row["units"] == "GiB" and row["model"] == "Llama 3.1 8B"
                out[int(row["parallelism"].removeprefix("FSDP "))] = float(row["value"]) * GIB
        assert sorted(out) == [8, 128], variant
        return out


def predict(dp: int, recompute: str) -> int:
    return _gpu_memory("llama3-8b", ParallelPlan(dp=dp), "fsdp2", seq_len=8192, micro_batch_size=2,
                      recompute=recompute, stack="pytorch").total  # fmt: skip


def test_every_row_has_its_provenance() -> None:
    with DATA.open(newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            assert "@" in row["source"] and row["hardware"] and row["config"] and row["units"]


def test_measurements_lie_between_full_and_no_recomputation() -> None:
    for dp, measured in rows().items():
        assert predict(dp, "full") < measured < predict(dp, "none"), dp


def test_measurements_lie_above_the_selective_prediction() -> None:
    for dp, measured in rows().items():
        assert predict(dp, "full") < predict(dp, "selective") < measured, dp


def test_the_difference_between_8_and_128_ranks_is_the_model_state_saving() -> None:
    measured = rows()
    for mode in ("none", "full"):
        predicted = predict(8, mode) - predict(128, mode)
        observed = measured[8] - measured[128]
        assert abs(predicted - observed) / observed < 0.10, (mode, predicted / GIB, observed / GIB)


def test_the_recipe_predicts_each_measurement_within_ten_percent() -> None:
    # torchtitan's recipe as the runs set it: FSDP2, op-level selective checkpointing and
    # cross_entropy on fp32 logits, whose backward holds two more logit-sized fp32 tensors
    for dp, measured in rows().items():
        b = _gpu_memory("llama3-8b", ParallelPlan(dp=dp), "torchtitan-bf16", seq_len=8192,
                       micro_batch_size=2, recompute="selective")  # fmt: skip
        assert abs(b.total / measured - 1) < 0.10, (dp, b.total / GIB, measured / GIB)
