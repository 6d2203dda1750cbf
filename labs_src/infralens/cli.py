"""Command line: ``python -m infralens plan PATH.yaml [--format text|markdown|json]``,
``python -m infralens memory --model NAME --plan PATH.yaml [--recipe NAME] [--gpu NAME]`` and
``python -m infralens rank --model NAME --cluster SYSTEM --gpus N --seq-len S --global-batch B``.

Bad input (a missing file, malformed YAML, degrees that do not fill the
cluster) prints one line on stderr and exits with status 2, never a
traceback.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from infralens._files import read_text
from infralens._typecheck import typed
from infralens._validate import check_choice, describe, positive_int, positive_number
from infralens.design import Workload, fill_worksheet, render_markdown
from infralens.fit import HBM_BYTES, gpu_memory, render
from infralens.hardware import SYSTEMS
from infralens.model import PRESETS
from infralens.plan import AXES, FREQUENCY, ParallelPlan
from infralens.precision import RECIPES
from infralens.topology import Cluster

__all__ = [
    "MAX_PLAN_BYTES",
    "MAX_PLAN_RANKS",
    "TOP_KEYS",
    "load_plan_file",
    "main",
    "memory_report",
    "parse_plan",
    "rank_report",
]

MAX_PLAN_BYTES = 2**20
"""Largest plan file read (1 MiB); a plan is a few lines."""

MAX_PLAN_RANKS = 2**17
"""Largest world size the plan command lays out (131,072 GPUs): it prints every rank."""

TOP_KEYS = ("world_size", "node_shape", "cluster", "parallelism", "training")
"""The keys a plan file may hold at its top level."""

DEGREE_KEYS = {"tp_size": "tp", "pp_size": "pp", "dp_size": "dp", "cp_size": "cp", "ep_size": "ep"}


def _mapping(value: object, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ValueError(f"{where} must be a mapping, got {type(value).__name__}")
    return value


def _plan_size(name: str, value: object) -> int:
    v = positive_int(name, value)
    if v > MAX_PLAN_RANKS:
        raise ValueError(
            f"{name} gives {describe(v)} GPUs; the plan command lists every rank and "
            f"takes at most {MAX_PLAN_RANKS}"
        )
    return v


def _no_unknown(keys: Iterable[object], known: Sequence[str], where: str) -> None:
    """Raise naming the first unknown key and the closest known one (a typo is an error)."""
    for key in keys:
        if key not in known:
            close = difflib.get_close_matches(str(key)[:100], known, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f"; use one of {', '.join(known)}"
            raise ValueError(f"{where} has an unknown key {describe(key)}{hint}")


@typed
def parse_plan(data: object) -> tuple[ParallelPlan, Cluster, Workload | None]:
    """Validate a loaded plan file and build its plan, cluster and optional workload.

    >>> plan, cluster, work = parse_plan({"world_size": 16, "node_shape": "2_nodes_x_8_gpus",
    ...                                   "parallelism": {"tp_size": 8, "dp_size": 2}})
    >>> plan.groups("dp")[0], cluster.world_size, work
    ([0, 8], 16, None)
    >>> parse_plan({"world_size": 16, "node_shape": "2_nodes_x_8_gpus",
    ...             "parallelism": {"tp_size": 8, "dp_size": 4}})
    Traceback (most recent call last):
    ...
    ValueError: tp * cp * pp * dp must equal world_size: 8 * 1 * 1 * 4 = 32 != 16
    """
    top = _mapping(data, "the plan file")
    _no_unknown(top, TOP_KEYS, "the plan file")
    for key in ("world_size", "node_shape", "parallelism"):
        if key not in top:
            raise ValueError(f"the plan file needs a '{key}' entry")
    _plan_size("world_size", top["world_size"])  # refuse huge plans before listing a rank
    cluster = Cluster.from_node_shape(top["node_shape"], top.get("cluster", "dgx-h100"))
    _plan_size("node_shape", cluster.world_size)
    par = _mapping(top["parallelism"], "parallelism")
    unknown = sorted(str(k)[:40] for k in set(par) - set(DEGREE_KEYS) - {"order"})
    if unknown:
        raise ValueError(f"parallelism has unknown keys {unknown[:5]}; use {sorted(DEGREE_KEYS)}")
    degrees = {DEGREE_KEYS[k]: v for k, v in par.items() if k in DEGREE_KEYS}
    plan = ParallelPlan(**degrees, order=par.get("order", "tp-cp-dp-pp"))
    plan.check_world_size(top["world_size"])
    if cluster.world_size != top["world_size"]:
        raise ValueError(
            f"node_shape gives {cluster.world_size} GPUs but world_size is {top['world_size']}"
        )
    work = None
    if "training" in top:
        training = _mapping(top["training"], "training")
        known = set(Workload.__dataclass_fields__)
        unknown_training = sorted(str(k)[:40] for k in set(training) - known)
        if unknown_training:
            raise ValueError(
                f"training has unknown keys {unknown_training[:5]}; use {sorted(known)}"
            )
        work = Workload(**training)
    return plan, cluster, work


@typed
def load_plan_file(path: str | Path) -> tuple[ParallelPlan, Cluster, Workload | None]:
    """Read a YAML plan file (needs PyYAML: ``pip install infralens-handbook[plan]``).

    >>> load_plan_file("no/such/plan.yaml")
    Traceback (most recent call last):
    ...
    ValueError: no such plan file: 'no/such/plan.yaml'
    """
    try:
        import yaml
    except ImportError:  # the package itself is standard library only
        raise ValueError(
            "reading YAML needs PyYAML: pip install 'infralens-handbook[plan]'"
        ) from None
    if not isinstance(path, str | Path):
        raise TypeError(f"path must be a str or Path, got {type(path).__name__}")
    shown = describe(str(path), 80)
    try:
        os.stat(path)
        missing = False
    except FileNotFoundError:
        missing = True
    except (OSError, ValueError):
        missing = False  # read_text names the reason: too long, not permitted, NUL byte
    if missing and str(path):
        raise ValueError(f"no such plan file: {shown}")
    text = read_text(path, "plan file", MAX_PLAN_BYTES)

    class _NoAliases(yaml.SafeLoader):
        """SafeLoader that refuses anchors and aliases: no exponential expansion."""

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
                raise ValueError(
                    f"plan file {shown} uses a YAML alias at line {mark.line + 1}; "
                    "write the value out"
                )
            return super().compose_node(parent, index)

    try:
        data = yaml.load(text, Loader=_NoAliases)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise ValueError(f"{shown} is not valid YAML{where}") from None
    except RecursionError:
        raise ValueError(f"plan file {shown} nests too deeply") from None
    return parse_plan(data)


def _label(coords: Mapping[str, int]) -> str:
    return " ".join(f"{a}{coords[a]}" for a in ("tp", "cp", "pp", "dp"))


def _report(plan: ParallelPlan, cluster: Cluster, work: Workload | None) -> dict[str, Any]:
    grid = [
        [
            _label(plan.coords(node * cluster.gpus_per_node + g))
            for g in range(cluster.gpus_per_node)
        ]
        for node in range(cluster.nodes)
    ]
    axes = {}
    for axis in AXES:
        groups = plan.groups(axis)
        links = sorted({cluster.tier_of(g).name for g in groups})
        axes[axis] = {
            "degree": getattr(plan, axis),
            "link": "/".join(links),
            "frequency": FREQUENCY[axis],
            "groups": groups,
        }
    report: dict[str, Any] = {
        "world_size": plan.world_size,
        "order": plan.order,
        "grid": grid,
        "axes": axes,
    }
    if work is not None:
        report["worksheet"] = render_markdown(fill_worksheet(plan, cluster, work))
    return report


def _text(report: Mapping[str, Any], markdown: bool) -> str:
    out = ["## Placement (node x GPU)" if markdown else "Placement (node x GPU):"]
    for node, row in enumerate(report["grid"]):
        out.append(f"{'- ' if markdown else ''}node {node}: " + " | ".join(row))
    out.append("")
    out.append("## Groups" if markdown else "Groups:")
    for axis, info in report["axes"].items():
        if info["degree"] == 1:
            continue
        shown = ", ".join(str(g) for g in info["groups"][:4])
        more = f" ... ({len(info['groups'])} groups)" if len(info["groups"]) > 4 else ""
        out.append(
            f"{'- ' if markdown else ''}{axis} (degree {info['degree']}, {info['link']}, "
            f"{info['frequency']}): {shown}{more}"
        )
    if "worksheet" in report:
        out += ["", "## Worksheet" if markdown else "Worksheet:", report["worksheet"]]
    return "\n".join(out)


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


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (2 for bad input, one line on stderr).

    A closed stdout (output piped to ``head``) ends quietly.
    """
    try:
        status = _main(argv)
        sys.stdout.flush()  # a closed pipe shows here, inside the handler
        return status
    except BrokenPipeError:
        # Python flushes stdout again at exit; point it at devnull so that does not fail.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


def _main(argv: Sequence[str] | None) -> int:
    parser = argparse.ArgumentParser(prog="python -m infralens", description="InfraLens tools.")
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
