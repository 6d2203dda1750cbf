"""GPU and system presets: datasheet figures for the machines the handbook prices.

One place holds every hardware number the package uses: peak dense
tensor-core FLOP/s, HBM capacity and bandwidth, NVLink bandwidth and the
size of the NVLink domain, and the network adapters of each node. Each
figure is a vendor datasheet value (cited next to it); where a datasheet
prints a rack total or a "with sparsity" figure, the code stores the
per-GPU dense value and says how it was derived.

>>> h100 = SYSTEMS["dgx-h100"]
>>> h100.gpu.name, h100.gpus_per_node, h100.nics_per_node, h100.nic_bits_per_s // 10**9
('H100 SXM5 80GB', 8, 8, 400)
>>> h100.gpu.bf16_flops / 1e12, h100.gpu.nvls
(989.5, True)
>>> SYSTEMS["gb200-nvl72"].nvlink_domain      # one NVLink fabric spans 18 trays
72

Dense, never sparse: the H100 datasheet prints 1,979 TFLOP/s for BF16
"with sparsity"; the dense peak that MFU divides by is half of it.
"""

from __future__ import annotations

from dataclasses import dataclass

from infralens._typecheck import check_fields, typed
from infralens._validate import check_choice, positive_int

__all__ = [
    "CEILING_STAND_IN",
    "GPU",
    "GPUS",
    "MAMF_BF16",
    "SYSTEMS",
    "System",
    "matmul_ceiling",
    "preset_key",
    "system",
]

GB = 10**9
TERA = 10**12
ARCHS = ("ampere", "hopper", "blackwell")


@dataclass(frozen=True)
class GPU:
    """One accelerator: peak dense math, HBM, and its NVLink ports.

    ``bf16_flops`` and ``fp8_flops`` are dense tensor-core peaks in FLOP/s
    (``fp8_flops`` is 0 where the GPU has no FP8 tensor cores).
    ``nvlink_bytes_per_s`` is per GPU and per direction (half the
    datasheet's bidirectional total); ``nvls`` says whether the NVSwitch
    fabric can reduce in the switch (NVLink SHARP, Hopper and later).
    """

    name: str
    arch: str
    bf16_flops: int
    fp8_flops: int
    hbm_bytes: int
    hbm_bytes_per_s: int
    nvlink_links: int
    nvlink_bytes_per_s: int
    nvls: bool

    def __post_init__(self) -> None:
        check_choice("arch", self.arch, ARCHS)
        for field in ("bf16_flops", "hbm_bytes", "hbm_bytes_per_s", "nvlink_links"):
            positive_int(field, getattr(self, field))
        positive_int("nvlink_bytes_per_s", self.nvlink_bytes_per_s)
        check_fields(self)


GPUS: dict[str, GPU] = {
    # A100 datasheet (80GB SXM): BF16 312 TFLOP/s dense (624 with sparsity), no FP8,
    # HBM2e 80 GB at 2,039 GB/s, NVLink 3 600 GB/s over 12 links.
    "a100-sxm4-80gb": GPU(
        "A100 SXM4 80GB",
        "ampere",
        312 * TERA,
        0,
        80 * GB,
        2039 * GB,
        12,
        300 * GB,
        False,
    ),
    # H100 datasheet (SXM): BF16 1,979 and FP8 3,958 TFLOP/s "with sparsity", so
    # 989.5 and 1,979 dense; HBM3 80 GB at 3.35 TB/s; NVLink 4 900 GB/s over 18 links.
    "h100-sxm5-80gb": GPU(
        "H100 SXM5 80GB",
        "hopper",
        989_500 * 10**9,
        1979 * TERA,
        80 * GB,
        3350 * GB,
        18,
        450 * GB,
        True,
    ),
    # H200 datasheet (SXM): the H100's math (same sparse figures), HBM3e 141 GB at
    # 4.8 TB/s, NVLink 4 900 GB/s.
    "h200-sxm-141gb": GPU(
        "H200 SXM 141GB",
        "hopper",
        989_500 * 10**9,
        1979 * TERA,
        141 * GB,
        4800 * GB,
        18,
        450 * GB,
        True,
    ),
    # The H100 of torchtitan's benchmarks (benchmarks/llama3_h100_202412_torchtitan.md at
    # b5bcd76): an SXM H100 with 96 GB of HBM2e at 2.4 TB/s, run at its default 500 W
    # limit. Its dense peak is unknown ("between SXM and NVL", their footnote 2); the SXM
    # figure is stored, as torchtitan divides by it, so it is an upper bound. NVLink 4 as
    # on every SXM H100.
    "h100-hbm2e-96gb": GPU(
        "H100 SXM 96GB HBM2e (500 W)",
        "hopper",
        989_500 * 10**9,
        1979 * TERA,
        96 * GB,
        2400 * GB,
        18,
        450 * GB,
        True,
    ),
    # GB200 NVL72 datasheet gives rack totals for 72 GPUs: FP16/BF16 360 PFLOP/s and
    # FP8 720 PFLOP/s with sparsity (2.5 and 5 PFLOP/s dense per GPU), 13.4 TB HBM3e
    # at 576 TB/s (186 GB and 8 TB/s per GPU), NVLink 5 1.8 TB/s per GPU over 18 links.
    "b200-gb200": GPU(
        "B200 (GB200 NVL72)",
        "blackwell",
        2500 * TERA,
        5000 * TERA,
        13_400 * GB // 72,
        576_000 * GB // 72,
        18,
        900 * GB,
        True,
    ),
}
"""GPUs by key; figures from the vendor datasheets cited in the bibliography."""


