"""Step time and MFU: compute, exposed communication and the bubble on one clock.

:func:`estimate` prices one optimizer step of a dense transformer on a
plan and a cluster. Every term is a model of what a named framework does:

- **compute** (:mod:`infralens.compute`): the weight GEMMs' FLOPs per GPU
  (recomputation adding its forward; torchtitan's op-level policy, for
  ``zero_stage=3``, every second matmul) at the GPU's measured BF16 matmul
  ceiling (:func:`infralens.hardware.matmul_ceiling`: for a part never
  measured, that of the part bounding it from above), attention at its
  kernel's measured throughput (*attention*: ``flash2``, ``flash3``,
  ``cudnn`` or ``materialized``), and the
  element-wise kernels' bytes at HBM bandwidth (*elementwise*: ``fused``, or
  ``eager`` for torchtitan without ``torch.compile``; :mod:`infralens.elementwise`).
  An FP8 recipe runs the blocks' GEMMs at the measured FP8 ceiling and adds its
  quantisation kernels' bytes; Transformer Engine gathers the forward TP inputs
  in FP8, and delayed scaling adds its amax all-reduces (:mod:`infralens.fp8`).
- **TP** (Megatron-Core with Transformer Engine): per
  layer and micro-batch, two all-gathers and two reduce-scatters of the
  ``b·s/cp × h`` activation each pass with sequence parallelism (two
  all-reduces without); a full recomputation repeats the forward ones. The
  forward ones and backward's output-gradient gathers sit between GEMMs and
  block; backward launches each column-parallel linear's re-gather of its
  saved input under its dgrad GEMM and its input-gradient reduce-scatter under
  its wgrad GEMM, so only what outlasts that GEMM waits. An FP8 recipe gathers
  FP8 both ways. torchtitan's DTensor TP (``zero_stage=3``) waits for every one.
  With ``tp_comm_overlap`` (Transformer Engine's userbuffers; under
  ``zero_stage=3`` PyTorch's asynchronous TP, fused into the matmuls by
  ``torch.compile``) none blocks: each runs beside a GEMM of its own linear and
  waits only for what outlasts it.
- **CP** (Megatron-Core/Transformer Engine ring attention): ``cp − 1``
  exchanges of this rank's K and V (kv_heads, GQA) forward, K, V and their
  gradients backward, overlapped with the attention blocks only.
- **PP** (Megatron-Core 1F1B or interleaved): the bubble (p − 1)/(v·m) of
  the work per micro-batch, and point-to-point sends of the
  ``b·s/(tp·cp) × h`` shard sequence parallelism leaves on each rank
  (without it, the whole activation, or with 2021 Megatron-LM's
  ``scatter_gather_p2p`` 1/tp of it and an all-gather over TP on arrival);
  1F1B waits for each send, interleaving (``overlap_p2p_comm``) hides all
  but the warm-up ones.
- **DP** (Megatron-Core DDP with ``overlap_grad_reduce`` and
  ``overlap_param_gather``, as NVIDIA's performance recipes set them): over
  the dp·cp ranks the model state is sharded over (``dp_cp_group``),
  gradients reduced in fp32 (Megatron's bf16 default,
  ``accumulate_allreduce_grads_in_fp32``; ``grad_reduce_in_fp32=False``
  reduces in bf16/fp16) in the stream time the last micro-batch's backward
  leaves free, all but the last bucket; with the distributed optimizer (ZeRO-1)
  the bf16 parameters are gathered in the next forward's free time the same
  way. A DP group that crosses the network while TP and CP stay inside one
  NVLink domain reduces on its own communicator's stream beside their traffic,
  so it may use the layers' whole time, not only what they leave free. With
  ``overlap_grad_reduce=False`` the whole reduction (and gather)
  runs after the last backward, as Megatron-LM's local DDP did in 2021 (commit
  cdde433) and Megatron-Core does without the flag (its default at d98e8a6).
- **FSDP** (``zero_stage=3``, FSDP2 as torchtitan runs it, over its
  ``dp_shard_cp`` mesh): per layer a bf16 all-gather forward and backward and
  an fp32 (or, without ``grad_reduce_in_fp32``, bf16) reduce-scatter each
  micro-batch; under a pipeline the parameters stay gathered after the first
  forward and the gradients are reduce-scattered once, after the last
  backward, where nothing hides them.
- **critical path** (``infralens.planner._step_overlap``): per layer, forward then
  backward, the collectives above share one stream and each hides only behind
  compute running beside it; compute with a collective beside it runs
  ``OVERLAP_SLOWDOWN`` (0.189) slower. Every axis is
  priced on its slowest group (``slowest_group`` in ``infralens.planner._step_groups``).
- **optimizer**: Adam reads and writes about 30 bytes per local parameter
  (fp32 master, two moments, gradient; bf16 copy) at HBM bandwidth, 1/(dp·cp)
  of them under ZeRO.

>>> from infralens.plan import ParallelPlan
>>> from infralens.topology import Cluster
>>> c = Cluster.from_node_shape("8_nodes_x_8_gpus", "dgx-h100")
>>> e = estimate(Job("llama2-70b", ParallelPlan(tp=8, pp=4, dp=2), c, seq_len=4096,
...                  global_batch_size=512, micro_batch_size=1))
>>> e.bottleneck, round(e.seconds, 1), round(e.mfu, 2)
('compute', 37.0, 0.38)
"""

