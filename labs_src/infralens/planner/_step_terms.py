"""The terms of :func:`infralens.planner.step.estimate`: a micro-batch's compute, what each axis
sends, how much of it the step cannot hide, and the optimizer's step.

Every function returns seconds. The collectives are priced by
:func:`infralens.nccl.predict`; the caller passes the rank groups and sizes it
already validated, so nothing here checks input.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from infralens.attention_kernels import attention_seconds
from infralens.compute import gemm_flops_per_token
from infralens.elementwise import elementwise_bytes, loss_bytes
from infralens.fp8 import (
    amax_bytes,
    fp8_gemm_flops_per_token,
    quantize_bytes,
    weight_quantize_bytes,
)
from infralens.hardware import GPU, GPUS, matmul_ceiling
from infralens.model import TransformerConfig
from infralens.nccl import predict
from infralens.pipeline import bubble_fraction
from infralens.pipeline_memory import in_flight
from infralens.recipe import Recipe
from infralens.sustained import Sustained, kernels_per_layer
from infralens.topology import Cluster

BF16 = 2
"""Bytes of a bf16 (or fp16) activation, parameter or gradient element."""

ADAM_BYTES_PER_PARAM = 30
"""Adam step traffic per local parameter: read fp32 param, m, v, grad (16), write
param, m, v (12), write the bf16 copy (2)."""


def seconds(op: str, nbytes: int, cluster: Cluster, ranks: list[int]) -> float:
    """One collective of *nbytes* over *ranks*; nothing to send costs nothing."""
    return (
        predict(op, nbytes, cluster, ranks).seconds
        if len(ranks) > 1 and nbytes
        else 0.0
    )


def microbatch_compute(
    m: TransformerConfig,
    gpu_key: str,
    *,
    tokens: int,
    seq_len: int,
    tp: int,
    cp: int,
    pp: int,
    sequence_parallel: bool,
    recompute: str,
    stack: str,
    kernel: str,
    elementwise: str,
    sustained: Sustained,
    scaling: str = "none",
    loss: str = "fused",
) -> tuple[float, float]:
    """(all compute, attention alone) of one micro-batch of *tokens* on one GPU.

    The weight GEMMs run at :func:`gemm_rate`, attention at its kernel's rate (its
    own traffic included) times the *sustained* share, element-wise kernels
    (norms, activations, residuals) move :func:`infralens.elementwise.elementwise_bytes`
    at HBM bandwidth, fused or *elementwise* ``"eager"``, and so does the *loss*
    (:func:`infralens.elementwise.loss_bytes`, once per micro-batch, not per layer);
    when a layer's kernels, each launched *sustained* per-kernel seconds after the
    last, take longer to launch than to run, the launches set the time
    (:func:`launch_paced`, which :func:`stage_compute` and :func:`layer_compute`
    apply per layer). With an FP8
    *scaling* the blocks' GEMMs run at the FP8 rate and their quantisation kernels
    (:func:`infralens.fp8.quantize_bytes`) join the element-wise bytes.
    """
    shards = tp * cp * pp
    gemm = (
        gemm_flops_per_token(m, recompute=recompute, stack=stack) * tokens / shards
    )
    gemm_s = gemm / gemm_rate(sustained, gpu_key)
    quantize = 0
    if scaling != "none":  # block GEMMs in FP8, the output layer in BF16
        fp8 = (
            fp8_gemm_flops_per_token(m, recompute=recompute, stack=stack)
            * tokens
            / shards
        )
        gemm_s = (gemm - fp8) / gemm_rate(sustained, gpu_key) + fp8 / gemm_rate(
            sustained, gpu_key, fp8=True
        )
        quantize = quantize_bytes(
            m, seq_len=seq_len // cp, micro_batch_size=tokens // seq_len, scaling=scaling,
            tp=tp, stack=stack, recompute=recompute,
        )  # fmt: skip
    attn = attention_seconds(m, seq_len=seq_len, tokens=tokens / shards, gpu=gpu_key,
                             recompute=recompute, kernel=kernel)  # fmt: skip
    attn /= sustained.share(gpu_key)
    moved = elementwise_bytes(
        m, seq_len=seq_len // cp, micro_batch_size=tokens // seq_len, kernels=elementwise,
        recompute=recompute, tp=tp, sequence_parallel=sequence_parallel and tp > 1,
        materialized=kernel == "materialized",
    )  # fmt: skip
    # the loss's passes over this rank's s·b·V/t logits (its share of s under CP)
    head = loss_bytes(m, seq_len=seq_len // cp, micro_batch_size=tokens // seq_len,
                      tp=tp, loss=loss)  # fmt: skip
    elementwise_s = (
        ((moved + quantize) * m.layers + head) / pp / GPUS[gpu_key].hbm_bytes_per_s
    )
    return gemm_s + attn + elementwise_s, attn


def launch_paced(
    layer: float,
    attention: float,
    *,
    elementwise: str,
    recompute: str,
    sustained: Sustained,
    **_: Any,
) -> tuple[float, float]:
    """(compute, attention) of one layer and micro-batch once its launches are counted.

    layer = max(layer, kernels · kernel_seconds);  attention += the difference

    The CPU launches kernels ahead of the GPU; it sets the pace only when a layer's
    kernels run shorter than the launches that feed them. The GPU then idles between
    kernels, and that idle time, like attention's, is time a K/V exchange on its own
    stream can use, so it joins the attention window.
    """
    floor = kernels_per_layer(elementwise, recompute) * sustained.kernel_seconds
    idle = max(0.0, floor - layer)
    return layer + idle, attention + idle


def gemm_rate(sustained: Sustained, gpu_key: str, *, fp8: bool = False) -> float:
    """FLOP/s the GEMMs of a step sustain on one GPU.

    rate = (measured plan rate or matmul ceiling) · share of the GPU's board

    The ceiling is :func:`infralens.hardware.matmul_ceiling`'s; a *sustained* that
    carries a rate measured for the plan's own GEMM shapes uses it instead. No tile or
    wave factor is applied: timed without launch gaps on an H200, the GEMMs of every
    plan in ``tests/data/gpu/`` ran within a few per cent of a square GEMM's rate
    (:func:`infralens.layer_gemms.shape_efficiency` would have charged up to 10 %).
    """
    measured = sustained.fp8_flops if fp8 else sustained.bf16_flops
    if measured is None:
        measured = matmul_ceiling(gpu_key, "fp8" if fp8 else "bf16")
    return measured * sustained.share(gpu_key)


def stage_compute(
    m: TransformerConfig, split: Sequence[int], gpu_key: str, **price: Any
) -> tuple[tuple[float, ...], float]:
    """(compute of one micro-batch on each pipeline stage, attention of one layer).

    stage s = n_s · layer + head on the last stage

    *price* is :func:`microbatch_compute`'s keywords but ``pp``: it prices a model of
    n layers on one GPU of a stage (``pp=1``), n · layer + head, head the output layer
    and the final norm. A price of one layer and of two gives both parts, the layer
    paced by its launches (:func:`launch_paced`); with one stage and a layer that
    outruns its launches this is :func:`microbatch_compute`. The head carries the
    loss's passes over the logits too; the first stage's embedding lookup, a gather
    with no FLOPs, is not counted.
    """

    def of(layers: int) -> tuple[float, float]:
        return microbatch_compute(replace(m, layers=layers), gpu_key, pp=1, **price)

    one, attention = of(1)
    two = of(2)[0]
    raw, head = two - one, 2 * one - two
    layer, attention = launch_paced(raw, attention, **price)
    stages = [n * layer for n in split]
    # the last stage priced whole (exactly the model's price with one stage), plus the
    # time its layers wait on their launches
    stages[-1] = of(split[-1])[0] + split[-1] * (layer - raw) if split[-1] else head
    return tuple(stages), attention


def layer_compute(
    m: TransformerConfig, gpu_key: str, **price: Any
) -> tuple[float, float]:
    """(compute, attention) of one layer and micro-batch on one GPU: what
    :func:`stage_compute` adds for each layer of a stage."""
    one = microbatch_compute(replace(m, layers=1), gpu_key, pp=1, **price)
    two = microbatch_compute(replace(m, layers=2), gpu_key, pp=1, **price)
    return launch_paced(two[0] - one[0], one[1], **price)


@dataclass(frozen=True)
class Pace:
    """The pipeline stage that sets a step's pace and its terms, in seconds.

    compute and work (compute + TP + CP) are per micro-batch; bubble and p2p per step.
    """

    stage: int
    layers: int
    compute: float
    work: float
    bubble: float
    p2p: float


def busiest_stage(
    compute: Sequence[float],
    split: Sequence[int],
    *,
    per_layer_comm: float,
    one_send: float,
    schedule: str,
    chunks: int,
    microbatches: int,
) -> Pace:
    """The stage whose step is longest: m · work + bubble + its sends, work its compute plus
    *per_layer_comm* (TP and CP) for each of its layers.

    bubble = (p − 1)/(v·m) · m · work            (Narayanan et al. 2021)

    Sends wait on the critical path: under 1F1B a middle stage's two exchanges per
    micro-batch (``send_forward_recv_backward``, ``send_backward_recv_forward``), one on
    the first and last stages, whose other neighbour is the data or the loss
    (Megatron-Core schedules.py:2379-2450 at d98e8a6); interleaved with
    ``overlap_p2p_comm``, the stage's warm-up sends, w = 2·(p − rank − 1) + (v − 1)·p
    (:func:`infralens.pipeline_memory.in_flight`), the rest hidden behind compute.
    """
    p, m, v = len(split), microbatches, chunks
    bubble = float(bubble_fraction(stages=p, microbatches=m, chunks=v))
    paces = []
    for s, n in enumerate(split):
        work = compute[s] + n * per_layer_comm
        if p == 1:
            sends = 0
        elif schedule == "1f1b":
            sends = m * (1 if s in (0, p - 1) else 2)
        else:
            sends = min(in_flight(s, p, chunks=v) - 1, m * v)
        paces.append(
            Pace(s, n, compute[s], work, bubble * m * work, sends * one_send)
        )
    return max(paces, key=lambda x: (m * x.work + x.bubble + x.p2p, x.stage))


Pairs = tuple[tuple[float, float], ...]
"""(collective seconds, seconds of the GEMM it runs under) pairs."""


@dataclass(frozen=True)
class TPComm:
    """One layer's TP collectives in one micro-batch, in seconds: *forward*, blocking, per
    forward pass; *backward*, blocking; *under_gemm*, backward's (collective, GEMM it is
    launched under) pairs; *forward_under*, the forward's pairs when they overlap."""

    forward: float = 0.0
    backward: float = 0.0
    under_gemm: Pairs = ()
    forward_under: Pairs = ()


