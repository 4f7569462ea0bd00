"""The generations of providers a process has built, one per version of the routing file, and
when each is closed.

A reload builds new providers and a new router; the previous generation is retired: its
providers are closed once `grace_seconds` have passed AND no lease on its router is held
(`gateway.routing.leases`: a chat call until it is answered, a stream until it is closed, a
task until it ends). The grace covers a request that picked the previous generation and has
not taken its lease yet (it is still reading its body, or being admitted); the leases cover
whatever runs longer, however long (a 15-minute Replicate prediction). The process's one
scrubber stops reading a generation's credentials when it is closed.
"""

from __future__ import annotations

import asyncio
from typing import Any

from gateway.logging import get_logger
from gateway.routing.resolver import Router
from gateway.routing.secrets import sinks_of

__all__ = ["Generations", "close_providers"]

_log = get_logger("gateway.app.generations")


class Generations:
    def __init__(self, *, grace_seconds: float) -> None:
        self._grace_seconds = grace_seconds
        self._open: list[tuple[dict[str, Any], Router]] = []
        self._retiring: set[asyncio.Task[None]] = set()

    def __len__(self) -> int:
        """How many generations are open (the current one and those not closed yet)."""
        return len(self._open)

    def add(self, providers: dict[str, Any], router: Router) -> None:
        """The new current generation; the previous one is retired."""
        previous = self._open[-1] if self._open else None
        self._open.append((providers, router))
        if previous is not None:
            task = asyncio.get_running_loop().create_task(self._retire(previous))
            self._retiring.add(task)
            task.add_done_callback(self._retiring.discard)

    async def close(self) -> None:
        """Close every generation (the process stops)."""
        for task in list(self._retiring):
            task.cancel()
        for providers, _ in self._open:
            await close_providers(providers)
        self._open.clear()

    async def _retire(self, generation: tuple[dict[str, Any], Router]) -> None:
        providers, router = generation
        await asyncio.sleep(self._grace_seconds)
        if router.leases.count:
            _log.info("providers_retiring", leases=router.leases.count)
        await router.leases.idle()
        if any(open_ is generation for open_ in self._open):
            self._open = [open_ for open_ in self._open if open_ is not generation]
            router.scrubber.forget(sinks_of(providers.values()))
            await close_providers(providers)
            _log.info("providers_closed", providers=sorted(providers))


async def close_providers(providers: dict[str, Any]) -> None:
    for provider in providers.values():
        try:
            await provider.close()
        except Exception as exc:
            _log.warning(
                "provider_close_failed", provider=getattr(provider, "name", "?"), error=repr(exc)
            )
