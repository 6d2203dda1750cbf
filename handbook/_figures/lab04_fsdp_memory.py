"""Lab 04 figure: bytes per GPU of DDP against FSDP (per-block units) as ranks are added."""

from __future__ import annotations

import matplotlib.pyplot as plt
from _draw import PALETTE

from infralens.fsdp import Unit
from infralens.fsdp_memory import gradient_buffer_peak, peak_unsharded_bytes
from infralens.zero import model_state_bytes

# 32 blocks of four 4096 x 4096 matrices: about 2.1B parameters.
blocks = [Unit(f"block{i}", ((4096, 4096),) * 4) for i in range(32)]
psi = sum(u.numel for u in blocks)
ranks = [2, 4, 8, 16, 32, 64]
ddp = [model_state_bytes(psi, dp_size=n, stage=0) / 10**9 for n in ranks]
shards = [model_state_bytes(psi, dp_size=n, stage=3) / 10**9 for n in ranks]
window = [peak_unsharded_bytes(blocks, n) / 10**9 for n in ranks]
no_root = Unit("none", ((0,),))
grads = [gradient_buffer_peak(no_root, blocks, n) / 10**9 for n in ranks]

fig, ax = plt.subplots(figsize=(6.2, 3.2))
x = range(len(ranks))
ax.bar([i - 0.2 for i in x], ddp, width=0.4, color=PALETTE[0], label="DDP: full model states")
ax.bar([i + 0.2 for i in x], shards, width=0.4, color=PALETTE[2], label="FSDP: sharded states")
ax.bar(
    [i + 0.2 for i in x],
    window,
    width=0.4,
    bottom=shards,
    color=PALETTE[1],
    hatch="////",
    edgecolor="white",
    linewidth=0,
    label="FSDP: gathered window (2 blocks)",
)
ax.bar(
    [i + 0.2 for i in x],
    grads,
    width=0.4,
    bottom=[a + b for a, b in zip(shards, window, strict=True)],
    color=PALETTE[3],
    hatch="....",
    edgecolor="white",
    linewidth=0,
    label="FSDP: gradient buffers in backward",
)
ax.set_xticks(list(x), [str(n) for n in ranks])
ax.set_xlabel("data-parallel ranks")
ax.set_ylabel("GB (10⁹ bytes) per GPU")
ax.set_title(f"{psi / 1e9:.2f}B parameters, mixed-precision Adam, bf16 gather", fontsize=10)
ax.set_ylim(0, 1.5 * max(ddp))  # room above the bars for the legend
ax.legend(fontsize=8, frameon=False, ncol=2, loc="upper center")
