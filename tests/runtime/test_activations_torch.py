"""infralens.memory.activation_bytes against the bytes autograd saves in PyTorch 2.13 (CPU).

One transformer block runs forward under ``torch.autograd.graph.saved_tensors_hooks``;
every tensor autograd packs for backward is recorded by its storage, each storage
counted once, parameters and the constant rotary tables and causal mask left out.
The total must equal the formula exactly.

What runs on CPU, and why it stands for the GPU path:

- ``F.scaled_dot_product_attention`` with ``is_causal=True`` dispatches to
  ``_scaled_dot_product_flash_attention_for_cpu`` (asserted below), which saves
  q, k and v (k and v at kv_heads: ``enable_gqa`` needs no copies), the
  output and the fp32 log-sum-exp (b, a, s): the tensors FlashAttention saves.
- CPU ``F.rms_norm`` is composite and would also save the normalised tensor;
  the block uses an autograd Function that saves what the fused kernel's
  backward, ``aten._fused_rms_norm_backward(grad, input, rstd, weight)``, reads:
  the input and the fp32 rstd.
- CPU ``F.dropout`` saves a scaled noise tensor in the input dtype; the GPT
  block calls ``torch.native_dropout``, the kernel CUDA uses, which saves a
  1-byte bool mask. The GPT block runs in fp32 because CPU LayerNorm keeps
  its mean and rstd in the input dtype (fp32 on GPUs for bf16 input).
"""

from __future__ import annotations

import pytest

from tests.runtime.harness import SKIP_REASON

torch = pytest.importorskip("torch", reason=SKIP_REASON)

import torch.nn.functional as F  # noqa: E402
from torch.utils.checkpoint import (  # noqa: E402
    CheckpointPolicy,
    checkpoint,
    create_selective_checkpoint_contexts,
)

from infralens.head_memory import logits_bytes  # noqa: E402
from infralens.memory import activation_bytes  # noqa: E402
from infralens.model import TransformerConfig  # noqa: E402

# (b, s, h, heads, kv_heads, ffn)
LLAMA_SHAPES = [(1, 16, 64, 4, 2, 96), (2, 32, 128, 8, 2, 256), (3, 8, 96, 6, 6, 160)]
GPT_SHAPES = [(1, 16, 64, 4, 256), (2, 24, 96, 6, 384), (2, 8, 32, 2, 96)]


def saved_bytes(fn, exclude):  # type: ignore[no-untyped-def]
    """Bytes of distinct storages autograd packs while *fn* runs, leaving out *exclude*'s."""
    skip = {t.untyped_storage().data_ptr() for t in exclude}
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        if storage.data_ptr() not in skip:
            seen[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn()
    return sum(seen.values()), out


class FusedRMSNorm(torch.autograd.Function):
    """RMSNorm saving what ``aten._fused_rms_norm_backward`` reads: input and fp32 rstd."""

    @staticmethod
    def forward(ctx, x, weight):  # type: ignore[no-untyped-def]
        rstd = torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-5)
        ctx.save_for_backward(x, rstd, weight)
        return (x.float() * rstd).to(x.dtype) * weight

    @staticmethod
    def backward(ctx, grad):  # type: ignore[no-untyped-def]
        x, rstd, weight = ctx.saved_tensors
        # the kernel has no CPU implementation in 2.13; its registered decomposition does the math
        from torch._decomp.decompositions import _fused_rms_norm_backward

        gx, gw = _fused_rms_norm_backward(grad, x, [x.shape[-1]], rstd, weight, [True, True])
        return gx, gw


def _rope(x, cos, sin):  # type: ignore[no-untyped-def]
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


def _llama_block(x, p, cos, sin, a, g):  # type: ignore[no-untyped-def]
    b, s, h = x.shape
    d = h // a
    n1 = FusedRMSNorm.apply(x, p["n1"])
    q = _rope(F.linear(n1, p["wq"]).view(b, s, a, d), cos, sin)
    k = _rope(F.linear(n1, p["wk"]).view(b, s, g, d), cos, sin)
    v = F.linear(n1, p["wv"]).view(b, s, g, d)
    o = F.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True, enable_gqa=True
    )
    assert "FlashAttentionForCpu" in type(o.grad_fn).__name__
    x = x + F.linear(o.transpose(1, 2).reshape(b, s, h), p["wo"])
    n2 = FusedRMSNorm.apply(x, p["n2"])
    return x + F.linear(F.silu(F.linear(n2, p["w1"])) * F.linear(n2, p["w3"]), p["w2"])


# torchtitan's op-level selective AC (pytorch/torchtitan, torchtitan/distributed/
# activation_checkpoint.py at cfb93265, _apply_op_sac; save list _op_sac_save_list in
# torchtitan/models/llama3/infra/parallelize.py at 018740b7). On CPU, SDPA dispatches to
# the _for_cpu flash kernel, which stands in for the CUDA one on that list.
SAC_SAVE = {
    torch.ops.aten.mm.default,
    torch.ops.aten._scaled_dot_product_flash_attention.default,
    torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default,
}


