"""What the model's head leaves on the last pipeline stage: its saved inputs and the loss's peak.

After the last transformer layer come the final norm, the output layer (the LM
head) and the loss. The norm and the output layer save their inputs for backward
like any layer's norm and column-parallel linear, whatever the recomputation
policy (it checkpoints the transformer layers, not the head):

    head = e·s·b·h + 4·s·b   (norm input, fp32 statistics)
         + e·s·b·h           (output-layer input)

Under sequence parallelism the norm's input is divided by t, and so is the output
layer's in Megatron; PyTorch saves the output layer's input gathered, whole.

The loss turns the s·b·V logits (V/t per rank when the output layer is
vocabulary-parallel) into fp32 tensors; how many are alive at the loss's peak
depends on its kernel (:data:`LOSS_COPIES`):

- ``fused``, Megatron-Core's cross-entropy fusion: one, the fp32 probabilities,
  the gradient written over them;
- ``eager``, PyTorch's ``cross_entropy`` on ``logits.float()``: three in backward,
  the saved log-probabilities, the gradient ``nll_loss`` writes and the one
  ``log_softmax`` returns;
- ``eager`` with tensor parallelism: the logits stay sharded by vocabulary and the
  loss runs under ``loss_parallel`` (torchtitan turns it on with TP), whose fused
  backward holds four: the log-probabilities, a zeroed gradient, their ``exp``
  and the sum of the two (``_nll_loss_and_log_softmax_backward``,
  torch/distributed/tensor/parallel/loss.py:470 and 518 in PyTorch 2.13.0).

``tests/runtime/test_loss_peak_torch.py`` measures three and four with PyTorch on
CPU (one rank, and two gloo ranks under ``loss_parallel``).

>>> eager = loss_peak_bytes("llama3-8b", seq_len=8192, micro_batch_size=1, loss="eager")
>>> round(eager / 1e9, 1)
12.6
"""

from __future__ import annotations

from fractions import Fraction

from infralens._validate import check_choice, divisible, flag, positive_int
from infralens.memory import STACKS, _ceil, _model
from infralens.model import TransformerConfig

__all__ = [
    "LOSS_COPIES",
    "head_activation_bytes",
    "logits_bytes",
    "loss_kernel",
    "loss_peak_bytes",
]

LOSS_COPIES: dict[str, int] = {"fused": 1, "eager": 3, "loss_parallel": 4}
"""fp32 logit-sized tensors alive at the loss's peak, by kernel (see the module docstring)."""


def logits_bytes(
    model: TransformerConfig | str,
    *,
    seq_len: int,
    micro_batch_size: int,
    tp: int = 1,
) -> int:
    """Bytes the loss keeps for backward: the fp32 log-softmax of the logits, 4·s·b·V/t.

    Cross-entropy on logits upcast to fp32 saves its s·b·V fp32 output (a
    vocabulary-parallel output layer divides V by t); the output layer's
    input is :func:`head_activation_bytes`'.

    >>> logits_bytes("llama3-8b", seq_len=8192, micro_batch_size=1) / 10**9
    4.202692608
    >>> logits_bytes("llama3-8b", seq_len=8192, micro_batch_size=1, tp=0)
    Traceback (most recent call last):
    ...
    ValueError: tp must be >= 1, got 0

    Raises ``ValueError`` for a size below 1.
    """
    m = _model(model)
    s = positive_int("seq_len", seq_len)
    b = positive_int("micro_batch_size", micro_batch_size)
    t = positive_int("tp", tp)
    return _ceil(Fraction(4 * s * b * m.vocab_size, t))


