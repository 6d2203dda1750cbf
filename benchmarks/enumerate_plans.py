"""Benchmark: enumerate every (tp, cp, pp, dp) plan for 16,384 GPUs with 8 per node.

Run: ``PYTHONPATH=labs_src python benchmarks/enumerate_plans.py``. The goal
(under one second) is a report, not a timed test.
"""

from __future__ import annotations

import time

from infralens.plan import enumerate_plans


def main() -> None:
    best = float("inf")
    count = 0
    for _ in range(5):
        start = time.perf_counter()
        count = sum(1 for _ in enumerate_plans(16_384, 8))
        best = min(best, time.perf_counter() - start)
    print(f"{count} plans for 16384 GPUs (8 per node) in {best * 1000:.1f} ms (best of 5)")


if __name__ == "__main__":
    main()
