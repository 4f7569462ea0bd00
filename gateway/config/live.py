"""Live routing file: reloaded on SIGHUP and when it changes on disk, never half-applied.

The file is polled (its modification time, size and inode) every `poll_seconds` (0: never,
SIGHUP only); a change, or
SIGHUP, loads it again. A file that fails validation is refused: the configuration in force
stays, and the log says why (`config_rejected`, with the file, field and problem). A valid one
is handed to `apply`, which builds the next generation of providers and services; requests
already running finish on the one they started with. Every load is logged with the file's
version (a checksum): `config_loaded` at start, `config_reloaded` after.

What a reload changes: providers, models, prices, routing, tenants and their limits. What it
does not: the store URL and the HTTP limits of `[gateway]` (request size, headers, timeouts),
which are read once at start.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path

from gateway.config.loader import ConfigError, GatewayConfig, load_config
from gateway.logging import get_logger

__all__ = ["ConfigWatcher"]

_log = get_logger("gateway.config")


class ConfigWatcher:
    def __init__(
        self,
        config: GatewayConfig,
        apply: Callable[[GatewayConfig], Awaitable[object]],
        *,
        poll_seconds: float = 1.0,
        recheck_at_start: bool = False,
    ) -> None:
        """`recheck_at_start`: `config` was read before this process began (a serving process
        forked from the supervisor's copy), so the file is read once more when it starts; what
        changed meanwhile, or a SIGHUP that came before the handler, is not missed."""
        self.config = config
        self._apply = apply
        self._poll_seconds = poll_seconds
        self._recheck_at_start = recheck_at_start
        self._stamp = _stamp(config.path)
        self._task: asyncio.Task[None] | None = None
        self._rechecking: asyncio.Task[bool] | None = None
        self._lock = asyncio.Lock()
        self._signal_installed = False

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        if self._poll_seconds > 0:
            self._task = loop.create_task(self._poll())
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(signal.SIGHUP, self._on_sighup)
            self._signal_installed = True
        _log.info("config_loaded", path=str(self.config.path), version=self.config.version)
        if self._recheck_at_start:
            self._rechecking = loop.create_task(self.reload("start"))

    async def close(self) -> None:
        if self._signal_installed:
            with contextlib.suppress(Exception):
                asyncio.get_running_loop().remove_signal_handler(signal.SIGHUP)
        for task in (self._task, self._rechecking):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    def _on_sighup(self) -> None:
        asyncio.get_running_loop().create_task(self.reload("sighup"))

    async def _poll(self) -> None:
        while True:
            await asyncio.sleep(self._poll_seconds)
            stamp = _stamp(self.config.path)
            if stamp != self._stamp:
                self._stamp = stamp
                await self.reload("file_changed")

    async def reload(self, reason: str) -> bool:
        """Load the file again; True when a new version is now in force."""
        async with self._lock:
            path = self.config.path
            try:
                config = await asyncio.to_thread(load_config, path)
            except ConfigError as exc:
                _log.error(
                    "config_rejected",
                    reason=reason,
                    error=str(exc),
                    version_in_force=self.config.version,
                )
                return False
            if config.version == self.config.version:
                return False
            try:
                await self._apply(config)
            except Exception as exc:  # e.g. a provider that cannot start: keep the old one
                _log.error(
                    "config_rejected",
                    reason=reason,
                    error=repr(exc),
                    version_in_force=self.config.version,
                )
                return False
            previous, self.config = self.config, config
            _log.info(
                "config_reloaded",
                reason=reason,
                path=str(path),
                version=config.version,
                previous=previous.version,
            )
            return True


def _stamp(path: Path) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)
