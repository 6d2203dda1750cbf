"""The element-wise kernels of a layer: norms, rotary embedding, activations and
residual adds, priced by the HBM bytes they move.

Between a layer's GEMMs and its attention kernel run memory-bound kernels that
read and write whole activations. How many bytes they move depends on
whether the framework fuses them:

- ``"fused"``: Megatron-style fused kernels (fused layer norm, bias-GeLU,
  bias-dropout-add) and ``torch.compile``. Each pass reads or writes about the
  tensors the layer saves outside core attention: written and re-read
  forward, read and its gradient written backward (4 passes, 5 with full
  recomputation).
- ``"eager"``: every PyTorch operator is its own kernel, as in torchtitan run
  without ``torch.compile``. The bytes are :data:`EAGER_BYTES`, counted
  operator by operator for torchtitan's Llama block.

>>> from infralens.model import PRESETS
>>> m = PRESETS["llama3-8b"]
>>> eager = elementwise_bytes(m, seq_len=8192, micro_batch_size=1, kernels="eager")
>>> fused = elementwise_bytes(m, seq_len=8192, micro_batch_size=1)
>>> round(eager / 8192 / 1e6, 2), round(eager / fused, 1)   # MB per token; ratio
(2.45, 4.4)

After the last layer the loss runs its own memory-bound passes over the s·b·V/t
logits (:func:`loss_bytes`): for a small model with a large vocabulary they are
a tenth of the step.
"""

from __future__ import annotations

from fractions import Fraction

from infralens._typecheck import typed
from infralens._validate import check_choice, flag, positive_int
from infralens.head_memory import logits_bytes, loss_kernel
from infralens.memory import RECOMPUTE, _ceil, _model, activation_bytes
from infralens.model import TransformerConfig

__all__ = [
    "EAGER_BYTES",
    "ELEMENTWISE_KERNELS",
    "LOSS_BYTES",
    "elementwise_bytes",
    "loss_bytes",
]

ELEMENTWISE_KERNELS = ("fused", "eager")
"""How the framework runs a layer's element-wise operators (see the module text)."""

EAGER_BYTES: dict[str, tuple[int, int, int, int, int]] = {
    # (per h, per q + kv, per f, constant, per q + kv when K/V are repeated for GQA)
    "forward": (84, 20, 10, 48, 4),
    "backward": (214, 20, 18, 80, 4),
}
"""HBM bytes per token of torchtitan's Llama block run eagerly, by pass.

Counted operator by operator (every tensor each ATen operator reads and
writes, matmuls and the attention kernel left out) for torchtitan at
9dec370, the commit of its published H100 benchmarks: ``RMSNorm`` upcasts to
fp32 and runs ``pow``, ``mean``, ``add``, ``rsqrt``, ``mul``, a cast back and
the weight ``mul`` (36·h + 24 per norm, two norms); the rotary embedding
casts q and k to fp32, multiplies them as complex numbers and casts back
(20 per element of q and k); ``repeat_kv`` copies K and V out to the query
heads (4 per element of q and kv, when ``kv_heads < heads``); SwiGLU's
``silu`` and ``mul`` (10·f); two residual adds (12·h). The backward is
what autograd runs for those operators. h is the hidden size, q and kv the
widths of the query and key/value projections, f the MLP width.
``tests/runtime/test_eager_bytes.py`` recounts both passes under a
``TorchDispatchMode`` and requires exact agreement. Recomputation, full or
torchtitan's op-level selective policy, replays every element-wise
operator but the block's last residual add (PyTorch's checkpoint stops
early once it has what backward needs): the forward's bytes less 6·h.
Per-layer terms (the norm weights, the rotary table) are left out."""


