"""infralens.planner.job: one Job from plan file to rank row to written plan and back."""

from __future__ import annotations

import inspect
import io
import json
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from infralens import cli
from infralens.model import shaped_model
from infralens.plan import ParallelPlan
from infralens.planner import design, fit, job, plan_file, ranking, step, worksheet_tables
from infralens.planner.fit import gpu_memory
from infralens.planner.job import Job
from infralens.planner.plan_writer import plan_yaml
from infralens.planner.ranking import rank_job, rank_plans
from infralens.planner.step import estimate
from infralens.topology import Cluster

H200 = Cluster.from_node_shape("2_nodes_x_8_gpus", "dgx-h200")


def _run(*args: str) -> str:
    out = io.StringIO()
    with redirect_stdout(out):
        assert cli.main(list(args)) == 0
    return out.getvalue()


def test_a_written_row_loads_back_into_the_job_rank_yielded(tmp_path: Path) -> None:
    pytest.importorskip("yaml")
    ranked = rank_plans("llama3-8b", H200, seq_len=8192, global_batch_size=32, top=4)
    assert len({r.plan for r in ranked}) == 4
    for row in ranked:
        path = tmp_path / "row.yaml"
        path.write_text(plan_yaml(row.job), encoding="utf-8")
        assert plan_file.load_plan_file(path)[2] == row.job  # the plan command's job
        assert cli.job_of(None, path) == row.job  # the memory command's job
        assert estimate(row.job).seconds == row.estimate.seconds
        assert gpu_memory(row.job).total == row.estimate.memory_bytes


def test_rank_write_plan_then_memory_and_plan_price_the_same_job(tmp_path: Path) -> None:
    pytest.importorskip("yaml")
    path = tmp_path / "first.yaml"
    _run("rank", "--model", "llama3-8b", "--cluster", "dgx-h200", "--gpus", "16",
         "--seq-len", "8192", "--global-batch", "32", "--write-plan", "1", str(path))  # fmt: skip
    first = rank_plans("llama3-8b", H200, seq_len=8192, global_batch_size=32, top=1)[0].job
    assert plan_file.load_plan_file(path)[2] == first
    mem = gpu_memory(first)
    text = _run("memory", "--plan", str(path))
    # judged against the file's own GPU, the H200's 141 GB, as rank judged it
    assert f"{mem.total / 1e9:.2f} GB of 141.00 GB (h200-sxm-141gb)" in text
    sheet = json.loads(_run("plan", str(path), "--format", "json"))["worksheet"]
    assert f"Step {estimate(first).seconds:.2f} s" in sheet
    assert "of 141 GB HBM: fits" in sheet


def test_rank_with_tp_overlap_writes_a_plan_that_prices_the_same_row(tmp_path: Path) -> None:
    pytest.importorskip("yaml")
    path = tmp_path / "first.yaml"
    args = ("rank", "--model", "llama2-70b", "--gpus", "64", "--seq-len", "4096",
            "--global-batch", "512", "--tp-comm-overlap")  # fmt: skip
    printed = _run(*args, "--write-plan", "1", str(path))
    assert "TP collectives overlapped with the GEMMs" in printed.splitlines()[0]
    c = Cluster.from_node_shape("8_nodes_x_8_gpus", "dgx-h100")
    like = Job("llama2-70b", ParallelPlan(dp=64), c, seq_len=4096, global_batch_size=512,
               tp_comm_overlap=True)  # fmt: skip
    first = rank_job(like, top=1)[0]
    assert first.plan.tp > 1 and first.job.tp_comm_overlap
    assert "tp_comm_overlap: true" in path.read_text(encoding="utf-8")
    assert plan_file.load_plan_file(path)[2] == first.job
    assert f"| {first.estimate.seconds:.2f} |" in printed


def _degrees(plan: ParallelPlan) -> tuple[int, int, int, int]:
    return plan.tp, plan.cp, plan.pp, plan.dp


