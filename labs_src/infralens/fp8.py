"""FP8 training: which GEMMs run in FP8, what quantising costs, and what it keeps in memory.

An FP8 recipe runs every transformer block's four weight GEMMs (QKV, output
projection, the MLP's two) in FP8, forward and backward; attention, the
element-wise kernels and the output layer stay in BF16 (Megatron-Core builds
the output layer outside Transformer Engine's ``fp8_autocast``, torchtitan's
float8 conversion skips the module named ``output``). Four costs follow:

- **GEMMs** at the measured FP8 matmul ceiling
  (:func:`infralens.hardware.matmul_ceiling`), the rest at the BF16 one;
- **quantisation kernels** (:func:`quantize_bytes`): each FP8 operand is read
  in BF16 and written as FP8 row-wise and column-wise (the transpose the
  backward GEMMs need), plus a read for the amax of *current* scaling;
- **amax reduction** (:func:`amax_bytes`): delayed scaling all-reduces every
  module's newest amax (MAX) over Megatron-Core's TP × DP × CP group when each
  ``fp8_autocast`` region ends, forward and backward (blocking);
- **memory** (:func:`state_bytes`, :func:`saved_activation_change`): the amax
  history, MXFP8's one E8M0 scale per 32 elements, and Transformer Engine's
  habit of saving a linear's input in FP8, column-wise only.

>>> from infralens.model import PRESETS
>>> m = PRESETS["llama3-8b"]
>>> fp8 = fp8_gemm_flops_per_token(m, recompute="none")
>>> round(fp8 / gemm_flops_per_token(m, recompute="none"), 3)    # the output layer's 7 %
0.93
>>> # one layer's quantisation traffic, in MB
>>> quantize_bytes(m, seq_len=8192, micro_batch_size=1, scaling="delayed") / 10**6
2013.26592
"""

from __future__ import annotations

from fractions import Fraction

from infralens._typecheck import typed
from infralens._validate import check_choice, divisible, positive_int
from infralens.compute import gemm_flops_per_token
from infralens.memory import RECOMPUTE, STACKS, _model
from infralens.model import TransformerConfig
from infralens.recipe import SCALINGS

__all__ = [
    "AMAX_SLOTS",
    "BLOCK_SCALES",
    "MXFP8_BLOCK",
    "SCALINGS",
    "amax_bytes",
    "block_scale_overhead",
    "fp8_gemm_flops_per_token",
    "quantize_bytes",
    "saved_activation_change",
    "state_bytes",
    "weight_quantize_bytes",
]

AMAX_SLOTS = (3, 2)
"""FP8 tensors per GEMM with an amax slot, forward (input, weight, output) and backward
(grad output, grad input): Transformer Engine ``module/base.py:1137-1139`` at d0067d0."""

MXFP8_BLOCK = 32
"""Elements per MXFP8 scale, one E8M0 byte each (Transformer Engine ``MXFP8BlockScaling``)."""

BLOCK_SCALES: dict[str, tuple[int, int, Fraction]] = {
    "float8-block-1x128": (128, 4, Fraction(1)),
    "float8-block-128x128": (128 * 128, 4, Fraction(1)),
    "mxfp8": (32, 1, Fraction(1)),
    "nvfp4": (16, 1, Fraction(1, 2)),
}
"""Elements per scale, bytes per scale and bytes per element of each block-scaled
format: Transformer Engine 2.8's ``Float8BlockScaling`` (FP32 scales; 1×128 for
activations and gradients, 128×128 for weights), ``MXFP8BlockScaling`` (E8M0 per
32) and ``NVFP4BlockScaling`` (E2M1 values, E4M3 per 16, plus one FP32 per tensor)."""


@typed
def block_scale_overhead(fmt: str) -> Fraction:
    """Scale bytes per payload byte of a block-scaled format.

    overhead = scale bytes / (elements per block × bytes per element)

    >>> block_scale_overhead("nvfp4"), block_scale_overhead("mxfp8")
    (Fraction(1, 8), Fraction(1, 32))
    >>> block_scale_overhead("float8-block-128x128")    # one FP32 per 16,384
    Fraction(1, 4096)
    >>> block_scale_overhead("fp4")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: fmt must be one of 'float8-block-1x128', ... 'nvfp4'; got 'fp4'

    Raises ``ValueError`` for a format not in :data:`BLOCK_SCALES`.
    """
    name = check_choice("fmt", fmt, tuple(BLOCK_SCALES))
    block, scale_bytes, element_bytes = BLOCK_SCALES[name]
    return Fraction(scale_bytes) / (block * element_bytes)


LINEARS = 4
"""Weight GEMMs per transformer block: QKV, the output projection and the MLP's two."""


