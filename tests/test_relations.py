"""Relations the planner must obey whatever its constants, over generated jobs.

Hypothesis draws jobs across the model presets, the clusters (node counts that do
not line up with the degrees: 3, 6, 12 nodes...), the recipes and 8 to 16,384 GPUs,
and checks what must hold for any honest model of a training step:

- **monotonicity**: a longer sequence, a bigger model of the same family or more
  recomputation never shortens a step; a faster network never lengthens one;
  FlashAttention-3 is never slower than FlashAttention-2; full recomputation never
  needs more memory than selective, nor selective more than none;
- **critical path**: no exposed term is negative, and the traffic the step hides is
  never more than the compute it hides behind (the worksheet's traffic, priced on
  each axis's slowest group, less what the step leaves exposed);
- **slowest group**: a collective waits for its slowest group, and the gradient and
  parameter sync spans the dp·cp ranks the model state is sharded over: that sync
  priced on any such group, with no more hidden than the compute running beside it,
  never exceeds what the step charges;
- **consistency and invariance**: a ``rank`` row written with ``--write-plan`` gives
  the same seconds and GB to ``plan`` and ``memory``, judged against the same GPU,
  for a preset and for a model given by its shape,
  and a job gives the same numbers through the API and the command line;
- **dominance**: the first row of a ranking is never slower than another feasible
  plan, and a plan ``rank`` calls feasible fits to ``memory``;
- **underneath**: an all-gather or reduce-scatter is never slower than the all-reduce
  of the same buffer, nor faster on one more rank of an NVLink domain; memory keeps
  in flight the chunk micro-batches the pipeline schedule runs.

``INFRALENS_FUZZ_EXAMPLES`` sets the examples per relation (a few, drawn the same
way every run, in ``nox -s tests``; set it higher to search further). Three
``rank`` commands whose first rows were once mispriced close the module.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import re
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, assume, example, given, settings
from hypothesis import strategies as st

from infralens.cli import main
from infralens.hardware import SYSTEMS
from infralens.model import PRESETS, parse_shape
from infralens.nccl import predict
from infralens.pipeline_memory import in_flight
from infralens.pipeline_orders import schedule_order
from infralens.plan import ParallelPlan
from infralens.planner.design import fill_worksheet
from infralens.planner.fit import gpu_memory
from infralens.planner.job import Job
from infralens.planner.plan_file import load_plan_file
from infralens.planner.ranking import RankedPlan, rank_plans
from infralens.planner.step import estimate
from infralens.planner.step_result import Estimate
from infralens.precision import RECIPES
from infralens.recipe import cannot_run
from infralens.topology import Cluster

pytest.importorskip("yaml")

EXAMPLES = int(os.environ.get("INFRALENS_FUZZ_EXAMPLES", "10"))
# A broken relation is reported with the example that broke it; shrinking it to the
# smallest such job costs minutes, so only a longer run (``nox -s fuzz``) shrinks.
SHRINK = "INFRALENS_FUZZ_EXAMPLES" in os.environ
RELATION = settings(
    max_examples=EXAMPLES,
    deadline=None,
    phases=[p for p in Phase if SHRINK or p not in (Phase.shrink, Phase.explain)],
    derandomize=os.environ.get("INFRALENS_FUZZ_RANDOM") != "1",
    suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow],
)
# Ranking is the slow call: its relations get a third of the budget.
RANKING = settings(RELATION, max_examples=max(2, EXAMPLES // 3))

# Clusters whose GPU has measured matmul ceilings, so the step can be priced.
STEP_SYSTEMS = ["dgx-a100", "dgx-h100", "dgx-h200", "grand-teton-h100-hbm2e"]
NODES = [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 512, 1024, 2048]
FAMILIES = [("llama2-7b", "llama2-13b"), ("llama3-8b", "llama3-70b"),
            ("llama3-70b", "llama3.1-405b")]  # fmt: skip
REL = 1e-9  # float noise allowed in a comparison of two priced steps
GB = 10**9


def job_on(model: str, system: str, nodes: int, plan: ParallelPlan, seq_len: int,
           global_batch: int, recipe: str, recompute: str, schedule: str = "1f1b",
           chunks: int = 1) -> Job:  # fmt: skip
    """One training job, micro-batch 1, on *nodes* nodes of *system*: what ``estimate``
    prices and a plan file describes."""
    node = SYSTEMS[system]
    return Job(model, plan, Cluster(nodes, node.gpus_per_node, node), seq_len=seq_len,
               global_batch_size=global_batch, recipe=recipe, recompute=recompute,
               schedule=schedule, chunks=chunks)  # fmt: skip


def name(job: Job) -> str:
    """The job's model preset name (every job here runs a preset)."""
    assert job.model_name is not None, job
    return job.model_name


