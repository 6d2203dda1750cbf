"""infralens.fsdp_memory.footprint against the storages FSDP2 allocates on gloo (PyTorch 2.13).

A root module (embedding and output layer) wraps three layers, each wrapped
with ``fully_shard`` under ``MixedPrecisionPolicy(param_dtype=bf16,
reduce_dtype=fp32)``; shapes are uneven so every shard is padded. On each rank
the test reads, counting each storage once: the local shards of the
parameters, of the gradients after backward and of Adam's state after one
step; the all-gathered parameters alive at the end of forward (only the
root's); and the largest set alive at any point inside a layer's forward or
backward. Unsharded bytes are read from FSDP2's internals: each
``FSDPParam._unsharded_param`` (FSDP2 resizes its storage to 0 when it frees
it) and, for a unit whose all-gather was prefetched in backward but not yet
copied out, the group's flat ``_all_gather_result.all_gather_output``.

The transient gradient buffers are sampled at the two moments each can peak:
on entry to every ``FSDPParamGroup.post_backward`` (the unit's unsharded
gradients are all computed; the previous unit's reduce-scatter input is still
held) and right after ``foreach_reduce_scatter_copy_in`` (the unit's gradients,
passed in, and its new fp32 reduce-scatter input, both live). Each sample
counts, once per storage, every ``_unsharded_param.grad`` still set, the
reduce-scatter inputs in ``comm_ctx.reduce_scatter_states`` and the tensors
passed to the copy-in; the test also checks their dtypes (bf16 gradients,
fp32 reduce-scatter input).
"""

from __future__ import annotations

import pytest

from tests.runtime.harness import SKIP_REASON, run_on_ranks_cached

torch = pytest.importorskip("torch", reason=SKIP_REASON)

from infralens.fsdp import Unit  # noqa: E402
from infralens.fsdp_memory import Footprint, footprint  # noqa: E402

WORLD_SIZES = (2, 3, 4)
# (vocabulary, widths: embedding dim, then each layer's output). In the first the root's
# reduce-scatter sets the peak; in the second (at 4 ranks) a padded reduce-scatter input held
# while an earlier, larger layer's gradients exist does, with the output layer's gradients.
CONFIGS = {"wide-root": (10, (6, 6, 7, 8)), "tapering": (2, (2, 4, 1))}


def _units(vocab: int, dims: tuple[int, ...]) -> tuple[Unit, list[Unit]]:
    root = Unit("root", ((vocab, dims[0]), (vocab, dims[-1]), (vocab,)))  # embedding, output w, b
    layers = [Unit(f"layer{i}", ((dims[i + 1], dims[i]),)) for i in range(len(dims) - 1)]
    return root, layers


