"""`python -m infralens plan`: output on the starter file, one-line errors on bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
STARTER = ROOT / "labs_src" / "starters" / "parallelism_plan.yaml"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "labs_src")}
    return subprocess.run(
        [sys.executable, "-m", "infralens", *args], capture_output=True, text=True, env=env,
        timeout=60,
    )  # fmt: skip


def test_help_lists_the_commands() -> None:
    done = run("--help")
    assert done.returncode == 0 and "plan" in done.stdout


def test_plan_prints_grid_groups_and_worksheet() -> None:
    done = run("plan", str(STARTER))
    assert done.returncode == 0, done.stderr
    assert "node 7: tp0 cp0 pp3 dp1" in done.stdout
    assert "tp (degree 8, nvlink" in done.stdout
    assert "| TP | 8 | nvlink: ranks 0–7 |" in done.stdout  # the group the step prices
    assert "tokens/s per GPU, MFU" in done.stdout and "bound by: compute" in done.stdout


def test_plan_json_is_machine_readable() -> None:
    report = json.loads(run("plan", str(STARTER), "--format", "json").stdout)
    assert report["axes"]["tp"]["groups"][0] == list(range(8))
    assert len(report["grid"]) == 8


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (None, "no such plan file"),
        ("world_size: [64\n", "is not valid YAML at line"),
        (
            "world_size: 64\nnode_shape: 8_nodes_x_8_gpus\n"
            "parallelism: {tp_size: 8, pp_size: 4, dp_size: 3}\n",
            "8 * 1 * 4 * 3 = 96 != 64",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    tmp_path: Path, content: str | None, expected: str
) -> None:
    path = tmp_path / "plan.yaml"
    if content is not None:
        path.write_text(content)
    done = run("plan", str(path))
    assert done.returncode == 2
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0], done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ([1, 2], "the plan file must be a mapping, got list"),
        ({"node_shape": "1_node_x_8_gpus", "parallelism": {}}, "needs a 'world_size' entry"),
        (
            {"world_size": 8, "node_shape": "1_node_x_8_gpus", "parallelism": {"sp_size": 2}},
            "parallelism has unknown keys ['sp_size']",
        ),
        (
            {"world_size": 8, "node_shape": "2_nodes_x_8_gpus", "parallelism": {"tp_size": 8}},
            "node_shape gives 16 GPUs but world_size is 8",
        ),
        (
            {
                "world_size": 8,
                "node_shape": "1_node_x_8_gpus",
                "parallelism": {"tp_size": 8},
                "training": {"layers": 2, "batch": 4},
            },
            "training has unknown keys ['batch']",
        ),
        (
            {"world_size": 8, "node_shape": "1_node_x_8_gpus", "cluster": "tpu", "parallelism": {}},
            "preset must be one of",
        ),
    ],
)
def test_parse_plan_names_each_problem(data: object, expected: str) -> None:
    from infralens.planner.plan_file import parse_plan

    with pytest.raises(ValueError) as caught:
        parse_plan(data)
    assert expected in str(caught.value)


def test_memory_prints_the_breakdown_and_verdict() -> None:
    from infralens.plan import ParallelPlan
    from infralens.planner.fit import _gpu_memory

    done = run("memory", "--model", "llama3-70b", "--plan", str(STARTER), "--recipe", "fsdp2")
    assert done.returncode == 0, done.stderr
    # the starter plan: tp 8, pp 4, dp 2, 4,096 tokens, selective recomputation, SP
    job = {"seq_len": 4096, "micro_batch_size": 1, "recompute": "selective"}
    expected = _gpu_memory(
        "llama3-70b", ParallelPlan(tp=8, pp=4, dp=2), "fsdp2", sequence_parallel=True, **job
    )
    assert f"{expected.total / 10**9:7.2f} GB of 80.00 GB (h100-sxm5-80gb)" in done.stdout
    assert "fits" in done.stdout and "not counted: CUDA context" in done.stdout


def test_memory_without_a_model_prices_the_files_own_workload_as_plan_does() -> None:
    # The starter names no preset, only a shape (Llama 2 70B's): memory reads it from
    # the training section, as plan does, and the two print one count of model states.
    done = run("memory", "--plan", str(STARTER))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("llama2-70b, tp=8 cp=1 pp=4 dp=2")
    states = next(line for line in done.stdout.splitlines() if "model states" in line)
    total = next(line for line in done.stdout.splitlines() if line.strip().startswith("total"))
    planned = run("plan", str(STARTER)).stdout
    gb = float(states.split()[-2])
    assert f"{gb:.1f} GB model states" in planned
    assert f"= {float(total.split()[1]):.1f} GB of 80 GB HBM" in planned


def test_memory_says_by_how_much_it_does_not_fit() -> None:
    from infralens.plan import ParallelPlan
    from infralens.planner.fit import _gpu_memory

    done = run("memory", "--model", "llama3-70b", "--plan", str(STARTER), "--hbm-gb", "30")
    assert done.returncode == 0, done.stderr
    # the starter plan's zero_stage 1 is the default recipe, Megatron's distributed optimizer
    b = _gpu_memory("llama3-70b", ParallelPlan(tp=8, pp=4, dp=2), "megatron-bf16-distopt",
                   seq_len=4096, micro_batch_size=1, recompute="selective",
                   sequence_parallel=True, microbatches=256)  # fmt: skip
    assert b.total > 30 * 10**9
    assert f"does not fit by {(b.total - 30 * 10**9) / 10**9:.2f} GB" in done.stdout
    assert "recipe megatron-bf16-distopt" in done.stdout


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--model", "llama9"], "model must be one of"),
        (["--model", "llama3-70b", "--recipe", "apex"], "recipe must be one of"),
        (["--model", "llama3-70b", "--gpu", "b200"], "gpu must be one of"),
        (["--model", "llama3-70b", "--hbm-gb", "-1"], "hbm_gb must be > 0"),
        (["--model", "llama3.1-405b"], "layers must be divisible by pp * chunks: 126 % 4 = 2"),
    ],
)
def test_memory_bad_input_is_one_line_and_exit_2(args: list[str], expected: str) -> None:
    done = run("memory", "--plan", str(STARTER), *args)
    assert done.returncode == 2 and done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0], done.stderr


def test_rank_takes_a_shape_and_prices_it_as_the_same_preset() -> None:
    # Llama 3 8B's shape at its own sequence length is the preset: the same table.
    shape = ("layers=32,hidden=4096,heads=32,kv_heads=8,ffn_hidden=14336,"
             "vocab_size=128256,gated_mlp=true")  # fmt: skip
    common = ["--gpus", "16", "--seq-len", "8192", "--global-batch", "64"]
    preset = run("rank", "--model", "llama3-8b", *common)
    shaped = run("rank", "--model", shape, *common)
    assert preset.returncode == shaped.returncode == 0, shaped.stderr
    assert shaped.stdout.replace(shape, "llama3-8b", 1) == preset.stdout


def test_rank_prints_ten_plans_fastest_first() -> None:
    done = run("rank", "--model", "llama3-70b", "--cluster", "dgx-h100", "--gpus", "64",
               "--seq-len", "4096", "--global-batch", "512")  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = [
        line for line in done.stdout.splitlines() if line.startswith("| ") and "---" not in line
    ]
    steps = [float(r.split("|")[10]) for r in rows[1:]]
    assert len(steps) == 10 and steps == sorted(steps)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--gpus", "60"], "multiple of the 8 GPUs"),
        (["--gpus", "64", "--model", "gpt5"], "model must be one of"),
        (["--gpus", "8", "--model", "llama3.1-405b"], "no feasible plan"),
        (
            ["--gpus", "64", "--model", "layers=8,hidden=512,head=8,vocab_size=1000"],
            "model shape has an unknown key 'head'; did you mean 'heads'?",
        ),
        (
            ["--gpus", "64", "--model", "layers=8,hidden=512,heads=8"],
            "model shape needs vocab_size",
        ),
        (
            ["--gpus", "64", "--model", "layers=8,hidden=512,heads=8,vocab_size=1k"],
            "model shape key vocab_size must be a whole number, got '1k'",
        ),
        (
            ["--gpus", "64", "--model", "layers=8,hidden=512,heads=8,kv_heads=3,vocab_size=9"],
            "heads must be divisible by kv_heads: 8 % 3 = 2",
        ),
    ],
)
def test_rank_bad_input_is_one_line_and_exit_2(args: list[str], expected: str) -> None:
    base = {"--model": "llama3-70b", "--cluster": "dgx-h100", "--seq-len": "4096",
            "--global-batch": "512"}  # fmt: skip
    for key, value in zip(args[::2], args[1::2], strict=True):
        base[key] = value
    done = run("rank", *[x for kv in base.items() for x in kv])
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1 and expected in done.stderr