from __future__ import annotations

from typing import Any, TypeVar

from infralens._validate import (
    check_choice,
    flag,
    positive_int,
)
from infralens.attention_kernels import ATTENTION_KERNELS, attention_flops_per_token
from infralens.batch import grad_accum_steps_for
from infralens.compute import (
    RECOMPUTE_MODES,
    gemm_flops_per_token,
    model_flops_per_token,
)
from infralens.elementwise import ELEMENTWISE_KERNELS
from infralens.hardware import GPUS, matmul_ceiling, preset_key
from infralens.memory import _model
from infralens.model import TransformerConfig
from infralens.plan import ParallelPlan
from infralens.planner import _step_checks as checks
from infralens.planner import _step_overlap as path
from infralens.planner import _step_sync as sync
from infralens.planner import _step_terms as comm
from infralens.planner._step_groups import (
    amax_group,
    group_of,
    ring_hop,
    slowest_group,
    spans,
)
from infralens.planner.job import SCHEDULES, Job
from infralens.planner.step_result import Breakdown, Estimate
from infralens.recipe import Recipe
from infralens.sustained import FITTED, Sustained
from infralens.topology import Cluster

T = TypeVar("T")

__all__ = ["SCHEDULES", "estimate", "group_of"]


def _given(value: T | None, default: T) -> T:
    return default if value is None else value


