"""The one-page cheat sheet: every formula the labs teach, each with a number the package computes.

:func:`cheatsheet_markdown` returns the MyST text that conf.py writes to
``handbook/_generated/cheatsheet.md`` at build time, so the sheet cannot
drift from the code; ``tests/test_cheatsheet.py`` checks it against the same
calls.
"""

from __future__ import annotations

from fractions import Fraction

from infralens.batch import global_batch_size
from infralens.collectives import bus_bandwidth_factor
from infralens.compute import mfu, model_flops_per_token
from infralens.hardware import GPUS
from infralens.memory import activation_bytes_per_layer
from infralens.model import PRESETS
from infralens.pipeline import bubble_fraction
from infralens.precision import recipe_bytes
from infralens.tensor_parallel_comm import layer_bytes_sent
from infralens.zero import STAGES, model_state_bytes

PSI = 7_500_000_000  # the ZeRO paper's worked example
N_D = 64


def _frac(x: Fraction) -> str:
    return str(x.numerator) if x.denominator == 1 else f"{x.numerator}/{x.denominator}"


def _zero() -> list[str]:
    formulas = (
        "$(2 + 2 + K)\\Psi$",
        "$(2 + 2)\\Psi + K\\Psi/N_d$",
        "$2\\Psi + (2 + K)\\Psi/N_d$",
        "$(2 + 2 + K)\\Psi/N_d$",
    )
    rows = [
        "| ZeRO stage | Bytes per GPU | 7.5B params, $N_d = 64$ |",
        "| --- | --- | --- |",
    ]
    for stage, formula in zip(STAGES, formulas, strict=True):
        gb = model_state_bytes(PSI, dp_size=N_D, stage=stage) / 1e9
        rows.append(f"| {stage} | {formula} | {gb:.2f} GB |")
    recipes = ", ".join(
        f"{name} {_frac(recipe_bytes(name))}" for name in ("zero-paper", "megatron-bf16", "ddp")
    )
    return [
        "**Model states** (mixed-precision Adam, $K = 12$ bytes of optimizer state "
        "per parameter; GB = $10^9$ bytes):",
        "",
        *rows,
        "",
        f"Bytes per parameter by recipe, unsharded: {recipes}.",
    ]


def _collectives() -> list[str]:
    n = 8
    rows = ["| Collective | busbw / algbw | $n = 8$ |", "| --- | --- | --- |"]
    shapes = {
        "all_reduce": "$2(n-1)/n$",
        "reduce_scatter": "$(n-1)/n$",
        "all_gather": "$(n-1)/n$",
        "all_to_all": "$(n-1)/n$",
        "broadcast": "$1$",
    }
    for op, shape in shapes.items():
        rows.append(f"| {op} | {shape} | {_frac(bus_bandwidth_factor(op, n))} |")
    return ["**Collectives** (nccl-tests' bus-bandwidth factors):", "", *rows]


def _pipeline() -> list[str]:
    rows = ["| Schedule | Bubble (of ideal compute) | $p = 8$, $m = 32$ |", "| --- | --- | --- |"]
    one = bubble_fraction(stages=8, microbatches=32)
    two = bubble_fraction(stages=8, microbatches=32, chunks=2)
    rows.append(f"| GPipe, 1F1B | $(p-1)/m$ | {_frac(one)} |")
    rows.append(f"| interleaved, $v$ chunks | $(p-1)/(v\\,m)$ | {_frac(two)} ($v = 2$) |")
    return ["**Pipeline bubble**:", "", *rows]


def _tensor_parallel() -> list[str]:
    shape = {"seq_len": 4096, "micro_batch_size": 1, "hidden": 8192}
    sent = {t: layer_bytes_sent(**shape, tp=t, sequence_parallel=True) / 1e6 for t in (2, 4, 8)}
    per_t = ", ".join(f"$t = {t}$: {mb:.1f} MB" for t, mb in sent.items())
    return [
        "**Tensor parallelism**: bytes each rank sends per layer, forward and backward, "
        "ring algorithms, with or without sequence parallelism: "
        "$8\\,b\\,s\\,h\\,(t-1)/t$ elements. For $s = 4096$, $h = 8192$, bf16: "
        f"{per_t}. Halving $t$ cuts it by the $(t-1)/t$ factor only.",
    ]


def _activations() -> list[str]:
    kw = {"seq_len": 2048, "micro_batch_size": 1, "hidden": 12288, "heads": 96, "tp": 8}
    none = activation_bytes_per_layer(**kw) / 2**20
    sp = activation_bytes_per_layer(**kw, sequence_parallel=True) / 2**20
    sel = activation_bytes_per_layer(**kw, sequence_parallel=True, recompute="selective") / 2**20
    return [
        "**Activations** per layer per GPU (Korthikanti et al., bf16, "
        "scores materialised): $s\\,b\\,h\\,(10 + 24/t + 5\\,a\\,s/(h\\,t))$ bytes; "
        "with sequence parallelism $s\\,b\\,h\\,(34/t + 5\\,a\\,s/(h\\,t))$; selective "
        "recomputation (or FlashAttention, which never stores the scores) drops "
        "the $5as/(ht)$ term. GPT-3 175B layer, $s = 2048$, $t = 8$: "
        f"{none:.0f} MiB, {sp:.0f} MiB with SP, {sel:.0f} MiB with SP and selective.",
    ]


def _mfu() -> list[str]:
    model = PRESETS["llama3-70b"]
    per_token = model_flops_per_token(model, seq_len=8192)
    peak = GPUS["h100-sxm5-80gb"].bf16_flops
    tokens_per_s = 800.0  # an illustrative rate, not a measurement
    util = mfu(per_token * tokens_per_s, peak)
    return [
        "**MFU** (PaLM, Appendix B): model FLOPs per token $6N + 12\\,L\\,h\\,s$, times "
        "tokens per second per GPU, over the **dense** peak. Llama 3 70B at "
        f"$s = 8192$: {per_token / 1e12:.3f} TFLOP per token; at an illustrative "
        f"{tokens_per_s:.0f} tokens/s per H100 ({peak / 1e12:.0f} TFLOP/s dense) that is MFU "
        f"{util:.2f}. Recomputation raises HFU, never MFU.",
    ]


def _batch() -> list[str]:
    g = global_batch_size(micro_batch_size=2, grad_accum_steps=8, dp_size=64)
    return [
        "**Global batch** $= b \\times$ accumulation steps $\\times d$: "
        f"$2 \\times 8 \\times 64 = {g}$ sequences.",
    ]


RULES = [
    "**Rules of thumb.**",
    "",
    "- TP's collectives run inside every layer: keep the TP group inside one NVLink domain.",
    "- Pipeline stages exchange one activation per micro-batch: they can cross nodes.",
    "- Data parallelism communicates once per step, overlapped with backward: outermost.",
    "- Cross-node bus bandwidth on a DGX is about NICs per node times one NIC's rate, "
    "not one NIC's.",
    "- A step is bound by its largest term; shrink that one first.",
]


def cheatsheet_markdown() -> str:
    """The sheet's MyST text, every number computed by the package."""
    blocks = [
        _zero(),
        _collectives(),
        _pipeline(),
        _tensor_parallel(),
        _activations(),
        _mfu(),
        _batch(),
        RULES,
    ]
    return "\n\n".join("\n".join(block) for block in blocks) + "\n"