MAMF_BF16: dict[str, int] = {
    # stas00/ml-engineering @ 744d01e1, compute/accelerator/README.md, "Maximum Achievable
    # Matmul FLOPS comparison table", BF16, mean of 100 iterations after 50 warm-up:
    "a100-sxm4-80gb": 271_200 * 10**9,  # NVIDIA A100 SXM 271.2 (torch 2.6.0+cu126)
    "h100-sxm5-80gb": 794_500 * 10**9,  # NVIDIA H100 SXM 794.5 (torch 2.7.0+cu126)
    "h200-sxm-141gb": 794_500
    * 10**9,  # same table: "H200 is the same" as the H100 SXM
}
"""Measured BF16 matmul ceilings in FLOP/s, by :data:`GPUS` key: the *maximum achievable
matmul FLOPS* over a sweep of shapes, not a datasheet figure."""

MAMF_FP8: dict[str, int] = {
    # the same table, FP8 (float8_e4m3fn) inputs; the A100 has no FP8 tensor cores:
    "h100-sxm5-80gb": 1_402_600
    * 10**9,  # NVIDIA H100 SXM 1402.6 (torch 2.7.0+cu126)
    "h200-sxm-141gb": 1_453_400
    * 10**9,  # NVIDIA H200 SXM 1453.4 (torch 2.7.1+cu128)
}
"""Measured FP8 matmul ceilings in FLOP/s, by :data:`GPUS` key (70.9 % and 73.4 % of the
1,979 TFLOP/s dense peak: quantised GEMMs reach less of their peak than BF16 ones do)."""

CEILING_STAND_IN: dict[str, str] = {"h100-hbm2e-96gb": "h100-sxm5-80gb"}
"""GPUs with no published ceiling, by :data:`GPUS` key, and the measured part whose matmul
and attention ceilings are used for them. The 500 W HBM2e H100 is the SXM H100's die held
to a lower power limit, so its clocks, and every ceiling, can only be lower: an upper bound."""


def matmul_ceiling(gpu: str, precision: str = "bf16") -> int:
    """The matmul ceiling in FLOP/s that prices *precision* GEMMs on preset *gpu*.

    MAMF_BF16[gpu] or MAMF_FP8[gpu], or that of its :data:`CEILING_STAND_IN` part.

    >>> matmul_ceiling("h100-hbm2e-96gb") == MAMF_BF16["h100-sxm5-80gb"]
    True
    >>> h100 = "h100-sxm5-80gb"
    >>> round(matmul_ceiling(h100, "fp8") / matmul_ceiling(h100), 2)
    1.77
    >>> matmul_ceiling("a100-sxm4-80gb", "fp8")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: gpu must be one of 'h100-sxm5-80gb', ...; got 'a100-sxm4-80gb'
    >>> matmul_ceiling("b200-gb200")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: gpu must be one of 'a100-sxm4-80gb', ...; got 'b200-gb200'

    Raises ``ValueError`` for an unknown *precision* or a GPU with neither a measurement
    nor a stand-in at that precision.
    """
    fp8 = check_choice("precision", precision, ("bf16", "fp8")) == "fp8"
    table = MAMF_FP8 if fp8 else MAMF_BF16
    stand_in = {k: v for k, v in CEILING_STAND_IN.items() if v in table}
    key = check_choice("gpu", gpu, (*table, *stand_in))
    return table[stand_in.get(key, key)]


@dataclass(frozen=True)
class System:
    """A node design: its GPUs, how many share an NVLink domain, and its network adapters.

    ``nvlink_domain`` is the number of GPUs one NVLink switch fabric joins:
    the node for a DGX, 72 GPUs over 18 trays for a GB200 NVL72 rack.
    ``nics_per_node`` and ``nic_bits_per_s`` describe the compute-fabric
    adapters (storage and management ports excluded).
    """

    name: str
    gpu: GPU
    gpus_per_node: int
    nvlink_domain: int
    nics_per_node: int
    nic_bits_per_s: int
    gpudirect_rdma: bool
    fabric: str

    def __post_init__(self) -> None:
        positive_int("gpus_per_node", self.gpus_per_node)
        positive_int("nvlink_domain", self.nvlink_domain)
        positive_int("nics_per_node", self.nics_per_node)
        positive_int("nic_bits_per_s", self.nic_bits_per_s)
        # [start:whole-nodes-per-domain]
        if self.nvlink_domain % self.gpus_per_node:
            raise ValueError(
                "nvlink_domain must be a multiple of gpus_per_node: "
                f"{self.nvlink_domain} % {self.gpus_per_node} != 0"
            )
        # [end:whole-nodes-per-domain]
        check_fields(self)

    @property
    def nic_bytes_per_s(self) -> int:
        """One adapter's line rate in bytes per second per direction (bits / 8)."""
        return self.nic_bits_per_s // 8