def estimate(job: Job, *, check_memory: bool = True) -> Estimate:
    """Predict one training step of *job* (see the module text).

    step = compute + TP + CP + bubble + p2p + exposed DP/FSDP + optimizer
    MFU  = (6N + 6·L·h·s) · tokens per step / step / GPUs / dense peak
    HFU  = (GEMM FLOPs with recomputation + attention as the kernel runs it) · ... / dense peak

    The peak is the dense one of the recipe's GEMM precision (FP8 for an FP8 recipe,
    so MFU stays a fraction of what the tensor cores could do). The attention term of
    MFU is the half a causal mask leaves (PaLM counts
    12·L·h·s, which credits FLOPs FlashAttention skips: above 100 % at 128K).

    The job's *recipe* (a :data:`infralens.precision.RECIPES` name or a
    :class:`~infralens.recipe.Recipe`) sets the ZeRO stage, the gradient-reduction
    dtype, the element-wise kernels and the memory count
    (:func:`infralens.planner.fit.gpu_memory`); left out, a bare *zero_stage* picks the recipe
    it always stood for, and with neither the default
    (:data:`~infralens.precision.DEFAULT_RECIPE`) applies. *grad_reduce_in_fp32* and
    *elementwise*, when given, override the recipe's. *first_stage_layers* /
    *last_stage_layers* and *account_for_embedding* / *account_for_loss* are
    Megatron-Core's uneven first and last stages; the stage whose step is longest (its
    layers, the output layer on the last) sets compute, TP, CP, bubble and sends.

    >>> from infralens.topology import Cluster
    >>> c = Cluster.from_node_shape("1_node_x_8_gpus", "dgx-h100")
    >>> e = estimate(Job("llama3-8b", ParallelPlan(dp=8), c, seq_len=8192,
    ...                  global_batch_size=16, micro_batch_size=2, zero_stage=3,
    ...                  recompute="full"))
    >>> e.bottleneck, e.microbatches
    ('compute', 1)
    >>> estimate(Job("llama3-8b", ParallelPlan(dp=8), c, seq_len=8192,
    ...              global_batch_size=12))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: global_batch_size must divide by micro_batch_size * dp_size: ... = 4

    Raises ``ValueError`` if the cluster's GPU is not a preset (its ceilings
    are unmeasured), the plan does not fill the cluster, the batch
    does not split into micro-batches per replica, the model does not fit
    the GPU (saying by how much; the job's *gpu* preset, by default the cluster's
    own), ``ep`` is not 1, or *schedule*,
    *recompute*, *zero_stage*, *attention* or *elementwise* is unknown, the
    attention kernel has no published ceiling on the cluster's GPU,
    materialized attention is asked to split the sequence (``cp`` > 1:
    Megatron-Core's unfused attention refuses context parallelism),
    *overlap_grad_reduce* is False with ``zero_stage=3`` (FSDP2 has no such
    mode), or eager element-wise kernels are asked of a Megatron plan (they are
    counted for torchtitan's block, ``zero_stage=3``), the layers do not divide
    among ``pp * chunks`` stage chunks (with *uneven_stages*, as Llama 3 trained,
    the busiest holds one more; fewer layers than stages are refused) or the
    heads among ``tp`` ranks; ``TypeError`` if a
    flag is not a bool. ``RuntimeError`` if a result breaks what it means (MFU or
    HFU outside (0, 1], a negative or infinite term): a bug, never bad input.
    *check_memory* False prices a plan that does not fit (the worksheet's verdict).
    """
    if not isinstance(job, Job):
        raise TypeError(f"job must be a Job, got {type(job).__name__}")
    return _estimate(
        job.model, job.plan, job.cluster, check_memory=check_memory, **_options(job)
    )


def _options(job: Job) -> dict[str, Any]:
    """*job*'s batch and options as :func:`_estimate`'s keywords: the one place a Job
    becomes them (the ranker overrides the ones it searches)."""
    named = job.recipe is not None  # else a bare zero_stage, as the keyword stood
    return dict(
        seq_len=job.seq_len, global_batch_size=job.global_batch_size,
        micro_batch_size=job.micro_batch_size, sequence_parallel=job.sequence_parallel,
        recompute=job.recompute, schedule=job.schedule, chunks=job.chunks,
        recipe=job.resolved_recipe() if named else None,
        zero_stage=None if named else job.zero_stage,
        attention=job.attention, overlap_grad_reduce=job.overlap_grad_reduce,
        grad_reduce_in_fp32=job.grad_reduce_in_fp32,
        scatter_gather_p2p=job.scatter_gather_p2p, elementwise=job.elementwise,
        tp_comm_overlap=job.tp_comm_overlap, uneven_stages=job.uneven_stages,
        first_stage_layers=job.first_stage_layers, last_stage_layers=job.last_stage_layers,
        account_for_embedding=job.account_for_embedding,
        account_for_loss=job.account_for_loss, sustained=job.sustained,
        hbm_of=job.gpu,
    )  # fmt: skip