def system(job: Job) -> str:
    """The :data:`~infralens.hardware.SYSTEMS` key of the job's nodes."""
    return next(k for k, v in SYSTEMS.items() if v == job.cluster.system)


def step(job: Job) -> Estimate:
    """The job's step through the API (memory not checked: the step is priced anyway)."""
    return estimate(job, check_memory=False)


def memory(job: Job) -> int:
    """The job's bytes on its busiest GPU through the API."""
    return gpu_memory(job).total


def priced(job: Job) -> Estimate:
    """The step, or the example is dropped if the job is one the step refuses."""
    try:
        return step(job)
    except ValueError:
        assume(False)
        raise AssertionError("unreachable") from None


def _divisors(n: int, limit: int) -> list[int]:
    return [d for d in range(1, min(n, limit) + 1) if n % d == 0]


@st.composite
def jobs(draw: st.DrawFn, models: Iterable[str] = tuple(PRESETS),
         systems: Iterable[str] = tuple(STEP_SYSTEMS), nodes: Iterable[int] = tuple(NODES),
         min_cp: int = 1) -> Job:  # fmt: skip
    """A job the step can price: degrees that divide the model and fill the cluster."""
    model = draw(st.sampled_from(list(models)))
    m = PRESETS[model]
    system = draw(st.sampled_from(list(systems)))
    n = draw(st.sampled_from(list(nodes)))
    world = n * SYSTEMS[system].gpus_per_node
    tps = [t for t in (1, 2, 4, 8) if m.heads % t == 0 and m.kv_heads % t == 0]
    tp = draw(st.sampled_from([t for t in tps if world % t == 0]))
    cps = [c for c in (1, 2, 3, 4, 6, 8, 16) if c >= min_cp and world % (tp * c) == 0]
    assume(cps)
    cp = draw(st.sampled_from(cps))
    pps = [p for p in _divisors(m.layers, 64) if world % (tp * cp * p) == 0]
    pp = draw(st.sampled_from(pps))
    dp = world // (tp * cp * pp)
    seqs = [s for s in (2048, 4096, 8192, 12288, 16384, 32768) if s % (cp * tp) == 0]
    assume(seqs)
    seq = draw(st.sampled_from(seqs))
    k = draw(st.sampled_from([1, 2, 4, 8, 16]))
    schedule, chunks = "1f1b", 1
    vs = [v for v in (2, 4) if m.layers % (pp * v) == 0]
    if pp > 1 and vs and k % pp == 0 and draw(st.booleans()):
        schedule, chunks = "interleaved", draw(st.sampled_from(vs))
    recipe = draw(st.sampled_from(sorted(RECIPES)))
    recompute = draw(st.sampled_from(["none", "selective", "full"]))
    plan = ParallelPlan(tp=tp, cp=cp, pp=pp, dp=dp)
    return job_on(model, system, n, plan, seq, dp * k, recipe, recompute, schedule, chunks)


def at_least(longer: float, shorter: float) -> bool:
    return longer >= shorter * (1 - REL)


# -- monotonicity ------------------------------------------------------------------


# Llama 3 8B on 256 H100s, tp 4, cp 16, dp 4 under FSDP2: attention hides both the
# CP ring and the FSDP traffic, so 64K once priced shorter than 32K (0.602 s, 0.740 s).
CP16 = job_on("llama3-8b", "dgx-h100", 32, ParallelPlan(tp=4, cp=16, dp=4), 32768, 8,
              "fsdp2", "selective")  # fmt: skip


