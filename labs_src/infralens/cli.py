"""Command line: ``python -m infralens plan PATH.yaml [--format text|markdown|json]``,
``python -m infralens memory --model NAME --plan PATH.yaml [--recipe NAME] [--gpu NAME]`` and
``python -m infralens rank --model NAME --cluster SYSTEM --gpus N --seq-len S --global-batch B``.

Bad input (a missing file, malformed YAML, degrees that do not fill the
cluster) prints one line on stderr and exits with status 2, never a
traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from infralens._typecheck import typed
from infralens._validate import check_choice, positive_int, positive_number
from infralens.fit import HBM_BYTES, gpu_memory, render
from infralens.hardware import SYSTEMS
from infralens.model import PRESETS
from infralens.plan_file import _report, _text, load_plan_file
from infralens.precision import RECIPES
from infralens.topology import Cluster

__all__ = ["main", "memory_report", "rank_report"]


@typed
def memory_report(
    model: str, path: str | Path, recipe: str, gpu: str, hbm_gb: float | None = None
) -> str:
    """The per-GPU memory of *model* under the plan in *path*, as text (``memory`` command).

    Sequence length, micro-batch, recomputation and sequence parallelism come
    from the file's ``training`` section when it has one; otherwise the
    model's own sequence length, micro-batch 1, no recomputation.

    >>> memory_report("llama3-70b", "no/such/plan.yaml", "megatron-bf16", "h100-sxm5-80gb")
    Traceback (most recent call last):
    ...
    ValueError: no such plan file: 'no/such/plan.yaml'
    """
    plan, _, work = load_plan_file(path)
    if plan.cp > 1 or plan.ep > 1:
        raise ValueError(
            "the memory command models tp, pp and dp only; set cp_size and ep_size to 1"
        )
    config = PRESETS[check_choice("model", model, tuple(PRESETS))]
    job: dict[str, Any] = {"seq_len": config.seq_len, "micro_batch_size": 1}
    if work is not None:
        job = {
            "seq_len": work.seq_len,
            "micro_batch_size": work.micro_batch_size,
            "recompute": work.recompute,
            "sequence_parallel": work.sequence_parallel,
        }
    breakdown = gpu_memory(config, plan, check_choice("recipe", recipe, tuple(RECIPES)), **job)
    if hbm_gb is None:
        capacity, name = HBM_BYTES[check_choice("gpu", gpu, tuple(HBM_BYTES))], gpu
    else:
        capacity, name = int(positive_number("hbm_gb", hbm_gb) * 10**9), "--hbm-gb"
    head = (
        f"{model}, tp={plan.tp} pp={plan.pp} dp={plan.dp}, seq_len={job['seq_len']}, "
        f"micro_batch_size={job['micro_batch_size']}, recipe {recipe}: {RECIPES[recipe].framework}"
    )
    return head + "\n" + render(breakdown, capacity, name)


@typed
def rank_report(
    model: str, system: str, gpus: int, seq_len: int, global_batch: int, micro_batch: int = 1
) -> str:
    """The ten fastest feasible plans by predicted step time (``rank`` command).

    >>> rank_report("llama3-70b", "dgx-h100", 60, 4096, 512)
    Traceback (most recent call last):
    ...
    ValueError: gpus must be a multiple of the 8 GPUs of a DGX H100 node, got 60
    """
    from infralens.ranking import rank_plans
    from infralens.ranking import render as render_ranking

    node = SYSTEMS[check_choice("system", system, tuple(SYSTEMS))]
    positive_int("gpus", gpus)
    if gpus % node.gpus_per_node:
        raise ValueError(
            f"gpus must be a multiple of the {node.gpus_per_node} GPUs of a {node.name} node, "
            f"got {gpus}"
        )
    cluster = Cluster(gpus // node.gpus_per_node, node.gpus_per_node, node)
    config = PRESETS[check_choice("model", model, tuple(PRESETS))]
    ranked = rank_plans(config, cluster, seq_len=seq_len, global_batch_size=global_batch,
                        micro_batch_size=micro_batch)  # fmt: skip
    head = (
        f"{model} on {gpus} GPUs ({node.name}), seq_len {seq_len}, global batch {global_batch}, "
        f"micro-batch {micro_batch}: the fastest feasible plans by predicted step time"
    )
    return head + "\n" + render_ranking(ranked)


class _Parser(argparse.ArgumentParser):
    """argparse, with a usage error as one line on stderr and exit status 2."""

    def error(self, message: str) -> NoReturn:
        text = " ".join(message.split())
        self.exit(2, f"{self.prog}: {text if len(text) < 200 else text[:196] + '...'}\n")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (2 for bad input, one line on stderr).

    A closed stdout (output piped to ``head``) ends quietly with status 1; a stdout
    that cannot be written (a full disk, ``> /dev/full``) with one line and status 1.
    """
    try:
        status = _main(argv)
        sys.stdout.flush()  # a closed pipe or a full device shows here, inside the handler
        return status
    except OSError as err:
        # Python flushes stdout again at exit; point it at devnull so that does not fail.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        if not isinstance(err, BrokenPipeError):
            print(f"infralens: cannot write the output: {err.strerror or err}", file=sys.stderr)
        return 1