def test_rank_with_a_calibration_ranks_at_the_measured_rates(tmp_path: Path) -> None:
    pytest.importorskip("yaml")
    from infralens.sustained import from_file

    cal = "tests/data/gpu/cal-llama3-8b-s8192-tp1.json"  # measured on one H200
    path = tmp_path / "first.yaml"
    args = ("rank", "--model", "llama3-8b", "--cluster", "dgx-h200", "--gpus", "16",
            "--seq-len", "8192", "--global-batch", "32")  # fmt: skip
    printed = _run(*args, "--calibration", cal, "--write-plan", "1", str(path))
    assert f"rates measured in {cal}" in printed.splitlines()[0]
    like = Job("llama3-8b", ParallelPlan(dp=16), H200, seq_len=8192, global_batch_size=32,
               sustained=from_file(cal))  # fmt: skip
    first, plain = rank_job(like, top=1)[0], rank_job(replace(like, sustained=None), top=1)[0]
    assert f"| {first.estimate.seconds:.2f} |" in printed
    assert first.estimate.seconds != plain.estimate.seconds  # the rates moved the step
    # the rates are no plan-file key: the written row loads back without them
    assert "sustained" not in path.read_text(encoding="utf-8")
    assert plan_file.load_plan_file(path)[2] == replace(first.job, sustained=None)
    # rates from one GPU price no other: said once, not as "no feasible plan"
    h100 = Cluster.from_node_shape("2_nodes_x_8_gpus", "dgx-h100")
    with pytest.raises(ValueError, match="measured on h200-sxm-141gb; the cluster's GPU"):
        rank_job(replace(like, cluster=h100), top=1)


def test_rank_like_a_plan_file_ranks_for_its_job_and_options(tmp_path: Path) -> None:
    pytest.importorskip("yaml")
    one = Cluster.from_node_shape("1_node_x_8_gpus", "dgx-a100")
    old = Job("llama3-8b", ParallelPlan(tp=2, dp=4), one, seq_len=4096, global_batch_size=32,
              recipe="megatron-bf16", attention="materialized", recompute="full",
              sequence_parallel=False)  # fmt: skip
    path = tmp_path / "old.yaml"
    path.write_text(plan_yaml(old), encoding="utf-8")
    printed = _run("rank", "--like", str(path))
    first = rank_job(old, top=1)[0]
    assert first.job.attention == "materialized" and first.recompute == "full"
    assert f"| {first.estimate.seconds:.2f} |" in printed.splitlines()[3]
    head = printed.splitlines()[0]
    assert head.startswith("llama3-8b on 8 GPUs (DGX A100)") and f"options of {path}" in head
    # the file names the job: a flag that would change it is refused, in one line
    err = io.StringIO()
    with redirect_stderr(err):
        assert cli.main(["rank", "--like", str(path), "--gpus", "16"]) == 2
    assert err.getvalue() == "infralens rank: --like takes the job from its file; drop --gpus\n"
    bare = tmp_path / "bare.yaml"  # degrees and a cluster, no job to rank for
    bare.write_text(plan_yaml(old).split("training:")[0], encoding="utf-8")
    err = io.StringIO()
    with redirect_stderr(err):
        assert cli.main(["rank", "--like", str(bare)]) == 2
    assert "--like needs a 'training' section" in err.getvalue()


def test_rank_plans_is_rank_job_on_a_job_of_default_options() -> None:
    c = Cluster.from_node_shape("4_nodes_x_8_gpus", "dgx-h100")
    kw: dict[str, Any] = dict(seq_len=4096, global_batch_size=256, micro_batch_size=1)
    like = Job("llama2-13b", ParallelPlan(tp=8, dp=4), c, **kw)
    assert rank_plans("llama2-13b", c, top=5, **kw) == rank_job(like, top=5)