def loss_peak_bytes(
    model: TransformerConfig | str,
    *,
    seq_len: int,
    micro_batch_size: int,
    tp: int = 1,
    loss: str = "fused",
) -> int:
    """Bytes of fp32 logit-sized tensors alive at the loss's peak on one GPU.

    peak = copies × :func:`logits_bytes`, copies from :data:`LOSS_COPIES`: *loss*
    ``"fused"`` 1, ``"eager"`` 3, or 4 when ``"eager"`` runs with *tp* > 1 (PyTorch's
    ``loss_parallel``, the only eager loss on vocabulary-sharded logits).

    >>> kw = dict(seq_len=8192, micro_batch_size=16, loss="eager")
    >>> [round(loss_peak_bytes("llama3-70b", tp=t, **kw) / 2**30, 1) for t in (1, 8)]
    [187.9, 31.3]
    >>> loss_peak_bytes("llama3-70b", seq_len=8, micro_batch_size=1, loss="liger")
    Traceback (most recent call last):
    ...
    ValueError: loss must be one of 'fused', 'eager'; got 'liger'

    Raises ``ValueError`` for a size below 1 or an unknown *loss*.
    """
    one = logits_bytes(
        model, seq_len=seq_len, micro_batch_size=micro_batch_size, tp=tp
    )
    return one * LOSS_COPIES[loss_kernel(loss, tp)]


def loss_kernel(loss: str, tp: int) -> str:
    """The kernel a recipe's *loss* runs at *tp*: :data:`LOSS_COPIES`' key.

    ``"eager"`` on vocabulary-sharded logits (*tp* > 1) is PyTorch's
    ``loss_parallel``.

    >>> loss_kernel("eager", 1), loss_kernel("eager", 8), loss_kernel("fused", 8)
    ('eager', 'loss_parallel', 'fused')

    Raises ``ValueError`` for an unknown *loss* or a *tp* below 1.
    """
    kind = check_choice("loss", loss, ("fused", "eager"))
    return (
        "loss_parallel" if kind == "eager" and positive_int("tp", tp) > 1 else kind
    )


def head_activation_bytes(
    model: TransformerConfig | str,
    *,
    seq_len: int,
    micro_batch_size: int,
    tp: int = 1,
    sequence_parallel: bool = False,
    stack: str = "megatron",
    element_bytes: int = 2,
) -> int:
    """Bytes the final norm and the output layer save for backward, on one GPU.

    The norm keeps its input e·sbh and its fp32 statistics (LayerNorm's mean too),
    the output layer its input e·sbh: with sequence parallelism the norm's are
    divided by t, and the output layer's too in Megatron, which saves the sharded
    input and re-gathers it in backward; PyTorch's ``ColwiseParallel`` (torchtitan
    gives the output layer ``input_layouts=Shard(1)``) saves the gathered one.

    >>> kw = dict(seq_len=8192, micro_batch_size=16, tp=8, sequence_parallel=True)
    >>> [round(head_activation_bytes("llama3-70b", stack=s, **kw) / 2**30, 2)
    ...  for s in ("megatron", "pytorch")]
    [0.5, 2.25]
    >>> head_activation_bytes("llama3-70b", seq_len=9, micro_batch_size=1, tp=8,
    ...                       sequence_parallel=True)
    Traceback (most recent call last):
    ...
    ValueError: seq_len must be divisible by tp: 9 % 8 = 1

    Raises ``ValueError`` for a size below 1, an unknown *stack*, or *seq_len* not
    divisible by *tp* with sequence parallelism; ``TypeError`` for a flag not a bool.
    """
    m = _model(model)
    s = positive_int("seq_len", seq_len)
    b = positive_int("micro_batch_size", micro_batch_size)
    t = positive_int("tp", tp)
    e = positive_int("element_bytes", element_bytes)
    sp = flag("sequence_parallel", sequence_parallel)
    who = check_choice("stack", stack, STACKS)
    if sp:
        divisible("seq_len", s, "tp", t)
    sb = s * b
    seq_t = t if sp else 1
    col_t = t if sp and who == "megatron" else 1
    stats = 8 if m.norm == "layernorm" else 4
    norm = Fraction(e * sb * m.hidden + stats * sb, seq_t)
    return _ceil(norm + Fraction(e * sb * m.hidden, col_t))
