"""infralens.elementwise.EAGER_BYTES against the operators PyTorch 2.13 runs (CPU).

One Llama block written as torchtitan wrote it at 9dec370 (the commit of its
published H100 benchmarks, ``torchtitan/models/llama/model.py`` and
``models/norms.py``): ``RMSNorm`` in fp32 from composite operators, the
rotary embedding as a complex multiply in fp32, ``repeat_kv`` by
expand-and-reshape, SwiGLU, two residual adds. It runs forward and backward
under a ``TorchDispatchMode`` that adds up, for every ATen operator but the
matmuls and the attention kernel, the bytes of each tensor it reads and
writes (a broadcast input counted once per distinct element). Per-layer
terms (the norm weights, the rotary table) are subtracted as the docstring
of ``EAGER_BYTES`` states; what is left must equal the formula exactly.

Why CPU stands for CUDA here: these operators and their backward formulas
are device-independent (autograd's ``derivatives.yaml``), and
``.contiguous()`` after attention copies nothing on either device because
both flash kernels return the output in (b, s, heads, d) memory order.
"""

from __future__ import annotations

import pytest

from tests.runtime.harness import SKIP_REASON

torch = pytest.importorskip("torch", reason=SKIP_REASON)

import torch.nn.functional as F  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402
from torch.utils._pytree import tree_leaves  # noqa: E402
from torch.utils.checkpoint import checkpoint, create_selective_checkpoint_contexts  # noqa: E402

from infralens.elementwise import elementwise_bytes  # noqa: E402
from infralens.model import TransformerConfig  # noqa: E402
from tests.runtime.test_activations_torch import _titan_policy  # noqa: E402

LEFT_OUT = {"mm", "_scaled_dot_product_flash_attention_for_cpu",
            "_scaled_dot_product_flash_attention_for_cpu_backward"}  # fmt: skip
NO_TRAFFIC = {"_unsafe_view", "detach", "empty", "empty_like", "new_empty_strided",
              "zeros_like", "ones_like"}  # fmt: skip
# (b, s, h, heads, kv_heads, ffn)
SHAPES = [(1, 16, 64, 4, 2, 96), (2, 24, 96, 6, 2, 160), (3, 8, 128, 4, 4, 256)]


def _bytes(t: torch.Tensor) -> int:
    distinct = 1
    for size, stride in zip(t.shape, t.stride(), strict=True):
        distinct *= size if stride else 1
    return distinct * t.element_size()


class CountBytes(TorchDispatchMode):
    """Bytes read and written by each operator that runs, views excepted, by phase."""

    def __init__(self) -> None:
        super().__init__()
        self.phase = "forward"
        self.total = {"forward": 0, "backward": 0}
        self.ops: set[str] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        out = func(*args, **(kwargs or {}))
        name = func.overloadpacket.__name__
        if name in LEFT_OUT or name in NO_TRAFFIC or func.is_view:
            return out
        self.ops.add(name)
        tensors = [t for t in tree_leaves((args, kwargs, out)) if isinstance(t, torch.Tensor)]
        self.total[self.phase] += sum(_bytes(t) for t in tensors)
        return out


def _rmsnorm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-5)).type_as(x) * w


def _rotary(x: torch.Tensor, freqs: torch.Tensor) -> torch.Tensor:
    xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    rotated = xc * freqs.view(1, x.shape[1], 1, xc.shape[-1])
    return torch.view_as_real(rotated).flatten(3).type_as(x)


def _repeat(x: torch.Tensor, n: int) -> torch.Tensor:
    if n == 1:
        return x
    b, s, g, d = x.shape
    return x.unsqueeze(3).expand(b, s, g, n, d).reshape(b, s, g * n, d)


def _block(x, p, freqs, a, g):  # type: ignore[no-untyped-def]
    b, s, h = x.shape
    d = h // a
    n1 = _rmsnorm(x, p["n1"])
    q = _rotary(F.linear(n1, p["wq"]).view(b, s, a, d), freqs)
    k = _repeat(_rotary(F.linear(n1, p["wk"]).view(b, s, g, d), freqs), a // g)
    v = _repeat(F.linear(n1, p["wv"]).view(b, s, g, d), a // g)
    o = F.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True
    )
    x = x + F.linear(o.transpose(1, 2).contiguous().view(b, s, h), p["wo"])
    n2 = _rmsnorm(x, p["n2"])
    return x + F.linear(F.silu(F.linear(n2, p["w1"])) * F.linear(n2, p["w3"]), p["w2"])


def _count(shape: tuple[int, ...], recompute: str) -> tuple[int, CountBytes]:
    b, s, h, a, g, f = shape
    d = h // a
    gen = torch.Generator().manual_seed(0)

    def param(*size: int) -> torch.Tensor:
        return torch.randn(*size, generator=gen, dtype=torch.bfloat16).requires_grad_()

    p = {"n1": param(h), "n2": param(h), "wq": param(h, h), "wk": param(g * d, h),
         "wv": param(g * d, h), "wo": param(h, h), "w1": param(f, h), "w3": param(f, h),
         "w2": param(h, f)}  # fmt: skip
    angles = torch.randn(s, d // 2, generator=gen)
    freqs = torch.polar(torch.ones_like(angles), angles)
    x = torch.randn(b, s, h, generator=gen, dtype=torch.bfloat16, requires_grad=True)
    counter = CountBytes()
    with counter:
        if recompute == "none":
            out = _block(x, p, freqs, a, g)
        elif recompute == "full":
            out = checkpoint(_block, x, p, freqs, a, g, use_reentrant=False)
        else:
            out = checkpoint(
                _block, x, p, freqs, a, g, use_reentrant=False,
                context_fn=lambda: create_selective_checkpoint_contexts(_titan_policy()),
            )  # fmt: skip
        counter.phase = "backward"
        out.backward(torch.ones_like(out))
    # per-layer terms the formula leaves out. The norm weights (bf16): each forward weight
    # multiply reads one (2·h per norm), backward reads it again and writes its gradient
    # (4·h per norm). The rotary table (complex64, 4·s·d bytes): read by the forward
    # multiplies of q and k (8·s·d); backward conjugates it into a copy and reads that
    # for each (24·s·d). Recomputation replays the forward's.
    forward = 4 * h + 8 * s * d
    per_layer = forward + 8 * h + 24 * s * d + (forward if recompute != "none" else 0)
    total = counter.total["forward"] + counter.total["backward"] - per_layer
    return total, counter


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("recompute", ["none", "selective", "full"])
def test_eager_llama_block_moves_the_counted_bytes(shape: tuple[int, ...], recompute: str) -> None:
    b, s, h, a, g, f = shape
    measured, counter = _count(shape, recompute)
    assert {"pow", "rsqrt", "silu", "silu_backward", "_to_copy"} <= counter.ops
    cfg = TransformerConfig(layers=1, hidden=h, heads=a, kv_heads=g, ffn_hidden=f,
                            vocab_size=32, seq_len=s, gated_mlp=True, norm="rmsnorm")  # fmt: skip
    assert measured == elementwise_bytes(
        cfg, seq_len=s, micro_batch_size=b, kernels="eager", recompute=recompute
    )