def _titan_policy():  # type: ignore[no-untyped-def]
    counts: dict[str, int] = {"forward": 0, "recompute": 0}

    def policy(ctx, func, *args, **kwargs):  # type: ignore[no-untyped-def]
        mode = "recompute" if ctx.is_recompute else "forward"
        if func == torch.ops.aten.mm.default:
            counts[mode] += 1
        every_second_mm = func == torch.ops.aten.mm.default and counts[mode] % 2 == 0
        save = func in SAC_SAVE and not every_second_mm
        return CheckpointPolicy.MUST_SAVE if save else CheckpointPolicy.PREFER_RECOMPUTE

    return policy


def _sac_saved_bytes(fn, exclude):  # type: ignore[no-untyped-def]
    """Storages autograd packs outside the checkpoint plus those the SAC cache holds, once each.

    Inside a non-reentrant checkpoint autograd packs placeholders; what survives to
    backward is what the caching mode stores (``_CachingTorchDispatchMode.storage``:
    one detached alias per MUST_SAVE output) and what the outer graph saves.
    """
    modes: list = []  # type: ignore[type-arg]

    def context_fn():  # type: ignore[no-untyped-def]
        contexts = create_selective_checkpoint_contexts(_titan_policy())
        modes.append(contexts[0])
        return contexts

    skip = {t.untyped_storage().data_ptr() for t in exclude}
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        if t.untyped_storage().data_ptr() not in skip:
            seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = fn(context_fn)
    for mode in modes:
        for entries in mode.storage.values():
            for entry in entries.values():
                wrapped = entry if isinstance(entry, tuple) else (entry,)
                for w in wrapped:
                    if isinstance(getattr(w, "val", None), torch.Tensor):
                        st = w.val.untyped_storage()
                        seen[st.data_ptr()] = st.nbytes()
    return sum(seen.values()), out


def _llama_inputs(
    b: int, s: int, h: int, a: int, g: int, f: int
) -> tuple[torch.Tensor, dict[str, torch.Tensor], torch.Tensor, torch.Tensor]:
    """A bf16 input, the block's weights and the rotary tables, seeded."""
    torch.manual_seed(0)
    dt, d = torch.bfloat16, h // a
    shapes = {"n1": (h,), "n2": (h,), "wq": (h, h), "wk": (g * d, h), "wv": (g * d, h),
              "wo": (h, h), "w1": (f, h), "w3": (f, h), "w2": (h, f)}  # fmt: skip
    p = {k: (torch.randn(v, dtype=dt) * 0.1).requires_grad_() for k, v in shapes.items()}
    angle = torch.arange(s).float()[:, None] / 10 ** (torch.arange(d).float() / d)
    cos, sin = angle.cos().to(dt)[:, None, :], angle.sin().to(dt)[:, None, :]
    x = torch.randn(b, s, h, dtype=dt, requires_grad=True)
    return x, p, cos, sin


def _llama(b: int, s: int, h: int, a: int, g: int, f: int, full: bool) -> tuple[int, int]:
    x, p, cos, sin = _llama_inputs(b, s, h, a, g, f)
    if full:
        nbytes, out = saved_bytes(
            lambda: checkpoint(_llama_block, x, p, cos, sin, a, g, use_reentrant=False),
            [*p.values(), cos, sin],
        )
    else:
        nbytes, out = saved_bytes(
            lambda: _llama_block(x, p, cos, sin, a, g), [*p.values(), cos, sin]
        )
    out.float().sum().backward()  # backward runs on what was saved
    config = TransformerConfig(layers=1, hidden=h, heads=a, kv_heads=g, ffn_hidden=f,
                               vocab_size=8, seq_len=s, gated_mlp=True, norm="rmsnorm")  # fmt: skip
    predicted = activation_bytes(config, seq_len=s, micro_batch_size=b, stack="pytorch",
                                 recompute="full" if full else "none")  # fmt: skip
    return nbytes, predicted


@pytest.mark.parametrize("shape", [*LLAMA_SHAPES, (2, 16, 48, 4, 1, 64)])
def test_llama_block_under_torchtitan_selective_ac_saves_the_formula(
    shape: tuple[int, ...],
) -> None:
    b, s, h, a, g, f = shape
    x, p, cos, sin = _llama_inputs(b, s, h, a, g, f)
    measured, out = _sac_saved_bytes(
        lambda ctx: checkpoint(
            _llama_block, x, p, cos, sin, a, g, use_reentrant=False, context_fn=ctx
        ),
        [*p.values(), cos, sin],
    )
    out.float().sum().backward()  # recompute consumes the cache: the policy is coherent
    assert x.grad is not None
    config = TransformerConfig(layers=1, hidden=h, heads=a, kv_heads=g, ffn_hidden=f,
                               vocab_size=8, seq_len=s, gated_mlp=True, norm="rmsnorm")  # fmt: skip
    predicted = activation_bytes(config, seq_len=s, micro_batch_size=b, stack="pytorch",
                                 recompute="selective")  # fmt: skip
    assert measured == predicted