@RELATION
@given(jobs())
@example(CP16)
def test_a_longer_sequence_never_shortens_a_step(job: Job) -> None:
    short = priced(job)
    longer = replace(job, seq_len=2 * job.seq_len)
    long = priced(longer)
    assert at_least(long.seconds, short.seconds), (job, short.breakdown, long.breakdown)


@RELATION
@given(st.data())
def test_a_bigger_model_never_shortens_a_step(data: st.DataObject) -> None:
    small, big = data.draw(st.sampled_from(FAMILIES))
    job = data.draw(jobs(models=[small]))
    m = PRESETS[big]
    p = job.plan
    assume(m.layers % (p.pp * job.chunks) == 0 and m.heads % p.tp == 0)
    assume(m.kv_heads % p.tp == 0)
    a, b = priced(job), priced(replace(job, model=big))
    assert at_least(b.seconds, a.seconds), (job, big, a.breakdown, b.breakdown)


@RELATION
@given(jobs())
@example(CP16)
def test_more_recomputation_never_shortens_a_step(job: Job) -> None:
    t = {mode: priced(replace(job, recompute=mode)) for mode in
         ("none", "selective", "full")}  # fmt: skip
    assert at_least(t["full"].seconds, t["selective"].seconds), (job, t)
    assert at_least(t["full"].seconds, t["none"].seconds), (job, t)
    assert at_least(t["selective"].seconds, t["none"].seconds), (job, t)


@RELATION
@given(jobs(nodes=[n for n in NODES if n > 1]))
def test_a_faster_network_never_lengthens_a_step(job: Job) -> None:
    node = job.cluster.system
    fast = replace(node, nic_bits_per_s=2 * node.nic_bits_per_s)
    slow_e = priced(job)
    fast_e = priced(replace(job, cluster=Cluster(job.cluster.nodes, node.gpus_per_node, fast)))
    assert at_least(slow_e.seconds, fast_e.seconds), (job, slow_e.breakdown, fast_e.breakdown)


@RELATION
@given(jobs(systems=["dgx-h100", "dgx-h200", "grand-teton-h100-hbm2e"]))
@example(CP16)
def test_flash_attention_3_is_never_slower_than_2(job: Job) -> None:
    fa2 = priced(replace(job, attention="flash2"))
    fa3 = priced(replace(job, attention="flash3"))
    assert at_least(fa2.seconds, fa3.seconds), (job, fa2.breakdown, fa3.breakdown)


@RELATION
@given(jobs())
# Llama 3 8B, tp 2, pp 32, dp 8 under FSDP2, one micro-batch: full recomputation once
# counted 12.54 GB against selective's 12.33 GB.
@example(job_on("llama3-8b", "dgx-h100", 64, ParallelPlan(tp=2, pp=32, dp=8), 8192, 8,
                "fsdp2", "selective"))  # fmt: skip
def test_more_recomputation_never_needs_more_memory(job: Job) -> None:
    try:
        b = {mode: memory(replace(job, recompute=mode)) for mode in
             ("none", "selective", "full")}  # fmt: skip
    except ValueError:
        assume(False)
        return
    assert b["full"] <= b["selective"] <= b["none"], (job, b)


# -- the critical path ------------------------------------------------------------


def _worksheet(job: Job) -> Any:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "plan.yaml"
        path.write_text(plan_text(job), encoding="utf-8")
        _, _, work = load_plan_file(path)
    assert work is not None
    try:
        return fill_worksheet(work)
    except ValueError:
        assume(False)


@RELATION
@given(jobs())
# interleaved sends hide in the stream time TP and the CP ring leave, not beside them
@example(job_on("llama2-7b", "dgx-h100", 32, ParallelPlan(tp=2, cp=16, pp=8), 2048, 16,
                "ddp", "none", "interleaved", 4))  # fmt: skip
