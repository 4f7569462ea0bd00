"""In-process apps keep structlog's defaults: the factory's logging setup is for a server
process, and it caches loggers on first use, so one in-process test that ran it would leave
every later test's `capture_logs` blind."""

from __future__ import annotations

import pytest
import structlog


@pytest.fixture(autouse=True)
def _plain_logging(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("gateway.app.factory.configure_logging", lambda level: None)
    structlog.reset_defaults()
