"""The one-page cheat sheet: every formula the labs teach, each with a number the package computes.

:func:`cheatsheet_markdown` returns the MyST text that conf.py writes to
``handbook/_generated/cheatsheet.md`` at build time, so the sheet cannot
drift from the code; ``tests/test_cheatsheet.py`` checks it against the same
calls.
"""

from __future__ import annotations

from fractions import Fraction

from infralens.batch import global_batch_size
from infralens.batch_ramp import batch_tradeoff
from infralens.checkpoint_writes import write_seconds
from infralens.collectives import bus_bandwidth_factor
from infralens.compute import mfu, model_flops_per_token
from infralens.compute_budget import chinchilla_budget, gpu_hours, training_flops
from infralens.fp8 import block_scale_overhead
from infralens.gemm import arithmetic_intensity, quantisation, ridge_point
from infralens.hardware import GPUS, MAMF_BF16
from infralens.memory import activation_bytes_per_layer
from infralens.model import PRESETS
from infralens.offload import cpu_adam_break_even_tokens
from infralens.pipeline import bubble_fraction
from infralens.precision import recipe_bytes
from infralens.reduction_precision import relative_error
from infralens.ring_attention import hybrid_bytes
from infralens.roofline import axis_roofline, dp_tokens_per_gpu
from infralens.tensor_parallel_comm import layer_bytes_sent
from infralens.topology import Cluster
from infralens.vocab_parallel import cross_entropy_traffic, padded_vocab
from infralens.zero import STAGES, accumulation_bytes_per_rank, model_state_bytes

PSI = 7_500_000_000  # the ZeRO paper's worked example
N_D = 64


def _frac(x: Fraction) -> str:
    return str(x.numerator) if x.denominator == 1 else f"{x.numerator}/{x.denominator}"


