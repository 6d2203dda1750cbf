"""The 64-GPU design worksheet, filled by code: axes, links, memory and traffic per step.

Given a :class:`~infralens.planner.job.Job` (a dense transformer, its
:class:`~infralens.plan.ParallelPlan`, its cluster and batch),
:func:`fill_worksheet` answers what a design review asks: where each axis's
groups sit (inside a node or across nodes), which collectives each axis runs,
how often and over which link, how many bytes of model state and activations
one GPU holds, and which communication is likely to bound the step.

>>> from infralens.plan import ParallelPlan
>>> from infralens.topology import Cluster
>>> cluster = Cluster.from_node_shape("8_nodes_x_8_gpus", "dgx-h100")
>>> job = Job("llama2-70b", ParallelPlan(tp=8, pp=4, dp=2), cluster, seq_len=4096,
...           global_batch_size=512)
>>> sheet = fill_worksheet(job)
>>> [(row.axis, row.degree, row.placement) for row in sheet.axes]
[('tp', 8, 'nvlink'), ('pp', 4, 'network'), ('dp', 2, 'network'), ('zero', 2, 'network')]
>>> sheet.bottleneck, round(sheet.step.seconds, 1), round(sheet.step.mfu, 2)
('compute', 37.0, 0.38)

Each traffic row counts its calls per step and says what a profiler trace would show:

>>> tp = sheet.comms[1]
>>> tp.collective, tp.frequency.split(" × ")[0]
('all_gather', '10,240 per step: 2 per layer per micro-batch (forward)')
>>> tp.risk.split(";")[0]
"in a trace: NCCL all-gather kernels between every layer's GEMMs, which wait for them"

Communication and the bubble are priced by :func:`infralens.planner.step.estimate`
(collectives through :func:`infralens.nccl.predict`); the worksheet prices
nothing itself. The table shows each collective's full time, the step
table what is left exposed after overlap.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from fractions import Fraction

from infralens._typecheck import typed
from infralens.batch import grad_accum_steps_for
from infralens.collectives import ring_bytes_sent
from infralens.fp8 import amax_bytes
from infralens.nccl import predict
from infralens.pipeline import bubble_fraction
from infralens.plan import ParallelPlan
from infralens.planner._step_groups import amax_group, ring_hop, slowest_group
from infralens.planner._step_sync import unit_params
from infralens.planner._step_terms import BF16, amax_reduction
from infralens.planner.fit import gpu_memory
from infralens.planner.job import Job
from infralens.planner.step import estimate
from infralens.planner.worksheet import (
    REASONS,
    RECIPE_STAGE,
    STEP_TERMS,
    TRACES,
    AxisRow,
    CommRow,
    Worksheet,
    group_ranks,
)
from infralens.sharding import padded_shard_size
from infralens.topology import Cluster
from infralens.zero import step_collectives

__all__ = [
    "RECIPE_STAGE",
    "AxisRow",
    "CommRow",
    "Job",
    "Worksheet",
    "compare",
    "fill_worksheet",
    "render_markdown",
]


def _trace(key: str, op: str, when: str = "") -> str:
    """What a row's traffic looks like in a profiler trace, and how to measure it."""
    return "in a trace: " + TRACES[key].format(op=op.replace("_", "-"), when=when)


def _when(op: str, zero: int, piped: bool = False) -> str:
    """Where in the step a DP row's collective runs, for its trace."""
    if zero == 3 and piped:  # torchtitan under a pipeline
        return (
            "before each wrapped unit's first forward"
            if op == "all_gather"
            else "after the last backward, once a step"
        )
    if zero == 3:
        return (
            "before each wrapped unit's forward and backward"
            if op == "all_gather"
            else "after each layer's backward"
        )
    if op == "all_gather" and zero:
        return "between the optimizer and the next forward"
    return "during and after the last backward"


def _slowest(
    plan: ParallelPlan, axis: str, cluster: Cluster
) -> tuple[str, list[int]]:
    # the group the axis's collectives wait for, as the step prices it; DP's
    # gradients and parameters are synchronised over dp·cp
    axes = ("dp", "cp") if axis == "dp" else (axis,)
    group = slowest_group(plan, cluster, axes)
    return cluster.tier_of(group).name, group