def test_rank_job_prices_every_plan_with_the_jobs_options() -> None:
    c = Cluster.from_node_shape("4_nodes_x_8_gpus", "dgx-h100")
    like = Job("llama2-13b", ParallelPlan(tp=2, cp=1, pp=2, dp=8, order="tp-cp-pp-dp"), c,
               seq_len=4096, global_batch_size=256, recipe="megatron-bf16",
               attention="materialized", sequence_parallel=False, recompute="full",
               overlap_grad_reduce=False, gpu="h100-hbm2e-96gb")  # fmt: skip
    rows = rank_job(like, top=1000)
    kept = {(r.job.attention, r.job.sequence_parallel, r.recompute, r.recipe,
             r.job.overlap_grad_reduce, r.job.gpu, r.plan.order) for r in rows}  # fmt: skip
    assert kept == {("materialized", False, "full", "megatron-bf16", False,
                     "h100-hbm2e-96gb", "tp-cp-pp-dp")}  # fmt: skip
    assert all(r.estimate == estimate(r.job) for r in rows)
    # the same plans under the defaults run faster: fused attention, lighter recomputation
    fast = {_degrees(r.plan): r for r in rank_plans("llama2-13b", c, seq_len=4096,
            global_batch_size=256, recipe="megatron-bf16", top=1000)}  # fmt: skip
    for r in rows:
        other = fast.get(_degrees(r.plan))
        assert other is None or other.estimate.seconds < r.estimate.seconds
    # the job's recomputation is the least a plan gets: none first, heavier where needed
    light = rank_job(replace(like, recompute="none"), top=1000)
    assert {r.recompute for r in light} >= {"none"}
    assert light[0].estimate.seconds < rows[0].estimate.seconds
    with pytest.raises(TypeError, match="job must be a Job"):
        rank_job("llama2-13b", top=1)  # type: ignore[arg-type]


def test_every_option_survives_a_written_plan(tmp_path: Path) -> None:
    pytest.importorskip("yaml")
    one = Cluster.from_node_shape("1_node_x_8_gpus", "dgx-h100")
    jobs = [
        Job("llama3-8b", ParallelPlan(dp=8), one, seq_len=4096, global_batch_size=16,
            micro_batch_size=2, recipe="fsdp2", recompute="full", attention="flash3",
            elementwise="eager", grad_reduce_in_fp32=False, gpu="h100-hbm2e-96gb",
            token_budget=10**12),
        Job("llama2-7b", ParallelPlan(tp=2, pp=4), one, seq_len=4096, global_batch_size=8,
            zero_stage=0, schedule="interleaved", chunks=2, sequence_parallel=False,
            overlap_grad_reduce=False, scatter_gather_p2p=True, first_stage_layers=6,
            last_stage_layers=10),
        Job(shaped_model(24, 2048, 16, 50257, 4096, kv_heads=4, ffn_hidden=5632,
                         gated_mlp=True), ParallelPlan(tp=2, dp=4), one, seq_len=4096,
            global_batch_size=16, recipe="fsdp2"),
    ]  # fmt: skip
    for j in jobs:
        path = tmp_path / "job.yaml"
        path.write_text(plan_yaml(j), encoding="utf-8")
        loaded = plan_file.load_plan_file(path)[2]
        assert loaded is not None
        assert loaded == j
        assert fit.gpu_memory(loaded) == fit.gpu_memory(j)


@pytest.mark.parametrize(
    ("change", "error", "field"),
    [
        ({"seq_len": 0}, ValueError, "seq_len"),
        ({"global_batch_size": 2.0}, TypeError, "global_batch_size"),
        ({"micro_batch_size": True}, TypeError, "micro_batch_size"),
        ({"chunks": -1}, ValueError, "chunks"),
        ({"model": "llama9"}, ValueError, "model"),
        ({"plan": ParallelPlan(dp=4)}, ValueError, "plan"),
        ({"plan": "dp=8"}, TypeError, "plan"),
        ({"cluster": None}, TypeError, "cluster"),
        ({"recipe": "apex"}, ValueError, "recipe"),
        ({"recipe": "fsdp2", "zero_stage": 1}, ValueError, "zero_stage"),
        ({"zero_stage": 4}, ValueError, "zero_stage"),
        ({"recompute": "some"}, ValueError, "recompute"),
        ({"sequence_parallel": "yes"}, TypeError, "sequence_parallel"),
        ({"schedule": "gpipe"}, ValueError, "schedule"),
        ({"attention": "flash"}, ValueError, "attention"),
        ({"elementwise": "compiled"}, ValueError, "elementwise"),
        ({"gpu": "h300"}, ValueError, "gpu"),
        ({"first_stage_layers": 0}, ValueError, "first_stage_layers"),
        ({"token_budget": -5}, ValueError, "token_budget"),
    ],
)
def test_a_bad_field_is_named(change: dict[str, object], error: type, field: str) -> None:
    good = Job("llama3-8b", ParallelPlan(dp=8), Cluster.from_node_shape("1_node_x_8_gpus"),
               seq_len=8192, global_batch_size=16)  # fmt: skip
    with pytest.raises(error, match=field):
        replace(good, **change)