def column_gemms(
    m: TransformerConfig,
    gpu_key: str,
    *,
    tokens: int,
    tp: int,
    fp8: bool,
    sustained: Sustained,
) -> tuple[float, float]:
    """Seconds of one backward GEMM (dgrad or wgrad: each has the forward's FLOPs) of the
    two column-parallel linears of a layer, QKV and the MLP's first, on *tokens* tokens.

    QKV: 2·tokens·h·(a + 2·kv)·d / tp;  MLP in: 2·tokens·h·f·(2 if gated) / tp  FLOPs
    """
    h, d = m.hidden, m.head_dim
    rate = gemm_rate(sustained, gpu_key, fp8=fp8)
    qkv = 2 * tokens * h * (m.heads + 2 * m.kv_heads) * d / tp
    mlp = 2 * tokens * h * m.ffn_hidden * (2 if m.gated_mlp else 1) / tp
    return qkv / rate, mlp / rate


def row_gemms(
    m: TransformerConfig, column: tuple[float, float]
) -> tuple[float, float]:
    """Seconds of one GEMM of each row-parallel linear of a layer, the attention output
    projection and the MLP's second, from *column* (:func:`column_gemms`: QKV's and the
    MLP's first on the same tokens, at the same rate), by their FLOPs' ratio.

    projection = QKV · a / (a + 2·kv);  MLP out = MLP in / (2 if gated else 1)
    """
    qkv, mlp = column
    proj = qkv * m.heads / (m.heads + 2 * m.kv_heads)
    return proj, mlp / (2 if m.gated_mlp else 1)