@typed
def fill_worksheet(job: Job) -> Worksheet:
    """Fill the axis table, communication table and memory for *job*'s plan on its cluster.

    Memory is :func:`infralens.planner.fit.gpu_memory` for the job's recipe
    (:meth:`~infralens.planner.job.Job.resolved_recipe`; ``zero-paper`` with
    ``zero_stage`` is the ZeRO paper's table), the count ``estimate`` and the
    ``memory`` command use: model states (with FSDP's gathered units and gradient
    buffers) and activations (with the logits) of the busiest stage. The bubble is
    (pp − 1)/(v·m) (Narayanan et al., 2021), as the step prices it.

    Raises ``ValueError`` if the plan does not fill the cluster, ``ep`` is
    not 1 (the worksheet models dense models), the sequence does not split
    over ``cp``, or the batch does not divide.
    """
    plan, cluster, work = job.plan, job.cluster, job  # work: the batch and options
    plan.check_world_size(cluster.world_size)
    if plan.ep != 1:
        raise ValueError(f"ep must be 1 for a dense workload, got {plan.ep}")
    if work.seq_len % plan.cp:
        raise ValueError(
            f"seq_len must be divisible by cp: {work.seq_len} % {plan.cp}"
        )
    m = grad_accum_steps_for(
        global_batch_size=work.global_batch_size,
        micro_batch_size=work.micro_batch_size,
        dp_size=plan.dp,
    )
    b, s, h, e = (
        work.micro_batch_size,
        work.seq_len // plan.cp,
        job.config.hidden,
        BF16,
    )
    stage_layers, cfg = padded_shard_size(job.config.layers, plan.pp), job.config
    params = padded_shard_size(cfg.num_params(), plan.tp * plan.pp)
    recipe = (
        work.resolved_recipe()
    )  # the step's too: its ZeRO stage and gradient bytes
    zero, grad = recipe.zero_stage, 4 if recipe.grad_reduce_in_fp32 else 2
    fp8 = recipe.precision == "fp8" and zero != 3  # Transformer Engine's TP gathers
    sp_t = (
        plan.tp if work.sequence_parallel else 1
    )  # a stage sends its sequence shard
    step = estimate(job, check_memory=False)
    # Memory: the planner's one count (infralens.planner.fit.gpu_memory), as estimate and the
    # memory command take it; the bubble as estimate prices it, (p - 1)/(v·m).
    mem = gpu_memory(job)
    states = mem.model_states + mem.gathered + mem.grad_buffers
    activations = mem.activations + mem.logits
    bubble = bubble_fraction(stages=plan.pp, microbatches=m, chunks=work.chunks)

    # [start:axes]
    axes = []
    for axis in ("tp", "cp", "pp", "dp"):
        if axis == "cp" and plan.cp == 1:
            continue
        # DP's collectives (the gradient sync) run over dp·cp
        ranks = plan.dp * plan.cp if axis == "dp" else getattr(plan, axis)
        link, group = _slowest(plan, axis, cluster) if ranks > 1 else ("none", [])
        row = AxisRow(axis, getattr(plan, axis), link, REASONS[axis], tuple(group))
        axes.append(row)
    # ZeRO shards over dp·cp, the DP row's group
    sharded = plan.dp * plan.cp if zero else 1
    dp_row = axes[-1] if sharded > 1 else AxisRow("dp", 1, "none", "")
    reason = f"ZeRO-{zero}: " + REASONS["zero"]
    axes.append(AxisRow("zero", sharded, dp_row.placement, reason, dp_row.group))
    # [end:axes]
    compute = Fraction(step.breakdown.compute)
    comms = [CommRow("compute", "GEMMs and attention", f"{m:,} micro-batches per step",
                     "GPU", Fraction(0), compute, _trace("compute", ""))]  # fmt: skip
    times = f" × {stage_layers} layers × {m} micro-batches"
    for axis in ("tp", "cp", "pp", "dp"):
        degree = plan.dp * plan.cp if axis == "dp" else getattr(plan, axis)
        if degree == 1:
            continue
        link, group = _slowest(plan, axis, cluster)
        # (collective, bytes a call, calls per step, how the count is made)
        calls: list[tuple[str, int, int, str]] = []
        # [start:tp-calls]
        # TP: S = b·s·h·e bytes a call, 2 calls of each kind a layer each pass;
        # Megatron-Core runs backward's re-gathers and reduce-scatters under GEMMs
        # and waits for the rest (infralens.planner.step).
        passes = 3 if work.recompute == "full" else 2
        S, n = b * s * h * e, 2 * stage_layers * m  # calls of a kind in a pass
        fwd = "forward" + (" and recomputed" if passes == 3 else "")
        if axis == "tp":
            op = "reduce_scatter" if work.sequence_parallel else "all_reduce"
            sp, mc = work.sequence_parallel, zero != 3  # mc: Megatron-Core
            ag = ("all_gather", S // 2 if fp8 else S)  # FP8 gathers move FP8
            rows = [(*ag, passes - 1, fwd)] if sp else []
            rows += [(op, S, passes - 1, fwd)]
            rows += [(*ag, 1, "backward's gradients")] if sp else []
            again = "inputs again, under each dgrad GEMM"
            rows += [(*ag, 1, again)] if sp and mc else []
            rows += [(op, S, 1, "backward" + ", under each wgrad GEMM" * mc)]
            for name, size, k, what in rows:
                how = f"{2 * k} per layer per micro-batch ({what}){times}"
                calls.append((name, size, k * n, how))
        # [end:tp-calls]
        # [start:cp-pp-calls]
        elif axis == "cp":
            # the K/V ring: cp - 1 hops of this rank's K and V in each of 3 passes
            kv = 2 * b * s * cfg.kv_heads * cfg.head_dim * e
            kv //= min(plan.tp, cfg.kv_heads)
            hops = f"{3 * (plan.cp - 1)} per layer per micro-batch{times}"
            calls.append(
                ("send_recv", kv, 3 * (plan.cp - 1) * stage_layers * m, hops)
            )
        elif axis == "pp":
            # an activation forward and a gradient back per micro-batch and chunk;
            # under SP each TP rank sends its 1/t of the sequence
            v = f" × {work.chunks} chunks" if work.chunks > 1 else ""
            how = f"1 forward + 1 back per micro-batch × {m} micro-batches{v}"
            calls.append(("send_recv", S // sp_t, 2 * m * work.chunks, how))
        # [end:cp-pp-calls]
        # [start:dp-calls]
        else:
            # DP over dp·cp; ZeRO-3 moves each unit every micro-batch, or once a
            # step under a pipeline (torchtitan keeps it gathered)
            piped = zero == 3 and plan.pp > 1
            ops = step_collectives(zero) if zero else [("all_reduce", "gradients")]
            for op, what in ops:
                if piped and what == "parameters for backward":
                    continue
                gathers = op == "all_gather" and zero != 0
                nbytes = recipe.gather_bytes if gathers else grad
                if zero == 3:  # the step's unit: the stage's share over its layers
                    every = "per step" if piped else f"per micro-batch{times}"
                    how = f"1 per wrapped unit {every}: {what}"
                    n = stage_layers * (1 if piped else m)
                    calls.append((op, unit_params(cfg, plan) * nbytes, n, how))
                else:  # the whole shard once a step
                    when = "the optimizer" if gathers else "the last backward"
                    calls.append((op, params * nbytes, 1, f"{what}, after {when}"))
        # [end:dp-calls]
        # [start:pricing]
        for op, nbytes, count, how in calls:
            if op == "send_recv":
                # priced on the chain's slowest hop, as the step does
                sent = Fraction(nbytes * count)
                pair = ring_hop(cluster, group)
                one = predict("send_recv", nbytes, cluster, pair).seconds
                seconds = count * Fraction(one)
                link = cluster.tier_of(pair).name
            else:  # a ring sends (n − 1)/n · S per call
                sent = ring_bytes_sent(op, nbytes, len(group)) * count
                one = predict(op, nbytes, cluster, group).seconds
                seconds = count * Fraction(one)
            # [end:pricing]
            when = _when(op, zero, axis == "dp" and zero == 3 and plan.pp > 1)
            key = "zero3" if axis == "dp" and zero == 3 else axis
            if "under each" in how:  # launched under a backward GEMM
                key, when = "tp-under", how.split("under each ")[1].split(" ")[0]
            trace = _trace(key, op, when)
            frequency = f"{count:,} per step: {how}"
            comms.append(CommRow(axis, op, frequency, link, sent, seconds, trace))
    if (
        recipe.scaling == "delayed"
    ):  # the amax all-reduces the step adds to its DP term
        group, chunk = (
            amax_group(plan),
            max(1, cfg.layers // (plan.pp * work.chunks)),
        )
        runs = (
            m * work.chunks
        )  # each chunk's forward and its backward, every micro-batch
        each = (amax_bytes(chunk), amax_bytes(chunk, backward=True))  # fp32 amaxes
        sent = runs * sum(
            (ring_bytes_sent("all_reduce", n, len(group)) for n in each), Fraction()
        )
        seconds = Fraction(
            amax_reduction(cluster, group, chunk_layers=chunk, chunks=runs)
        )
        link = cluster.tier_of(group).name
        how = (f"{2 * runs:,} per step: 1 per chunk per micro-batch in forward and 1 in "
               "backward (FP8 amax, delayed scaling, over TP x DP x CP)")  # fmt: skip
        comms.append(CommRow("dp", "all_reduce", how, link, sent, seconds,
                             _trace("amax", "all_reduce")))  # fmt: skip
    bottleneck = step.bottleneck
    return Worksheet(
        plan, tuple(axes), tuple(comms), states, activations, m, bubble, bottleneck,
        recipe.name, job.hbm_bytes, step, work.token_budget,
    )  # fmt: skip


@typed
def compare(plans: Sequence[ParallelPlan], job: Job) -> list[Worksheet]:
    """Fill one worksheet per plan for *job* (its own plan set aside), in the order given.

    >>> from infralens.plan import ParallelPlan
    >>> from infralens.topology import Cluster
    >>> c = Cluster.from_node_shape("8_nodes_x_8_gpus")
    >>> job = Job("llama2-70b", ParallelPlan(dp=64), c, seq_len=4096,
    ...           global_batch_size=512)
    >>> plans = [ParallelPlan(tp=8, pp=4, dp=2), ParallelPlan(tp=8, pp=8, dp=1),
    ...          ParallelPlan(tp=4, pp=4, dp=4)]
    >>> [round(s.memory_bytes / 10**9, 1) for s in compare(plans, job)]
    [37.3, 31.1, 61.6]
    """
    return [fill_worksheet(replace(job, plan=p)) for p in plans]


def _share(sheet: Worksheet) -> str:
    """The largest term's share of the predicted step, as " (67 % of the step)"."""
    e = sheet.step
    if e is None or e.seconds <= 0:
        return ""
    return (
        f" ({getattr(e.breakdown, sheet.bottleneck) / e.seconds:.0%} of the step)"
    )


@typed
def render_markdown(sheet: Worksheet) -> str:
    """The worksheet as two Markdown tables and a memory line.

    >>> from infralens.plan import ParallelPlan
    >>> from infralens.topology import Cluster
    >>> c = Cluster.from_node_shape("1_node_x_8_gpus")
    >>> job = Job("llama3-8b", ParallelPlan(dp=8), c, seq_len=2048, global_batch_size=8)
    >>> lines = render_markdown(fill_worksheet(job)).splitlines()
    >>> print(lines[0])
    | Axis | Degree | Placement | Reason |
    >>> for cell in lines[4].strip("| ").split(" | "):   # the DP row's cells
    ...     print(cell)
    DP
    8
    nvlink: ranks 0–7
    replicas (sharded by ZeRO) over the rest; one sync per step
    """
    lines = ["| Axis | Degree | Placement | Reason |", "| --- | ---: | --- | --- |"]
    label = {"zero": "FSDP/ZeRO"}
    lines += [  # placement: the link and ranks of the group the step prices
        f"| {label.get(r.axis, r.axis.upper())} | {r.degree} | {r.placement}"
        f"{': ' + group_ranks(r.group) if r.group else ''} | {r.reason} |"
        for r in sheet.axes
    ]
    lines += [
        "",
        "| Communication | Frequency | Link | GB sent per GPU per step "
        "| ms per step, before overlap | Risk |",
        "| --- | --- | --- | ---: | ---: | --- |",
    ]
    lines += [
        f"| {r.axis.upper() if r.axis != 'compute' else 'Compute:'} {r.collective} | "
        f"{r.frequency} | {r.link} | "
        f"{f'{float(r.bytes_per_step) / 1e9:.2f}' if r.axis != 'compute' else '–'} | "
        f"{float(r.seconds_per_step) * 1e3:.1f} | {r.risk} |"
        for r in sheet.comms
    ]
    over = sheet.shortfall_bytes / 1e9
    verdict = (
        f"does not fit by {over:.1f} GB"
        if over > 0
        else f"fits, {-over:.1f} GB spare"
    )
    lines += [
        "",
        f"Memory per GPU ({sheet.recipe} recipe): {sheet.model_state_bytes / 1e9:.1f} GB model "
        f"states + {sheet.activation_bytes / 1e9:.1f} GB activations = "
        f"{sheet.memory_bytes / 1e9:.1f} GB of {sheet.capacity_bytes / 1e9:.0f} GB HBM: {verdict} "
        "(before the CUDA context, NCCL buffers and fragmentation); "
        f"{sheet.microbatches} micro-batches, bubble {float(sheet.bubble_fraction):.1%}; "
        f"bound by: {STEP_TERMS.get(sheet.bottleneck, sheet.bottleneck)}{_share(sheet)}.",
    ]
    if sheet.step is not None:
        e = sheet.step
        lines += ["", "| Step time | ms | share |", "| --- | ---: | ---: |"]
        lines += [
            f"| {STEP_TERMS[name]} | {sec * 1e3:,.0f} | {sec / e.seconds:.1%} |"
            for name, sec in e.breakdown.items()
            if sec > 0
        ]
        budget = (
            "; set training.token_budget for the days a run takes"
            if sheet.token_budget is None
            else f"; {sheet.token_budget / 1e12:g}T tokens take "
            f"{e.days(sheet.token_budget):.0f} days on {e.gpus} GPUs"
        )
        lines += [
            "",
            f"Step {e.seconds:.2f} s, {e.tokens_per_second_per_gpu:,.0f} tokens/s per GPU, "
            f"MFU {e.mfu:.1%} (dense {e.precision.upper()} peak){budget}.",
        ]
    return "\n".join(lines)