def _estimate(
    model: TransformerConfig | str,
    plan: ParallelPlan,
    cluster: Cluster,
    *,
    seq_len: int,
    global_batch_size: int,
    micro_batch_size: int,
    sequence_parallel: bool = True,
    recompute: str = "selective",
    schedule: str = "1f1b",
    chunks: int = 1,
    zero_stage: int | None = None,
    attention: str = "flash2",
    overlap_grad_reduce: bool = True,
    grad_reduce_in_fp32: bool | None = None,
    scatter_gather_p2p: bool = False,
    elementwise: str | None = None,
    tp_comm_overlap: bool = False,
    check_memory: bool = True,
    uneven_stages: bool = False,
    recipe: str | Recipe | None = None,
    first_stage_layers: int | None = None,
    last_stage_layers: int | None = None,
    account_for_embedding: bool = False,
    account_for_loss: bool = False,
    sustained: Sustained | None = None,
    hbm_of: str | None = None,
) -> Estimate:
    """:func:`estimate`'s body, with the job as keywords (the ranker's light path);
    *hbm_of* is the job's *gpu*."""
    m = _model(model)
    rates = FITTED if sustained is None else sustained
    if not isinstance(rates, Sustained):
        raise TypeError(
            f"sustained must be a Sustained, got {type(rates).__name__}"
        )
    v = positive_int("chunks", chunks)
    r, zero_stage = checks.resolve_recipe(recipe, zero_stage)
    # Every stage chunk holds whole layers (the same number unless *uneven_stages* or
    # first/last stage layers say otherwise) and every TP rank whole heads.
    uneven = flag("uneven_stages", uneven_stages)
    counted, split = checks.busiest_stage(
        m, plan, cluster, chunks=v, uneven=uneven, first=first_stage_layers,
        last=last_stage_layers, embedding=account_for_embedding, loss=account_for_loss,
    )  # fmt: skip
    s = positive_int("seq_len", seq_len)
    b = positive_int("micro_batch_size", micro_batch_size)
    mode = check_choice("recompute", recompute, RECOMPUTE_MODES)
    sched = check_choice("schedule", schedule, SCHEDULES)
    sp = flag("sequence_parallel", sequence_parallel)
    check_mem = flag("check_memory", check_memory)
    overlap = flag("overlap_grad_reduce", overlap_grad_reduce)
    fp32_grads = flag(
        "grad_reduce_in_fp32", _given(grad_reduce_in_fp32, r.grad_reduce_in_fp32)
    )
    scatter = flag("scatter_gather_p2p", scatter_gather_p2p)
    tp_overlap = flag("tp_comm_overlap", tp_comm_overlap)
    kernels = check_choice(
        "elementwise", _given(elementwise, r.elementwise), ELEMENTWISE_KERNELS
    )
    checks.tp_overlap_runs(
        tp_overlap, tp=plan.tp, sequence_parallel=sp, zero_stage=zero_stage,
        elementwise=kernels,
    )  # fmt: skip
    checks.stack_options(
        zero_stage, elementwise=kernels, overlap_grad_reduce=overlap
    )
    if s % plan.cp:
        raise ValueError(
            f"seq_len must be divisible by cp: {s} % {plan.cp} = {s % plan.cp}"
        )
    if attention == "materialized" and plan.cp > 1:
        # Megatron-Core's unfused DotProductAttention asserts cp == 1 (at 00caa53)
        raise ValueError(
            f"attention 'materialized' cannot split a sequence over cp = {plan.cp} ranks: "
            "context parallelism runs inside a fused attention kernel"
        )
    n_mb = grad_accum_steps_for(
        global_batch_size=global_batch_size, micro_batch_size=b, dp_size=plan.dp
    )
    checks.schedule_runs(sched, chunks=v, pp=plan.pp, microbatches=n_mb)
    gpu_key = preset_key(cluster.system.gpu)
    checks.rates_fit(rates.gpu, gpu_key)
    matmul_ceiling(
        gpu_key
    )  # a GPU without a measured (or stand-in) ceiling stops here
    gpu = cluster.system.gpu
    checks.precision_runs(r, gpu, gpu_key)
    # memory is judged against the job's GPU preset, by default the cluster's own
    held = gpu_key if hbm_of is None else check_choice("gpu", hbm_of, tuple(GPUS))
    memory = checks.fitted_memory(
        counted, plan, held, GPUS[held], recipe=r, recompute=mode, seq_len=s, micro_batch_size=b,
        sequence_parallel=sp, check=check_mem, microbatches=n_mb, chunks=v,
        first=first_stage_layers, last=last_stage_layers, embedding=account_for_embedding,
        loss=account_for_loss,
    )  # fmt: skip

    # [start:compute]
    kernel = check_choice("attention", attention, ATTENTION_KERNELS)
    stack = "pytorch" if zero_stage == 3 else "megatron"
    # Per stage, one micro-batch on one GPU: the GEMMs at the measured ceiling,
    # attention at its kernel's rate, the element-wise kernels and the loss at HBM
    # bandwidth.
    per_stage, attn = comm.stage_compute(
        m, split, gpu_key, tokens=b * s, seq_len=s, tp=plan.tp, cp=plan.cp,
        sequence_parallel=sp, recompute=mode, stack=stack, kernel=kernel,
        elementwise=kernels, scaling=r.scaling, sustained=rates, loss=r.loss,
    )  # fmt: skip
    layer_c, _ = comm.layer_compute(
        m, gpu_key, tokens=b * s, seq_len=s, tp=plan.tp, cp=plan.cp,
        sequence_parallel=sp, recompute=mode, stack=stack, kernel=kernel,
        elementwise=kernels, scaling=r.scaling, sustained=rates, loss=r.loss,
    )  # fmt: skip
    # [end:compute]

    # [start:tp-exposed]
    # TP: the collectives between and under GEMMs; act is the whole b·(s/cp)·h buffer.
    # Every axis is priced on the group its collectives wait for.
    act = b * (s // plan.cp) * m.hidden * comm.BF16
    tp_group = slowest_group(plan, cluster, ("tp",))
    fp8 = r.precision == "fp8"  # TE gathers FP8 both ways, torchao forward only
    tpc = comm.TPComm()  # per layer and micro-batch
    if plan.tp > 1:
        gemms = comm.column_gemms(
            m, gpu_key, tokens=b * s // plan.cp, tp=plan.tp,
            fp8=fp8, sustained=rates,
        )  # fmt: skip
        tpc = comm.tensor_parallel(
            act, cluster, tp_group, sequence_parallel=sp,
            fp8_gathers=fp8 and stack == "megatron", fp8_forward=fp8,
            gemms=gemms if stack == "megatron" or tp_overlap else None,
            row=comm.row_gemms(m, gemms) if tp_overlap else None,
            async_tp=stack == "pytorch",
        )  # fmt: skip
    # [end:tp-exposed]

    # [start:cp-ring]
    # CP: ring exchange of K/V (kv heads split over tp), one pass forward, two backward.
    ring = 0.0  # per layer, micro-batch and pass
    if plan.cp > 1:
        kv = 2 * b * (s // plan.cp) * m.kv_heads * m.head_dim * comm.BF16
        kv //= min(plan.tp, m.kv_heads)
        # the ring waits for its slowest hop
        pair = ring_hop(cluster, slowest_group(plan, cluster, ("cp",)))
        ring = comm.context_parallel(kv, cluster, pair, cp=plan.cp)
    # [end:cp-ring]

    # Gradients and parameters are synchronised over dp·cp, where the state is
    # sharded.
    dp_group = slowest_group(plan, cluster, ("dp", "cp"))
    local = m.num_params() / (plan.tp * plan.pp)
    grad_bytes = 4 if fp32_grads else comm.BF16
    fsdp = sync.fsdp(
        sync.unit_params(m, plan), cluster, dp_group,
        microbatches=n_mb, pipelined=plan.pp > 1, grad_bytes=grad_bytes,
        gather_bytes=r.gather_bytes,
    ) if zero_stage == 3 and len(dp_group) > 1 else None  # fmt: skip
    # [start:critical-path]
    # One layer and micro-batch, forward then backward: what each collective
    # hides behind, one stream at a time (infralens.planner._step_overlap).
    f = path.forward_share(mode)
    passes = 3 if mode == "full" else 2  # a full recomputation reruns the forward
    waits = tpc.backward + (passes - 2) * tpc.forward  # backward's blocking TP
    under = tpc.under_gemm + (passes - 2) * tpc.forward_under  # and overlapping

    # The K/V exchange hides behind attention: Megatron-Core's ring behind every
    # block's; PyTorch's (pytorch f2127db, tensor/experimental/_attention.py: its
    # default rotate method, ALL_GATHER, is issued before the local block and
    # awaited after it) behind the local block's alone, 1/cp of it.
    behind = attn / (plan.cp if stack == "pytorch" else 1)

    def layer(fsdp_traffic: tuple[float, float]) -> tuple[path.Exposed, ...]:
        fwd_s, bwd_s = fsdp_traffic
        fwd = path.Phase(f * layer_c, f * behind, tpc.forward,
                         tpc.forward_under, ring, fwd_s)  # fmt: skip
        bwd = path.Phase((1 - f) * layer_c, (1 - f) * behind, waits,
                         under, 2 * ring, bwd_s)  # fmt: skip
        return path.phase_exposed(fwd), path.phase_exposed(bwd)

    # [end:critical-path]
    # [start:layer-kinds]
    # FSDP's traffic differs by layer: the first micro-batch's (`first`), the
    # others' (`later`), and in each micro-batch the `lead` layer, whose gather
    # waited in the open (fsdp.waits), so its forward prefetches nothing.
    later_fwd, later_bwd = layer(fsdp.later if fsdp else (0.0, 0.0))
    later = later_fwd + later_bwd
    first, lead = later, [later, later]
    if fsdp:
        first = sum(layer(fsdp.first), path.Exposed())
        backward_only = [(0.0, fsdp.first[1]), (0.0, fsdp.later[1])]
        lead = [sum(layer(t), path.Exposed()) for t in backward_only]
    # [end:layer-kinds]

    # [start:pipeline-pace]
    # PP: the longest stage sets the pace: its work, the bubble (p - 1)/(v·m) of it,
    # and the sends it waits for, over the slowest stage boundary.
    one = comm.pipeline_p2p(
        act, cluster, ring_hop(cluster, slowest_group(plan, cluster, ("pp",))),
        tp_group, sends=1, sequence_parallel=sp, scatter_gather=scatter,
    )  # fmt: skip
    pace = comm.busiest_stage(
        per_stage, split, per_layer_comm=later.tp + later.cp + later.slowdown,
        one_send=one, schedule=sched, chunks=v, microbatches=n_mb,
    )  # fmt: skip
    rest = pace.layers - 1  # each micro-batch: its lead layer and the rest
    step_layers = first * rest + lead[0] + (later * rest + lead[1]) * (n_mb - 1)
    compute = n_mb * pace.compute + step_layers.slowdown
    tp, cp = step_layers.tp, step_layers.cp
    pp_bubble, pp_p2p = pace.bubble, pace.p2p
    # [end:pipeline-pace]

    # [start:pp-beside]
    # Interleaved sends past the warm-up hide, but only in the stream time the
    # layers leave free (one collective stream), and beside compute they slow it.
    sent = 2 * n_mb * v * one if plan.pp > 1 and sched == "interleaved" else 0.0
    to_hide = max(0.0, sent - pace.p2p)
    pp_beside = min(to_hide, step_layers.free)
    pp_p2p += to_hide - pp_beside
    compute += path.OVERLAP_SLOWDOWN * pp_beside
    left = 1.0 - pp_beside / step_layers.free if step_layers.free else 0.0
    # [end:pp-beside]

    # [start:dp-links]
    # A DP group that leaves the NVLink domain waits on the network, which TP and
    # CP inside one domain never cross: on its own communicator's stream it runs
    # beside their traffic, in the layers' whole time (open), not their free time.
    cp_group = slowest_group(plan, cluster, ("cp",))
    own_links = spans(cluster, dp_group) and not (
        spans(cluster, tp_group) or spans(cluster, cp_group)
    )
    window = [x.open if own_links else x.free for x in (later_fwd, later_bwd)]
    # [end:dp-links]

    # [start:dp]
    # DP / FSDP: gradient reduction in fp32 (or bf16), parameter gathers in bf16
    # (or fp8), over dp·cp: FSDP behind each layer, DDP in the window the last
    # backward (and the next forward) leave it.
    if fsdp is not None:
        dp = step_layers.dp + fsdp.waits + pace.layers * fsdp.after
    else:
        dp, beside = sync.data_parallel(
            local, cluster, dp_group, zero_stage=zero_stage,
            overlap_grad_reduce=overlap,
            free=(window[0] * pace.layers * left, window[1] * pace.layers * left),
            grad_bytes=grad_bytes, gather_bytes=r.gather_bytes,
        )  # fmt: skip
        compute += path.OVERLAP_SLOWDOWN * min(beside, pace.compute)
    # Transformer Engine's amax all-reduce over TP x DP x CP
    if r.scaling == "delayed":
        dp += comm.amax_reduction(
            cluster, amax_group(plan), chunks=n_mb * v,
            chunk_layers=max(1, m.layers // (plan.pp * v)),
        )  # fmt: skip
    # [end:dp]

    # ZeRO shards the optimizer state over dp·cp
    shards = plan.dp * plan.cp if zero_stage >= 1 else 1
    optimizer = comm.optimizer(
        local, gpu, r, shards=shards, stack=stack, microbatches=n_mb
    )

    # [start:clock]
    try:  # a result that cannot be is a bug the code reports, not bad input
        parts = Breakdown(compute, tp, cp, 0.0, pp_bubble, pp_p2p, dp, optimizer)
    except (ValueError, TypeError) as err:
        raise checks.invariant_broken(err) from None
    seconds = parts.total
    # [end:clock]

    # [start:mfu]
    tokens = global_batch_size * s
    world = cluster.world_size
    # MFU counts the FLOPs the causal model needs (6N + 6·L·h·s), HFU what the
    # GPUs run: the GEMMs with recomputation and attention as the chosen kernel
    # runs it. Both are counted against the same step, so MFU <= HFU <= 1 when
    # every kernel's time is its FLOPs at a ceiling no higher than the dense peak.
    model_rate = (
        model_flops_per_token(m, seq_len=s, causal=True) * tokens / seconds / world
    )
    attn_fwd, attn_bwd = attention_flops_per_token(
        m, seq_len=s, recompute=mode, kernel=kernel
    )
    hw_flops = (
        gemm_flops_per_token(m, recompute=mode, stack=stack) + attn_fwd + attn_bwd
    )
    hw_rate = hw_flops * tokens / seconds / world
    # the GEMMs' precision
    peak = gpu.fp8_flops if r.precision == "fp8" else gpu.bf16_flops
    # [end:mfu]
    try:
        return Estimate(
            seconds=seconds,
            mfu=model_rate / peak,
            hfu=hw_rate / peak,
            tflops_per_gpu=model_rate / 1e12,
            tokens_per_second_per_gpu=tokens / seconds / world,
            microbatches=n_mb,
            breakdown=parts,
            memory_bytes=memory,
            gpus=world,
            recipe=r.name,
            precision=r.precision,
        )
    except (ValueError, TypeError) as err:
        raise checks.invariant_broken(err) from None