SYSTEMS: dict[str, System] = {
    # DGX A100 datasheet: 8 A100, 8 single-port ConnectX-6 200 Gb/s HDR InfiniBand.
    "dgx-a100": System(
        "DGX A100",
        GPUS["a100-sxm4-80gb"],
        8,
        8,
        8,
        200 * GB,
        True,
        "InfiniBand HDR",
    ),
    # [start:system-dgx-h100]
    # DGX H100 datasheet: 8 H100, 8 single-port ConnectX-7 400 Gb/s
    # InfiniBand/Ethernet.
    "dgx-h100": System(
        "DGX H100",
        GPUS["h100-sxm5-80gb"],
        8,
        8,
        8,
        400 * GB,
        True,
        "InfiniBand NDR",
    ),
    # [end:system-dgx-h100]
    # DGX H200 datasheet: 8 H200, the DGX H100's eight 400 Gb/s ConnectX-7 adapters.
    "dgx-h200": System(
        "DGX H200",
        GPUS["h200-sxm-141gb"],
        8,
        8,
        8,
        400 * GB,
        True,
        "InfiniBand NDR",
    ),
    # Meta's Grand Teton hosts of torchtitan's H100 benchmarks: 8 of the HBM2e H100s above
    # "fully connected with NVLink" and "400 Gb/s per GPU" of backend RDMA network.
    "grand-teton-h100-hbm2e": System(
        "Grand Teton H100 HBM2e",
        GPUS["h100-hbm2e-96gb"],
        8,
        8,
        8,
        400 * GB,
        True,
        "RDMA",
    ),
    # [start:system-gb200-nvl72]
    # GB200 NVL72: 18 compute trays of 4 GPUs joined by one NVLink 5 fabric;
    # NVIDIA's multi-node NVLink tuning guide gives each tray ConnectX-7
    # adapters, one per GPU.
    "gb200-nvl72": System(
        "GB200 NVL72",
        GPUS["b200-gb200"],
        4,
        72,
        4,
        400 * GB,
        True,
        "InfiniBand NDR",
    ),
    # [end:system-gb200-nvl72]
    # vTrain's multi-node validation cluster (Bang et al. 2024): 8 A100 per NVSwitch
    # node, 800 Gb/s of inter-node bandwidth per node (VIA-Research/vTrain f8dda84,
    # src/config.py: inter_node_bandwidth "in Gbps", 800 in every config of
    # config/validation/multi); the adapters' split is not given: eight of 100 Gb/s,
    # one per GPU, so that groups running at once share the node's 800 Gb/s.
    "vtrain-a100": System(
        "vTrain A100 cluster",
        GPUS["a100-sxm4-80gb"],
        8,
        8,
        8,
        100 * GB,
        True,
        "InfiniBand",
    ),
}
"""Node designs by key, as :meth:`infralens.topology.Cluster.from_node_shape` takes them."""


@typed
def system(name: str) -> System:
    """The preset called *name*.

    >>> system("dgx-a100").gpu.bf16_flops // 10**12
    312
    >>> system("dgx-b300")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: name must be one of 'dgx-a100', 'dgx-h100', ...; got 'dgx-b300'
    """
    return SYSTEMS[check_choice("name", name, list(SYSTEMS))]


def preset_key(gpu: GPU) -> str:
    """The :data:`GPUS` key of *gpu*, for looking up what was measured on that part.

    >>> preset_key(SYSTEMS["dgx-a100"].gpu)
    'a100-sxm4-80gb'
    >>> from dataclasses import replace
    >>> pcie = replace(GPUS["h100-sxm5-80gb"], name="H100 PCIe")
    >>> preset_key(pcie)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: gpu 'H100 PCIe' is not a preset of infralens.hardware.GPUS: ...

    Raises ``TypeError`` if *gpu* is not a :class:`GPU`, ``ValueError`` if no preset equals it.
    """
    if not isinstance(gpu, GPU):
        raise TypeError(f"gpu must be a GPU, got {type(gpu).__name__}")
    for key, preset in GPUS.items():
        if preset == gpu:
            return key
    raise ValueError(
        f"gpu {gpu.name!r} is not a preset of infralens.hardware.GPUS: its ceilings are unmeasured"
    )
