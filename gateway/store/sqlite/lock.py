"""One serving process per SQLite file.

A serving store keeps holds, leases and rate buckets in its own memory, so a second server on
the same file would not see them and could overdraw a wallet. The first server holds an
exclusive lock on `<db>.serve-lock` for its lifetime; the CLI never takes it.
"""

from __future__ import annotations

import fcntl
from pathlib import Path
from typing import IO

__all__ = ["StoreLocked", "claim_for_serving"]


class StoreLocked(RuntimeError):
    """Another gateway process already serves from this SQLite file."""


def claim_for_serving(path: Path | str) -> IO[bytes]:
    """Returns the open lock file; keep it open while serving (closing it releases the lock)."""
    lock_path = Path(f"{path}.serve-lock")
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    handle = lock_path.open("wb")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        raise StoreLocked(
            f"another gateway process is serving from {path}; the embedded SQLite store is for "
            "one process (run several replicas with GATEWAY_STORE_URL=redis://...)"
        ) from None
    return handle
