"""Structured JSON logs: one line per request, rendered by msgspec, written straight to stdout.

Keys and Authorization headers never reach a log call, so there is nothing to scrub.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import MutableMapping
from typing import Any

import msgspec
import structlog

__all__ = ["configure_logging", "get_logger"]

_LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40, "critical": 50}
_encode = msgspec.json.Encoder().encode


def _render(_: Any, __: str, event: MutableMapping[str, Any]) -> bytes:
    return _encode(event)


def configure_logging(level: str = "info") -> None:
    numeric = _LEVELS.get(level.lower(), 20)
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            _render,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.BytesLoggerFactory(sys.stdout.buffer),
        cache_logger_on_first_use=True,
    )
    # Libraries log through the standard module; keep them quiet unless something is wrong.
    logging.basicConfig(level=max(numeric, logging.WARNING), stream=sys.stderr)
    for noisy in ("uvicorn.access", "httpx", "aiohttp.access"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def get_logger(name: str) -> Any:
    return structlog.get_logger(name)