def test_no_term_is_negative_and_nothing_hides_behind_more_than_the_compute(
    job: Job,
) -> None:
    sheet = _worksheet(job)
    e = sheet.step
    terms = dict(e.breakdown.items())
    assert all(v >= 0 and math.isfinite(v) for v in terms.values()), (job, terms)
    # The traffic each axis runs in a step (each collective on the axis's slowest
    # group), and what the step leaves exposed of it; PP's bubble is idle time.
    exposed = {"tp": terms["tp"], "cp": terms["cp"], "pp": terms["pp_p2p"],
               "dp": terms["dp"]}  # fmt: skip
    raw = dict.fromkeys(exposed, 0.0)
    for row in sheet.comms:
        if row.axis in raw:
            raw[row.axis] += float(row.seconds_per_step)
    hidden = {a: raw[a] - exposed[a] for a in raw}
    compute = terms["compute"]
    # no axis leaves more exposed than the traffic the worksheet lists for it (DP's
    # term also carries Transformer Engine's amax reduction, which the table omits)
    delayed = job.resolved_recipe().scaling == "delayed"
    for axis, h in hidden.items():
        if not (axis == "dp" and delayed):
            assert h >= -1e-6 * max(1.0, raw[axis]), (job, axis, raw, exposed)
    for axis, h in hidden.items():
        assert h <= compute * (1 + 1e-6), (job, axis, raw, exposed, compute)
    # one collective stream at a time: two axes do not hide behind the same compute
    assert sum(max(0.0, h) for h in hidden.values()) <= compute * (1 + 1e-6), (
        job, raw, exposed, compute,
    )  # fmt: skip


# -- a collective waits for its slowest group ------------------------------------


def sync_groups(plan: ParallelPlan) -> list[list[int]]:
    """The groups the gradient and parameter sync runs over: the ranks that share a TP
    and a PP coordinate, dp·cp of them, over which the model state is sharded."""
    groups: dict[tuple[int, int], list[int]] = {}
    for rank in range(plan.world_size):
        c = plan.coords(rank)
        groups.setdefault((c["tp"], c["pp"]), []).append(rank)
    return list(groups.values())


def _distinct(cluster: Cluster, groups: Iterable[list[int]]) -> list[list[int]]:
    """One group of each placement (how its ranks fall on NVLink domains)."""
    seen: dict[tuple[int, ...], list[int]] = {}
    for g in groups:
        order: dict[int, int] = {}
        key = tuple(order.setdefault(cluster.domain_of(r), len(order)) for r in g)
        seen.setdefault(key, g)
    return list(seen.values())


def _seconds(op: str, nbytes: float, cluster: Cluster, group: list[int]) -> float:
    if len(group) < 2 or nbytes < 1:
        return 0.0
    return predict(op, int(nbytes), cluster, group).seconds


def sync_bound(job: Job, e: Estimate) -> tuple[float, list[int]]:
    """The least step the gradient and parameter sync allows, on its slowest group.

    The sync of the state one GPU holds (its stage's parameters over tp, gradients in
    the recipe's reduce dtype, parameters in its gather dtype) runs on each dp·cp
    group; the step lasts at least its compute plus whatever of the sync no compute
    beside it can hide:

    - ZeRO-3 without a pipeline: per layer and micro-batch two gathers and a
      reduce-scatter, hidden at most behind that layer's compute;
    - ZeRO-0 to 2 without a pipeline: the reduction (and the gather) once a step,
      hidden at most behind one micro-batch's compute;
    - with a pipeline, the sync at least once a step, on one stream: the step is at
      least as long as the sync itself.
    """
    m, p, cluster = job.config, job.plan, job.cluster
    r = job.resolved_recipe()
    grad = 4 if r.grad_reduce_in_fp32 else 2
    layers = m.layers // p.pp
    local = m.num_params() / (p.tp * p.pp)
    compute, mb = e.breakdown.compute, job.microbatches
    worst, where = 0.0, [0]
    for g in _distinct(cluster, sync_groups(p)):
        if r.zero_stage == 3:
            unit = local / layers
            gather = _seconds("all_gather", unit * r.gather_bytes, cluster, g)
            reduce = _seconds("reduce_scatter", unit * grad, cluster, g)
            if p.pp == 1:
                per_layer = compute / (mb * layers)
                bound = compute + mb * layers * max(0.0, 2 * gather + reduce - per_layer)
            else:
                bound = layers * (gather + reduce)
        else:
            op = "all_reduce" if r.zero_stage == 0 else "reduce_scatter"
            sync = _seconds(op, local * grad, cluster, g)
            if r.zero_stage:
                sync += _seconds("all_gather", local * r.gather_bytes, cluster, g)
            bound = compute + max(0.0, sync - compute / mb) if p.pp == 1 else sync
        if bound > worst:
            worst, where = bound, g
    return worst, where


