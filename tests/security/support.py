"""Small helpers the security tests share."""

from __future__ import annotations

from pathlib import Path

__all__ = ["rss_mib"]


def rss_mib(pid: int) -> float:
    """The resident set size of process `pid` (VmRSS), in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for process {pid}")
