"""Read NCCL's NCCL_DEBUG=INFO start-up lines: which network, interfaces, GPUDirect or not.

On a new cluster the first question is whether NCCL uses the fabric at all.
With ``NCCL_DEBUG=INFO`` each rank logs, at communicator creation (NCCL
2.30.7, ``src/init.cc``, ``src/transport/net_socket.cc``,
``src/transport/net_ib/init.cc``, ``src/transport/net.cc``):

- ``Using network IB`` or ``Using network Socket``: the transport between
  nodes; ``Socket`` means TCP through the kernel, typically after
  ``NET/IB : No device found.``;
- ``NET/Socket : Using [0]eth0:10.0.0.1<0>`` or the ``OOB`` interface on the
  ``NET/IB : Using ...`` line: the IP interfaces NCCL picked, which
  ``NCCL_SOCKET_IFNAME`` overrides;
- ``Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA``: one line per
  channel and peer; ``/GDRDMA`` means the adapter reads GPU memory directly.

>>> log = ["NCCL INFO NET/IB : No device found.",
...        "NCCL INFO NET/Socket : Using [0]docker0:172.17.0.1<0>",
...        "NCCL INFO Using network Socket"]
>>> for problem in init_problems(read_init_log(log)):
...     print(problem)
inter-node traffic uses TCP sockets, not RDMA
the socket transport uses a container bridge or loopback: docker0
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from infralens._typecheck import check_fields, typed

__all__ = ["InitReport", "init_problems", "read_init_log"]

_NETWORK = re.compile(r"Using network (\S+)")
_SOCKET = re.compile(r"NET/Socket : Using((?: \[\d+\][^:\s]+:\S+)+)")
_OOB = re.compile(r"NET/IB : Using.*; OOB ([^:\s]+):")
_IFACE = re.compile(r"\[\d+\]([^:\s]+):")
_CHANNEL = re.compile(r"\[send\] via NET/([^/\s]+)/\d+(\S*)")
_BAD_IFACES = ("docker", "lo", "virbr", "veth")


@dataclass(frozen=True)
class InitReport:
    """What one rank's start-up log says: the ``network`` between nodes (``""`` if
    no line named it), the IP ``interfaces`` NCCL chose (socket transport or
    out-of-band), the ``net_channels`` that send through the network and how
    many of them use GPUDirect RDMA (``gdr_channels``)."""

    network: str
    interfaces: tuple[str, ...]
    net_channels: int
    gdr_channels: int

    def __post_init__(self) -> None:
        check_fields(self)


@typed
def read_init_log(lines: Sequence[str]) -> InitReport:
    """Collect the network, interfaces and channel transports from *lines*.

    >>> r = read_init_log([
    ...     "NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; "
    ...     "OOB ens1:10.0.0.5<0>",
    ...     "NCCL INFO Using network IB",
    ...     "NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA",
    ...     "NCCL INFO Channel 01/0 : 0[0] -> 8[0] [send] via NET/IB/1"])
    >>> r
    InitReport(network='IB', interfaces=('ens1',), net_channels=2, gdr_channels=1)
    >>> read_init_log([])
    InitReport(network='', interfaces=(), net_channels=0, gdr_channels=0)
    """
    network = ""
    interfaces: list[str] = []
    net = gdr = 0
    # [start:scan]
    for line in lines:
        if m := _NETWORK.search(line):
            network = m.group(1)
        elif m := _SOCKET.search(line):
            interfaces += _IFACE.findall(m.group(1))
        elif m := _OOB.search(line):
            interfaces.append(m.group(1))
        elif m := _CHANNEL.search(line):
            net += 1
            gdr += "/GDRDMA" in m.group(2)
    # [end:scan]
    return InitReport(network, tuple(dict.fromkeys(interfaces)), net, gdr)


@typed
def init_problems(report: InitReport) -> tuple[str, ...]:
    """What is wrong with a start-up, read from *report*; empty if nothing is.

    >>> init_problems(InitReport("IB", ("ens1",), 16, 16))
    ()
    >>> init_problems(InitReport("IB", ("ens1",), 16, 0))
    ('16 of 16 network channels stage through host memory (no GPUDirect RDMA)',)
    >>> init_problems(InitReport("", (), 0, 0))
    ('no "Using network" line: run with NCCL_DEBUG=INFO',)
    """
    out: list[str] = []
    if not report.network:
        return ('no "Using network" line: run with NCCL_DEBUG=INFO',)
    if report.network == "Socket":
        out.append("inter-node traffic uses TCP sockets, not RDMA")
    bad = [i for i in report.interfaces if i.startswith(_BAD_IFACES)]
    if bad:
        kind = "socket transport" if report.network == "Socket" else "bootstrap"
        out.append(
            f"the {kind} uses a container bridge or loopback: {', '.join(bad)}"
        )
    missing = report.net_channels - report.gdr_channels
    if report.network != "Socket" and missing > 0:
        out.append(
            f"{missing} of {report.net_channels} network channels stage through "
            "host memory (no GPUDirect RDMA)"
        )
    return tuple(out)