@RELATION
@given(jobs(nodes=[n for n in NODES if n > 1 and n <= 256]))
def test_the_sync_waits_for_its_slowest_dp_cp_group(job: Job) -> None:
    e = priced(job)
    bound, group = sync_bound(job, e)
    assert at_least(e.seconds, bound), (job, e.breakdown, bound, group[:8])


# -- consistency, invariance, dominance ------------------------------------------


def plan_text(job: Job) -> str:
    p, node, r = job.plan, job.cluster.system, job.resolved_recipe()
    lines = [
        f"world_size: {p.world_size}",
        f"node_shape: {job.cluster.nodes}_nodes_x_{node.gpus_per_node}_gpus",
        f"cluster: {system(job)}",
        "parallelism:",
        *(f"  {a}_size: {getattr(p, a)}" for a in ("tp", "cp", "pp", "dp")),
        f"  order: {p.order}",
        "training:",
        f"  model: {name(job)}",
        f"  seq_len: {job.seq_len}",
        f"  micro_batch_size: {job.micro_batch_size}",
        f"  global_batch_size: {job.global_batch_size}",
        f"  recipe: {r.name}",
        f"  zero_stage: {r.zero_stage}",
        f"  recompute: {job.recompute}",
        "  sequence_parallel: true",
        f"  schedule: {job.schedule}",
        f"  chunks: {job.chunks}",
    ]
    return "\n".join(lines) + "\n"


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(list(argv))
    return status, out.getvalue(), err.getvalue()


@dataclass(frozen=True)
class Said:
    """What ``plan`` and ``memory`` print about a plan file."""

    plan_seconds: float
    plan_gb: float
    plan_capacity_gb: float
    memory_gb: float
    memory_capacity_gb: float
    memory_fits: bool


def said(path: Path) -> Said:
    status, text, err = cli("plan", str(path), "--format", "json")
    assert status == 0, err
    sheet = json.loads(text)["worksheet"]
    seconds = float(re.search(r"\nStep ([\d.,]+) s,", sheet)[1].replace(",", ""))  # type: ignore[index]
    mem = re.search(r"= ([\d.]+) GB of ([\d.]+) GB HBM", sheet)
    assert mem is not None, sheet
    status, text, err = cli("memory", "--plan", str(path))
    assert status == 0, err
    total = re.search(r"total +([\d.]+) GB of ([\d.]+) GB \([^)]*\): (\w+)", text)
    assert total is not None, text
    return Said(seconds, float(mem[1]), float(mem[2]), float(total[1]), float(total[2]),
                total[3] == "fits")  # fmt: skip


def _close(a: float, b: float, shown: float) -> bool:
    """Equal to the precision a command prints (*shown*, e.g. 0.01 for two decimals)."""
    return abs(a - b) <= shown / 2 + 1e-9 * abs(b)


@RELATION
@given(jobs(nodes=[1, 2, 3, 4, 6, 12, 64, 512, 2048]))
def test_the_api_and_the_command_line_give_one_job_the_same_numbers(job: Job) -> None:
    try:
        e, gb = step(job), memory(job) / GB
    except ValueError:
        assume(False)
        return
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "plan.yaml"
        path.write_text(plan_text(job), encoding="utf-8")
        s = said(path)
    hbm = job.cluster.system.gpu.hbm_bytes / GB
    assert _close(s.plan_seconds, e.seconds, 0.01), (job, s, e.seconds)
    assert _close(s.plan_gb, gb, 0.1), (job, s, gb)
    assert _close(s.memory_gb, gb, 0.01), (job, s, gb)
    assert s.plan_capacity_gb == pytest.approx(hbm) and s.memory_capacity_gb == pytest.approx(
        hbm
    ), (job, s, hbm)  # fmt: skip