def _main(argv: Sequence[str] | None) -> int:
    parser = _Parser(prog="python -m infralens", description="InfraLens tools.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    plan_cmd = commands.add_parser(
        "plan", help="show the rank placement, groups, links and worksheet of a plan file"
    )
    plan_cmd.add_argument("path", help="a parallelism_plan.yaml file")
    plan_cmd.add_argument("--format", choices=["text", "markdown", "json"], default="text")
    mem_cmd = commands.add_parser(
        "memory", help="per-GPU memory of a model under a plan file, and whether it fits"
    )
    mem_cmd.add_argument("--model", required=True, help="a PRESETS key, e.g. llama3-70b")
    mem_cmd.add_argument("--plan", required=True, help="a parallelism_plan.yaml file")
    mem_cmd.add_argument("--recipe", default="megatron-bf16", help="a precision recipe")
    mem_cmd.add_argument("--gpu", default="h100-sxm5-80gb", help="an HBM preset")
    mem_cmd.add_argument("--hbm-gb", type=float, default=None, help="HBM in GB, instead of --gpu")
    rank_cmd = commands.add_parser(
        "rank", help="the ten fastest feasible plans for a model on a cluster"
    )
    rank_cmd.add_argument("--model", required=True, help="a PRESETS key, e.g. llama3-70b")
    rank_cmd.add_argument("--cluster", default="dgx-h100", help="a SYSTEMS key")
    rank_cmd.add_argument("--gpus", type=int, required=True)
    rank_cmd.add_argument("--seq-len", type=int, required=True)
    rank_cmd.add_argument("--global-batch", type=int, required=True)
    rank_cmd.add_argument("--micro-batch", type=int, default=1)
    args = parser.parse_args(argv)
    if args.command == "rank":
        try:
            print(rank_report(args.model, args.cluster, args.gpus, args.seq_len,
                              args.global_batch, args.micro_batch))  # fmt: skip
        except (ValueError, TypeError) as err:
            print(f"infralens rank: {err}", file=sys.stderr)
            return 2
        return 0
    if args.command == "memory":
        try:
            print(memory_report(args.model, args.plan, args.recipe, args.gpu, args.hbm_gb))
        except (ValueError, TypeError) as err:
            print(f"infralens memory: {err}", file=sys.stderr)
            return 2
        return 0
    try:
        report = _report(*load_plan_file(args.path))
    except (ValueError, TypeError) as err:
        print(f"infralens plan: {err}", file=sys.stderr)
        return 2
    if args.format == "json":
        print(json.dumps(report, indent=2))
    else:
        print(_text(report, markdown=args.format == "markdown"))
    return 0
