"""Offloading: the bytes a step moves over PCIe when model state or activations live on the CPU.

Three things can leave the GPU. *Optimizer offload* (ZeRO-Offload,
Megatron-Core's ``--optimizer-cpu-offload``) keeps fp32 master weights and
Adam moments on the host and runs the update there: each step sends the
gradient shard down and the updated 16-bit parameter shard back up.
*Parameter offload* (FSDP2's ``CPUOffloadPolicy``, ZeRO-Infinity) keeps the
sharded parameters, gradients and optimizer state on the host: every
all-gather first copies the rank's shard up, and every reduce-scatter's
output is copied down. *Activation offload* copies saved activations down in
forward and back up in backward.

Offload pays when its copies hide behind the step's arithmetic: PCIe runs
both directions at once, so a step's transfer time is the larger direction
over the link's bandwidth, and it is hidden when the GPU computes longer
than that (:func:`break_even_tokens`). Optimizer offload also moves the Adam
update onto the host, whose speed is a second, usually tighter limit
(:func:`cpu_adam_seconds`, :func:`cpu_adam_break_even_tokens`).

>>> t = optimizer_offload(8 * 10**9, dp_size=8)        # 8B parameters on 8 GPUs
>>> t, t.seconds(PCIE_GEN5_X16_BYTES_PER_S)
(Transfers(host_to_device=2000000000, device_to_host=2000000000), Fraction(1, 32))
>>> fsdp2_cpu_offload(8 * 10**9, dp_size=8).host_to_device    # two fp32 gathers
8000000000
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from math import ceil

from infralens._typecheck import check_fields, typed
from infralens._validate import nonnegative_int, positive_int, positive_number

__all__ = [
    "CPU_ADAM_PARAMS_PER_S",
    "PCIE_GEN5_X16_BYTES_PER_S",
    "Transfers",
    "activation_offload",
    "break_even_tokens",
    "compute_seconds",
    "cpu_adam_break_even_tokens",
    "cpu_adam_seconds",
    "fsdp2_cpu_offload",
    "optimizer_offload",
]

PCIE_GEN5_X16_BYTES_PER_S = 64 * 10**9
"""Bytes per second one way over an H100 SXM's PCIe Gen5 x16 link: half of the
128 GB/s NVIDIA's datasheet gives for both directions. An upper bound: what a
copy reaches also depends on pinned host memory and the host's topology."""

CPU_ADAM_PARAMS_PER_S = Fraction(11_600_000_000) / Fraction("8.2")
"""Parameters per second DeepSpeed's CPU-Adam updated in its authors' measurement: one
step of an 11.6B-parameter GPT-2 in 8.2 s, against 56 s for ``torch.optim.Adam`` on
the same host (DeepSpeed pull request 735, 2021; the host is not named). One
host's rate, shared by every rank that runs on it: time the step on yours."""


@dataclass(frozen=True)
class Transfers:
    """Bytes one GPU copies over PCIe in one training step, per direction."""

    host_to_device: int
    device_to_host: int

    def __post_init__(self) -> None:
        check_fields(self)
        nonnegative_int("host_to_device", self.host_to_device)
        nonnegative_int("device_to_host", self.device_to_host)

    def seconds(self, bandwidth_bytes_per_s: int) -> Fraction:
        """Time of the step's copies: ``max(host_to_device, device_to_host) / bandwidth``.

        PCIe is full duplex, so the two directions overlap each other.

        >>> Transfers(6, 2).seconds(3)
        Fraction(2, 1)
        >>> Transfers(0, 0).seconds(3)
        Fraction(0, 1)
        >>> Transfers(6, 2).seconds(0)
        Traceback (most recent call last):
        ...
        ValueError: bandwidth_bytes_per_s must be > 0, got 0

        Raises ``ValueError`` for a bandwidth that is not positive.
        """
        bw = positive_number("bandwidth_bytes_per_s", bandwidth_bytes_per_s)
        return Fraction(max(self.host_to_device, self.device_to_host)) / bw


