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

:func:`run_on_ranks_cached` runs on a *pool* instead: one spawned gloo world
per world size, started on first use and kept for the test session, which
runs each submitted function in turn on its already-initialised default
group. Starting a world (spawning, importing torch, the rendezvous) is most of
a small test's time, so sharing it is what keeps the runtime suite fast. A
pool whose function raised or timed out is killed and rebuilt on next use,
since its group may be left mid-collective. Functions that need a group of
their own — ones that let a collective time out, change the debug level or
the flight recorder, set environment variables read at init, or destroy the
group — pass ``fresh=True`` and get :func:`run_on_ranks`' fresh spawn.
"""

from __future__ import annotations

import atexit
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


def _join_gloo(rank: int, world_size: int, port: int, timeout: float) -> None:
    """Join a gloo group on loopback with one CPU thread per rank (every spawned rank does this)."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
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


def _rank_main(
    fn: Callable[..., Any],
    rank: int,
    world_size: int,
    port: int,
    timeout: float,
    args: tuple[Any, ...],
    results: Any,
) -> None:
    try:
        _join_gloo(rank, world_size, port, timeout)
        import torch.distributed as dist

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


def _pool_rank_main(
    rank: int, world_size: int, port: int, timeout: float, tasks: Any, results: Any
) -> None:
    """One pooled rank: init the group once, then run submitted functions until told to stop."""
    try:
        _join_gloo(rank, world_size, port, timeout)
        import torch.distributed as dist
    except BaseException:
        results.put((-1, rank, False, traceback.format_exc()))
        return
    try:
        while (task := tasks.get()) is not None:
            task_id, fn, args = task
            try:
                value = fn(rank, world_size, *args)
                # the next function starts only when every rank has finished this one
                dist.barrier()
                results.put((task_id, rank, True, value))
            except BaseException:
                results.put((task_id, rank, False, traceback.format_exc()))
    finally:
        dist.destroy_process_group()


class _Pool:
    """*world_size* spawned ranks sharing one gloo group, running functions in turn."""

    def __init__(self, world_size: int, timeout: float = DEFAULT_TIMEOUT_S) -> None:
        ctx = mp.get_context("spawn")
        self.world_size = world_size
        self.timeout = timeout
        self.results = ctx.Queue()
        self.tasks = [ctx.Queue() for _ in range(world_size)]
        port = free_port()
        self.procs = [
            ctx.Process(
                target=_pool_rank_main,
                args=(rank, world_size, port, timeout, self.tasks[rank], self.results),
                name=f"pool{world_size}-rank{rank}",
                daemon=True,
            )
            for rank in range(world_size)
        ]
        for p in self.procs:
            p.start()
        self.next_id = 0

    def run(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> list[Any]:
        self.next_id += 1
        task_id = self.next_id
        for q in self.tasks:
            q.put((task_id, fn, args))
        got: dict[int, Any] = {}
        while len(got) < self.world_size:
            try:
                tid, rank, ok, value = self.results.get(timeout=self.timeout)
            except queue.Empty:
                missing = sorted(set(range(self.world_size)) - set(got))
                raise RankFailure(
                    f"{fn.__name__} on a pooled {self.world_size}-rank group timed out after "
                    f"{self.timeout:.0f} s; no result from rank(s) {missing}"
                ) from None
            if not ok:
                where = "starting the pool" if tid == -1 else f"in {fn.__name__}"
                raise RankFailure(
                    f"rank {rank} of a pooled {self.world_size}-rank group raised {where}:\n{value}"
                )
            if tid == task_id:
                got[rank] = value
        return [got[r] for r in range(self.world_size)]

    def close(self, *, kill: bool = False) -> None:
        if not kill:
            for q in self.tasks:
                q.put(None)
            for p in self.procs:
                p.join(timeout=10)
        for p in self.procs:
            if p.is_alive():
                p.kill()
        for p in self.procs:
            p.join(timeout=10)
        for q in [*self.tasks, self.results]:
            q.close()


_POOLS: dict[int, _Pool] = {}


def run_on_pool(fn: Callable[..., Any], world_size: int, *args: Any) -> list[Any]:
    """Run ``fn(rank, world_size, *args)`` on the session's pooled *world_size*-rank group.

    The pool starts on first use; if *fn* raises or times out the pool is
    killed (its group may be mid-collective) and the next call starts a new one.
    """
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    pool = _POOLS.get(world_size)
    if pool is None:
        pool = _POOLS[world_size] = _Pool(world_size)
    try:
        return pool.run(fn, args)
    except BaseException:
        del _POOLS[world_size]
        pool.close(kill=True)
        raise


@atexit.register
def close_pools() -> None:
    """Stop every pooled group (at interpreter exit, or from a session fixture)."""
    while _POOLS:
        _POOLS.popitem()[1].close()


_CACHE: dict[tuple[Any, ...], tuple[bool, Any]] = {}


def run_on_ranks_cached(
    fn: Callable[..., Any], world_size: int, *args: Any, fresh: bool = False
) -> list[Any]:
    """Run each (fn, world_size, args) once per test session, on the pooled group.

    Many tests compare different parts of one group's results; a failure is
    cached too, so a broken rank function fails every dependent test at once
    instead of re-spawning the group for each of them. ``fresh=True`` runs on
    a group of its own (:func:`run_on_ranks`) instead of the pool.
    """
    key = (fn.__module__, fn.__qualname__, world_size, args)
    if key not in _CACHE:
        try:
            run = run_on_ranks if fresh else run_on_pool
            _CACHE[key] = (True, run(fn, world_size, *args))
        except RankFailure as failure:
            _CACHE[key] = (False, failure)
    ok, value = _CACHE[key]
    if not ok:
        raise value
    return list(value)


def run_torchrun(
    script: str | Path, nproc: int, *args: str, timeout: float = 240.0
) -> subprocess.CompletedProcess[str]:
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
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)


SKIP_REASON = "torch is not installed; runtime-agreement tests need: pip install torch==2.13.0"
