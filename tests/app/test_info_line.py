"""The access line skips structlog's processor chain (`gateway.logging.info_line`) and writes
the bytes the chain would: the same fields, in the same order, with the same level, timestamp
and process id, at the same levels, and through structlog whenever structlog is not the
gateway's (captured in tests, reset)."""

from __future__ import annotations

import io
import json
import re
from typing import Any

import structlog
from structlog.testing import capture_logs

from gateway.logging import configure_logging, get_logger, info_line, name_the_process

_STAMP = re.compile(rb'"timestamp":"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{6})?Z)"')


def _fields() -> dict[str, Any]:
    return {
        "request_id": "req-\u00e9t\u00e9-1",
        "method": "POST",
        "route": "/v1/chat/completions",
        "status": 200,
        "tenant": "default",
        "model": "gpt-x",
        "routing": None,
        "error": None,
        "replayed": None,
        "dialect": "openai",
        "dropped_tools": ["web_search"],
        "dropped_fields": None,
        "latency_ms": 1.234,
        "upstream_ms": 0.5,
    }


def _both(level: str) -> tuple[list[bytes], list[bytes]]:
    """Lines of the chain (logger.info) and of `info_line`, for the same call."""
    stream = io.BytesIO()
    configure_logging(level, stream=stream)
    try:
        log = get_logger("gateway.access")
        log.info("request", **_fields())
        chain = stream.getvalue().splitlines()
        info_line(log, "request", _fields())
        direct = stream.getvalue().splitlines()[len(chain) :]
    finally:
        configure_logging("info")  # back to stdout for whatever runs next in this process
    return chain, direct


def _unstamped(line: bytes) -> bytes:
    assert _STAMP.search(line), line
    return _STAMP.sub(b'"timestamp":"T"', line)


def test_the_line_is_the_one_the_chain_renders() -> None:
    [chain], [direct] = _both("info")
    assert _unstamped(direct) == _unstamped(chain)
    parsed = json.loads(direct)
    assert list(parsed)[-3:] == ["event", "level", "timestamp"]
    assert parsed["request_id"] == "req-\u00e9t\u00e9-1"


def test_several_processes_name_theirs_in_both() -> None:
    name_the_process(True)
    try:
        [chain], [direct] = _both("info")
    finally:
        name_the_process(False)
    assert _unstamped(direct) == _unstamped(chain)
    assert list(json.loads(direct))[-1] == "pid"


def test_above_info_neither_writes() -> None:
    assert _both("warning") == ([], [])


def test_captured_and_reset_logging_go_through_structlog() -> None:
    configure_logging("info", stream=io.BytesIO())
    try:
        with capture_logs() as captured:
            info_line(get_logger("gateway.access"), "request", _fields())
        structlog.reset_defaults()
        with capture_logs() as after_reset:
            info_line(get_logger("gateway.access"), "request", _fields())
    finally:
        configure_logging("info")
    for logs in (captured, after_reset):
        [line] = logs
        assert line["event"] == "request" and line["status"] == 200
        assert line["dropped_tools"] == ["web_search"]