def test_the_job_holds_its_gpu_and_its_model() -> None:
    j = Job("llama3-70b", ParallelPlan(tp=8, dp=2), H200, seq_len=8192, global_batch_size=16)
    assert (j.gpu_key, j.hbm_bytes, j.model_name) == ("h200-sxm-141gb", 141 * 10**9, "llama3-70b")
    assert replace(j, gpu="h100-sxm5-80gb").hbm_bytes == 80 * 10**9
    assert j.microbatches == 8


def test_the_step_and_the_ranker_judge_memory_against_the_jobs_gpu() -> None:
    # 80.7 GB on the busiest GPU: over an H100 SXM's 80 GB, inside the 96 GB part's
    one = Cluster.from_node_shape("1_node_x_8_gpus", "dgx-h100")
    j = Job("llama3-8b", ParallelPlan(dp=8), one, seq_len=4096, global_batch_size=8)
    assert 80e9 < fit.gpu_memory(j).total < 81e9
    with pytest.raises(ValueError, match="over the 80 GB of HBM"):
        estimate(j)
    big = replace(j, gpu="h100-hbm2e-96gb")
    assert estimate(big).seconds == estimate(j, check_memory=False).seconds

    # DP alone keeps selective recomputation on the 96 GB part, needs full on 80 GB
    def dp_alone(job: Job) -> str:
        rows = rank_job(replace(job, recipe="megatron-bf16-distopt"), top=1000)
        return next(r.recompute for r in rows if _degrees(r.plan) == (1, 1, 1, 8))

    assert (dp_alone(big), dp_alone(j)) == ("selective", "full")


def test_no_public_planner_function_takes_more_than_eight_parameters() -> None:
    for module in (job, step, fit, ranking, design, plan_file, worksheet_tables, cli):
        for name in module.__all__:
            obj = getattr(module, name)
            if inspect.isfunction(obj):
                count = len(inspect.signature(obj).parameters)
                assert count <= 8, f"{module.__name__}.{name} takes {count}"


SHAPED = {"num_params": 1_288_083_456, "layers": 24, "hidden": 2048, "heads": 16,
          "kv_heads": 4, "ffn_hidden": 5632, "vocab_size": 50257, "gated_mlp": True,
          "seq_len": 4096}  # fmt: skip


def _shaped_plan(**training: object) -> dict[str, object]:
    return {"world_size": 8, "node_shape": "1_nodes_x_8_gpus",
            "parallelism": {"dp_size": 8}, "training": training}  # fmt: skip


def test_the_full_shape_keys_build_the_model_they_name() -> None:
    job = plan_file.parse_plan(_shaped_plan(**SHAPED))[2]
    assert job is not None
    assert job.config == shaped_model(24, 2048, 16, 50257, 4096, kv_heads=4,
                                      ffn_hidden=5632, gated_mlp=True)  # fmt: skip
    assert job.config.num_params() == SHAPED["num_params"] and job.model_name is None
    # a preset's own values beside it are accepted; another is refused, named
    assert plan_file.parse_plan(_shaped_plan(model="llama3-8b", kv_heads=8))[2] is not None


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"vocab_size": None}, "training.kv_heads needs vocab_size beside it"),
        ({"num_params": 1_288_083_457}, "the training keys give 1288083456 parameters"),
        ({"gated_mlp": "yes"}, "gated_mlp must be a bool"),
        ({"kv_heads": 3}, "heads must be divisible by kv_heads: 16 % 3 = 1"),
        ({"model": "llama3-8b"}, "training.num_params is 1288083456 but model 'llama3-8b'"),
    ],
)
def test_a_bad_shape_key_is_named(change: dict[str, object], message: str) -> None:
    training = {k: v for k, v in {**SHAPED, **change}.items() if v is not None}
    with pytest.raises((ValueError, TypeError), match=message):
        plan_file.parse_plan(_shaped_plan(**training))


def test_the_plan_file_page_lists_every_training_key() -> None:
    page = Path(__file__).resolve().parents[1] / "handbook" / "reference" / "plan-file.md"
    text = page.read_text(encoding="utf-8")
    for key in (*plan_file.TRAINING_KEYS, *plan_file.SHAPE_KEYS, *plan_file.FULL_SHAPE_KEYS):
        assert f"`{key}`" in text, key