@typed
def elementwise_bytes(
    model: TransformerConfig | str,
    *,
    seq_len: int,
    micro_batch_size: int,
    kernels: str = "fused",
    recompute: str = "selective",
    tp: int = 1,
    sequence_parallel: bool = False,
    materialized: bool = False,
) -> int:
    """HBM bytes one layer's element-wise kernels move for one micro-batch, on one GPU::

        fused:  passes · activation bytes saved outside core attention
                (passes = 4, or 5 with full recomputation)
        eager:  tokens · (forward + backward [+ forward - 6·h if recomputing])
                with q, kv and f split over tp, h over tp only with sequence parallelism

    >>> elementwise_bytes("llama3-8b", seq_len=8, micro_batch_size=1, kernels="eager",
    ...                   recompute="none")
    14943232
    >>> elementwise_bytes("gpt3-175b", seq_len=8, micro_batch_size=1, kernels="eager")
    Traceback (most recent call last):
    ...
    ValueError: kernels='eager' is counted for torchtitan's Llama block only

    *materialized* counts the fused path's saved activations as 2021 Megatron's
    materialized attention leaves them (the eager count leaves attention out).

    Raises ``ValueError`` for an unknown *kernels* or *recompute*, a size
    below 1, or eager kernels on a model that is not Llama-shaped (RMSNorm,
    rotary, SwiGLU, no biases).
    """
    m = _model(model)
    mode = check_choice("kernels", kernels, ELEMENTWISE_KERNELS)
    rec = check_choice("recompute", recompute, RECOMPUTE)
    s = positive_int("seq_len", seq_len)
    b = positive_int("micro_batch_size", micro_batch_size)
    t = positive_int("tp", tp)
    sp = flag("sequence_parallel", sequence_parallel)
    if mode == "fused":
        saved = activation_bytes(
            m, seq_len=s, micro_batch_size=b, tp=t, sequence_parallel=sp and t > 1,
            recompute="selective", attention="materialized" if materialized else "flash",
        )  # fmt: skip
        return (5 if rec == "full" else 4) * saved
    if not m.gated_mlp or m.norm != "rmsnorm" or m.bias or m.learned_positions:
        raise ValueError(
            "kernels='eager' is counted for torchtitan's Llama block only"
        )
    h = m.hidden / (t if sp else 1)
    qkv = (m.heads + m.kv_heads) * m.head_dim / t
    f = m.ffn_hidden / t
    gqa = m.kv_heads < m.heads

    def per_token(coeffs: tuple[int, int, int, int, int]) -> float:
        per_h, per_qkv, per_f, const, repeat = coeffs
        return per_h * h + (per_qkv + repeat * gqa) * qkv + per_f * f + const

    fwd = per_token(EAGER_BYTES["forward"])
    total = fwd + per_token(EAGER_BYTES["backward"])
    if rec != "none":
        total += fwd - 6 * h
    return round(total * s * b)


LOSS_BYTES: dict[str, int] = {"fused": 52, "eager": 36, "loss_parallel": 76}
"""HBM bytes the cross-entropy loss moves per logit, forward and backward, by the
kernels of :data:`infralens.head_memory.LOSS_COPIES`, counted operator by operator
(each reads its inputs and writes its outputs once; a row's gather or scatter of the
target is left out):

- ``fused``, Megatron's vocabulary-parallel cross-entropy on one fp32 copy
  (``tensor_parallel/cross_entropy.py`` at d98e8a6, the same passes as
  ``mpu/cross_entropy.py`` in 2021): forward the cast to fp32 (2 + 4), ``max`` (4),
  in-place subtract, ``exp`` and divide (8 each), ``sum`` (4); backward the
  in-place multiply by the loss's gradient (8) and the cast back to bf16 (4 + 2).
  Its optional ``--cross-entropy-loss-fusion`` (off by default) runs the same
  passes in fewer kernels and is not priced apart;
- ``eager``, PyTorch's ``cross_entropy`` on ``logits.float()`` (torchtitan's loss,
  not compiled): the cast (6) and ``log_softmax`` (8) forward; backward
  ``nll_loss``'s zeroed gradient (4), ``log_softmax``'s backward (12) and the cast
  back (6);
- ``loss_parallel``, ``eager`` on vocabulary-sharded logits (PyTorch 2.13.0,
  ``torch/distributed/tensor/parallel/loss.py``): forward the cast, ``amax``,
  subtract, ``exp``, ``sum`` and the subtract of the log-sum
  (6 + 4 + 8 + 8 + 4 + 8); backward a zeroed gradient, ``exp``, an add, the
  multiply and the cast back (4 + 8 + 12 + 8 + 6).

``tests/runtime/test_loss_bytes_torch.py`` recounts ``eager`` and ``fused`` under
PyTorch."""


@typed
def loss_bytes(
    model: TransformerConfig | str,
    *,
    seq_len: int,
    micro_batch_size: int,
    tp: int = 1,
    loss: str = "fused",
) -> int:
    """HBM bytes the loss moves for one micro-batch on one GPU, both passes.

        bytes = LOSS_BYTES[kernel] · s·b·V / t

    V/t is the vocabulary slice of a vocabulary-parallel output layer; *loss*
    ``"eager"`` with *tp* > 1 runs as ``loss_parallel`` (as in
    :func:`infralens.head_memory.loss_peak_bytes`). Priced at HBM bandwidth, these
    bytes join the output layer's time on the last pipeline stage.

    >>> round(loss_bytes("llama3-8b", seq_len=8192, micro_batch_size=1) / 1e9, 1)
    54.6
    >>> [round(loss_bytes("llama3-70b", seq_len=8192, micro_batch_size=1, tp=t,
    ...                   loss="eager") / 1e9, 1) for t in (1, 8)]
    [37.8, 10.0]
    >>> loss_bytes("llama3-8b", seq_len=8192, micro_batch_size=1, loss="liger")
    Traceback (most recent call last):
    ...
    ValueError: loss must be one of 'fused', 'eager'; got 'liger'

    Raises ``ValueError`` for a size below 1 or an unknown *loss*.
    """
    per_logit = LOSS_BYTES[loss_kernel(loss, tp)]
    fp32 = logits_bytes(  # 4 bytes a logit: this rank's s·b·V/t logits in fp32
        model, seq_len=seq_len, micro_batch_size=micro_batch_size, tp=tp
    )
    return _ceil(Fraction(per_logit * fp32, 4))
