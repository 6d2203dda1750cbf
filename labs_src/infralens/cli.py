"""Command line: ``python -m infralens plan PATH.yaml [--format text|markdown|json]``,
``python -m infralens memory [--model NAME] --plan PATH.yaml [--recipe NAME] [--gpu NAME]``
and
``python -m infralens rank --model NAME|SHAPE --cluster SYSTEM --gpus N --seq-len S
--global-batch B``, where SHAPE is ``layers=32,hidden=4096,heads=32,vocab_size=128256,...``
(:func:`infralens.model.parse_shape`), or ``rank --like PATH.yaml`` for a plan file's
job and options.

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
from dataclasses import replace
from pathlib import Path
from typing import NoReturn

from infralens import _rank_command as rank_command
from infralens._typecheck import typed
from infralens._validate import check_choice, positive_int, positive_number
from infralens.hardware import SYSTEMS
from infralens.model import PRESETS
from infralens.planner.fit import HBM_BYTES, gpu_memory, render
from infralens.planner.job import Job
from infralens.planner.plan_file import _report, _text, load_plan_file
from infralens.planner.ranking import rank_job
from infralens.precision import DEFAULT_RECIPE, RECIPES
from infralens.sustained import from_file

__all__ = ["job_of", "main", "memory_report", "rank_report"]


@typed
def memory_report(
    model: str | None,
    path: str | Path,
    recipe: str | None,
    gpu: str | None = None,
    hbm_gb: float | None = None,
) -> str:
    """The per-GPU memory of the plan in *path*, as text (``memory`` command).

    The :class:`~infralens.planner.job.Job` is the file's (:func:`job_of`); the count is
    :func:`infralens.planner.fit.gpu_memory`, the one ``plan`` and ``rank`` use, so the
    three agree. It is judged against the HBM of *gpu* when named, else of the job's
    GPU (the file's ``training.gpu``, else its cluster's), the one ``plan`` and
    ``rank`` judge it against; *hbm_gb* replaces that capacity with a number of GB.

    >>> memory_report("llama3-70b", "no/such/plan.yaml", "megatron-bf16",
    ...               "h100-sxm5-80gb")
    Traceback (most recent call last):
    ...
    ValueError: no such plan file: 'no/such/plan.yaml'
    """
    job = job_of(model, path, recipe)
    if gpu is not None:
        job = replace(job, gpu=check_choice("gpu", gpu, tuple(HBM_BYTES)))
    breakdown = gpu_memory(job)
    if hbm_gb is None:
        capacity, where = job.hbm_bytes, job.gpu_key
    else:
        capacity, where = int(positive_number("hbm_gb", hbm_gb) * 10**9), "--hbm-gb"
    p, name = job.plan, job.model_name or "the file's model"
    chosen = job.resolved_recipe()
    head = (
        f"{name}, tp={p.tp} cp={p.cp} pp={p.pp} dp={p.dp}, seq_len={job.seq_len}, "
        f"micro_batch_size={job.micro_batch_size}, recipe {chosen.name}: "
        f"{chosen.framework}"
    )
    return head + "\n" + render(breakdown, capacity, where)


@typed
def job_of(model: str | None, path: str | Path, recipe: str | None = None) -> Job:
    """The :class:`~infralens.planner.job.Job` of the plan file at *path*.

    The file's ``training`` section gives it; *model*, if given, replaces the file's
    model and keeps its batch and options. Without a ``training`` section, *model* is
    needed: its own sequence length, micro-batch 1, one micro-batch per stage per
    replica, no recomputation and no sequence parallelism. *recipe*, when given, replaces the job's.

    >>> job_of(None, "labs_src/starters/parallelism_plan.yaml").plan.tp
    8
    """
    plan, cluster, job = load_plan_file(path)
    if model is not None:
        check_choice("model", model, tuple(PRESETS))
    if job is not None and model is not None:
        job = replace(job, model=PRESETS[model])
    if job is None:
        if model is None:
            raise ValueError(
                "name a model: --model NAME, or a 'training' section in the plan file"
            )
        config = PRESETS[model]
        job = Job(config, plan, cluster, seq_len=config.seq_len,
                  global_batch_size=plan.dp * plan.pp, recompute="none",
                  sequence_parallel=False)  # fmt: skip
    if recipe is not None:
        chosen = check_choice("recipe", recipe, tuple(RECIPES))
        job = replace(job, recipe=chosen, zero_stage=None)
    return job


@typed
def rank_report(
    model: str,
    system: str,
    gpus: int,
    seq_len: int,
    global_batch: int,
    micro_batch: int = 1,
    recipe: str | None = None,
    max_cp: int = 8,
) -> str:
    """The ten fastest feasible plans by predicted step time (``rank`` command).

    >>> rank_report("llama3-70b", "dgx-h100", 60, 4096, 512)
    Traceback (most recent call last):
    ...
    ValueError: gpus must be a multiple of the 8 GPUs of a DGX H100 node, got 60
    """
    job = rank_command.flag_job(model, system, gpus, seq_len, global_batch, micro_batch,
                                recipe)  # fmt: skip
    return rank_command.table(job, rank_job(job, top=10, max_cp=max_cp), model)


class _Parser(argparse.ArgumentParser):
    """argparse, with a usage error as one line on stderr and exit status 2."""

    def error(self, message: str) -> NoReturn:
        text = " ".join(message.split())
        self.exit(
            2, f"{self.prog}: {text if len(text) < 200 else text[:196] + '...'}\n"
        )


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
            print(
                f"infralens: cannot write the output: {err.strerror or err}",
                file=sys.stderr,
            )
        return 1


def _epilog() -> str:
    """What ``--help`` lists: the model presets, clusters and recipes a user can name."""
    return (
        f"models: {', '.join(PRESETS)}\n"
        f"clusters: {', '.join(SYSTEMS)}\n"
        f"recipes (default {DEFAULT_RECIPE}): {', '.join(RECIPES)}\n"
        "plan-file keys: see the handbook's plan-file reference page"
    )


def _main(argv: Sequence[str] | None) -> int:
    parser = _Parser(
        prog="python -m infralens", description="InfraLens tools.", epilog=_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    commands = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND"
    )
    raw = argparse.RawDescriptionHelpFormatter
    plan_cmd = commands.add_parser(
        "plan",
        help="show the rank placement, groups, links and worksheet of a plan file",
        epilog=_epilog(),
        formatter_class=raw,
    )
    plan_cmd.add_argument("path", help="a parallelism_plan.yaml file")
    plan_cmd.add_argument(
        "--format", choices=["text", "markdown", "json"], default="text"
    )
    plan_cmd.add_argument("--tokens", type=int, default=None,
                          help="training tokens, for the days the run takes")  # fmt: skip
    plan_cmd.add_argument(
        "--calibration", default=None, metavar="FILE",
        help="rates measured by labs_src/demos/calibrate_gpu.py, in place of the "
        "published ceilings",
    )  # fmt: skip
    mem_cmd = commands.add_parser(
        "memory",
        help="per-GPU memory of a model under a plan file, and whether it fits",
        epilog=_epilog(),
        formatter_class=raw,
    )
    mem_cmd.add_argument(
        "--model", default=None, help="a model preset (default: the file's)"
    )
    mem_cmd.add_argument(
        "--plan", required=True, help="a parallelism_plan.yaml file"
    )
    mem_cmd.add_argument("--recipe", default=None,
                         help=f"a recipe (default: the file's, else {DEFAULT_RECIPE})")  # fmt: skip
    mem_cmd.add_argument("--gpu", default=None,
                         help="a GPU preset whose HBM to judge against (default: the "
                         "file's training.gpu, else its cluster's GPU)")  # fmt: skip
    mem_cmd.add_argument("--hbm-gb", type=float, default=None,
                         help="HBM in GB, instead of the GPU's")  # fmt: skip
    rank_command.add_parser(commands, _epilog())
    args = parser.parse_args(argv)
    if args.command == "rank":
        return rank_command.run(args)
    if args.command == "memory":
        try:
            print(
                memory_report(
                    args.model, args.plan, args.recipe, args.gpu, args.hbm_gb
                )
            )
        except (ValueError, TypeError) as err:
            print(f"infralens memory: {err}", file=sys.stderr)
            return 2
        return 0
    try:
        plan, cluster, job = load_plan_file(args.path)
        if args.tokens is not None:
            if job is None:
                raise ValueError(
                    "--tokens needs a 'training' section in the plan file"
                )
            job = replace(job, token_budget=positive_int("tokens", args.tokens))
        if args.calibration is not None:
            if job is None:
                raise ValueError(
                    "--calibration needs a 'training' section in the plan file"
                )
            job = replace(job, sustained=from_file(args.calibration))
        report = _report(plan, cluster, job)
    except (ValueError, TypeError) as err:
        print(f"infralens plan: {err}", file=sys.stderr)
        return 2
    if args.format == "json":
        print(json.dumps(report, indent=2))
    else:
        print(_text(report, markdown=args.format == "markdown"))
    return 0