def fp8_gemm_flops_per_token(
    model: TransformerConfig,
    *,
    recompute: str = "selective",
    stack: str = "megatron",
) -> int:
    """The part of :func:`infralens.compute.gemm_flops_per_token` an FP8 recipe runs in FP8.

    fp8 = gemm − 6·V·h    (the output layer, forward and backward, stays in BF16)

    >>> from infralens.model import PRESETS
    >>> m = PRESETS["llama3-70b"]
    >>> both = gemm_flops_per_token(m, recompute="full")
    >>> both - fp8_gemm_flops_per_token(m, recompute="full")
    6304038912

    Raises ``ValueError`` for an unknown *recompute* or *stack*.
    """
    m = _model(model)
    return (
        gemm_flops_per_token(m, recompute=recompute, stack=stack)
        - 6 * m.vocab_size * m.hidden
    )


def _per_element(scaling: str) -> Fraction:
    """HBM bytes per quantised element: read 2 (bf16), write 1 row-wise and 1 column-wise;
    current scaling reads the input once more for its amax, MXFP8 writes two scale bytes
    per 32 elements."""
    kind = check_choice("scaling", scaling, SCALINGS)
    extra = {
        "delayed": Fraction(0),
        "current": Fraction(2),
        "mxfp8": Fraction(2, MXFP8_BLOCK),
    }
    return 4 + extra[kind]


