"""Lab 10 figure: a ring step's attention time against its K/V transfer time, by tokens per rank."""

from __future__ import annotations

import matplotlib.pyplot as plt
from _draw import PALETTE

from infralens.ring_attention import min_block_tokens, ring_step
from infralens.topology import Cluster

CP, HEADS, HEAD_DIM = 8, 32, 128
links = Cluster.from_node_shape("2_nodes_x_8_gpus", "dgx-a100")
F = links.system.gpu.bf16_flops
tokens = [2**k for k in range(7, 16)]  # tokens per rank, c = seq_len / cp


def step_us(c: int, bandwidth: int) -> tuple[float, float]:
    step = ring_step(
        c * CP, CP, HEADS, HEADS, HEAD_DIM, flops_per_s=F, bandwidth_bytes_per_s=bandwidth
    )
    return float(step.compute_s) * 1e6, float(step.transfer_s) * 1e6


fig, ax = plt.subplots(figsize=(6.2, 3.6))
compute = [step_us(c, links.intra.bandwidth_bytes_per_s)[0] for c in tokens]
ax.plot(tokens, compute, color=PALETTE[0], marker="o", ms=3, label="attention of one step")
LINKS = ((PALETTE[1], "NVLink", links.intra), (PALETTE[3], "network", links.inter))
for colour, name, link in LINKS:
    bw = link.bandwidth_bytes_per_s
    ax.plot(
        tokens,
        [step_us(c, bw)[1] for c in tokens],
        color=colour,
        marker="s",
        ms=3,
        label=f"K/V transfer over {name} ({bw // 10**9} GB/s)",
    )
    c_min = min_block_tokens(HEADS, HEADS, flops_per_s=F, bandwidth_bytes_per_s=bw)
    ax.axvline(float(c_min), color=colour, ls=":", lw=1)
    ax.text(float(c_min) * 1.08, compute[0], f"c = {c_min}", color=colour, fontsize=8, va="bottom")
ax.set_xscale("log", base=2)
ax.set_yscale("log")
ax.set_xlabel("tokens per rank, c = s / cp", fontsize=9)
ax.set_ylabel("microseconds per ring step", fontsize=9)
ax.set_title(
    f"{HEADS} heads x {HEAD_DIM}, bf16, {F // 10**12} TFLOP/s: the step hides its transfer"
    " right of the dotted line",
    fontsize=9,
)
ax.legend(fontsize=8, frameon=False, loc="upper left")
for side in ("top", "right"):
    ax.spines[side].set_visible(False)
fig.tight_layout()