def _rank_args(job: Job) -> list[str]:
    gpus, batch = job.plan.world_size, job.global_batch_size
    return ["rank", "--model", name(job), "--cluster", system(job), "--gpus", str(gpus),
            "--seq-len", str(job.seq_len), "--global-batch", str(batch)]  # fmt: skip


def ranked(job: Job) -> list[RankedPlan]:
    try:
        return rank_plans(job.config, job.cluster, seq_len=job.seq_len,
                          global_batch_size=job.global_batch_size, top=10)  # fmt: skip
    except ValueError:
        assume(False)
        raise AssertionError("unreachable") from None


RANK_JOBS = jobs(
    models=["llama2-7b", "llama3-8b", "llama2-13b", "llama3-70b"],
    systems=["dgx-h100", "dgx-h200", "grand-teton-h100-hbm2e", "dgx-a100"],
    nodes=[1, 2, 3, 4, 6],
)


@RANKING
@given(RANK_JOBS, st.integers(min_value=1, max_value=10))
def test_rank_plan_and_memory_agree_on_a_written_row(job: Job, row: int) -> None:
    rows = ranked(job)
    assume(row <= len(rows))
    chosen = rows[row - 1]
    hbm = job.cluster.system.gpu.hbm_bytes / GB
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "row.yaml"
        status, text, err = cli(*_rank_args(job), "--write-plan", str(row), str(path))
        assert status == 0, err
        line = text.splitlines()[2 + row].split("|")
        s = said(path)
    e = chosen.estimate
    assert float(line[10]) == pytest.approx(round(e.seconds, 2))
    assert _close(s.plan_seconds, e.seconds, 0.01), (job, row, s, e.seconds)
    assert _close(s.memory_gb, e.memory_bytes / GB, 0.01), (job, row, s, e.memory_bytes)
    assert _close(s.plan_gb, e.memory_bytes / GB, 0.1), (job, row, s, e.memory_bytes)
    # against the GPU rank used: the row's cluster's
    assert s.memory_capacity_gb == pytest.approx(hbm), (job, row, s)
    assert s.plan_capacity_gb == pytest.approx(hbm), (job, row, s)
    assert s.memory_fits, (job, row, s)


