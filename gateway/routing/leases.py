"""Who still uses one generation of providers: a count of leases, so a reload closes the old
providers only once nothing uses them.

Each `Router` (one per version of the routing file) has one `Leases`, shared by its routes.
A chat call takes a lease for as long as it calls upstreams (a stream until it is closed), a
task for as long as it runs (a Replicate prediction may run 15 minutes); the process closes a
retired generation's providers when its last lease is let go (`idle()`). A lease is an integer
step each way: nothing on the hot path waits for it.
"""

from __future__ import annotations

import asyncio
from types import TracebackType

__all__ = ["Lease", "Leases"]


class Leases:
    """How many calls, streams and tasks use one generation's providers now."""

    __slots__ = ("_count", "_idle")

    def __init__(self) -> None:
        self._count = 0
        self._idle: asyncio.Event | None = None

    @property
    def count(self) -> int:
        return self._count

    def take(self) -> Lease:
        """A lease, held until its `release()` (or the end of its `with` block)."""
        self._count += 1
        return Lease(self)

    async def idle(self) -> None:
        """Return once no lease is held (at once when none is)."""
        while self._count:
            if self._idle is None:
                self._idle = asyncio.Event()
            await self._idle.wait()

    def _release(self) -> None:
        self._count -= 1
        if not self._count and self._idle is not None:
            self._idle.set()
            self._idle = None


class Lease:
    """One user's hold on a generation; releasing it twice is releasing it once."""

    __slots__ = ("_leases",)

    def __init__(self, leases: Leases) -> None:
        self._leases: Leases | None = leases

    def release(self) -> None:
        leases, self._leases = self._leases, None
        if leases is not None:
            leases._release()

    def __enter__(self) -> Lease:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.release()
