"""A :class:`~infralens.planner.job.Job` written as a plan file.

``rank --write-plan`` writes a ranking's row with :func:`plan_yaml`; ``plan`` and
``memory`` read the file back (:mod:`infralens.planner.plan_file`) into the same Job,
so a plan chosen from a ranking is priced and counted as it was ranked.
"""

from __future__ import annotations

from dataclasses import fields

from infralens._typecheck import typed
from infralens.hardware import SYSTEMS
from infralens.model import shaped_model
from infralens.planner.job import Job
from infralens.recipe import Recipe

__all__ = ["ALWAYS_WRITTEN", "plan_yaml"]


ALWAYS_WRITTEN = ("seq_len", "global_batch_size", "micro_batch_size", "recipe",
                  "recompute", "sequence_parallel", "schedule", "chunks")  # fmt: skip
"""The ``training`` keys :func:`plan_yaml` writes even at their defaults."""


@typed
def plan_yaml(job: Job) -> str:
    """*job* as a plan file that ``plan`` and ``memory`` read back into the same
    :class:`~infralens.planner.job.Job` (``rank --write-plan`` writes a row's).

    The cluster and degrees are named by their presets, and the model by its preset or,
    for a shape (:func:`infralens.model.shaped_model`), by its shape keys; every option
    that is given and not its default, and those of :data:`ALWAYS_WRITTEN`, goes under
    ``training`` (a :class:`~infralens.recipe.Recipe` by its name). The rates a job is
    priced with (*sustained*) are no plan-file key: ``plan --calibration`` gives them.

    >>> from infralens.planner.ranking import rank_plans
    >>> from infralens.topology import Cluster
    >>> node = Cluster.from_node_shape("1_node_x_8_gpus")
    >>> row = rank_plans("llama3-8b", node, seq_len=8192, global_batch_size=16, top=1)[0]
    >>> print(plan_yaml(row.job).splitlines()[0])
    world_size: 8
    >>> from dataclasses import replace
    >>> shaped = replace(row.job, model=replace(row.job.config, layers=31))
    >>> [line for line in plan_yaml(shaped).splitlines() if "layers" in line]
    ['  layers: 31']
    >>> plan_yaml(replace(row.job, model=replace(row.job.config, bias=True)))
    ... # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: plan_yaml writes a preset model or one its shape keys give; ...
    """
    system = next((k for k, v in SYSTEMS.items() if v == job.cluster.system), None)
    if system is None:
        raise ValueError(
            "plan_yaml writes a preset cluster; the job's cluster is no preset"
        )
    p, c = job.plan, job.cluster
    lines = [
        f"world_size: {p.world_size}",
        f"node_shape: {c.nodes}_nodes_x_{c.gpus_per_node}_gpus",
        f"cluster: {system}",
        "parallelism:",
        *(
            f"  {axis}_size: {getattr(p, axis)}"
            for axis in ("tp", "cp", "pp", "dp")
        ),
        f"  order: {p.order}",
        "training:",
        *_model_lines(job),
    ]
    for f in fields(Job):
        value = getattr(job, f.name)
        if f.name in ("model", "plan", "cluster", "sustained") or value is None:
            continue
        if isinstance(value, Recipe):  # a preset recipe by its name
            value = value.name
        if value != f.default or f.name in ALWAYS_WRITTEN:
            shown = str(value).lower() if isinstance(value, bool) else value
            lines.append(f"  {f.name}: {shown}")
    return "\n".join(lines) + "\n"


def _model_lines(job: Job) -> list[str]:
    """The ``training`` lines naming the model: its preset, else its whole shape."""
    if job.model_name is not None:
        return [f"  model: {job.model_name}"]
    m = job.config
    rebuilt = shaped_model(m.layers, m.hidden, m.heads, m.vocab_size, job.seq_len,
                           kv_heads=m.kv_heads, ffn_hidden=m.ffn_hidden,
                           gated_mlp=m.gated_mlp)  # fmt: skip
    if rebuilt != m:
        raise ValueError(
            "plan_yaml writes a preset model or one its shape keys give; the job's model is neither"
        )
    shape = (("num_params", m.num_params()), ("layers", m.layers), ("hidden", m.hidden),
             ("heads", m.heads), ("kv_heads", m.kv_heads), ("ffn_hidden", m.ffn_hidden),
             ("vocab_size", m.vocab_size), ("gated_mlp", str(m.gated_mlp).lower()))  # fmt: skip
    return [f"  {key}: {value}" for key, value in shape]