def quantize_bytes(
    model: TransformerConfig | str,
    *,
    seq_len: int,
    micro_batch_size: int,
    scaling: str,
    tp: int = 1,
    stack: str = "megatron",
    recompute: str = "none",
) -> int:
    """HBM bytes the quantisation kernels of one layer move for one micro-batch, on one GPU.

    bytes = per-element cost × (forward operands [× 2 with full recomputation]
                                + backward gradient operands [+ saved inputs re-cast])

    Per-element cost: 4 (delayed), 6 (current), 4 + 2/32 (MXFP8). Megatron-Core's
    Transformer Engine layers fuse the cast into the norms (``LayerNormLinear`` writes
    its output in FP8), so the forward casts the output projection's input s·b·h/t and
    the second MLP GEMM's s·b·f/t; backward casts every GEMM's output gradient
    (s·b·(h + 2·g·d)/t, s·b·h, s·b·f·(2 if gated)/t, s·b·h). torchao (``"pytorch"``)
    casts all four inputs forward and, as it saves them in BF16, casts them again
    column-wise for the weight gradients.

    >>> quantize_bytes("llama3-8b", seq_len=8, micro_batch_size=1, scaling="mxfp8", tp=3)
    Traceback (most recent call last):
    ...
    ValueError: heads must be divisible by tp: 32 % 3 = 2

    Raises ``ValueError`` for a size below 1, an unknown *scaling*, *stack* or
    *recompute*, or *tp* not dividing heads, kv_heads or ffn_hidden.
    """
    m = _model(model)
    sb = positive_int("seq_len", seq_len) * positive_int(
        "micro_batch_size", micro_batch_size
    )
    t = positive_int("tp", tp)
    who = check_choice("stack", stack, STACKS)
    mode = check_choice("recompute", recompute, RECOMPUTE)
    cost = _per_element(scaling)
    for name in ("heads", "kv_heads", "ffn_hidden"):
        divisible(name, getattr(m, name), "tp", t)
    h, f = m.hidden, m.ffn_hidden
    qkv = h + 2 * m.kv_heads * m.head_dim
    grads = Fraction(qkv, t) + h + Fraction(f * (2 if m.gated_mlp else 1), t) + h
    if who == "megatron":
        forward = Fraction(h + f, t)
        saved_recast = Fraction(0)
    else:
        forward = h + Fraction(h + f, t) + h
        saved_recast = forward
    if mode == "full":
        forward *= 2
    total = cost * sb * (forward + grads) + Fraction(3 * sb) * saved_recast
    return -(-total.numerator // total.denominator)


def weight_quantize_bytes(
    params: int,
    *,
    scaling: str,
    stack: str = "megatron",
    fp8_params: bool = False,
    microbatches: int = 1,
) -> int:
    """HBM bytes one step's weight casts move for *params* block weights on one GPU.

    Transformer Engine casts each weight once a step and caches it for the step's
    micro-batches (``is_first_microbatch``): the per-element cost of
    :func:`quantize_bytes`, or, with FP8 parameters (``--fp8-param-gather``), only the
    column-wise copy made from the FP8 row-wise one (read 1, write 1). torchao casts
    the weight every micro-batch, forward and, from the BF16 copy it saved, backward.

    >>> weight_quantize_bytes(10**9, scaling="delayed", fp8_params=True) // 10**9
    2
    >>> weight_quantize_bytes(10**9, scaling="current", stack="pytorch",
    ...                       microbatches=4) // 10**9
    48

    Raises ``ValueError`` for an unknown *scaling* or *stack*, or sizes below 1.
    """
    n = positive_int("params", params)
    m = positive_int("microbatches", microbatches)
    cost = _per_element(scaling)
    if check_choice("stack", stack, STACKS) == "pytorch":
        cost *= 2 * m
    elif fp8_params:
        cost = Fraction(2)
    total = cost * n
    return -(-total.numerator // total.denominator)


def amax_bytes(layers: int, *, backward: bool = False) -> int:
    """Bytes of one delayed-scaling amax all-reduce for a region of *layers* blocks.

    bytes = 4 (fp32) × slots per GEMM (3 forward, 2 backward) × 4 GEMMs × layers

    >>> amax_bytes(20), amax_bytes(20, backward=True)
    (960, 640)

    Raises ``ValueError`` for *layers* below 1.
    """
    n = positive_int("layers", layers)
    return 4 * AMAX_SLOTS[1 if backward else 0] * LINEARS * n


def state_bytes(
    model: TransformerConfig | str,
    *,
    scaling: str,
    amax_history: int,
    tp: int = 1,
    layers: int,
) -> int:
    """Persistent FP8 bookkeeping of *layers* blocks on one GPU, beyond the recipe's buffers.

    bytes = layers · (4 GEMMs · 5 slots · 4 B · (history + 2 for scale and inverse)
                      + MXFP8: 2 · P_layer/t / 32 scale bytes of the cached weight copies)

    >>> state_bytes("llama3-8b", scaling="delayed", amax_history=1024, layers=1)
    82080
    >>> state_bytes("llama3-8b", scaling="mxfp8", amax_history=0, layers=1) // 10**6
    13

    Raises ``ValueError`` for an unknown *scaling*, sizes below 1 or a negative history.
    """
    m = _model(model)
    kind = check_choice("scaling", scaling, SCALINGS)
    if type(amax_history) is not int or amax_history < 0:
        raise ValueError(f"amax_history must be an int >= 0, got {amax_history!r}")
    t, n = positive_int("tp", tp), positive_int("layers", layers)
    slots = LINEARS * sum(AMAX_SLOTS)
    meta = slots * 4 * (amax_history + 2) if kind == "delayed" else 0
    scales = 2 * (m.layer_params() // t) // MXFP8_BLOCK if kind == "mxfp8" else 0
    return n * (meta + scales)


def saved_activation_change(
    model: TransformerConfig | str,
    *,
    seq_len: int,
    micro_batch_size: int,
    scaling: str,
    tp: int = 1,
    sequence_parallel: bool = False,
    stack: str = "megatron",
    recompute: str = "none",
) -> int:
    """Bytes one layer's saved activations change by when its linears run in FP8 (≤ 0 saves).

    Transformer Engine saves a linear's input quantised, column-wise only (1 byte):
    the two norm outputs (2·s·b·h, /t with sequence parallelism) and the second MLP
    GEMM's input (s·b·f/t) drop from 2 bytes to 1, and the output projection's input
    adds an FP8 copy (s·b·h/t) beside the BF16 attention output attention keeps;
    MXFP8 adds a scale byte per 32. torchao saves BF16 inputs (no change), and full
    recomputation keeps only the layer input (no change).

    >>> saved_activation_change("llama3-8b", seq_len=8192, micro_batch_size=1,
    ...                         scaling="delayed") / 10**6
    -150.994944

    Raises ``ValueError`` as :func:`quantize_bytes` does.
    """
    m = _model(model)
    sb = positive_int("seq_len", seq_len) * positive_int(
        "micro_batch_size", micro_batch_size
    )
    t = positive_int("tp", tp)
    check_choice("scaling", scaling, SCALINGS)
    who = check_choice("stack", stack, STACKS)
    if (
        check_choice("recompute", recompute, RECOMPUTE) == "full"
        or who == "pytorch"
    ):
        return 0
    norm_t = t if sequence_parallel else 1
    fp8_copies = Fraction(2 * m.hidden, norm_t) + Fraction(
        m.ffn_hidden + m.hidden, t
    )
    dropped = Fraction(2 * m.hidden, norm_t) + Fraction(
        m.ffn_hidden, t
    )  # bf16 → fp8
    scale = Fraction(1, MXFP8_BLOCK) if scaling == "mxfp8" else Fraction(0)
    change = sb * (Fraction(m.hidden, t) - dropped + scale * fp8_copies)
    return -(-change.numerator // change.denominator)
