"""The weight GEMMs one GPU runs for a layer under a plan, and how well their shapes fill it.

A layer's four weight matmuls (QKV, the attention output projection, the
MLP's first and second matmul) each run as one GEMM forward and two backward:
the input gradient (*dgrad*) and the weight gradient (*wgrad*). TP splits the
weight's output columns (QKV, fc1) or its input rows (projection, fc2); CP
splits the tokens. A small or skinny GEMM fills the GPU's SMs poorly:
:func:`infralens.gemm.quantisation` gives the share of the tile slots that
compute useful output, and :func:`shape_efficiency` weighs it over a layer.

For a GEMM written m × n × k (output m × n, inner dimension k)::

    forward  x·Wᵀ  : tokens × out × in
    dgrad    dy·W  : tokens × in  × out
    wgrad    dyᵀ·x : out    × in  × tokens

>>> from infralens.model import PRESETS
>>> [g.name for g in layer_gemms(PRESETS["llama3-8b"], tokens=8192, tp=1, cp=1)]
['qkv', 'proj', 'fc1', 'fc2']
>>> qkv = layer_gemms(PRESETS["llama3-8b"], tokens=8192, tp=8, cp=1)[0]
>>> qkv.m, qkv.n, qkv.k                          # 6,144 output columns over 8 ranks
(8192, 768, 4096)
>>> round(float(shape_efficiency(PRESETS["llama3-8b"], tokens=8192, tp=1, cp=1)), 3)
0.979
>>> layer_gemms(PRESETS["llama3-8b"], tokens=8192, tp=0, cp=1)
Traceback (most recent call last):
...
ValueError: tp must be >= 1, got 0
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from infralens._typecheck import check_fields, typed
from infralens._validate import check_choice, positive_int
from infralens.gemm import quantisation
from infralens.model import TransformerConfig

__all__ = ["SMS", "TILES", "Gemm", "layer_gemms", "passes", "shape_efficiency"]

SMS: dict[str, int] = {
    # Streaming multiprocessors enabled on each preset's board: NVIDIA A100 Tensor Core
    # GPU Architecture whitepaper (108 on A100 SXM4); H100 Tensor Core GPU Architecture
    # whitepaper (132 on H100 SXM5; the H200 and the 96 GB HBM2e board are the same die
    # and SM count); Blackwell architecture technical brief (148 on B200).
    "a100-sxm4-80gb": 108,
    "h100-sxm5-80gb": 132,
    "h100-hbm2e-96gb": 132,
    "h200-sxm-141gb": 132,
    "b200-gb200": 148,
}
"""SMs per GPU preset: the wave size of :func:`infralens.gemm.quantisation`."""

TILES = ((128, 256), (256, 128), (128, 128))
"""Output tiles a GEMM may run with; the library's heuristic picks per shape, and the
model takes the one that fills the GPU best (CUTLASS's Hopper and Ampere BF16 kernels
offer these among others)."""


@dataclass(frozen=True)
class Gemm:
    """One GEMM of *m* × *n* output and inner dimension *k*: 2·m·n·k FLOPs."""

    name: str
    m: int
    n: int
    k: int

    def __post_init__(self) -> None:
        check_fields(self)

    @property
    def flops(self) -> int:
        """2·m·n·k."""
        return 2 * self.m * self.n * self.k


@typed
def layer_gemms(
    model: TransformerConfig, *, tokens: int, tp: int, cp: int
) -> tuple[Gemm, ...]:
    """The forward weight GEMMs of one layer on one GPU for a micro-batch of *tokens*.

    m = ⌈tokens / cp⌉; QKV and fc1 split their output columns over *tp*, the
    projection and fc2 their inner dimension. A width *tp* does not divide is
    rounded up: the widest shard sets the time. Raises ``ValueError`` for a size
    below 1.
    """
    if not isinstance(model, TransformerConfig):
        raise TypeError(
            f"model must be a TransformerConfig, got {type(model).__name__}"
        )
    t, tp, cp = (
        positive_int("tokens", tokens),
        positive_int("tp", tp),
        positive_int("cp", cp),
    )
    h, q = model.hidden, model.heads * model.head_dim
    kv, f = model.kv_heads * model.head_dim, model.ffn_hidden
    m, up = -(-t // cp), -(-(2 if model.gated_mlp else 1) * f // tp)
    return (
        Gemm("qkv", m, -(-(q + 2 * kv) // tp), h),
        Gemm("proj", m, h, -(-q // tp)),
        Gemm("fc1", m, up, h),
        Gemm("fc2", m, h, -(-f // tp)),
    )


@typed
def passes(gemm: Gemm) -> tuple[Gemm, Gemm, Gemm]:
    """(forward, dgrad, wgrad) of a forward *gemm*: the same FLOPs in three shapes.

    >>> [(g.m, g.n, g.k) for g in passes(Gemm("fc2", 8192, 4096, 1792))]
    [(8192, 4096, 1792), (8192, 1792, 4096), (4096, 1792, 8192)]
    """
    g = gemm
    return (
        g,
        Gemm(g.name + ".dgrad", g.m, g.k, g.n),
        Gemm(g.name + ".wgrad", g.n, g.k, g.m),
    )


@typed
def shape_efficiency(
    model: TransformerConfig,
    *,
    tokens: int,
    tp: int,
    cp: int,
    gpu: str = "h100-sxm5-80gb",
) -> Fraction:
    """The FLOP-weighted share of tile slots doing useful work over a layer's GEMMs.

    efficiency = Σ flops / Σ (flops / q(g)),  q = tile × wave efficiency of each pass

    Forward and both backward passes of each weight GEMM count, on *gpu*'s
    :data:`SMS`, each with the tile of :data:`TILES` that fills the GPU best.
    The measured matmul ceiling was taken on shapes that fill the GPU, so this
    is the share of that ceiling a layer's own shapes can reach. Raises
    ``ValueError`` for a GPU without an SM count.

    >>> from infralens.model import PRESETS
    >>> m = PRESETS["llama3-8b"]
    >>> [round(float(shape_efficiency(m, tokens=2048, tp=t, cp=1)), 3) for t in (1, 8)]
    [0.973, 0.879]
    >>> shape_efficiency(m, tokens=2048, tp=1, cp=1, gpu="v100")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: gpu must be one of ...; got 'v100'
    """
    sms = SMS[check_choice("gpu", gpu, tuple(SMS))]
    work, slots = 0, Fraction(0)
    for g in layer_gemms(model, tokens=tokens, tp=tp, cp=cp):
        for p in passes(g):
            work += p.flops
            best = max(quantisation(p.m, p.n, tile_m=a, tile_n=b, sms=sms).efficiency
                       for a, b in TILES)  # fmt: skip
            slots += Fraction(p.flops) / best
    return work / slots
