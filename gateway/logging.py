"""Structured JSON logs: one line per request, rendered by msgspec, written to stdout.

Every command logs this way (`serve` and `worker` to stdout; the one-shot commands, whose
stdout is their result, to stderr), and so do the libraries that log through the standard
`logging` module (uvicorn, aiohttp, redis: warnings and errors only), each line with its
`logger` name.
Inside the server, lines are flushed in batches a quarter second apart rather than one
system call each (that was ~2 % of a request's CPU); outside a running loop (the CLI, start-up)
every line is flushed at once, and whatever is pending is flushed at exit.
Keys and Authorization headers never reach a log call, so there is nothing to scrub.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import os
import sys
from collections.abc import MutableMapping
from types import ModuleType
from typing import TYPE_CHECKING, Any

import msgspec


def _structlog_without_rich() -> ModuleType:
    """structlog, loaded while `rich` is hidden from it.

    structlog imports rich when it is installed (Litestar installs it) for its console renderer
    and the locals of its dict tracebacks, neither of which these JSON lines use: ~0.05 s of
    every process start, measured, the CLI's included. Anything else still loads rich."""
    hidden = "rich" not in sys.modules
    if hidden:
        sys.modules["rich"] = None  # type: ignore[assignment]  # `import rich` fails in it
    try:
        import structlog
    finally:
        if hidden:
            del sys.modules["rich"]
    return structlog


if TYPE_CHECKING:
    import structlog
else:
    structlog = _structlog_without_rich()

__all__ = ["configure_logging", "get_logger", "name_the_process"]

_LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40, "critical": 50}
_encode = msgspec.json.Encoder().encode


def _render(_: Any, __: str, event: MutableMapping[str, Any]) -> bytes:
    return _encode(event)


_PROCESS: dict[str, int] = {}
"""`{"pid": ...}` when several processes write to one stream (`name_the_process`)."""


def _name_process(_: Any, __: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    if _PROCESS:
        event.update(_PROCESS)
    return event


_FLUSH_DELAY_SECONDS = 0.25


class _BatchedLines:
    """A structlog logger writing bytes lines; flushes once per batch while the loop runs."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self._flush_pending = False
        atexit.register(self.flush)

    def msg(self, message: bytes) -> None:
        self._stream.write(message + b"\n")
        if self._flush_pending:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.flush()
            return
        self._flush_pending = True
        loop.call_later(_FLUSH_DELAY_SECONDS, self.flush)

    log = debug = info = warn = warning = error = critical = exception = fatal = msg

    def flush(self) -> None:
        self._flush_pending = False
        with contextlib.suppress(OSError, ValueError):  # a closed stdout must not fail a call
            self._stream.flush()


class _StandardToStructured(logging.Handler):
    """A standard `logging` record as a line of ours (same format, same stream)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            structlog.get_logger(record.name).log(
                record.levelno,
                record.getMessage(),
                logger=record.name,
                exc_info=record.exc_info or None,
            )
        except Exception:
            self.handleError(record)


_CONFIGURED: list[_BatchedLines] = []


def name_the_process(on: bool) -> None:
    """With `on`, every line names this process (`pid`): several write to one stream.

    The processor that adds it is always in the chain, reading `_PROCESS`, because loggers
    cache their chain on first use: a process forked from one that had logged keeps it."""
    _PROCESS.clear()
    if on:
        _PROCESS["pid"] = os.getpid()


def configure_logging(level: str = "info", *, stream: Any = None) -> None:
    """JSON lines at `level` and above to `stream` (stdout's bytes by default)."""
    numeric = _LEVELS.get(level.lower(), 20)
    target = stream if stream is not None else sys.stdout.buffer
    reused = [lines for lines in _CONFIGURED if lines._stream is target]
    _lines = reused[0] if reused else _BatchedLines(target)
    if not reused:
        _CONFIGURED.append(_lines)
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            _name_process,
            _render,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=lambda *_: _lines,
        cache_logger_on_first_use=True,
    )
    # Libraries log through the standard module; keep them quiet unless something is wrong.
    root = logging.getLogger()
    for handler in [h for h in root.handlers if isinstance(h, _StandardToStructured)]:
        root.removeHandler(handler)
    root.addHandler(_StandardToStructured())
    root.setLevel(max(numeric, logging.WARNING))
    for noisy in ("uvicorn.access", "httpx", "aiohttp.access"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def get_logger(name: str) -> Any:
    return structlog.get_logger(name)