def _shard(params: int, dp_size: int) -> int:
    # torch.chunk's largest shard: ceil(params / dp_size), what the busiest rank copies
    return ceil(
        Fraction(positive_int("params", params), positive_int("dp_size", dp_size))
    )


@typed
def optimizer_offload(
    params: int, *, dp_size: int = 1, grad_bytes: int = 2, param_bytes: int = 2
) -> Transfers:
    """Copies of optimizer offload (ZeRO-Offload; Megatron-Core's CPU optimizer) in one step.

    Each rank sends its gradient shard to the host (``grad_bytes`` per
    parameter) and receives the updated parameter shard (``param_bytes``),
    ``ceil(params / dp_size)`` parameters each way: ZeRO-Offload's 2Ψ + 2Ψ
    with 16-bit gradients and parameters on one GPU.

    >>> optimizer_offload(10**9)
    Transfers(host_to_device=2000000000, device_to_host=2000000000)
    >>> optimizer_offload(10**9, dp_size=4, grad_bytes=4)   # fp32 gradients, 4 ranks
    Transfers(host_to_device=500000000, device_to_host=1000000000)

    Raises ``ValueError`` for a count or size below 1.
    """
    shard = _shard(params, dp_size)
    pb, gb = (
        positive_int("param_bytes", param_bytes),
        positive_int("grad_bytes", grad_bytes),
    )
    return Transfers(shard * pb, shard * gb)


@typed
def fsdp2_cpu_offload(
    params: int,
    *,
    dp_size: int,
    all_gathers: int = 2,
    shard_bytes: int = 4,
    reduce_bytes: int = 4,
) -> Transfers:
    """Copies of FSDP2's ``CPUOffloadPolicy`` in one step (PyTorch 2.13).

    Before every all-gather a rank copies its parameter shard host-to-device
    in the dtype it is stored in (``shard_bytes``: fp32 under the ``"fsdp2"``
    recipe), then casts it to the compute dtype; after every reduce-scatter
    it copies the gradient shard device-to-host in ``reduce_bytes``. With
    ``reshard_after_forward=True`` each unit is gathered twice a step.

    >>> fsdp2_cpu_offload(10**9, dp_size=8)
    Transfers(host_to_device=1000000000, device_to_host=500000000)
    >>> fsdp2_cpu_offload(10**9, dp_size=8, all_gathers=1)   # no reshard after forward
    Transfers(host_to_device=500000000, device_to_host=500000000)

    Raises ``ValueError`` for a count or size below 1.
    """
    shard = _shard(params, dp_size)
    gathers = positive_int("all_gathers", all_gathers)
    sb, rb = (
        positive_int("shard_bytes", shard_bytes),
        positive_int("reduce_bytes", reduce_bytes),
    )
    return Transfers(gathers * shard * sb, shard * rb)


def activation_offload(saved_bytes: int) -> Transfers:
    """Copies of activation offload: saved tensors go down in forward and come back in backward.

    >>> activation_offload(3 * 2**30)
    Transfers(host_to_device=3221225472, device_to_host=3221225472)
    >>> activation_offload(-1)
    Traceback (most recent call last):
    ...
    ValueError: saved_bytes must be >= 0, got -1

    Raises ``ValueError`` for negative *saved_bytes*.
    """
    n = nonnegative_int("saved_bytes", saved_bytes)
    return Transfers(n, n)


@typed
def compute_seconds(params: int, tokens: int, flops_per_s: int) -> Fraction:
    """Time of a step's weight GEMMs on one GPU: ``6 · params · tokens / flops_per_s``.

    2 FLOPs per parameter per token forward, 4 backward; *params* are those
    the GPU multiplies (all of them under data parallelism or FSDP), *tokens*
    those it processes in the step.

    >>> compute_seconds(10**9, 1000, 6 * 10**12)
    Fraction(1, 1)

    Raises ``ValueError`` for a value below 1.
    """
    p, t = positive_int("params", params), positive_int("tokens", tokens)
    return Fraction(6 * p * t, positive_int("flops_per_s", flops_per_s))


