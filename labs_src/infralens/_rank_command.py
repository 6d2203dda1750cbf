"""The ``rank`` command of :mod:`infralens.cli`: its flags, the job they describe
(or a plan file's, ``--like``), the ranking's head line and the written row."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from infralens._typecheck import typed
from infralens._validate import check_choice, positive_int
from infralens.hardware import SYSTEMS
from infralens.model import model_from
from infralens.plan import ParallelPlan
from infralens.planner.job import Job
from infralens.planner.plan_file import load_plan_file
from infralens.planner.plan_writer import plan_yaml
from infralens.planner.ranking import RankedPlan, rank_job
from infralens.precision import DEFAULT_RECIPE
from infralens.sustained import from_file
from infralens.topology import Cluster


def add_parser(commands: Any, epilog: str) -> None:
    """Add ``rank`` and its flags to the command line's sub-commands."""
    rank_cmd = commands.add_parser(
        "rank",
        help="the ten fastest feasible plans for a model on a cluster",
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    rank_cmd.add_argument(
        "--like", default=None, metavar="FILE",
        help="rank for the job of a plan file (its model, cluster, batch and "
        "options) instead of the flags below",
    )  # fmt: skip
    rank_cmd.add_argument(
        "--model", default=None,
        help="a model preset, e.g. llama3-70b, or a shape: layers=L,hidden=H,heads=A,"
        "vocab_size=V[,kv_heads=K][,ffn_hidden=F][,gated_mlp=true]; required without "
        "--like",
    )  # fmt: skip
    rank_cmd.add_argument(
        "--cluster", default=None, help="a cluster (SYSTEMS key; default dgx-h100)"
    )
    for flag in ("--gpus", "--seq-len", "--global-batch"):
        rank_cmd.add_argument(
            flag, type=int, default=None, help="required without --like"
        )
    rank_cmd.add_argument("--micro-batch", type=int, default=None, help="default 1")
    rank_cmd.add_argument(
        "--recipe",
        default=None,
        help=f"a recipe (default: {DEFAULT_RECIPE} and fsdp2, the faster)",
    )
    rank_cmd.add_argument("--max-cp", type=int, default=8,
                          help="the largest context-parallel degree searched")  # fmt: skip
    rank_cmd.add_argument("--tp-comm-overlap", action="store_true",
                          help="run each TP plan's collectives under its GEMMs")  # fmt: skip
    rank_cmd.add_argument("--calibration", default=None, metavar="FILE",
                          help="rates measured by labs_src/demos/calibrate_gpu.py, in "
                          "place of the published ceilings")  # fmt: skip
    rank_cmd.add_argument("--write-plan", nargs=2, metavar=("ROW", "FILE"), default=None,
                          help="write row ROW of the ranking as a plan file")  # fmt: skip


def table(job: Job, ranked: list[RankedPlan], model: str, *notes: str) -> str:
    """The ranking under a line naming the job it ranks, then *notes*."""
    from infralens.planner.ranking import render as render_ranking

    named = job.recipe is not None or job.zero_stage is not None
    recipe = job.resolved_recipe().name if named else f"{DEFAULT_RECIPE} or fsdp2"
    c = job.cluster
    head = (
        f"{model} on {c.world_size} GPUs ({c.system.name}), seq_len {job.seq_len}, global "
        f"batch {job.global_batch_size}, micro-batch {job.micro_batch_size}: the fastest "
        f"feasible plans by predicted step time, recipe {recipe}"
        + (
            ", TP collectives overlapped with the GEMMs"
            if job.tp_comm_overlap
            else ""
        )
        + "".join(f", {note}" for note in notes)
    )
    return head + "\n" + render_ranking(ranked)


@typed  # the command's own names in messages: global_batch, not global_batch_size
def flag_job(
    model: str, system: str, gpus: int, seq_len: int, global_batch: int, micro_batch: int,
    recipe: str | None, tp_comm_overlap: bool = False,
) -> Job:  # fmt: skip
    """The job ``rank`` ranks plans for: its default options, no plan chosen yet."""
    node = SYSTEMS[check_choice("system", system, tuple(SYSTEMS))]
    positive_int("gpus", gpus)
    if gpus % node.gpus_per_node:
        raise ValueError(
            f"gpus must be a multiple of the {node.gpus_per_node} GPUs of a {node.name} node, "
            f"got {gpus}"
        )
    cluster = Cluster(gpus // node.gpus_per_node, node.gpus_per_node, node)
    config = model_from(model, seq_len)  # a preset, or a shape spec at this seq_len
    return Job(config, ParallelPlan(dp=gpus), cluster, seq_len, global_batch, micro_batch,
               recipe=recipe, tp_comm_overlap=tp_comm_overlap)  # fmt: skip


def args_job(args: argparse.Namespace) -> tuple[Job, str, list[str]]:
    """The job the ``rank`` command ranks, the model's name and the head's notes: the
    job of a plan file (``--like``) or of the flags, at measured rates if given."""
    named = {"--model": args.model, "--cluster": args.cluster, "--gpus": args.gpus,
             "--seq-len": args.seq_len, "--global-batch": args.global_batch,
             "--micro-batch": args.micro_batch, "--recipe": args.recipe}  # fmt: skip
    notes = []
    if args.like is not None:
        if given := [flag for flag, value in named.items() if value is not None]:
            raise ValueError(
                f"--like takes the job from its file; drop {', '.join(given)}"
            )
        job = load_plan_file(args.like)[2]
        if job is None:
            raise ValueError("--like needs a 'training' section in the plan file")
        job = replace(
            job, tp_comm_overlap=job.tp_comm_overlap or args.tp_comm_overlap
        )
        model = job.model_name or "the model"
        notes.append(f"options of {args.like[:200]}")
    else:
        wanted = ("--model", "--gpus", "--seq-len", "--global-batch")
        if missing := [flag for flag in wanted if named[flag] is None]:
            raise ValueError(
                f"the following arguments are required: {', '.join(missing)} "
                "(or --like FILE)"
            )
        job = flag_job(args.model, args.cluster or "dgx-h100", args.gpus, args.seq_len,
                   args.global_batch, 1 if args.micro_batch is None else args.micro_batch,
                   args.recipe, args.tp_comm_overlap)  # fmt: skip
        model = args.model
    if args.calibration is not None:
        job = replace(job, sustained=from_file(args.calibration))
        notes.append(f"rates measured in {args.calibration[:200]}")
    return job, model, notes


def run(args: argparse.Namespace) -> int:
    try:
        job, model, notes = args_job(args)
        # ranked once: printed, and a row written from it
        ranked = rank_job(job, top=10, max_cp=args.max_cp)
        print(table(job, ranked, model, *notes))
        if args.write_plan is not None:
            row_text, path = args.write_plan
            if not row_text.isdigit() or not 1 <= int(row_text) <= 10:
                raise ValueError(
                    f"--write-plan ROW must be a row number 1-10, got {row_text!r}"
                )
            if int(row_text) > len(ranked):
                raise ValueError(f"--write-plan ROW must be at most {len(ranked)}")
            text = plan_yaml(ranked[int(row_text) - 1].job)
            try:
                Path(path).write_text(text, encoding="utf-8")
            except (OSError, ValueError) as err:
                raise ValueError(f"cannot write {path[:80]!r}: {err}") from None
            print(f"wrote row {row_text} to {path[:200]}")
    except (ValueError, TypeError) as err:
        print(f"infralens rank: {err}", file=sys.stderr)
        return 2
    return 0