def _rows() -> list[tuple[str, str, str]]:
    """(quantity, formula, worked number) for every line of the sheet."""
    rows: list[tuple[str, str, str]] = []
    formulas = (
        "$(2 + 2 + K)\\Psi$",
        "$4\\Psi + K\\Psi/N_d$",
        "$2\\Psi + (2 + K)\\Psi/N_d$",
        "$(4 + K)\\Psi/N_d$",
    )
    for stage, formula in zip(STAGES, formulas, strict=True):
        gb = model_state_bytes(PSI, dp_size=N_D, stage=stage) / 1e9
        rows.append((f"Model states, ZeRO-{stage}", formula, f"{gb:.2f} GB (7.5B, $N_d = 64$)"))
    recipes = ", ".join(
        f"{name} {_frac(recipe_bytes(name))}" for name in ("zero-paper", "megatron-bf16", "ddp")
    )
    rows.append(("Bytes per parameter, by recipe", "unsharded buffers", recipes))
    ar, rs = bus_bandwidth_factor("all_reduce", 8), bus_bandwidth_factor("reduce_scatter", 8)
    rows.append(("busbw / algbw, all-reduce", "$2(n-1)/n$", f"{_frac(ar)} ($n = 8$)"))
    rows.append(("busbw / algbw, reduce-scatter, all-gather, all-to-all", "$(n-1)/n$", _frac(rs)))
    one = bubble_fraction(stages=8, microbatches=32)
    two = bubble_fraction(stages=8, microbatches=32, chunks=2)
    rows.append(("Bubble, GPipe and 1F1B", "$(p-1)/m$", f"{_frac(one)} ($p = 8$, $m = 32$)"))
    rows.append(("Bubble, interleaved", "$(p-1)/(v\\,m)$", f"{_frac(two)} ($v = 2$)"))
    shape = {"seq_len": 4096, "micro_batch_size": 1, "hidden": 8192, "sequence_parallel": True}
    t8, t4 = (layer_bytes_sent(**shape, tp=t) / 1e6 for t in (8, 4))
    rows.append(
        (
            "TP bytes sent per layer, forward and backward",
            "$8\\,b\\,s\\,h\\,(t-1)/t$ elements",
            f"{t8:.1f} MB at $t = 8$, {t4:.1f} MB at $t = 4$ ($s = 4096$, $h = 8192$, bf16)",
        )
    )
    kw = {"seq_len": 2048, "micro_batch_size": 1, "hidden": 12288, "heads": 96, "tp": 8}
    none = activation_bytes_per_layer(**kw) / 2**20
    sp = activation_bytes_per_layer(**kw, sequence_parallel=True) / 2**20
    sel = activation_bytes_per_layer(**kw, sequence_parallel=True, recompute="selective") / 2**20
    rows.append(
        (
            "Activations per layer, scores stored",
            "$s\\,b\\,h\\,(10 + 24/t + 5as/(ht))$ bytes",
            f"{none:.0f} MiB (GPT-3 175B, $s = 2048$, $t = 8$)",
        )
    )
    rows.append(("with sequence parallelism", "$s\\,b\\,h\\,(34/t + 5as/(ht))$", f"{sp:.0f} MiB"))
    rows.append(("with SP and selective recomputation", "$34\\,s\\,b\\,h/t$", f"{sel:.0f} MiB"))
    model = PRESETS["llama3-70b"]
    per_token = model_flops_per_token(model, seq_len=8192)
    peak = GPUS["h100-sxm5-80gb"].bf16_flops
    tokens_per_s = 800.0  # an illustrative rate, not a measurement
    util = mfu(per_token * tokens_per_s, peak)
    rows.append(
        (
            "Model FLOPs per token",
            "$6N + 12\\,L\\,h\\,s$",
            f"{per_token / 1e12:.3f} TFLOP (Llama 3 70B, $s = 8192$)",
        )
    )
    rows.append(
        (
            "MFU",
            "FLOPs per token × tokens/s ÷ dense peak",
            f"{util:.2f} at an illustrative {tokens_per_s:.0f} tokens/s per H100 "
            f"({peak / 1e12:.1f} TFLOP/s dense)",
        )
    )
    g = global_batch_size(micro_batch_size=2, grad_accum_steps=8, dp_size=64)
    rows.append(("Global batch", "$b \\times$ accumulation $\\times d$", f"{g} ($2, 8, 64$)"))
    c = training_flops(70e9, 1.4e12)
    rows.append(("Training compute", "$C = 6ND$", f"{c:.2e} FLOPs (70B on 1.4T tokens)"))
    _, d = chinchilla_budget(10e9)
    rows.append(
        (
            "Compute-optimal tokens (Chinchilla, Approach 1)",
            "$N_{opt} \\propto C^{0.50}$, about 20 tokens per parameter",
            f"{d / 1e9:.1f}B tokens for 10B parameters",
        )
    )
    hours = gpu_hours(c, peak_flops=peak, mfu=0.40)
    rows.append(
        (
            "GPU-hours",
            "$C$ ÷ (dense peak × MFU) ÷ 3600",
            f"{hours / 1e6:.2f} M (above, H100, MFU 0.40)",
        )
    )
    steps, data = batch_tradeoff(batch=2, critical=1)
    rows.append(
        (
            "Critical batch: steps and data",
            "$S/S_{min} = 1 + B_{crit}/B$, $E/E_{min} = 1 + B/B_{crit}$",
            f"{_frac(steps)} and {_frac(data)} at $B = 2B_{{crit}}$",
        )
    )
    t = write_seconds(
        [980 * 10**9 // 1024] * 1024, gpus_per_node=8, node_gb_per_s=50, storage_gb_per_s=200
    )
    rows.append(
        (
            "Checkpoint write time",
            "max(node bytes ÷ node bandwidth, total ÷ storage bandwidth)",
            f"{t:.1f} s (980 GB from 128 nodes, 200 GB/s storage)",
        )
    )
    rows += _rows_added()
    return rows


def _rows_added() -> list[tuple[str, str, str]]:
    """GEMM roofline, vocabulary parallelism, reduction precision, ZeRO with pipelines,
    the per-GPU data-parallel threshold, hybrid CP, MoE balancing, offload's host Adam
    and block scales."""
    rows: list[tuple[str, str, str]] = []
    ridge = ridge_point(989_500 * 10**9, 3_350 * 10**9)
    ai = arithmetic_intensity(8192, 8192, 8192)
    rows.append(
        (
            "GEMM arithmetic intensity against the ridge point",
            "$2mnk / (2(mk + kn + mn))$ vs peak / HBM bandwidth",
            f"{float(ai):.0f} for $8192^3$; H100 ridge {float(ridge):.0f} FLOP/byte",
        )
    )
    q = quantisation(4096, 4097)
    rows.append(
        (
            "Tile and wave quantisation",
            "$\\lceil m/128\\rceil\\lceil n/256\\rceil$ tiles in $\\lceil$tiles/132$\\rceil$ waves",
            f"{float(q.efficiency):.3f} of peak for $4096 \\times 4097$ ({q.tiles} tiles)",
        )
    )
    cluster = Cluster.from_node_shape("8_nodes_x_8_gpus", "dgx-h100")
    t = dp_tokens_per_gpu(axis_roofline("llama3-70b", cluster)[2].machine_flops_per_byte)
    rows.append(
        (
            "Tokens per GPU for DP to hide (nothing overlapped)",
            "ratio $\\cdot 8/6 \\cdot (N/N_{active}) / M$",
            f"{t:.0f} at $M = 1$, {t / 128:.0f} at $M = 128$ (DGX H100 network)",
        )
    )
    v = padded_vocab(128256, tp=8)
    traffic = cross_entropy_traffic(tokens=8192, vocab=v, tp=8)
    rows.append(
        ("Vocabulary padding", "$\\lceil V/(128t)\\rceil \\cdot 128t$", f"{v} (128,256 at $t = 8$)")
    )
    rows.append(
        (
            "Vocabulary-parallel loss",
            "3 all-reduces of $b s$ fp32 (max, target, sum of exp)",
            f"{traffic.three_all_reduces / 1e3:.0f} kB vs {traffic.gather_logits / 1e9:.2f} GB "
            "to gather logits ($t = 8$, 8K tokens)",
        )
    )
    grads = [1 + (i % 7) / 64 for i in range(512)]
    rows.append(
        (
            "bf16 ring reduction error",
            "partial sums rounded each hop",
            f"{relative_error(grads, 'bf16'):+.1%} at 512 ranks; "
            f"{relative_error(grads, 'fp32-accumulate'):+.0e} with fp32 accumulation",
        )
    )
    one = accumulation_bytes_per_rank(10**9, dp_size=8, stage=1, microbatches=16)
    two, three = (
        accumulation_bytes_per_rank(10**9, dp_size=8, stage=s, microbatches=16) / one
        for s in (2, 3)
    )
    rows.append(
        (
            "ZeRO traffic with $m$ micro-batches, vs stage 1",
            "stage 2: $(m + 1)/2$; stage 3: $3m/2$",
            f"{_frac(two)} and {_frac(three)} at $m = 16$",
        )
    )
    shape = {"heads": 128, "kv_heads": 8, "head_dim": 128}
    hybrid = hybrid_bytes(131072, ulysses=8, ring=2, **shape)
    ring = hybrid_bytes(131072, ulysses=1, ring=16, **shape)
    rows.append(
        (
            "Hybrid CP ($u$ Ulysses x $r$ ring), K/V across nodes",
            "$(r-1)$ blocks of $s/r$ tokens, kv\\_heads$/u$",
            f"{hybrid.ring / 2**20:.0f} MiB per layer ($u = 8$, $r = 2$, 128K) vs "
            f"{ring.ring / 2**20:.0f} MiB ring",
        )
    )
    rows.append(
        (
            "MoE auxiliary-loss gradient",
            "$\\partial L/\\partial z_{tj} = (\\alpha N/T)\\,p_{tj}(f_j - \\sum_i f_i p_{ti})$",
            "zero at balance; the bias of aux-loss-free balancing moves by $\\pm\\gamma$",
        )
    )
    hosts = [
        cpu_adam_break_even_tokens(
            PRESETS["llama3-8b"].num_params(),
            dp_size=d,
            ranks_per_host=8,
            flops_per_s=MAMF_BF16["h100-sxm5-80gb"],
        )
        for d in (8, 64)
    ]
    rows.append(
        (
            "Host Adam under optimizer offload",
            "ranks per host $\\times \\Psi/N_d$ ÷ CPU-Adam rate, vs $6\\Psi T$ ÷ GPU rate",
            f"covered from {hosts[0]:,} tokens per GPU on 1 host, {hosts[1]:,} on 8 "
            "(Llama 3 8B on H100s)",
        )
    )
    rows.append(
        (
            "Block-scale overhead",
            "scale bytes / (block x element bytes)",
            f"NVFP4 {_frac(block_scale_overhead('nvfp4'))}, MXFP8 "
            f"{_frac(block_scale_overhead('mxfp8'))}",
        )
    )
    return rows


RULES = [
    "**Rules of thumb.**",
    "",
    "- TP's collectives run inside every layer: keep the TP group inside one NVLink domain.",
    "- Pipeline stages exchange one activation per micro-batch: they can cross nodes.",
    "- Data parallelism communicates once per step, overlapped with backward: outermost.",
    "- Cross-node bus bandwidth on a DGX is about NICs per node times one NIC's rate, "
    "not one NIC's.",
    "- A step is bound by its largest term; shrink that one first.",
    "- A pending row remap does not take a GPU out; a remapping failure (Xid 64) does.",
    "- A NaN's origin is in per-rank, per-layer statistics taken before the all-reduce.",
    "- `Using network Socket` in NCCL's log means no RDMA: fix it before tuning.",
    "- With pipeline parallelism, shard the optimizer state (ZeRO-1), not gradients or "
    "parameters: stages 2 and 3 pay per micro-batch.",
]


def cheatsheet_markdown() -> str:
    """The sheet's MyST text, every number computed by the package."""
    lines = [
        "$K = 12$ bytes of optimizer state per parameter (mixed-precision Adam); "
        "GB = $10^9$ bytes, MiB = $2^{20}$; bf16 activations.",
        "",
        "| Quantity | Formula | Worked number |",
        "| --- | --- | --- |",
    ]
    lines += [f"| {q} | {f} | {n} |" for q, f, n in _rows()]
    return "\n".join([*lines, "", *RULES]) + "\n"
