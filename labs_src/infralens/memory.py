"""Activation memory of one transformer layer, after Korthikanti et al. (2022), Table 2.

For sequence length s, micro-batch b, hidden size h, a attention heads and
tensor-parallel degree t, with 16-bit activations, one layer stores:

- no recomputation, TP only:        s·b·h·(10 + 24/t + 5·a·s/(h·t)) bytes
- no recomputation, TP + sequence parallel: s·b·h·(34/t + 5·a·s/(h·t))
- selective recomputation (attention scores recomputed): s·b·h·(10 + 24/t), or s·b·h·34/t with SP
- full recomputation (only the layer input kept): 2·s·b·h

With t = 1 the first two rows are the paper's s·b·h·(34 + 5·a·s/h).

The paper's worked configurations (Section 5): for GPT-3 (a = 96, s = 2048,
h = 12288) 5·a·s/h = 80, and selective recomputation saves 70% of the
activation memory; for MT-NLG (a = 128, h = 20480) the saving is 65%:

>>> def saving(**model):
...     full = activation_bytes_per_layer(**model)
...     kept = activation_bytes_per_layer(**model, recompute="selective")
...     return round(1 - kept / full, 2)
>>> saving(seq_len=2048, micro_batch_size=1, hidden=12288, heads=96)
0.7
>>> saving(seq_len=2048, micro_batch_size=1, hidden=20480, heads=128)
0.65

The paper's "GB" is GiB (2**30 bytes). Its Appendix B prices s·b·h·p 2-byte
elements for the 530B model (p = 35 pipeline stages), p tensors the size of
the one layer input that full recomputation keeps, at "2.73 GB":

>>> kept = activation_bytes_per_layer(seq_len=2048, micro_batch_size=1, hidden=20480,
...                                   heads=128, recompute="full")
>>> round(35 * kept / 2**30, 2), round(35 * kept / 10**9, 2)
(2.73, 2.94)

>>> activation_bytes_per_layer(seq_len=2048, micro_batch_size=1, hidden=12288, heads=96)
2868903936
>>> activation_bytes_per_layer(seq_len=2048, micro_batch_size=1, hidden=12288, heads=96,
...                            tp=8, sequence_parallel=True, recompute="selective")
106954752
"""

from __future__ import annotations

from fractions import Fraction

from infralens._validate import check_choice, divisible, flag, positive_int
from infralens.model import PRESETS, TransformerConfig
from infralens.precision import recipe_bytes

__all__ = [
    "ATTENTION",
    "RECOMPUTE",
    "STACKS",
    "activation_bytes",
    "activation_bytes_per_layer",
    "bytes_per_parameter",
]

RECOMPUTE = ("none", "selective", "full")
"""Activation recomputation strategies of Korthikanti et al. (2022)."""


