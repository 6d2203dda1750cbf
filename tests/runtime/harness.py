"""Run a function on N CPU ranks with torch.distributed (gloo) and gather the results.

Usage from a runtime-agreement test::

    from tests.runtime.harness import run_on_ranks

    def _body(rank: int, world_size: int, n: int) -> list[float]:
        import torch
        import torch.distributed as dist
        t = torch.arange(n, dtype=torch.float64) + 10 * rank
        dist.all_reduce(t)
        return t.tolist()

    results = run_on_ranks(_body, 4, 8)   # one entry per rank, in rank order

``fn`` must be a module-level function (the ranks are spawned processes that
import it by name) and must return something picklable. Each call starts a
fresh process group on a free loopback port. If any rank raises, the call
fails with that rank's number and traceback; if the group does not finish
within ``timeout`` seconds, every rank is killed and the call fails. Either
way no process outlives the call.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import queue
import socket
import subprocess
import sys
import traceback
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

DEFAULT_TIMEOUT_S = 90.0


class RankFailure(AssertionError):
    """A rank raised, or the group did not finish in time."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _rank_main(
    fn: Callable[..., Any],
    rank: int,
    world_size: int,
    port: int,
    timeout: float,
    args: tuple[Any, ...],
    results: Any,
) -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    try:
        import torch
        import torch.distributed as dist

        torch.set_num_threads(1)
        dist.init_process_group(
            "gloo",
            init_method=f"tcp://127.0.0.1:{port}",
            rank=rank,
            world_size=world_size,
            timeout=timedelta(seconds=timeout),
        )
        try:
            value = fn(rank, world_size, *args)
        finally:
            dist.destroy_process_group()
        results.put((rank, True, value))
    except BaseException:  # report everything, including SystemExit, to the parent
        results.put((rank, False, traceback.format_exc()))


def run_on_ranks(
    fn: Callable[..., Any],
    world_size: int,
    *args: Any,
    timeout: float = DEFAULT_TIMEOUT_S,
) -> list[Any]:
    """Run ``fn(rank, world_size, *args)`` on *world_size* gloo ranks; return results by rank."""
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    port = free_port()
    procs = [
        ctx.Process(
            target=_rank_main,
            args=(fn, rank, world_size, port, timeout, args, results),
            name=f"rank{rank}",
            daemon=True,
        )
        for rank in range(world_size)
    ]
    for p in procs:
        p.start()
    got: dict[int, Any] = {}
    failures: list[str] = []
    try:
        for _ in range(world_size):
            try:
                rank, ok, value = results.get(timeout=timeout)
            except queue.Empty:
                missing = sorted(set(range(world_size)) - set(got))
                raise RankFailure(
                    f"{fn.__name__} on {world_size} ranks timed out after {timeout:.0f} s; "
                    f"no result from rank(s) {missing}"
                ) from None
            if ok:
                got[rank] = value
            else:
                failures.append(f"rank {rank} of {world_size} raised in {fn.__name__}:\n{value}")
                break  # the others may now block forever; tear everything down
        if failures:
            raise RankFailure("\n".join(failures))
        for p in procs:
            p.join(timeout=timeout)
        return [got[r] for r in range(world_size)]
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
        for p in procs:
            p.join(timeout=10)
        results.close()


_CACHE: dict[tuple[Any, ...], tuple[bool, Any]] = {}


def run_on_ranks_cached(fn: Callable[..., Any], world_size: int, *args: Any) -> list[Any]:
    """Like :func:`run_on_ranks`, but run each (fn, world_size, args) once per test session.

    Many tests compare different parts of one group's results; a failure is
    cached too, so a broken rank function fails every dependent test at once
    instead of re-spawning the group for each of them.
    """
    key = (fn.__module__, fn.__qualname__, world_size, args)
    if key not in _CACHE:
        try:
            _CACHE[key] = (True, run_on_ranks(fn, world_size, *args))
        except RankFailure as failure:
            _CACHE[key] = (False, failure)
    ok, value = _CACHE[key]
    if not ok:
        raise value
    return list(value)


def run_torchrun(script: str | Path, nproc: int, *args: str) -> subprocess.CompletedProcess[str]:
    """Run *script* under ``torchrun`` on *nproc* local CPU ranks; return the finished process.

    ``labs_src`` is put on ``PYTHONPATH`` (the demos import ``infralens``) and
    the rendezvous uses a free loopback port, so several runs never collide.
    """
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(root / "labs_src"), env.get("PYTHONPATH", "")])
    env["OMP_NUM_THREADS"] = "1"
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        f"--nproc-per-node={nproc}",
        "--master-addr=127.0.0.1",
        f"--master-port={free_port()}",
        str(script),
        *args,
    ]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=180)


SKIP_REASON = "torch is not installed; runtime-agreement tests need: pip install torch==2.13.0"
