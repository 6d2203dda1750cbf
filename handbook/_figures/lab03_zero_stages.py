"""Lab 03 figure: bytes per rank by ZeRO stage, held (by component) and sent (by collective)."""

from __future__ import annotations

import matplotlib.pyplot as plt
from _draw import PALETTE
from matplotlib.patches import Patch

from infralens.collectives import ring_bytes_sent
from infralens.zero import STAGES, communication_bytes_per_rank, model_states, step_collectives

PSI, DP = 7_500_000_000, 64  # the ZeRO paper's worked example (Figure 1)
GB = 10**9

fig, (held, sent) = plt.subplots(2, 1, figsize=(6.2, 5.2), sharex=True)
parts = ("parameters", "gradients", "optimizer")
for stage in STAGES:
    m = model_states(PSI, dp_size=DP, stage=stage)
    bottom = 0.0
    for k, part in enumerate(parts):
        gb = getattr(m, part) / GB
        held.bar(stage, gb, bottom=bottom, color=PALETTE[k], label=part if stage == 0 else None,
                 hatch=(None, "////", "....")[k], edgecolor="white", linewidth=0)  # fmt: skip
        bottom += gb
    held.text(stage, bottom + 2, f"{m.total / GB:.4g}", ha="center", fontsize=7.5)

    nbytes = PSI * 2  # bf16 elements, as communication_bytes_per_rank counts them
    bottom = 0.0
    for op, what in step_collectives(stage):
        gb = float(ring_bytes_sent(op, nbytes, DP)) / GB
        color = PALETTE[4] if op == "reduce_scatter" else PALETTE[5]
        sent.bar(stage, gb, bottom=bottom, color=color, edgecolor="white",
                 hatch=None if op == "reduce_scatter" else "////")  # fmt: skip
        sent.text(
            stage,
            bottom + gb / 2,
            what.replace(" ", "\n", 1),
            ha="center",
            va="center",
            fontsize=7,
            color="white",
            bbox={"boxstyle": "square,pad=0.2", "facecolor": color, "linewidth": 0},
        )
        bottom += gb
    assert abs(bottom * GB - communication_bytes_per_rank(PSI, dp_size=DP, stage=stage)) < 1
    sent.text(stage, bottom + 0.4, f"{bottom:.4g}", ha="center", fontsize=7.5)

held.set_title(f"held: model states, Ψ = 7.5B, N_d = {DP}", fontsize=9)
held.set_ylabel("GB per rank (10⁹ bytes)")
held.set_ylim(0, 132)
held.legend(fontsize=8, frameon=False)
sent.set_title("sent: ring collectives, bf16", fontsize=9)
sent.set_ylim(0, 50)
sent.set_ylabel("GB sent per rank per step")
sent.legend(
    handles=[
        Patch(color=PALETTE[4], label="reduce-scatter"),
        Patch(facecolor=PALETTE[5], edgecolor="white", hatch="////", label="all-gather"),
    ],
    fontsize=8,
    frameon=False,
    loc="upper left",
)
for ax in (held, sent):
    ax.set_xticks(list(STAGES), [f"stage {s}" for s in STAGES], fontsize=8)
    ax.spines[["top", "right"]].set_visible(False)
