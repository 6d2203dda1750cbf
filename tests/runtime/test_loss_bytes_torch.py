"""infralens.elementwise.LOSS_BYTES against the operators PyTorch 2.13 runs (CPU).

Two losses on bf16 logits, forward and backward, under a ``TorchDispatchMode`` that
adds up the logit-sized tensors each ATen operator reads and writes:

- ``eager``: torchtitan's loss at 9dec370 (``train.py``), ``cross_entropy`` on
  ``pred.flatten(0, 1).float()``;
- ``fused``: the operators of Megatron's vocabulary-parallel cross-entropy at one
  tensor-parallel rank (its all-reduces are then identities): the fp32 copy, ``max``,
  in-place subtract, ``exp`` written over its input, ``sum``, in-place divide, and in
  backward the target's ``-1``, the in-place multiply by the loss's gradient and the
  cast back.

Operators that only index rows of the logits (``nll_loss`` and the target's gather
and scatter) touch one element per row, which the count leaves out, as does every
row-sized tensor. An in-place operator's output is the input it wrote, counted once
as read and once as written. The total must equal ``LOSS_BYTES`` times the logits'
elements exactly.
"""

from __future__ import annotations

import pytest

from tests.runtime.harness import SKIP_REASON

torch = pytest.importorskip("torch", reason=SKIP_REASON)

import torch.nn.functional as F  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402
from torch.utils._pytree import tree_leaves  # noqa: E402

from infralens.elementwise import LOSS_BYTES  # noqa: E402

INDEXED = {"nll_loss_forward", "nll_loss_backward", "index", "index_put_", "index_put"}


class CountLogitBytes(TorchDispatchMode):
    """Bytes of logit-sized tensors read and written, views excepted."""

    def __init__(self, elements: int) -> None:
        super().__init__()
        self.elements = elements
        self.total = 0

    def _big(self, tensors: list[torch.Tensor]) -> int:
        return sum(t.numel() * t.element_size() for t in tensors
                   if t.numel() == self.elements)  # fmt: skip

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        name = func.overloadpacket.__name__
        if func.is_view or name in {"detach", "empty", "empty_like", "zeros_like"}:
            return out
        inputs = [t for t in tree_leaves((args, {k: v for k, v in kwargs.items()
                                                 if k != "out"}))
                  if isinstance(t, torch.Tensor)]  # fmt: skip
        outputs = [t for t in tree_leaves(out) if isinstance(t, torch.Tensor)]
        if name in INDEXED:  # one element per row read; a scatter writes one per row
            inputs = []
            outputs = [] if name.endswith("_") or name == "index" else outputs
        self.total += self._big(inputs) + self._big(outputs)
        return out


class _MegatronLoss(torch.autograd.Function):
    """Megatron's vocabulary-parallel cross-entropy at one TP rank, operator for operator."""

    @staticmethod
    def forward(ctx, logits, target):  # type: ignore[no-untyped-def]
        logits = logits.float()
        logits_max = torch.max(logits, dim=-1)[0]
        logits -= logits_max.unsqueeze(dim=-1)
        rows = torch.arange(logits.size(0))
        predicted = logits[rows, target].clone()
        exp_logits = logits
        torch.exp(logits, out=exp_logits)
        sum_exp = exp_logits.sum(dim=-1)
        loss = torch.log(sum_exp) - predicted
        exp_logits.div_(sum_exp.unsqueeze(dim=-1))
        ctx.save_for_backward(exp_logits, target)
        return loss

    @staticmethod
    def backward(ctx, grad_output):  # type: ignore[no-untyped-def]
        grad_input, target = ctx.saved_tensors
        rows = torch.arange(grad_input.size(0))
        grad_input[rows, target] -= 1.0
        grad_input.mul_(grad_output.unsqueeze(dim=-1))
        return grad_input, None


def _count(kind: str, tokens: int, vocab: int) -> int:
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(tokens, vocab, generator=gen, dtype=torch.bfloat16,
                         requires_grad=True)  # fmt: skip
    target = torch.randint(0, vocab, (tokens,), generator=gen)
    counter = CountLogitBytes(tokens * vocab)
    with counter:
        if kind == "eager":
            loss = F.cross_entropy(logits.float(), target)
        else:
            loss = _MegatronLoss.apply(logits, target).mean()
        loss.backward()
    assert logits.grad is not None and logits.grad.dtype == torch.bfloat16
    return counter.total


@pytest.mark.parametrize("kind", ["eager", "fused"])
@pytest.mark.parametrize("tokens, vocab", [(16, 96), (24, 160), (7, 33)])
def test_the_loss_moves_its_counted_bytes_per_logit(kind: str, tokens: int, vocab: int) -> None:
    assert _count(kind, tokens, vocab) == LOSS_BYTES[kind] * tokens * vocab


def test_the_megatron_loss_gives_pytorchs_gradient() -> None:
    # the operator sequence counted above is a cross-entropy: same loss, same gradient
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(12, 40, generator=gen)
    target = torch.randint(0, 40, (12,), generator=gen)
    a, b = x.clone().requires_grad_(), x.clone().requires_grad_()
    ours = _MegatronLoss.apply(a, target).mean()
    ref = F.cross_entropy(b, target)
    ours.backward()
    ref.backward()
    assert torch.allclose(ours, ref) and torch.allclose(a.grad, b.grad)  # type: ignore[arg-type]
