"""The sustained rates: fitted from the shipped runs, measured on a GPU, applied by the step."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from infralens.layer_gemms import layer_gemms, passes, shape_efficiency
from infralens.model import model_from
from infralens.plan import ParallelPlan
from infralens.planner.calibration import fit, refit
from infralens.planner.job import Job
from infralens.planner.ranking import BAND, TELLS_APART, rank_plans
from infralens.planner.step import estimate
from infralens.planner.step_accuracy import held_out_errors
from infralens.planner.step_validation import check_run, load_runs
from infralens.sustained import (
    CHIPS,
    FITTED,
    IDEAL,
    LAUNCH_GAP_SECONDS,
    Sustained,
    chip,
    clock_share,
    from_file,
    kernels_per_layer,
)
from infralens.topology import Cluster

ROOT = Path(__file__).parent.parent
RUNS = load_runs(ROOT / "tests" / "data" / "training_runs.csv")
GPU_FILES = sorted((ROOT / "tests" / "data" / "gpu").glob("cal-*.json"))


def test_the_shipped_shares_are_what_the_fit_gives_on_the_shipped_runs() -> None:
    s = fit(RUNS)
    assert (s.ampere, s.hopper) == (FITTED.ampere, FITTED.hopper)
    assert FITTED.kernel_seconds == LAUNCH_GAP_SECONDS


def test_each_share_is_the_least_absolute_log_error_of_its_chip() -> None:
    # Moving a share one step either way makes its chip's runs fit worse.
    import math

    from infralens.hardware import SYSTEMS, preset_key

    def loss(s: Sustained, kind: str) -> float:
        mine = [r for r in RUNS if chip(preset_key(SYSTEMS[r.system].gpu)) == kind]
        return sum(abs(math.log1p(check_run(r, s).error)) for r in mine)

    for kind in CHIPS:
        best = loss(FITTED, kind)
        for step in (-0.01, 0.01):
            moved = replace(FITTED, **{kind: getattr(FITTED, kind) + step})
            assert loss(moved, kind) > best


def test_a_board_held_below_its_power_keeps_the_cube_root_of_its_clock() -> None:
    # The 500 W share is derived, not fitted: Hopper's share times (500/700)^(1/3), so a
    # fold without the 500 W runs still prices them at 500 W.
    assert clock_share("h100-hbm2e-96gb") == pytest.approx((500 / 700) ** (1 / 3))
    assert clock_share("h100-sxm5-80gb") == clock_share("a100-sxm4-80gb") == 1.0
    assert FITTED.share("h100-hbm2e-96gb") == pytest.approx(FITTED.hopper * (500 / 700) ** (1 / 3))
    held_out = fit([r for r in RUNS if r.family != "torchtitan"])
    assert held_out.share("h100-hbm2e-96gb") < held_out.share("h100-sxm5-80gb")
    with pytest.raises(ValueError, match="gpu must be one of"):
        clock_share("h100-pcie")


def test_out_of_sample_refits_without_the_held_out_source() -> None:
    checks = [check_run(r) for r in RUNS]
    held = held_out_errors(checks, refit)
    for family in {"narayanan", "torchtitan"}:
        others = [r for r in RUNS if r.family != family]
        s = fit(others)
        for c in checks:
            if c.row.family == family:
                assert held[c.row.run_id] == pytest.approx(check_run(c.row, s).error)
    # the held-out shares differ from the shipped ones: a source never grades its own fit
    assert fit([r for r in RUNS if r.family != "narayanan"]) != fit(RUNS)


def test_the_band_and_tells_apart_are_the_held_out_quartiles() -> None:
    checks = [check_run(r) for r in RUNS]
    held = held_out_errors(checks, refit)
    for precision, (low, high) in BAND.items():
        errors = [held[c.row.run_id] for c in checks if c.row.precision == precision]
        q1, _, q3 = statistics.quantiles(errors, n=4)
        assert (round(q1, 3), round(q3, 3)) == (low, high)
    assert round((1 + BAND["bf16"][1]) / (1 + BAND["bf16"][0]) - 1, 2) == TELLS_APART


def test_the_shares_slow_only_tensor_core_work() -> None:
    c = Cluster.from_node_shape("1_node_x_8_gpus", "dgx-h100")
    job = Job("llama3-8b", ParallelPlan(tp=8), c, seq_len=8192, global_batch_size=8)
    fast = estimate(replace(job, sustained=IDEAL), check_memory=False)
    slow = estimate(job, check_memory=False)
    assert slow.seconds > fast.seconds
    assert slow.breakdown.compute > fast.breakdown.compute
    # the optimizer's HBM traffic is not tensor-core work
    assert slow.breakdown.optimizer == fast.breakdown.optimizer
    # the element-wise kernels are not divided: compute grows by less than 1 / share
    assert slow.breakdown.compute < fast.breakdown.compute / FITTED.hopper


def test_the_launch_gap_paces_only_a_layer_that_runs_shorter_than_its_launches() -> None:
    c = Cluster.from_node_shape("1_node_x_8_gpus", "dgx-h100")
    tiny = model_from("layers=4,hidden=256,heads=4,vocab_size=1024", 128)
    job = Job(tiny, ParallelPlan(dp=8), c, seq_len=128, global_batch_size=8,
              recompute="none", sequence_parallel=False)  # fmt: skip
    slow_cpu = replace(FITTED, kernel_seconds=1e-3)
    e = estimate(replace(job, sustained=slow_cpu), check_memory=False)
    kernels = kernels_per_layer("fused", "none") * tiny.layers
    assert e.breakdown.compute >= kernels * 1e-3  # launch-bound
    big = Job("llama3-8b", ParallelPlan(dp=8), c, seq_len=8192, global_batch_size=8,
              zero_stage=3, recompute="full")  # fmt: skip
    a = estimate(replace(big, sustained=replace(FITTED, kernel_seconds=0.0)), check_memory=False)
    b = estimate(big, check_memory=False)
    assert a.seconds == b.seconds  # its kernels outrun their launches


def test_bad_sustained_values_are_refused() -> None:
    with pytest.raises(ValueError, match="hopper must be in"):
        Sustained(0.7, 1.2, kernel_seconds=0.0)
    with pytest.raises(ValueError, match="kernel_seconds must be a number"):
        Sustained(0.7, 0.7, kernel_seconds=float("nan"))
    with pytest.raises(TypeError, match="ampere must be a float"):
        Sustained("0.7", 0.7, kernel_seconds=0.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="gpu must name"):
        Sustained(0.7, 0.7, kernel_seconds=0.0, bf16_flops=1e15)


def test_the_shipped_gpu_files_read_and_name_their_gpu_and_versions() -> None:
    assert len(GPU_FILES) >= 5
    for path in GPU_FILES:
        s = from_file(path)
        assert s.gpu == "h200-sxm-141gb"
        assert "NVIDIA H200" in s.source and "torch 2.11.0" in s.source
        assert s.bf16_flops is not None and 5e14 < s.bf16_flops < 1e15


def test_the_launch_gap_is_the_median_of_the_shipped_measurements() -> None:
    gaps = [json.loads(p.read_text())["launch_seconds"] for p in GPU_FILES]
    assert round(statistics.median(gaps), 7) == LAUNCH_GAP_SECONDS


def test_a_measured_file_is_refused_on_another_gpu() -> None:
    c = Cluster.from_node_shape("1_node_x_8_gpus", "dgx-h100")
    job = Job("llama3-8b", ParallelPlan(dp=8), c, seq_len=8192, global_batch_size=8,
              sustained=from_file(GPU_FILES[0]))  # fmt: skip
    with pytest.raises(ValueError, match="measured on h200-sxm-141gb"):
        estimate(job, check_memory=False)
    h200 = Cluster.from_node_shape("1_node_x_8_gpus", "dgx-h200")
    measured = estimate(replace(job, cluster=h200), check_memory=False)
    assert measured.seconds > 0


def test_from_file_names_the_file_for_a_malformed_one(tmp_path: Path) -> None:
    bad = tmp_path / "cal.json"
    bad.write_text('{"versions": {}}')
    with pytest.raises(ValueError, match=r"cal\.json. is not a calibration file"):
        from_file(bad)


def test_the_plans_gemms_ran_near_a_square_gemm_on_the_h200() -> None:
    # Timed in CUDA graphs (no launch gaps), each plan's GEMMs, skinny TP shards included,
    # ran within 10 % of a square 8192 GEMM on the same GPU. Tile and wave quantisation
    # predicts up to 10 % less for the 3.6B model at TP 8 than at TP 1; the measurement
    # shows no such gap, which is why the step applies no shape factor.
    rates = {p.stem: json.loads(p.read_text()) for p in GPU_FILES}
    for d in rates.values():
        ratio = d["plan_gemm_flops_per_s"]["bf16"] / d["square_gemm"]["bf16_flops_per_s"]
        assert 0.9 < ratio < 1.1
    tp8 = rates["cal-gpt3.6b-s2048-tp8-b2"]["plan_gemm_flops_per_s"]["bf16"]
    tp1 = rates["cal-gpt3.6b-s2048-tp1-b2"]["plan_gemm_flops_per_s"]["bf16"]
    gpt = model_from("layers=30,hidden=3072,heads=32,vocab_size=51200,ffn_hidden=12288", 2048)
    predicted = shape_efficiency(gpt, tokens=4096, tp=8, cp=1, gpu="h200-sxm-141gb") / (
        shape_efficiency(gpt, tokens=4096, tp=1, cp=1, gpu="h200-sxm-141gb")
    )
    assert predicted < 0.95 < tp8 / tp1


def test_the_files_gemms_are_the_plans() -> None:
    for path in GPU_FILES:
        d = json.loads(path.read_text())
        p = d["plan"]
        model = model_from(p["model"], p["seq_len"])
        shapes = [(g.m, g.n, g.k) for f in layer_gemms(model, tokens=p["micro_batch"] *
                  p["seq_len"], tp=p["tp"], cp=p["cp"]) for g in passes(f)]  # fmt: skip
        assert shapes == [(g["m"], g["n"], g["k"]) for g in d["gemms"]]


def test_no_first_row_on_hopper_offers_ten_per_cent_past_the_best_published_mfu() -> None:
    # The best BF16 MFU any Hopper run in the data reached, in the package's count
    # (Megatron-LM's README: a 16B GPT at TP 4 on 192 H100s); a 70B plan on 64 H100s once
    # ranked at 61 %.
    checks = [check_run(r) for r in RUNS if r.precision == "bf16"]
    hopper = [c for c in checks if "h100" in c.row.system or "h200" in c.row.system]
    best = max(c.published_mfu for c in hopper)
    c = Cluster.from_node_shape("8_nodes_x_8_gpus", "dgx-h100")
    first = rank_plans("llama3-70b", c, seq_len=8192, global_batch_size=512, top=1)[0]
    assert first.estimate.mfu <= 1.1 * best
    assert best == pytest.approx(0.471, abs=0.002)


def test_the_demo_writes_a_file_estimate_takes(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    out = tmp_path / "cal.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "labs_src" / "demos" / "calibrate_gpu.py"), "--device",
         "cpu", "--model", "layers=2,hidden=128,heads=4,vocab_size=512", "--seq-len", "64",
         "--tp", "2", "--repeats", "2", "--gpu-preset", "h100-sxm5-80gb", "--out", str(out)],
        capture_output=True, text=True, timeout=300,
        env={"PYTHONPATH": str(ROOT / "labs_src"), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    s = from_file(out)
    assert s.gpu == "h100-sxm5-80gb" and s.fp8_flops is None and s.kernel_seconds > 0
    d = json.loads(out.read_text())
    assert [g["gemm"] for g in d["gemms"]][:3] == ["qkv", "qkv.dgrad", "qkv.wgrad"]
    assert d["attention"]["heads"] == 2
    # the loss on this GPU's logits: 64 tokens by 512 / 2 of the vocabulary
    assert d["loss"]["logits"] == [64, 256] and d["loss"]["counted_bytes"] == 36
    assert d["loss"]["bytes_per_s"] > 0 and d["loss"]["copy_bytes_per_s"] > 0


@pytest.fixture(scope="module")
def ceilings() -> list[Any]:
    """Every class's best published MFU against the ranker's first row (about 40 s)."""
    from infralens.planner.published_rank import mfu_ceiling, published_rank

    return mfu_ceiling([check_run(r) for r in RUNS], [published_rank(r) for r in RUNS])


@pytest.mark.xfail(
    strict=True,
    reason="Megatron-LM's CI 7B and README 1.7B, Narayanan et al.'s 18.4B and torchtitan's "
    "70B FP8 run are offered more than a tenth past their MFU: see validation.md",
)
def test_no_ranked_first_row_offers_a_tenth_past_the_best_published_mfu(
    ceilings: list[Any],
) -> None:
    assert len(ceilings) >= 15
    assert all(c.ratio <= 1.10 for c in ceilings), [
        (c.model, c.gpu, round(c.ratio, 2)) for c in ceilings if c.ratio > 1.10
    ]


def test_the_a100_ceilings_are_the_ones_the_page_gives(ceilings: list[Any]) -> None:
    # The validation page's A100 paragraph, each figure from the ceiling table.
    page = " ".join((ROOT / "handbook" / "reference" / "validation.md").read_text().split())
    a100 = {c.model: c for c in ceilings if c.gpu == "a100-sxm4-80gb"}

    def span(ratios: list[float], digits: int) -> str:
        return f"{min(ratios):.{digits}f} to {max(ratios):.{digits}f}"

    korthikanti = [
        c.ratio
        for c in a100.values()
        if c.best_run in ("korthikanti-175b", "korthikanti-530b", "korthikanti-1t")
    ]
    assert len(korthikanti) == 3 and f"offers are {span(korthikanti, 2)} times" in page
    assert f"22B run is offered {a100['gpt:48:6144:64'].ratio:.2f}:" in page
    old = [c.ratio for c in old_rows(a100)]
    # ranked with the 2021 software they ran, one shape past the goal: 18.4B
    assert len(old) == 8 and f"those shapes show {span(old, 2)}," in page
    assert [c.model for c in a100.values() if c.ratio > 1.10 and c in old_rows(a100)] == [
        "gpt:40:6144:48"
    ]
    top = max(a100.values(), key=lambda c: c.ratio)
    assert top.best_run.startswith("megatron-ci-a100")
    assert f"the ratio reaches {top.ratio:.1f}, at the same CI model" in page
    titan = f"{a100['llama3-8b'].ratio:.2f} and {a100['llama3-70b'].ratio:.2f} times"
    assert f"offered {titan} their MFU" in page


def old_rows(a100: dict[str, Any]) -> list[Any]:
    """The A100 classes whose best run is 2021 Megatron or Megatron-DeepSpeed."""
    return [c for c in a100.values() if c.best_run.startswith(("narayanan", "vtrain"))]


def test_the_launch_gap_changes_no_published_run() -> None:
    # Every published layer outruns its launches, so the measured gap moves no row: the
    # validation page says so, and a model change that made it bind would show here.
    free = replace(FITTED, kernel_seconds=0.0)
    for r in RUNS:
        assert check_run(r).error == check_run(r, free).error, r.run_id
