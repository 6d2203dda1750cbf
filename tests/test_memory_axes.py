"""infralens.planner.fit against torchtitan's peak memory with context and tensor parallelism.

tests/data/memory_measurements.csv holds, beside the 1D FSDP rows, torchtitan's
Llama 3.1 8B with FSDP and context parallelism (8 GPUs, sequences of 32K to 256K,
full activation checkpointing, Float8) and Llama 3.1 70B with FSDP 32 and TP 8
(256 GPUs, local batch 16, full checkpointing, Float8). Both are predicted within
10 %; the TP rows only since the count holds what torchtitan's TP adds to the
last stage, the gathered input its output layer saves and the fourth fp32 logit
copy of ``loss_parallel``'s backward (infralens.head_memory).
"""

from __future__ import annotations

import csv
from pathlib import Path

from infralens.plan import ParallelPlan
from infralens.planner.fit import _gpu_memory

DATA = Path(__file__).parent / "data" / "memory_measurements.csv"
GIB = 2**30
RECIPE = "torchtitan-float8-compile"


def rows(axis: str) -> list[dict[str, str]]:
    with DATA.open(newline="", encoding="utf-8") as f:
        return [r for r in csv.DictReader(f) if axis in r["config"].rsplit(";", 1)[-1]]


def degrees(row: dict[str, str]) -> dict[str, int]:
    """{"dp": 4, "cp": 2} from "FSDP 4, CP 2"."""
    names = {"FSDP": "dp", "CP": "cp", "TP": "tp"}
    return {names[k]: int(v) for k, v in (p.split() for p in row["parallelism"].split(", "))}


def seq_len(row: dict[str, str]) -> int:
    return int(row["config"].split("seq_len ")[1].split(",")[0])


def local_batch(row: dict[str, str]) -> int:
    return int(row["config"].split("local batch ")[1].split(",")[0])


def predicted(row: dict[str, str]) -> float:
    model = {"Llama 3.1 8B": "llama3-8b", "Llama 3.1 70B": "llama3-70b"}[row["model"]]
    plan = ParallelPlan(**degrees(row))
    b = _gpu_memory(model, plan, RECIPE, seq_len=seq_len(row), micro_batch_size=local_batch(row),
                   recompute="full", sequence_parallel=plan.tp > 1)  # fmt: skip
    return b.total / GIB


def test_the_rows_are_the_published_tables() -> None:
    cp, tp = rows("context parallelism"), rows("tensor parallelism")
    assert [seq_len(r) for r in cp] == [32768, 65536, 131072, 262144]
    assert [degrees(r)["cp"] for r in cp] == [1, 2, 4, 8]
    assert len(tp) == 2 and all(degrees(r) == {"dp": 32, "tp": 8} for r in tp)


def test_context_parallel_rows_within_ten_percent() -> None:
    for row in rows("context parallelism"):
        p, m = predicted(row), float(row["value"])
        assert abs(p / m - 1) < 0.10, (row["parallelism"], p, m)


def test_tensor_parallel_rows_within_ten_percent() -> None:
    for row in rows("tensor parallelism"):
        p, m = predicted(row), float(row["value"])
        assert abs(p / m - 1) < 0.10, (row["config"], p, m)