def _measure(rank: int, world: int, vocab: int, dims: tuple[int, ...]) -> Footprint:
    import torch
    from torch import nn
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import FSDPModule, MixedPrecisionPolicy, fully_shard
    from torch.distributed.fsdp._fully_shard import _fsdp_collectives, _fsdp_param_group

    def unsharded(model: nn.Module) -> int:
        storages: dict[int, int] = {}
        for module in model.modules():
            if isinstance(module, FSDPModule):
                group = module._get_fsdp_state()._fsdp_param_group
                if group is None:
                    continue
                held = [
                    fp._unsharded_param
                    for fp in group.fsdp_params
                    if hasattr(fp, "_unsharded_param")
                ]
                if group._all_gather_result is not None:  # prefetched, not yet copied out
                    held.append(group._all_gather_result.all_gather_output)
                for t in held:
                    storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return sum(storages.values())

    seen: list[int] = []

    class Probe(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):  # type: ignore[no-untyped-def]
            seen.append(unsharded(model))
            return x.view_as(x)

        @staticmethod
        def backward(ctx, g):  # type: ignore[no-untyped-def]
            seen.append(unsharded(model))
            return g

    class Layer(nn.Module):
        def __init__(self, fan_in: int, fan_out: int) -> None:
            super().__init__()
            self.lin = nn.Linear(fan_in, fan_out, bias=False)

        def forward(self, x):  # type: ignore[no-untyped-def]
            return Probe.apply(self.lin(x))

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(vocab, dims[0])
            self.layers = nn.ModuleList(Layer(dims[i], dims[i + 1]) for i in range(len(dims) - 1))
            self.out = nn.Linear(dims[-1], vocab)

        def forward(self, tokens):  # type: ignore[no-untyped-def]
            x = self.embed(tokens)
            for layer in self.layers:
                x = layer(x)
            return self.out(x)

    groups: list = []  # type: ignore[type-arg]
    buffers: list[int] = []
    dtypes: set[tuple[str, torch.dtype]] = set()

    def sample(*extra: torch.Tensor) -> None:
        params = [fp for g in groups for fp in g.fsdp_params if hasattr(fp, "_unsharded_param")]
        held = [fp._unsharded_param.grad for fp in params if fp._unsharded_param.grad is not None]
        held += [st.reduce_scatter_input for st in groups[0].comm_ctx.reduce_scatter_states]
        storages = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes()
                    for t in [*held, *extra]}  # fmt: skip
        buffers.append(sum(storages.values()))

    post_backward = _fsdp_param_group.FSDPParamGroup.post_backward
    copy_in = _fsdp_collectives.foreach_reduce_scatter_copy_in

    def sampled_post_backward(self, *args):  # type: ignore[no-untyped-def]
        sample()
        return post_backward(self, *args)

    def sampled_copy_in(grads, rs_input, world_size):  # type: ignore[no-untyped-def]
        copy_in(grads, rs_input, world_size)
        dtypes.update({("grad", g.dtype) for g in grads} | {("rs_input", rs_input.dtype)})
        sample(*grads, rs_input)

    torch.manual_seed(0)
    mesh = init_device_mesh("cpu", (world,))
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    model = Net()
    for layer in model.layers:
        fully_shard(layer, mesh=mesh, mp_policy=mp)
    fully_shard(model, mesh=mesh, mp_policy=mp)

    def local_bytes(tensors) -> int:  # type: ignore[no-untyped-def]
        local = [t._local_tensor.untyped_storage() for t in tensors]
        return sum({st.data_ptr(): st.nbytes() for st in local}.values())

    groups.extend(
        m._get_fsdp_state()._fsdp_param_group for m in model.modules() if isinstance(m, FSDPModule)
    )
    params = local_bytes(model.parameters())
    logits = model(torch.arange(4).view(2, 2) % vocab)
    root = unsharded(model)
    _fsdp_param_group.FSDPParamGroup.post_backward = sampled_post_backward  # type: ignore[method-assign]
    _fsdp_collectives.foreach_reduce_scatter_copy_in = sampled_copy_in
    try:
        logits.float().sum().backward()
    finally:
        _fsdp_param_group.FSDPParamGroup.post_backward = post_backward  # type: ignore[method-assign]
        _fsdp_collectives.foreach_reduce_scatter_copy_in = copy_in
    assert dtypes == {("grad", torch.bfloat16), ("rs_input", torch.float32)}, dtypes
    grads = local_bytes(p.grad for p in model.parameters())
    opt = torch.optim.Adam(model.parameters())
    opt.step()
    state = [t for s in opt.state.values() for k, t in s.items() if k != "step"]
    return Footprint(params, grads, local_bytes(state), root, max(seen) - root, max(buffers))


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("world", WORLD_SIZES)
def test_fsdp2_rank_holds_the_predicted_bytes(world: int, config: str) -> None:
    vocab, dims = CONFIGS[config]
    root, layers = _units(vocab, dims)
    for rank, measured in enumerate(run_on_ranks_cached(_measure, world, vocab, dims)):
        # the output layer's weight and bias (the root's last two) get gradients first
        predicted = footprint(root, layers, world, rank=rank, head_params=2)
        assert measured == predicted, f"rank {rank}"