def tensor_parallel(
    act: int,
    cluster: Cluster,
    group: list[int],
    *,
    sequence_parallel: bool,
    fp8_gathers: bool = False,
    fp8_forward: bool = False,
    gemms: tuple[float, float] | None = None,
    row: tuple[float, float] | None = None,
    async_tp: bool = False,
) -> TPComm:
    """Per layer and micro-batch: with sequence parallelism two all-gathers and two
    reduce-scatters of the *act*-byte activation each pass, two all-reduces without.

    Forward they block. Backward as Megatron-Core and Transformer Engine run it (*gemms*,
    from :func:`column_gemms`): each row-parallel linear all-gathers its output gradient
    and waits; each column-parallel one re-gathers its saved input under its dgrad GEMM
    and reduce-scatters the input gradient under its wgrad GEMM (Megatron-LM d98e8a6
    ``tensor_parallel/layers.py:667-711``; Transformer Engine d0067d0
    ``module/linear.py:979-998, 1122-1130``, ``layernorm_linear.py:773-792``); without
    sequence parallelism the dgrad all-reduce runs under the wgrad GEMM. Without *gemms*
    (PyTorch's DTensor tensor parallelism, whose collectives wait where they are issued)
    backward's two all-gathers and two reduce-scatters block.

    With *fp8_gathers* every all-gather moves FP8: Transformer Engine quantises the norm
    output before the forward gather (``layernorm_linear.py:283-312``), the saved input
    it re-gathers and the output gradient it gathers backward
    (``module/base.py:1688-1752``); the reduce-scatters move the bf16 gradients.
    With *fp8_forward* only the forward all-gathers move FP8: torchao's Float8
    tensor parallelism, which torchtitan applies with Float8
    (``parallelize_llama.py:148-167`` at 9dec370), casts each block input to
    FP8 before it gathers it (``float8_tensor_parallel.py:196-217`` at torchao
    eab345c); the gradients that backward gathers and scatters stay bf16.

    With *row* (from :func:`row_gemms`: Megatron-Core's ``tp_comm_overlap``, Transformer
    Engine's userbuffers, which needs sequence parallelism) no TP collective blocks:
    forward, each all-gather runs under its column-parallel GEMM and each reduce-scatter
    under its row-parallel one, chunk by chunk; backward, each row-parallel linear's
    output-gradient all-gather runs under its dgrad GEMM (Megatron-LM d98e8a6
    ``core/extensions/transformer_engine.py:1188-1205``, the row-parallel linear's
    ``ub_overlap_ag`` and ``ub_overlap_rs``; ``1455-1480``, the column-parallel one's
    ``ub_overlap_ag`` and bulk dgrad and wgrad). Each then waits only for what outlasts
    its GEMM.

    With *row* and *async_tp* (PyTorch's asynchronous TP: Inductor's
    ``micro_pipeline_tp`` pass, which torchtitan turns on with
    ``enable_async_tensor_parallel``, ``parallelize_llama.py:201-205`` at
    9dec370, on PyTorch 1963fc8 in its December 2024 benchmarks) each
    all-gather and its matmul, and each matmul and its reduce-scatter, run as
    one fused, micro-pipelined operator, in forward and backward graphs alike
    (it is one of the post-grad passes Inductor runs on every graph it
    compiles). Autograd keeps the gathered input, so backward re-gathers
    nothing: each column-parallel linear's reduce-scatter runs under its dgrad
    GEMM, each row-parallel one's output-gradient all-gather under its own;
    the forward gathers move FP8 under *fp8_forward*.
    """
    # [start:tp-collectives]
    if not sequence_parallel:
        ar = seconds("all_reduce", act, cluster, group)
        if gemms is None:
            return TPComm(2 * ar, 2 * ar)
        return TPComm(2 * ar, 0.0, ((ar, gemms[0]), (ar, gemms[1])))
    rs = seconds("reduce_scatter", act, cluster, group)
    ag = seconds("all_gather", act // 2 if fp8_gathers else act, cluster, group)
    ag8 = seconds("all_gather", act // 2, cluster, group) if fp8_forward else ag
    if gemms is None:
        return TPComm(2 * (ag8 + rs), 2 * (ag + rs))
    qkv, mlp = gemms  # re-gather under dgrad, reduce-scatter under wgrad
    column: Pairs = ((ag, qkv), (rs, qkv), (ag, mlp), (rs, mlp))
    if row is None:
        return TPComm(2 * (ag + rs), 2 * ag, column)
    proj, out = row  # each collective beside its own GEMM
    forward = ((ag8, qkv), (rs, proj), (ag8, mlp), (rs, out))
    if async_tp:  # autograd kept the gathered input: no re-gather
        column = ((rs, qkv), (rs, mlp))
    return TPComm(0.0, 0.0, (*column, (ag, proj), (ag, out)), forward)
    # [end:tp-collectives]


def context_parallel(
    kv: int, cluster: Cluster, pair: list[int], *, cp: int
) -> float:
    """Per layer and micro-batch: one pass of the ring, cp − 1 exchanges of this rank's
    *kv* bytes (forward runs one pass, backward two: K and V, and their gradients)."""
    return (cp - 1) * seconds("send_recv", kv, cluster, pair)


def pipeline_p2p(
    act: int,
    cluster: Cluster,
    pair: list[int],
    tp_group: list[int],
    *,
    sends: int,
    sequence_parallel: bool,
    scatter_gather: bool,
) -> float:
    """*sends* activation sends between neighbouring stages.

    Under sequence parallelism each TP rank already holds 1/tp of the
    activation and sends only that. Without it, 2021 Megatron-LM's
    ``scatter_gather_tensors_in_pipeline`` sent 1/tp per rank and all-gathered
    the rest over the receiving stage's TP group; otherwise every TP rank sends
    the whole activation.
    """
    tp = len(tp_group)
    split = sequence_parallel or scatter_gather
    one = seconds("send_recv", act // (tp if split else 1), cluster, pair)
    if scatter_gather and not sequence_parallel:
        one += seconds("all_gather", act, cluster, tp_group)
    return sends * one


def amax_reduction(
    cluster: Cluster, group: list[int], *, chunk_layers: int, chunks: int
) -> float:
    """Delayed FP8 scaling's blocking amax all-reduces of one step: one when each chunk's
    forward leaves ``fp8_autocast`` and one in its backward, over *group* (TP × DP × CP)."""
    forward = seconds("all_reduce", amax_bytes(chunk_layers), cluster, group)
    backward = seconds(
        "all_reduce", amax_bytes(chunk_layers, backward=True), cluster, group
    )
    return chunks * (forward + backward)


def optimizer(
    local_params: float,
    gpu: GPU,
    recipe: Recipe,
    *,
    shards: int,
    stack: str,
    microbatches: int,
) -> float:
    """Adam's step on this GPU at HBM bandwidth: :data:`ADAM_BYTES_PER_PARAM` for each
    parameter it updates, 1/*shards* of its *local_params* (dp·cp under ZeRO, else 1);
    an FP8 recipe adds the block weights' casts (:func:`infralens.fp8.weight_quantize_bytes`)."""
    moved = local_params / shards * ADAM_BYTES_PER_PARAM
    if recipe.precision == "fp8":  # and the block weights' casts to FP8
        moved += weight_quantize_bytes(
            int(local_params), scaling=recipe.scaling, stack=stack,
            fp8_params=recipe.gather_bytes == 1, microbatches=microbatches,
        )  # fmt: skip
    return moved / gpu.hbm_bytes_per_s