def activation_bytes_per_layer(
    *,
    seq_len: int,
    micro_batch_size: int,
    hidden: int,
    heads: int,
    tp: int = 1,
    sequence_parallel: bool = False,
    recompute: str = "none",
) -> int:
    """Bytes of activations one transformer layer keeps for backward, per GPU.

    The formulas are those of the module docstring (the paper's Table 2),
    rounded up to whole bytes.

    >>> activation_bytes_per_layer(seq_len=4, micro_batch_size=1, hidden=8, heads=2,
    ...                            recompute="full")
    64
    >>> activation_bytes_per_layer(seq_len=4, micro_batch_size=1, hidden=8, heads=3, tp=2)
    Traceback (most recent call last):
    ...
    ValueError: heads must be divisible by tp: 3 % 2 = 1

    Raises ``ValueError`` for a size below 1, heads not divisible by *tp*, or
    an unknown *recompute*.
    """
    s = positive_int("seq_len", seq_len)
    b = positive_int("micro_batch_size", micro_batch_size)
    h = positive_int("hidden", hidden)
    a = positive_int("heads", heads)
    t = positive_int("tp", tp)
    mode = check_choice("recompute", recompute, RECOMPUTE)
    divisible("heads", a, "tp", t)
    sbh = s * b * h
    if mode == "full":
        total = Fraction(2 * sbh)
    elif sequence_parallel:
        total = sbh * Fraction(34, t)
        if mode == "none":
            total += sbh * Fraction(5 * a * s, h * t)
    else:
        total = sbh * (10 + Fraction(24, t))
        if mode == "none":
            total += sbh * Fraction(5 * a * s, h * t)
    return -(-total.numerator // total.denominator)


def bytes_per_parameter(recipe: str, *, dp_size: int = 1) -> Fraction:
    """Persistent bytes per parameter (parameters, gradients, optimizer state) under *recipe*.

    The recipes and the sources they follow are in :data:`infralens.precision.RECIPES`.

    >>> bytes_per_parameter("zero-paper"), bytes_per_parameter("megatron-bf16")
    (Fraction(16, 1), Fraction(18, 1))
    >>> bytes_per_parameter("megatron-bf16-distopt", dp_size=64)       # 6 + 12/64
    Fraction(99, 16)
    >>> bytes_per_parameter("fsdp2", dp_size=0)
    Traceback (most recent call last):
    ...
    ValueError: dp_size must be >= 1, got 0

    Raises ``ValueError`` for an unknown *recipe* or *dp_size* below 1.
    """
    return recipe_bytes(recipe, dp_size=dp_size)


ATTENTION = ("flash", "materialized")
"""``flash``: output and log-sum-exp kept (FlashAttention, SDPA); ``materialized``: a·s² scores."""

STACKS = ("megatron", "pytorch")
"""Whose kernels and sequence parallelism the activation count follows."""


def _model(model: TransformerConfig | str) -> TransformerConfig:
    if isinstance(model, str):
        return PRESETS[check_choice("model", model, tuple(PRESETS))]
    if not isinstance(model, TransformerConfig):
        raise TypeError(
            f"model must be a TransformerConfig or a PRESETS key, got {type(model).__name__}"
        )
    return model


def activation_bytes(
    model: TransformerConfig | str,
    *,
    seq_len: int,
    micro_batch_size: int,
    tp: int = 1,
    sequence_parallel: bool = False,
    recompute: str = "none",
    attention: str = "flash",
    stack: str = "megatron",
    dropout: bool = False,
    element_bytes: int = 2,
) -> int:
    """Bytes of activations one transformer layer keeps for backward, on one GPU.

    Each saved tensor is counted once (e = *element_bytes*, 2 for bf16;
    statistics are fp32). Per layer, with s, b, h, a heads, g kv_heads, d
    head_dim, f ffn_hidden:

    - norms: input e·sbh and fp32 statistics (rstd; LayerNorm also the mean) each;
      their outputs e·sbh, the inputs of the column-parallel linears;
    - attention, flash: q e·sbh, k and v 2·e·sb·g·d, output e·sbh (also the
      output projection's input), log-sum-exp 4·a·s·b;
    - attention, materialized: q, and k and v repeated to all a heads,
      3·e·sbh; softmax output e·a·s²·b; output-projection input e·sbh;
    - MLP: GELU 2·e·sbf (its input and fc2's); SwiGLU 3·e·sbf in Megatron
      (fused: fc1 output, 2f wide, and fc2's input), 4·e·sbf in eager PyTorch
      (gate, silu(gate), up, product);
    - *dropout*: a 1-byte mask of sbh after attention and after the MLP, and
      for materialized attention a·s²·b mask plus e·a·s²·b output.

    Tensor parallelism divides attention and MLP tensors by t. Sequence
    parallelism divides norm, dropout and residual tensors by t; Megatron
    also saves the column-parallel inputs sharded and re-gathers them in
    backward, PyTorch 2.13 saves the gathered, full-sequence input. Megatron's
    ``selective`` recomputes core attention (the s² terms, or flash's
    log-sum-exp); ``full`` keeps only the layer input e·sbh (/t with SP).

    PyTorch's ``selective`` is torchtitan's op-level policy for
    ``create_selective_checkpoint_contexts``: the outputs of ``aten.mm`` and
    of the SDPA kernels are ``MUST_SAVE``, except every second ``mm`` of the
    block, and everything else is recomputed. The block runs its matmuls in
    the order q, k, v, o, then w1, w3, w2 (fc1, fc2 without gating), so it
    keeps the layer input e·sbh, the 1st, 3rd, 5th and 7th ``mm`` outputs
    (q e·sbh, v e·sb·g·d, w1 e·sbf, w2 e·sbh; q, v and fc1 ungated), and
    the attention output e·sbh with its log-sum-exp 4·a·s·b:

    >>> activation_bytes("llama3-8b", seq_len=8192, micro_batch_size=1,
    ...                  stack="pytorch", recompute="selective")
    521142272

    >>> activation_bytes("llama3-8b", seq_len=8192, micro_batch_size=1)
    1141964800
    >>> activation_bytes("llama3-8b", seq_len=8192, micro_batch_size=1,
    ...                  attention="materialized")
    5536546816
    >>> activation_bytes("llama3-8b", seq_len=8, micro_batch_size=1, tp=16)
    Traceback (most recent call last):
    ...
    ValueError: kv_heads must be divisible by tp: 8 % 16 = 8

    Raises ``ValueError`` for a size below 1, an unknown *recompute*,
    *attention* or *stack*, tp not dividing heads, kv_heads or ffn_hidden,
    tp not dividing *seq_len* with sequence parallelism, or ``selective``
    with the ``pytorch`` stack and tensor parallelism, materialized attention
    or dropout (not modelled: their matmuls are no longer the block's ``mm``
    sequence above).
    """
    m = _model(model)
    s = positive_int("seq_len", seq_len)
    b = positive_int("micro_batch_size", micro_batch_size)
    t = positive_int("tp", tp)
    e = positive_int("element_bytes", element_bytes)
    sequence_parallel = flag("sequence_parallel", sequence_parallel)
    dropout = flag("dropout", dropout)
    mode = check_choice("recompute", recompute, RECOMPUTE)
    kind = check_choice("attention", attention, ATTENTION)
    who = check_choice("stack", stack, STACKS)
    divisible("heads", m.heads, "tp", t)
    divisible("kv_heads", m.kv_heads, "tp", t)
    divisible("ffn_hidden", m.ffn_hidden, "tp", t)
    if sequence_parallel:
        divisible("seq_len", s, "tp", t)
    h, a, f, sb = m.hidden, m.heads, m.ffn_hidden, s * b
    if mode == "selective" and who == "pytorch":
        if t > 1 or kind != "flash" or dropout:
            raise ValueError(
                "recompute='selective' with stack='pytorch' is modelled for tp=1, "
                "attention='flash' and dropout=False only"
            )
        kv = m.kv_heads * m.head_dim
        widths = [
            h,
            kv,
            kv,
            h,
            *([f, f, h] if m.gated_mlp else [f, h]),
        ]  # mm outputs, in order
        return e * sb * (h + sum(widths[0::2]) + h) + 4 * a * sb
    # [start:saved-tensors]
    # norms, dropout masks, residual: divided by t under sequence parallelism
    seq_t = t if sequence_parallel else 1
    # column-parallel inputs: divided by t only where Megatron re-gathers them
    col_t = t if sequence_parallel and who == "megatron" else 1
    if mode == "full":
        return e * sb * h // seq_t
    stats = 8 if m.norm == "layernorm" else 4
    total = Fraction(
        2 * (e * sb * h + stats * sb) + (2 if dropout else 0) * sb * h, seq_t
    )
    total += Fraction(2 * e * sb * h, col_t)
    # [end:saved-tensors]
    # [start:attention-and-mlp]
    # flash: q and output e·sbh each, k and v e·sb·g·d each, LSE 4·a·s·b
    if kind == "flash":
        attn = e * sb * h * 2 + 2 * e * sb * m.kv_heads * m.head_dim
        attn += 4 * a * sb if mode == "none" else 0
    else:  # q, k, v at a heads and the projection input 4·e·sbh; softmax e·a·s²·b
        attn = 4 * e * sb * h
        if mode == "none":
            attn += (e + (1 + e if dropout else 0)) * a * s * sb
    mlp = (3 if who == "megatron" else 4) if m.gated_mlp else 2
    return _ceil(total + Fraction(attn + mlp * e * sb * f, t))
    # [end:attention-and-mlp]


def _ceil(x: Fraction) -> int:
    return -(-x.numerator // x.denominator)
