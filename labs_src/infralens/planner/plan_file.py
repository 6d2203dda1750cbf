"""Plan files: the YAML a job's parallelism is written in, checked and laid out.

A plan file gives the machine (``world_size``, ``node_shape`` and an optional
``cluster`` preset), the degrees under ``parallelism`` and, optionally, the
``training`` section of a design worksheet. :func:`load_plan_file` reads one
(PyYAML, no aliases, at most :data:`MAX_PLAN_BYTES`); :func:`parse_plan` checks
it and builds the :class:`~infralens.plan.ParallelPlan`, the
:class:`~infralens.topology.Cluster` and, from the ``training`` section, the
:class:`~infralens.planner.job.Job` they run. ``python -m infralens plan`` prints the
placement and the groups they give.

>>> plan, cluster, _ = parse_plan({"world_size": 8, "node_shape": "1_nodes_x_8_gpus",
...                                "parallelism": {"tp_size": 4, "dp_size": 2}})
>>> plan.groups("tp")[1], cluster.nodes
([4, 5, 6, 7], 1)
>>> parse_plan({"world_sise": 8})
Traceback (most recent call last):
...
ValueError: the plan file has an unknown key 'world_sise'; did you mean 'world_size'?
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from infralens._files import read_text
from infralens._typecheck import typed
from infralens._validate import describe, flag, positive_int
from infralens.model import PRESETS, TransformerConfig, shaped_model
from infralens.plan import AXES, FREQUENCY, ParallelPlan
from infralens.planner._plan_yaml import check_size, plan_loader
from infralens.planner.design import fill_worksheet, render_markdown
from infralens.planner.job import Job
from infralens.planner.worksheet_tables import worksheet_tables
from infralens.topology import Cluster

__all__ = [
    "FULL_SHAPE_KEYS",
    "MAX_PLAN_BYTES",
    "MAX_PLAN_RANKS",
    "SHOWN_NODES",
    "TOP_KEYS",
    "load_plan_file",
    "parse_plan",
    "worksheet_page",
]

MAX_PLAN_BYTES = 2**20
"""Largest plan file read (1 MiB); a plan is a few lines."""

MAX_PLAN_RANKS = 2**15
"""Largest world size a plan file may describe (32,768 GPUs, twice the largest published run
in the project's data): the plan command places every rank and lists every group, which
takes about a second at this size."""

SHOWN_NODES = 16
"""Nodes the text and Markdown placement lists; ``--format json`` lists every one."""

TOP_KEYS = ("world_size", "node_shape", "cluster", "parallelism", "training")
"""The keys a plan file may hold at its top level."""

DEGREE_KEYS = {
    "tp_size": "tp",
    "pp_size": "pp",
    "dp_size": "dp",
    "cp_size": "cp",
    "ep_size": "ep",
}


def _mapping(value: object, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ValueError(f"{where} must be a mapping, got {type(value).__name__}")
    return value


def _plan_size(name: str, value: object) -> int:
    v = positive_int(name, value)
    if v > MAX_PLAN_RANKS:
        raise ValueError(
            f"{name} gives {describe(v)} GPUs; a plan file describes at most "
            f"{MAX_PLAN_RANKS} (the plan command places every rank)"
        )
    return v


def _no_unknown(keys: Iterable[object], known: Sequence[str], where: str) -> None:
    """Raise naming the first unknown key and the closest known one (a typo is an error)."""
    for key in keys:
        if key not in known:
            close = difflib.get_close_matches(str(key)[:100], known, n=1)
            hint = (
                f"; did you mean {close[0]!r}?"
                if close
                else f"; use one of {', '.join(known)}"
            )
            raise ValueError(f"{where} has an unknown key {describe(key)}{hint}")


@typed
def parse_plan(data: object) -> tuple[ParallelPlan, Cluster, Job | None]:
    """Validate a loaded plan file and build its plan, cluster and, with a ``training``
    section, its :class:`~infralens.planner.job.Job` (on that plan and cluster).

    >>> plan, cluster, job = parse_plan({
    ...     "world_size": 16, "node_shape": "2_nodes_x_8_gpus",
    ...     "parallelism": {"tp_size": 8, "dp_size": 2}})
    >>> plan.groups("dp")[0], cluster.world_size, job
    ([0, 8], 16, None)
    >>> parse_plan({"world_size": 8, "node_shape": "1_nodes_x_8_gpus", "parallelism": {
    ...     "dp_size": 8}, "training": {"model": "llama3-8b", "chunks": 0}})
    Traceback (most recent call last):
    ...
    ValueError: chunks must be >= 1, got 0
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
    _plan_size(
        "world_size", top["world_size"]
    )  # refuse huge plans before listing a rank
    cluster = Cluster.from_node_shape(
        top["node_shape"], top.get("cluster", "dgx-h100")
    )
    _plan_size("node_shape", cluster.world_size)
    # [start:degrees-to-plan]
    par = _mapping(top["parallelism"], "parallelism")
    unknown = sorted(str(k)[:40] for k in set(par) - set(DEGREE_KEYS) - {"order"})
    if unknown:
        raise ValueError(
            f"parallelism has unknown keys {unknown[:5]}; use {sorted(DEGREE_KEYS)}"
        )
    degrees = {DEGREE_KEYS[k]: v for k, v in par.items() if k in DEGREE_KEYS}
    plan = ParallelPlan(**degrees, order=par.get("order", "tp-cp-dp-pp"))
    plan.check_world_size(top["world_size"])
    # [end:degrees-to-plan]
    if cluster.world_size != top["world_size"]:
        raise ValueError(
            f"node_shape gives {cluster.world_size} GPUs but world_size is {top['world_size']}"
        )
    job = None
    if "training" in top:
        training = _mapping(top["training"], "training")
        known = {*TRAINING_KEYS, *SHAPE_KEYS, *FULL_SHAPE_KEYS}
        unknown_training = sorted(str(k)[:40] for k in set(training) - known)
        if unknown_training:
            raise ValueError(
                f"training has unknown keys {unknown_training[:5]}; use {sorted(known)}"
            )
        given = _with_preset(dict(training), plan)
        options = {k: v for k, v in given.items() if k in TRAINING_KEYS}
        options["model"] = _shape_model(given)
        job = Job(plan=plan, cluster=cluster, **options)
    return plan, cluster, job


SHAPE_KEYS = ("num_params", "layers", "hidden", "heads")
"""The model shape a ``training`` section gives, or takes from its ``model`` preset."""

FULL_SHAPE_KEYS = ("kv_heads", "ffn_hidden", "vocab_size", "gated_mlp")
"""Optional shape keys: with ``vocab_size`` they give the whole model
(:func:`infralens.model.shaped_model`), which must hold ``num_params`` exactly."""

TRAINING_KEYS = tuple(
    k for k in Job.__dataclass_fields__ if k not in ("plan", "cluster", "sustained")
)
"""The :class:`~infralens.planner.job.Job` fields a ``training`` section may set: all but
the plan and cluster (the file's other sections) and the sustained rates, which a
measured file gives (``plan --calibration FILE``)."""


def _shape_model(training: dict[str, Any]) -> TransformerConfig:
    """The model the step is priced for: the ``model`` preset; else, with ``vocab_size``,
    the whole shape the keys give; else the preset whose size and shape match, else a
    GPT-shaped stand-in (4h MLP, kv heads = heads) whose vocabulary makes up the
    parameter count, which must hold ``num_params`` (1 %)."""
    if training.get("model"):
        return PRESETS[training["model"]]
    for name in (*SHAPE_KEYS, "seq_len"):
        positive_int(name, training[name])
    full = [k for k in FULL_SHAPE_KEYS if k in training]
    if full:
        return _full_shape(training, full)
    shape = tuple(training[k] for k in SHAPE_KEYS)
    for preset in PRESETS.values():
        if (
            preset.num_params(),
            preset.layers,
            preset.hidden,
            preset.heads,
        ) == shape:
            return preset
    n, layers, h, heads = shape
    body = layers * (12 * h * h + 4 * h) + h
    vocab = max(1, (n - body) // (2 * h))
    config = TransformerConfig(layers=layers, hidden=h, heads=heads, kv_heads=heads,
                               ffn_hidden=4 * h, vocab_size=vocab,
                               seq_len=training["seq_len"], norm="rmsnorm")  # fmt: skip
    counted = config.num_params()
    if abs(counted - n) > n // 100:
        raise ValueError(
            f"num_params must match the shape: {layers} layers of hidden {h} "
            f"(GPT-shaped) hold {counted}, got {n}"
        )
    return config


def _full_shape(training: dict[str, Any], given: list[str]) -> TransformerConfig:
    if "vocab_size" not in given:
        raise ValueError(
            f"training.{given[0]} needs vocab_size beside it (the whole shape), "
            "or leave it out"
        )
    config = shaped_model(
        training["layers"], training["hidden"], training["heads"],
        training["vocab_size"], training["seq_len"],
        kv_heads=training.get("kv_heads"), ffn_hidden=training.get("ffn_hidden"),
        gated_mlp=flag("gated_mlp", training.get("gated_mlp", False)),
    )  # fmt: skip
    if config.num_params() != training["num_params"]:
        raise ValueError(
            f"num_params must equal the shape's count: the training keys give "
            f"{config.num_params()} parameters, num_params is {training['num_params']}"
        )
    return config


def _with_preset(training: dict[str, Any], plan: ParallelPlan) -> dict[str, Any]:
    """Fill the shape, sequence length, micro-batch and batch a ``model`` preset implies.

    A preset gives ``num_params``, ``layers``, ``hidden``, ``heads``, the
    :data:`FULL_SHAPE_KEYS` and ``seq_len``; a shape key given beside it must agree.
    Left out, ``micro_batch_size`` is 1 and ``global_batch_size`` one micro-batch per
    data-parallel replica.
    """
    name = training.get("model")
    if name:
        if not isinstance(name, str) or name not in PRESETS:
            raise ValueError(
                f"training.model must be one of the presets {', '.join(PRESETS)}; "
                f"got {describe(name)}"
            )
        m = PRESETS[name]
        implied = {"num_params": m.num_params(), "layers": m.layers, "hidden": m.hidden,
                   "heads": m.heads, "kv_heads": m.kv_heads, "ffn_hidden": m.ffn_hidden,
                   "vocab_size": m.vocab_size, "gated_mlp": m.gated_mlp}  # fmt: skip
        for key, value in implied.items():
            given = training.setdefault(key, value)
            if given != value:
                raise ValueError(
                    f"training.{key} is {describe(given)} but model {name!r} has {value}; "
                    f"leave {key} out or correct it"
                )
        training.setdefault("seq_len", m.seq_len)
    training.setdefault("micro_batch_size", 1)
    if "global_batch_size" not in training and isinstance(
        training["micro_batch_size"], int
    ):
        training["global_batch_size"] = (
            training["micro_batch_size"] * plan.dp * plan.pp
        )
    missing = [k for k in (*SHAPE_KEYS, "seq_len") if k not in training]
    if missing:
        raise ValueError(
            f"training needs {', '.join(missing)}, or a model preset (model: llama3-70b) "
            "that implies them"
        )
    return training


@typed
def load_plan_file(path: str | Path) -> tuple[ParallelPlan, Cluster, Job | None]:
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
        missing = (
            False  # read_text names the reason: too long, not permitted, NUL byte
        )
    if missing and str(path):
        raise ValueError(f"no such plan file: {shown}")
    text = read_text(path, "plan file", MAX_PLAN_BYTES)
    check_size(text, shown)
    try:
        data = yaml.load(text, Loader=plan_loader(yaml, shown))
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise ValueError(f"{shown} is not valid YAML{where}") from None
    except RecursionError:
        raise ValueError(f"plan file {shown} nests too deeply") from None
    return parse_plan(data)


@typed
def worksheet_page(path: str | Path) -> str:
    """The filled worksheet of a plan file with a ``training`` section, as MyST tables.

    The handbook writes Lab 12's worksheet with this at build time, so its
    numbers are the package's (:func:`infralens.planner.worksheet_tables.worksheet_tables`).

    >>> text = worksheet_page("labs_src/starters/parallelism_plan.yaml")
    >>> rows = [row.split(" | ")[0] for row in text.splitlines()
    ...         if row.startswith("| TP ")]
    >>> rows.count("| TP all-gather"), rows.count("| TP reduce-scatter")
    (3, 2)

    Raises ``ValueError`` as :func:`load_plan_file` does, or if the file has
    no ``training`` section.
    """
    job = load_plan_file(path)[2]
    if job is None:
        raise ValueError(
            f"plan file {describe(str(path), 80)} has no 'training' section"
        )
    return worksheet_tables(fill_worksheet(job))


def _label(coords: Mapping[str, int]) -> str:
    return " ".join(f"{a}{coords[a]}" for a in ("tp", "cp", "pp", "dp"))


def _report(
    plan: ParallelPlan, cluster: Cluster, job: Job | None
) -> dict[str, Any]:
    # The worksheet checks the training section: refuse a bad one before listing ranks.
    sheet = None if job is None else render_markdown(fill_worksheet(job))
    grid = [
        [
            _label(plan.coords(node * cluster.gpus_per_node + g))
            for g in range(cluster.gpus_per_node)
        ]
        for node in range(cluster.nodes)
    ]
    # [start:axis-links]
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
    # [end:axis-links]
    report: dict[str, Any] = {
        "world_size": plan.world_size,
        "order": plan.order,
        "grid": grid,
        "axes": axes,
    }
    if sheet is not None:
        report["worksheet"] = sheet
    return report


def _group(ranks: list[int]) -> str:
    """A group's ranks, the first eight and the last of a long one."""
    return (
        str(ranks)
        if len(ranks) <= 16
        else f"[{str(ranks[:8])[1:-1]}, ..., {ranks[-1]}]"
    )


def _text(report: Mapping[str, Any], markdown: bool) -> str:
    out = ["## Placement (node x GPU)" if markdown else "Placement (node x GPU):"]
    grid = report["grid"]
    for node, row in enumerate(grid[:SHOWN_NODES]):
        out.append(f"{'- ' if markdown else ''}node {node}: " + " | ".join(row))
    if len(grid) > SHOWN_NODES:
        out.append(f"... ({len(grid)} nodes; --format json lists every rank)")
    out.append("")
    out.append("## Groups" if markdown else "Groups:")
    for axis, info in report["axes"].items():
        if info["degree"] == 1:
            continue
        shown = ", ".join(_group(g) for g in info["groups"][:4])
        more = (
            f" ... ({len(info['groups'])} groups)"
            if len(info["groups"]) > 4
            else ""
        )
        out.append(
            f"{'- ' if markdown else ''}{axis} (degree {info['degree']}, {info['link']}, "
            f"{info['frequency']}): {shown}{more}"
        )
    if "worksheet" in report:
        out += [
            "",
            "## Worksheet" if markdown else "Worksheet:",
            report["worksheet"],
        ]
    return "\n".join(out)
