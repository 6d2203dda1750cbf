"""Validation figure: predicted against measured nccl-tests bus bandwidth, every shipped row."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
from _draw import PALETTE

from infralens.validation import SCOPES, check_nccl, load_nccl_rows

# The plot directive runs this script from handbook/_figures.
checks = [check_nccl(r) for r in load_nccl_rows(Path("../../tests/data/nccl_tests.csv"))]
fig, (scatter, errors) = plt.subplots(1, 2, figsize=(6.2, 3.2))
for k, scope in enumerate(SCOPES):
    mine = [c for c in checks if c.row.scope == scope]
    scatter.plot(
        [c.row.busbw for c in mine],
        [c.predicted for c in mine],
        "os^vD"[k],
        markersize=3,
        color=PALETTE[k],
        linestyle="none",
        label=f"{scope} ({len(mine)})",
    )
    errors.plot(
        [c.row.size_bytes for c in mine],
        [100 * c.error for c in mine],
        "os^vD"[k],
        markersize=3,
        color=PALETTE[k],
        linestyle="none",
    )
top = max(max(c.row.busbw, c.predicted) for c in checks) * 1.1
scatter.plot([1, top], [1, top], "k-", linewidth=0.6)
scatter.plot([1, top], [1.2, 1.2 * top], "k:", linewidth=0.6)
scatter.plot([1, top], [0.8, 0.8 * top], "k:", linewidth=0.6)
scatter.set_xscale("log")
scatter.set_yscale("log")
scatter.set_xlabel("measured busbw (GB/s)")
scatter.set_ylabel("predicted busbw (GB/s)")
scatter.legend(fontsize=7, frameon=False, title="transport (rows)", title_fontsize=7)
errors.axhline(0, color="k", linewidth=0.6)
for bound in (-10, 10):
    errors.axhline(bound, color="k", linestyle=":", linewidth=0.6)
errors.set_xscale("log", base=2)
errors.set_ylim(-100, 300)
errors.set_xlabel("message size (bytes)")
errors.set_ylabel("error (%), predicted / measured − 1")
