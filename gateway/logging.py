"""Structured JSON logs: one line per request, rendered by msgspec, written to stdout.

Every command logs this way (`serve` and `worker` to stdout; the one-shot commands, whose
stdout is their result, to stderr), and so do the libraries that log through the standard
`logging` module (uvicorn, aiohttp, redis: warnings and errors only), each line with its
`logger` name.
Inside the server, lines are flushed in batches a quarter second apart rather than one
system call each (that was ~2 % of a request's CPU); outside a running loop (the CLI, start-up)
every line is flushed at once, and whatever is pending is flushed at exit.
Keys and Authorization headers never reach a log call, so there is nothing to scrub.
The access line, one per request, skips structlog's processor chain (`info_line`): the same
fields in the same order, the same bytes, written to the same batch (~25 us a request less).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import datetime
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

__all__ = ["configure_logging", "get_logger", "info_line", "name_the_process"]

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


class _Direct:
    """What `info_line` needs to render a line as the chain `configure_logging` set up would:
    that chain (to see that it is still the one in force), its lines and whether `info` passes."""

    __slots__ = ("chain", "info", "lines")

    def __init__(self, chain: list[Any], lines: _BatchedLines, info: bool) -> None:
        self.chain = chain
        self.lines = lines
        self.info = info


_DIRECT: list[_Direct] = []
_UTC = datetime.UTC


def info_line(logger: Any, event: str, fields: dict[str, Any]) -> None:
    """`logger.info(event, **fields)`, rendered without structlog's processor chain.

    The line is what the chain renders: the fields in their order, then `event`, `level` and
    the UTC ISO `timestamp` (structlog's `add_log_level` and `TimeStamper(fmt="iso",
    utc=True)`), then `pid` when several processes share the stream. When structlog is no
    longer configured by `configure_logging` (tests capturing lines, a reset), it goes through
    `logger`. `fields` is consumed."""
    direct = _DIRECT[0] if _DIRECT else None
    if (
        direct is None
        or structlog.get_config()["processors"] is not direct.chain
        or direct.chain[-1] is not _render  # changed in place (structlog's `capture_logs`)
    ):
        logger.info(event, **fields)
        return
    if not direct.info:
        return
    fields["event"] = event
    fields["level"] = "info"
    fields["timestamp"] = datetime.datetime.now(tz=_UTC).isoformat().replace("+00:00", "Z")
    if _PROCESS:
        fields.update(_PROCESS)
    direct.lines.msg(_encode(fields))


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
    chain: list[Any] = [
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.format_exc_info,
        _name_process,
        _render,
    ]
    _DIRECT[:] = [_Direct(chain, _lines, numeric <= _LEVELS["info"])]
    structlog.configure(
        processors=chain,
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
