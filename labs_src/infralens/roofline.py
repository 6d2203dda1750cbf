"""The roofline view of each parallel axis: FLOPs per byte sent against the link's ratio.

An axis hides its communication only when the arithmetic its traffic
buys takes longer than the traffic. Per axis, with the model's shapes:

    intensity = FLOPs the traffic enables / bytes each GPU sends
    machine   = matmul ceiling (FLOP/s) / bus bandwidth of the link (bytes/s)

and the axis is communication-bound while intensity < machine. The link's
bandwidth is what :func:`infralens.nccl.predict` gives for a 1 GiB
collective on a group of that tier, so the roofline uses the same network
model as the step estimate. The intensities (forward and backward
together, Megatron's shapes, bf16 activations, fp32 gradients):

- TP (sequence parallel, 8 collectives of b·s·h per layer):
  2·P_layer·3 / (8·h·2·(t − 1)) per token, independent of batch and
  sequence: the hidden size decides.
- CP (ring, K/V of kv_heads·d per token): causal attention, 6·s_local·h
  per token per layer, over 3·2·2·kv·d bytes: the local sequence decides.
- DP (reduce-scatter and all-gather of fp32 gradients, once per step):
  6·tokens per replica / (2·4) per parameter: the batch decides.
- PP (b·s·h/t each way per boundary): 6·P_stage / (4·h) per token.

>>> from infralens.topology import Cluster
>>> rows = axis_roofline("llama3-70b", Cluster.from_node_shape("8_nodes_x_8_gpus"), tp=8)
>>> [(r.axis, r.link, r.needs) for r in rows]      # doctest: +NORMALIZE_WHITESPACE
[('tp', 'nvlink', 'hidden'), ('cp', 'network', 'tokens per GPU'),
 ('dp', 'network', 'tokens per replica'), ('pp', 'network', 'layers per stage')]
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from infralens._typecheck import check_fields, typed
from infralens._validate import positive_int
from infralens.hardware import (
    CEILING_STAND_IN,
    MAMF_BF16,
    matmul_ceiling,
    preset_key,
)
from infralens.memory import _model
from infralens.model import TransformerConfig
from infralens.nccl import predict
from infralens.topology import Cluster

__all__ = ["AxisRoofline", "axis_roofline", "dp_tokens_per_gpu", "link_bandwidth"]

GIB = 2**30


@dataclass(frozen=True)
class AxisRoofline:
    """One axis: the link it crosses, the machine's FLOPs per byte on it, the axis's
    intensity at the given shape, and the size at which the two are equal."""

    axis: str
    link: str
    machine_flops_per_byte: float
    intensity: float
    needs: str
    break_even: float

    def __post_init__(self) -> None:
        check_fields(self)


@typed
def link_bandwidth(cluster: Cluster, tier: str) -> float:
    """Bus bandwidth in bytes/s of a 1 GiB reduce-scatter on eight GPUs of one *tier*.

    ``nvlink``: one node's eight GPUs; ``network``: rank 0 of eight nodes.

    >>> from infralens.topology import Cluster
    >>> eight = Cluster.from_node_shape("8_nodes_x_8_gpus")
    >>> round(link_bandwidth(eight, "network") / 1e9)
    47
    """
    if tier == "nvlink":
        ranks = list(range(min(8, cluster.gpus_per_node)))
    else:
        ranks = [n * cluster.gpus_per_node for n in range(min(8, cluster.nodes))]
    return predict("reduce_scatter", GIB, cluster, ranks).bus_bandwidth * 1e9


def axis_roofline(
    model: TransformerConfig | str,
    cluster: Cluster,
    *,
    tp: int = 8,
    cp: int = 2,
    seq_len: int = 8192,
    tokens_per_replica: int = 1_048_576,
    pp: int = 4,
) -> list[AxisRoofline]:
    """Intensity and break-even size of TP, CP, DP and PP for *model* on *cluster*.

    TP and CP are priced on NVLink when they fit in a node, else on the
    network; DP and PP on the network. ``break_even`` is the hidden size
    (TP), local tokens (CP), tokens per replica (DP) or layers per stage
    (PP) at which intensity equals the machine's ratio.

    GEMMs run at :func:`infralens.hardware.matmul_ceiling`; a preset with no
    measured (or stand-in) ceiling, such as the B200, at its dense peak.

    Raises ``ValueError`` for a size below 1 or a GPU that is not a preset.
    """
    m = _model(model)
    t, c, s, p = (positive_int(n, v) for n, v in (("tp", tp), ("cp", cp), ("seq_len", seq_len),
                                                   ("pp", pp)))  # fmt: skip
    tokens = positive_int("tokens_per_replica", tokens_per_replica)
    key = preset_key(cluster.system.gpu)
    priced = key in MAMF_BF16 or key in CEILING_STAND_IN
    ceiling = matmul_ceiling(key) if priced else cluster.system.gpu.bf16_flops
    h, kvd = m.hidden, m.kv_heads * m.head_dim

    def machine(group: int) -> tuple[str, float]:
        tier = "nvlink" if group <= cluster.gpus_per_node else "network"
        return tier, ceiling / link_bandwidth(cluster, tier)

    rows = []
    tier, ratio = machine(t)
    per_h = 6 * m.layer_params() / h / (16 * h * max(t - 1, 1))  # intensity / h
    rows.append(AxisRoofline("tp", tier, ratio, per_h * h, "hidden", ratio / per_h))
    tier, ratio = machine(t * c)
    local = s // c
    per_token = 6 * h / (12 * kvd)
    rows.append(AxisRoofline("cp", tier, ratio, per_token * local, "tokens per GPU",
                             ratio / per_token))  # fmt: skip
    tier, ratio = "network", ceiling / link_bandwidth(cluster, "network")
    rows.append(AxisRoofline("dp", tier, ratio, 6 * tokens / 8, "tokens per replica",
                             ratio * 8 / 6))  # fmt: skip
    per_layer = 6 * m.layer_params() / (4 * h)
    rows.append(AxisRoofline("pp", tier, ratio, per_layer * m.layers / p, "layers per stage",
                             ratio / per_layer))  # fmt: skip
    return rows


@typed
def dp_tokens_per_gpu(
    machine_flops_per_byte: float,
    *,
    model_parallel: int = 1,
    total_to_active: float = 1.0,
    bytes_per_param: int = 8,
) -> float:
    """Tokens per GPU per step at which the data-parallel reduction takes as long as the
    arithmetic, with nothing overlapped.

    A GPU computes 6 · N_active · T FLOPs on its T tokens and sends about
    *bytes_per_param* · N_total / M bytes (a ring all-reduce of fp32 gradients: 8), where
    M GPUs share one copy of the parameters (tp · pp, and ep for expert weights):

        T* = machine ratio · bytes_per_param / 6 · (N_total / N_active) / M

    >>> round(dp_tokens_per_gpu(17084))                      # DGX H100, pure FSDP/DDP
    22779
    >>> round(dp_tokens_per_gpu(17084, model_parallel=128))  # Llama 3 405B: tp 8 x pp 16
    178
    >>> round(dp_tokens_per_gpu(17084, total_to_active=671 / 37, model_parallel=64))
    6455
    >>> dp_tokens_per_gpu(17084, model_parallel=0)
    Traceback (most recent call last):
    ...
    ValueError: model_parallel must be >= 1, got 0

    Raises ``ValueError`` for a non-positive ratio or size, or *total_to_active* below 1.
    """
    ratio = float(machine_flops_per_byte)
    if not 0 < ratio < math.inf:
        raise ValueError(
            f"machine_flops_per_byte must be > 0 and finite, got {ratio}"
        )
    if not 1 <= total_to_active < math.inf:
        raise ValueError(
            f"total_to_active must be >= 1 and finite, got {total_to_active}"
        )
    m = positive_int("model_parallel", model_parallel)
    b = positive_int("bytes_per_param", bytes_per_param)
    tokens = ratio * b / 6 * total_to_active / m
    if not math.isfinite(tokens):  # a ratio and a size whose product overflows
        raise ValueError(
            f"machine_flops_per_byte x total_to_active too large: {ratio} x "
            f"{total_to_active}"
        )
    return tokens
