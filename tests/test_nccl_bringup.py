"""NCCL start-up logs: the socket-fallback signature, interfaces and GPUDirect RDMA per channel."""

from __future__ import annotations

import pytest

from infralens.nccl_bringup import InitReport, init_problems, read_init_log

# Lines in the formats NCCL 2.30.7 prints them (src/init.cc, src/transport/*.cc).
HEALTHY = [
    "node1:123:123 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_3:1/IB [RO]; "
    "OOB ens10f0:10.1.0.11<0>",
    "node1:123:123 [0] NCCL INFO Using network IB",
    "node1:123:130 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA",
    "node1:123:130 [0] NCCL INFO Channel 01/0 : 0[0] -> 8[0] [send] via NET/IB/1/GDRDMA",
    "node1:123:130 [0] NCCL INFO Channel 00/0 : 8[0] -> 0[0] [receive] via NET/IB/0/GDRDMA",
]
FALLBACK = [
    "node1:123:123 [0] NCCL INFO NET/IB : No device found.",
    "node1:123:123 [0] NCCL INFO NET/Socket : Using [0]eth0:10.1.0.11<0> [1]docker0:172.17.0.1<0>",
    "node1:123:123 [0] NCCL INFO Using network Socket",
    "node1:123:130 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/Socket/0",
]


def test_a_healthy_start() -> None:
    r = read_init_log(HEALTHY)
    # receive lines are not counted: one line per channel and direction
    assert r == InitReport("IB", ("ens10f0",), 2, 2)
    assert init_problems(r) == ()


def test_the_socket_fallback_signature() -> None:
    r = read_init_log(FALLBACK)
    assert r.network == "Socket" and r.interfaces == ("eth0", "docker0")
    problems = init_problems(r)
    assert problems[0] == "inter-node traffic uses TCP sockets, not RDMA"
    assert "docker0" in problems[1] and "eth0" not in problems[1]
    # a socket channel is never GPUDirect, and that is not reported twice
    assert len(problems) == 2


def test_gdr_missing_on_some_channels() -> None:
    lines = [*HEALTHY[:3], HEALTHY[3].replace("/GDRDMA", "")]
    problems = init_problems(read_init_log(lines))
    assert problems == ("1 of 2 network channels stage through host memory (no GPUDirect RDMA)",)


def test_bad_input() -> None:
    with pytest.raises(TypeError):
        read_init_log("Using network IB")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        InitReport("IB", ("eth0",), 1.5, 1)  # type: ignore[arg-type]