@st.composite
def shapes(draw: st.DrawFn) -> str:
    """A ``rank --model`` shape spec no preset has: head width 128, grouped or full
    kv heads, a gated or plain MLP, a vocabulary of some published tokenizer."""
    heads = draw(st.sampled_from([16, 24, 32, 40]))
    hidden = 128 * heads
    kv = draw(st.sampled_from([k for k in (heads, 8, 4) if heads % k == 0]))
    gated = draw(st.booleans())
    ffn = 4 * hidden if not gated else -(-8 * hidden // 3 // 256) * 256
    layers = draw(st.sampled_from([12, 16, 20, 24, 30]))
    vocab = draw(st.sampled_from([32000, 50257, 65536, 128256]))
    return (f"layers={layers},hidden={hidden},heads={heads},kv_heads={kv},"
            f"ffn_hidden={ffn},vocab_size={vocab},gated_mlp={str(gated).lower()}")  # fmt: skip


@RANKING
@given(RANK_JOBS, shapes(), st.integers(min_value=1, max_value=10))
def test_rank_plan_and_memory_agree_on_a_written_row_of_a_shape(
    job: Job, spec: str, row: int
) -> None:
    # The shape, not a preset: rank takes it as --model, writes its keys, and plan and
    # memory rebuild the same model from them.
    config = parse_shape(spec, job.seq_len)
    assert config not in PRESETS.values()
    try:
        rows = rank_plans(config, job.cluster, seq_len=job.seq_len,
                          global_batch_size=job.global_batch_size, top=10)  # fmt: skip
    except ValueError:
        assume(False)
        return
    assume(row <= len(rows))
    e = rows[row - 1].estimate
    args = _rank_args(job)
    args[args.index("--model") + 1] = spec
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "row.yaml"
        status, text, err = cli(*args, "--write-plan", str(row), str(path))
        assert status == 0, err
        written = path.read_text(encoding="utf-8")
        assert "  model:" not in written and f"  num_params: {config.num_params()}\n" in written
        loaded = load_plan_file(path)[2]
        s = said(path)
    assert loaded is not None and loaded.config == config, (loaded, config)
    line = text.splitlines()[2 + row].split("|")
    assert float(line[10]) == pytest.approx(round(e.seconds, 2))
    assert _close(s.plan_seconds, e.seconds, 0.01), (spec, row, s, e.seconds)
    assert _close(s.memory_gb, e.memory_bytes / GB, 0.01), (spec, row, s, e.memory_bytes)
    assert _close(s.plan_gb, e.memory_bytes / GB, 0.1), (spec, row, s, e.memory_bytes)
    assert s.memory_fits, (spec, row, s)


@RANKING
@given(RANK_JOBS, st.data())
def test_the_first_row_is_never_slower_than_another_feasible_plan(
    job: Job, data: st.DataObject
) -> None:
    rows = ranked(job)
    best = rows[0].estimate.seconds
    assert all(best <= r.estimate.seconds for r in rows), [r.estimate.seconds for r in rows]
    # any plan the ranker could have proposed, priced with memory checked
    other = replace(
        job,
        recipe=data.draw(st.sampled_from(["megatron-bf16-distopt", "fsdp2"])),
        recompute=data.draw(st.sampled_from(["selective", "full"])),
    )
    # a plan in the ranker's search: cp up to its max_cp (8), layers split evenly
    m = job.config
    assume(m.layers % job.plan.pp == 0 and job.plan.cp <= 8)
    try:
        e = estimate(other)
    except ValueError:
        assume(False)
        return
    assert best <= e.seconds * (1 + REL), (other, e.seconds, rows[0])


@RANKING
@given(RANK_JOBS)
def test_every_row_rank_calls_feasible_fits_its_gpu(job: Job) -> None:
    hbm = job.cluster.system.gpu.hbm_bytes
    for r in ranked(job):
        pass_ = replace(job, plan=r.plan, recipe=r.recipe, recompute=r.recompute,
                        schedule=r.schedule, chunks=r.chunks)  # fmt: skip
        assert r.estimate.memory_bytes <= hbm, r
        if not r.account_for_embedding_and_loss:
            assert memory(pass_) == r.estimate.memory_bytes, r


@RANKING
@given(RANK_JOBS, st.sampled_from(sorted(RECIPES)))
@example(job_on("llama3-70b", "dgx-h100", 4, ParallelPlan(tp=8, dp=4), 32768, 16, "ddp",
                "selective", "1f1b", 1), "deepspeed-zero3-bf16")  # fmt: skip
def test_rank_proposes_only_plans_the_named_recipe_runs(job: Job, recipe: str) -> None:
    try:
        rows = rank_plans(job.config, job.cluster, seq_len=job.seq_len,
                          global_batch_size=job.global_batch_size, recipe=recipe)  # fmt: skip
    except ValueError:
        assume(False)
        return
    for r in rows:
        why = cannot_run(RECIPES[recipe], pp=r.plan.pp, cp=r.plan.cp, schedule=r.schedule)
        assert why is None, (recipe, r.plan, r.schedule, why)
    if recipe.startswith("deepspeed"):  # DeepSpeed's engine, read directly
        zero3 = RECIPES[recipe].zero_stage >= 2
        assert all(r.plan.cp == 1 and (r.plan.pp == 1 or not zero3) for r in rows), rows
        assert all(r.schedule == "1f1b" or r.plan.pp == 1 for r in rows), rows


# -- the collectives underneath ------------------------------------------------


@RELATION
@given(
    st.sampled_from(["dgx-h100", "gb200-nvl72", "dgx-a100"]),
    st.integers(min_value=2, max_value=72),
    st.integers(min_value=12, max_value=32),
)
@example("gb200-nvl72", 72, 28)  # 256 MiB over one NVL72
@example("gb200-nvl72", 16, 28)
def test_a_gather_is_no_slower_than_a_reduction_and_no_faster_on_more_ranks(
    system: str, ranks: int, log_bytes: int
) -> None:
    node = SYSTEMS[system]
    assume(ranks <= node.nvlink_domain)  # one NVLink domain
    cluster = Cluster(node.nvlink_domain // node.gpus_per_node, node.gpus_per_node, node)
    n = 2**log_bytes
    few, more = list(range(ranks)), list(range(ranks + 1))
    for op in ("all_gather", "reduce_scatter"):
        one = predict(op, n, cluster, few).seconds
        # an all-reduce is a reduce-scatter and an all-gather of the same buffer
        assert one <= predict("all_reduce", n, cluster, few).seconds * (1 + REL), (op, n)
        if ranks < node.nvlink_domain:  # each rank sends (n - 1)/n of the buffer
            assert one <= predict(op, n, cluster, more).seconds * (1 + REL), (op, n, ranks)


@RELATION
@given(
    st.integers(min_value=2, max_value=8),
    st.integers(min_value=1, max_value=4),
    st.integers(min_value=1, max_value=4),
)
@example(4, 1, 2)  # p 4, m 4, v 2
def test_memory_and_the_schedule_keep_the_same_micro_batches_in_flight(
    p: int, rounds: int, v: int
) -> None:
    m = rounds * p  # Megatron-Core's interleaved schedule runs whole rounds of p
    schedule = "1f1b" if v == 1 else "interleaved"
    rows = schedule_order(schedule, stages=p, microbatches=m, chunks=v)
    for stage, row in enumerate(rows):
        live = peak = 0
        for kind, _, _ in row:
            live += 1 if kind == "F" else -1 if kind == "B" else 0
            peak = max(peak, live)
        assert in_flight(stage, p, chunks=v, microbatches=m) == peak, (p, m, v, stage)


# -- rank commands whose first rows were priced on rank 0's groups ------------


@dataclass(frozen=True)
class Command:
    model: str
    gpus: int
    seq_len: int
    global_batch: int


COMMANDS = [
    Command("llama3-70b", 48, 12288, 48),  # DP groups cross nodes beside rank 0's
    Command("llama3-70b", 32, 32768, 16),  # dp = 1: the sync spans the CP ranks
    Command("llama3-70b", 64, 8192, 512),  # FSDP2 gathers across nodes under PP
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: f"{c.gpus}gpus-{c.seq_len}")
def test_the_first_row_is_priced_on_its_slowest_groups(command: Command) -> None:
    node = SYSTEMS["dgx-h100"]
    cluster = Cluster(command.gpus // node.gpus_per_node, node.gpus_per_node, node)
    first = rank_plans(command.model, cluster, seq_len=command.seq_len,
                       global_batch_size=command.global_batch, top=1)[0]  # fmt: skip
    job = job_on(command.model, "dgx-h100", cluster.nodes, first.plan, command.seq_len,
                 command.global_batch, first.recipe, first.recompute, first.schedule,
                 first.chunks)  # fmt: skip
    e = first.estimate
    bound, group = sync_bound(job, e)
    assert at_least(e.seconds, bound), (first, bound, group[:8])
    sheet = _worksheet(job)
    terms = dict(sheet.step.breakdown.items())
    raw = sum(float(r.seconds_per_step) for r in sheet.comms if r.axis == "dp")
    assert raw - terms["dp"] <= terms["compute"], (first, raw, terms)
    r, m = RECIPES[first.recipe], PRESETS[command.model]
    if r.zero_stage == 3 and r.stack == "pytorch" and first.plan.pp > 1:
        # torchtitan keeps FSDP2's parameters unsharded after forward under PP
        # (reshard_after_forward = not pp_enabled, to avoid per-micro-batch
        # all-gathers): every layer of the stage stays gathered until its backward.
        held = gpu_memory(job).gathered
        stage = m.layers // first.plan.pp * m.layer_params() // first.plan.tp
        assert held >= r.gather_bytes * stage, (first, held, stage)
