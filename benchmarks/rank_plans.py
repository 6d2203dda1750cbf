"""Benchmark: rank every feasible plan for Llama 3 405B on 16,384 H100s by step time.

Run: ``PYTHONPATH=labs_src python benchmarks/rank_plans.py``. The goal is under one
second; this prints the wall time and the CPU time (the one to read on a busy
machine); it is not a timed test.
"""

from __future__ import annotations

import time

from infralens.planner.ranking import rank_plans, render
from infralens.topology import Cluster


def main() -> None:
    cluster = Cluster.from_node_shape("2048_nodes_x_8_gpus", "dgx-h100")
    start, cpu = time.perf_counter(), time.process_time()
    best = rank_plans("llama3.1-405b", cluster, seq_len=8192, global_batch_size=2048)
    elapsed, used = time.perf_counter() - start, time.process_time() - cpu
    print(render(best))
    print(f"ranked in {elapsed:.2f} s ({used:.2f} s of CPU) for {cluster.world_size} GPUs")


if __name__ == "__main__":
    main()