@pytest.mark.parametrize("full", [False, True])
@pytest.mark.parametrize("shape", LLAMA_SHAPES)
def test_llama_block_with_sdpa_saves_the_flash_formula(shape: tuple[int, ...], full: bool) -> None:
    measured, predicted = _llama(*shape, full=full)
    assert measured == predicted


def _gpt_block(x, p, mask, a, drop):  # type: ignore[no-untyped-def]
    b, s, h = x.shape
    d = h // a
    n1 = F.layer_norm(x, (h,), p["ln1w"], p["ln1b"])
    q, k, v = F.linear(n1, p["wqkv"], p["bqkv"]).view(b, s, 3, a, d).permute(2, 0, 3, 1, 4)
    scores = (torch.matmul(q, k.transpose(-2, -1)) * d**-0.5).masked_fill(mask, float("-inf"))
    probs = torch.native_dropout(torch.softmax(scores, dim=-1), drop, True)[0]
    o = torch.matmul(probs, v).transpose(1, 2).reshape(b, s, h)
    x = x + torch.native_dropout(F.linear(o, p["wo"], p["bo"]), drop, True)[0]
    n2 = F.layer_norm(x, (h,), p["ln2w"], p["ln2b"])
    mlp = F.linear(F.gelu(F.linear(n2, p["w1"], p["b1"])), p["w2"], p["b2"])
    return x + torch.native_dropout(mlp, drop, True)[0]


def _gpt(b: int, s: int, h: int, a: int, f: int, full: bool) -> tuple[int, int]:
    torch.manual_seed(0)
    shapes = {"ln1w": (h,), "ln1b": (h,), "wqkv": (3 * h, h), "bqkv": (3 * h,), "wo": (h, h),
              "bo": (h,), "ln2w": (h,), "ln2b": (h,), "w1": (f, h), "b1": (f,), "w2": (h, f),
              "b2": (h,)}  # fmt: skip
    p = {k: (torch.randn(v) * 0.1).requires_grad_() for k, v in shapes.items()}
    mask = torch.ones(s, s, dtype=torch.bool).triu(1)
    x = torch.randn(b, s, h, requires_grad=True)
    block = (
        (lambda: checkpoint(_gpt_block, x, p, mask, a, 0.1, use_reentrant=False))
        if full
        else (lambda: _gpt_block(x, p, mask, a, 0.1))
    )
    nbytes, out = saved_bytes(block, [*p.values(), mask])
    out.sum().backward()
    config = TransformerConfig(layers=1, hidden=h, heads=a, kv_heads=a, ffn_hidden=f,
                               vocab_size=8, seq_len=s, bias=True)  # fmt: skip
    predicted = activation_bytes(config, seq_len=s, micro_batch_size=b, attention="materialized",
                                 dropout=True, element_bytes=4, stack="pytorch",
                                 recompute="full" if full else "none")  # fmt: skip
    return nbytes, predicted


@pytest.mark.parametrize("full", [False, True])
@pytest.mark.parametrize("shape", GPT_SHAPES)
def test_gpt_block_with_materialised_attention_saves_the_formula(
    shape: tuple[int, ...], full: bool
) -> None:
    measured, predicted = _gpt(*shape, full=full)
    assert measured == predicted


@pytest.mark.parametrize(("b", "s", "h", "vocab"), [(1, 16, 32, 100), (2, 8, 64, 1000)])
def test_loss_saves_fp32_logits(b: int, s: int, h: int, vocab: int) -> None:
    torch.manual_seed(0)
    w = torch.randn(vocab, h, dtype=torch.bfloat16, requires_grad=True)
    hidden = torch.randn(b, s, h, dtype=torch.bfloat16, requires_grad=True)
    target = torch.randint(vocab, (b * s,))
    nbytes, loss = saved_bytes(
        lambda: F.cross_entropy(F.linear(hidden, w).float().view(b * s, vocab), target),
        [w, hidden, target],
    )
    loss.backward()
    config = TransformerConfig(layers=1, hidden=h, heads=1, kv_heads=1, ffn_hidden=h,
                               vocab_size=vocab, seq_len=s)  # fmt: skip
    # nll_loss also saves its fp32 total weight, one 4-byte scalar.
    assert nbytes == logits_bytes(config, seq_len=s, micro_batch_size=b) + 4
