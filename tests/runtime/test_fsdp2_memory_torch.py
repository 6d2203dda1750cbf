"""infralens.fsdp.footprint against the storages FSDP2 allocates on gloo ranks (PyTorch 2.13).

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
"""

from __future__ import annotations

import pytest

from tests.runtime.harness import SKIP_REASON, run_on_ranks_cached

torch = pytest.importorskip("torch", reason=SKIP_REASON)

from infralens.fsdp import Footprint, Unit, footprint  # noqa: E402

WORLD_SIZES = (2, 3, 4)
HIDDEN, VOCAB, LAYERS = 6, 10, 3


def _units() -> tuple[Unit, list[Unit]]:
    root = Unit("root", ((VOCAB, HIDDEN), (VOCAB, HIDDEN), (VOCAB,)))  # embedding, output w, b
    layers = [
        Unit(f"layer{i}", ((HIDDEN + i, HIDDEN + i - 1 if i else HIDDEN),)) for i in range(LAYERS)
    ]
    return root, layers


def _measure(rank: int, world: int) -> Footprint:
    import torch
    from torch import nn
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import FSDPModule, MixedPrecisionPolicy, fully_shard

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
            self.embed = nn.Embedding(VOCAB, HIDDEN)
            dims = [HIDDEN] + [HIDDEN + i for i in range(LAYERS)]
            self.layers = nn.ModuleList(Layer(dims[i], dims[i + 1]) for i in range(LAYERS))
            self.out = nn.Linear(HIDDEN, VOCAB)

        def forward(self, tokens):  # type: ignore[no-untyped-def]
            x = self.embed(tokens)
            for layer in self.layers:
                x = layer(x)
            return self.out(x[..., :HIDDEN])  # the last layer is wider than the output's input

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

    params = local_bytes(model.parameters())
    logits = model(torch.arange(4).view(2, 2) % VOCAB)
    root = unsharded(model)
    logits.float().sum().backward()
    grads = local_bytes(p.grad for p in model.parameters())
    opt = torch.optim.Adam(model.parameters())
    opt.step()
    state = [t for s in opt.state.values() for k, t in s.items() if k != "step"]
    return Footprint(params, grads, local_bytes(state), root, max(seen) - root)


@pytest.mark.parametrize("world", WORLD_SIZES)
def test_fsdp2_rank_holds_the_predicted_bytes(world: int) -> None:
    root, layers = _units()
    for rank, measured in enumerate(run_on_ranks_cached(_measure, world)):
        assert measured == footprint(root, layers, world, rank=rank), f"rank {rank}"
