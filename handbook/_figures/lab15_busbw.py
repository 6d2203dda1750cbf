"""Lab 15 figure: bus bandwidth by size for each NCCL algorithm on DGX H100, with published runs."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
from _draw import PALETTE

from infralens.nccl import candidates, predict
from infralens.topology import Cluster
from infralens.validation import load_nccl_rows

# The plot directive runs this script from handbook/_figures.
ROWS = load_nccl_rows(Path("../../tests/data/nccl_tests.csv"))
sizes = [2**k for k in range(20, 34)]  # 1 MiB .. 8 GiB
fig, panels = plt.subplots(1, 2, figsize=(6.2, 4.2), sharey=True)
STYLES = ("-", "-.", ":")  # with the colours: the forced algorithms apart in greyscale

for ax, nodes in zip(panels, (1, 2), strict=True):
    cluster = Cluster.from_node_shape(f"{nodes}_nodes_x_8_gpus", "dgx-h100")
    for k, algorithm in enumerate(candidates("all_reduce", cluster)):
        values = [
            predict("all_reduce", s, cluster, algorithm=algorithm).bus_bandwidth for s in sizes
        ]
        ax.plot(sizes, values, STYLES[k % 3], color=PALETTE[k], label=f"{algorithm} (forced)")
    chosen = [predict("all_reduce", s, cluster).bus_bandwidth for s in sizes]
    ax.plot(sizes, chosen, "k--", linewidth=0.8, label="NCCL's choice")
    runs = sorted(
        {r.run_id for r in ROWS if r.op == "all_reduce" and r.nodes == nodes
         and r.gpu == "h100-sxm5-80gb" and r.scope in ("nvlink", "rdma")}
    )  # fmt: skip
    for m, run in enumerate(runs):
        points = [(r.size_bytes, r.busbw) for r in ROWS if r.run_id == run and r.op == "all_reduce"]
        ax.plot(*zip(*points, strict=True), "os^v"[m % 4], markersize=3, color=PALETTE[4 + m],
                linestyle="none", label=f"measured: {run}")  # fmt: skip
    ax.set_xscale("log", base=2)
    ax.set_xlabel("all-reduce size (bytes)")
    ax.set_title(f"{nodes} DGX H100 node{'s' if nodes > 1 else ''}", fontsize=9)
    ax.legend(fontsize=7, frameon=False, loc="upper center", bbox_to_anchor=(0.5, -0.2))
panels[0].set_ylabel("bus bandwidth (GB/s)")