@typed
def break_even_tokens(
    transfers: Transfers,
    *,
    params: int,
    flops_per_s: int,
    bandwidth_bytes_per_s: int,
) -> int:
    """Fewest tokens per GPU per step whose arithmetic lasts as long as the step's copies.

    ``ceil(transfers.seconds(bandwidth) · flops_per_s / (6 · params))``. With
    at least that many tokens a perfectly overlapped offload costs no time;
    with fewer, the difference is exposed. The CPU's own work (the optimizer
    step on the host) is not counted.

    >>> t = Transfers(2 * 10**9, 2 * 10**9)
    >>> break_even_tokens(t, params=10**9, flops_per_s=6 * 10**14,
    ...                   bandwidth_bytes_per_s=10**9)
    200000
    >>> break_even_tokens(Transfers(0, 0), params=1, flops_per_s=1,
    ...                   bandwidth_bytes_per_s=1)
    0

    Raises ``ValueError`` for a value below 1.
    """
    if not isinstance(transfers, Transfers):
        raise TypeError(
            f"transfers must be Transfers, got {type(transfers).__name__}"
        )
    seconds = transfers.seconds(bandwidth_bytes_per_s)
    rate = positive_int("flops_per_s", flops_per_s)
    return ceil(seconds * rate / (6 * positive_int("params", params)))


@typed
def cpu_adam_seconds(
    params: int,
    *,
    dp_size: int = 1,
    ranks_per_host: int = 1,
    params_per_s: Fraction = CPU_ADAM_PARAMS_PER_S,
) -> Fraction:
    """Time of the host's Adam step under optimizer offload.

    ``ranks_per_host · ceil(params / dp_size) / params_per_s``: each rank updates
    its shard on the CPU, and the ranks on one host share its cores and memory
    bandwidth, so a host updates *ranks_per_host* shards each step.

    >>> cpu_adam_seconds(11_600_000_000)        # the measurement the rate comes from
    Fraction(41, 5)
    >>> round(float(cpu_adam_seconds(8 * 10**9, dp_size=8, ranks_per_host=8)), 2)
    5.66
    >>> round(float(cpu_adam_seconds(8 * 10**9, dp_size=64, ranks_per_host=8)), 2)
    0.71
    >>> cpu_adam_seconds(10**9, ranks_per_host=0)
    Traceback (most recent call last):
    ...
    ValueError: ranks_per_host must be >= 1, got 0

    Raises ``ValueError`` for a count below 1 or a rate that is not positive.
    """
    share = positive_int("ranks_per_host", ranks_per_host)
    rate = positive_number("params_per_s", params_per_s)
    return share * _shard(params, dp_size) / rate


@typed
def cpu_adam_break_even_tokens(
    params: int,
    *,
    dp_size: int = 1,
    ranks_per_host: int = 1,
    flops_per_s: int,
    params_per_s: Fraction = CPU_ADAM_PARAMS_PER_S,
) -> int:
    """Fewest tokens per GPU per step whose arithmetic lasts as long as the host's Adam.

    ``ceil(cpu_adam_seconds(...) · flops_per_s / (6 · params))``, *params* being
    those each GPU multiplies (all of them under data parallelism or ZeRO). Where
    the host step runs after backward and before the next forward, it adds its
    whole time, and this count says when it stops dominating the step; where a
    framework overlaps it with GPU work, it is the count above which it hides.

    >>> cpu_adam_break_even_tokens(10**9, flops_per_s=6 * 10**14,
    ...                            params_per_s=Fraction(10**9))
    100000
    >>> cpu_adam_break_even_tokens(10**9, flops_per_s=0)
    Traceback (most recent call last):
    ...
    ValueError: flops_per_s must be >= 1, got 0

    Raises ``ValueError`` for a count below 1 or a rate that is not positive.
    """
    rate = positive_int("flops_per_s", flops_per_s)
    host = cpu_adam_seconds(
        params,
        dp_size=dp_size,
        ranks_per_host=ranks_per_host,
        params_per_s=params_per_s,
    )
    return ceil(host * rate / (6 * positive_int("params", params)))
