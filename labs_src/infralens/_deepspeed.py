"""DeepSpeed's bf16 ZeRO presets: the commit they follow, the lines each cites, the fixed buffers.

The ``deepspeed-zero{1,2,3}-bf16`` recipes of :data:`infralens.precision.RECIPES`
are built from this module. Besides its per-parameter buffers, DeepSpeed
allocates buffers whose size is a setting, not the model's: the gradient
bucket of ``reduce_bucket_size`` elements (5·10⁸ by default) in the
communication dtype, and under ZeRO-3 the gathered parameters, which
``max_live_parameters`` (10⁹ by default) bounds. With bf16 both take 2 bytes
an element:

    fixed bytes = 2 · reduce_bucket_size                            (ZeRO-1, ZeRO-2)
    fixed bytes = 2 · reduce_bucket_size + 2 · max_live_parameters  (ZeRO-3)

>>> fixed_bytes(1), fixed_bytes(3)
(1000000000, 3000000000)
>>> fixed_bytes(0)
Traceback (most recent call last):
...
ValueError: stage must be one of 1, 2, 3; got 0

DeepSpeed runs the model it is given, so the activation count, loss and
element-wise kernels are the model's, and the presets keep the recipe defaults.
ZeRO-3 keeps the ``megatron`` stack: with ``pytorch`` the memory count would
add FSDP2's gathered root and layers and its per-unit gradient buffers, which
DeepSpeed does not allocate; it gathers module by module within
``max_live_parameters`` and moves each gradient into the bucket.

Not counted: the fp32 gradient partition the optimizer step creates and frees
(4/d bytes a parameter, when activations are gone), a gradient before its hook
moves it into the bucket, and the parameters below
``stage3_param_persistence_threshold`` (10⁵ elements), which ZeRO-3 keeps whole.

Raises ``ValueError`` for a stage other than 1, 2 or 3.
"""

from __future__ import annotations

__all__ = ["BUFFERS", "FRAMEWORK", "SOURCES", "fixed_bytes"]

COMMIT = "deepspeedai/DeepSpeed edaa7221267243c7be7fb49c5d5f5c4fb97b4641"
FRAMEWORK = f"DeepSpeed 0.19.6 ({COMMIT})"
"""The release its ``version.txt`` names at the commit the presets cite."""

REDUCE_BUCKET_SIZE = 5 * 10**8
"""``reduce_bucket_size``, elements: deepspeed/runtime/zero/config.py:113."""

MAX_LIVE_PARAMETERS = 10**9
"""``stage3_max_live_parameters``, elements: deepspeed/runtime/zero/config.py:238."""

BF16 = 2

_RT = "deepspeed/runtime/"
_BF16 = f"{_RT}engine.py:1404-1416, 1485-1496 (bf16 reduction; grad_accum_dtype unset is bf16)"
_STAGE12 = (
    f"{_RT}zero/stage_1_and_2.py:437-456 (bf16 parameters flat and whole on every rank),"
    " 489-509 (fp32 master partition, single_partition_of_fp32_groups), "
)
_BUCKET12 = (
    "2493-2516 (one bf16 reduce bucket, two with overlap_comm); "
    f"{_RT}zero/config.py:113, 383-386 (reduce_bucket_size 5e8, overlap_comm off); "
    + _BF16
)

BUFFERS: dict[int, tuple[tuple[str, int, bool], ...]] = {
    1: (("bf16 parameters", BF16, False), ("bf16 gradients", BF16, False)),
    2: (("bf16 parameters", BF16, False), ("bf16 sharded gradients", BF16, True)),
    3: (
        ("bf16 sharded parameters", BF16, True),
        ("bf16 sharded gradients", BF16, True),
    ),
}
"""Each stage's 16-bit buffers (what, bytes, sharded); the fp32 master weights and Adam
moments, sharded at every stage, follow them."""

SOURCES = {
    1: _STAGE12 + "1752-1754, 1764-1769 (ZeRO-1 keeps every bf16 gradient until the"
    " accumulation boundary), " + _BUCKET12,
    2: _STAGE12
    + "1670-1687, 1742-1751 (ZeRO-2 copies its partition's gradients into the"
    " bf16 grads_in_partition and frees the rest), " + _BUCKET12,
    3: f"{_RT}zero/stage3.py:917-924 (bf16 parameter partitions), 1119-1122 (fp32 master"
    " partition), 730-735 (bf16 reduce bucket), 742-744 (bf16 gradient partitions,"
    f" grad_partitions_flat_buffer); {_RT}zero/config.py:113, 238 (reduce_bucket_size 5e8,"
    f" max_live_parameters 1e9); {_RT}zero/partitioned_param_coordinator.py:452-454, 653-663"
    " (prefetch capped by max_live_parameters; parameters reused within 1e9 kept); "
    + _BF16,
}
"""The ``source`` of each stage's preset: file:line ranges at :data:`COMMIT`."""


def fixed_bytes(stage: int) -> int:
    """Bytes of DeepSpeed's fixed-size GPU buffers under bf16 ZeRO-*stage* (see the module text)."""
    if stage not in (1, 2, 3) or type(stage) is not int:
        raise ValueError(f"stage must be one of 1, 2, 3; got {stage!r}")
    bucket = BF16 * REDUCE_BUCKET_SIZE
    return bucket + (BF16 * MAX_LIVE_PARAMETERS if stage == 3 else 0)
