"""Free TCP ports for the servers tests start (gateways, Redis, moto, Prometheus).

A port asked of the kernel (`bind(("127.0.0.1", 0))`) comes from its ephemeral range, the range
it also takes outgoing connections' ports from: between our probe and the server's own bind, a
client socket of a busy parallel run can take it. So ports come from below that range
(20000-31999), in a slice of 500 per pytest-xdist worker (`PYTEST_XDIST_WORKER`), so that two
workers never pick the same one; within its slice a process starts at a random place and takes
the next port that it can bind.
"""

from __future__ import annotations

import itertools
import os
import random
import re
import socket

__all__ = ["free_port", "port_slice"]

_FIRST = 20_000
_SLICE = 500
_SLICES = 24  # up to 32000, below the usual ephemeral range (32768-60999)


def port_slice(worker: str | None = None) -> range:
    """This process's ports: a slice per xdist worker (`gw0` -> the second), the first
    slice for a run without workers."""
    name = os.environ.get("PYTEST_XDIST_WORKER", "") if worker is None else worker
    match = re.fullmatch(r"gw(\d+)", name)
    index = (int(match.group(1)) + 1) % _SLICES if match else 0
    start = _FIRST + index * _SLICE
    return range(start, start + _SLICE)


_ports = port_slice()
_start = random.randrange(_SLICE)
_next = itertools.cycle([*_ports[_start:], *_ports[:_start]])


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def free_port() -> int:
    """A port of this process's slice that nothing is bound to now."""
    for _ in range(_SLICE):
        port = next(_next)
        if _bindable(port):
            return port
    raise RuntimeError(f"no free port in {_ports.start}-{_ports.stop - 1}")
