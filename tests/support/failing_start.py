"""`python -m tests.support.failing_start PORT`: the real supervisor of `serve --processes 2`,
whose processes fail their start-up (as one whose app cannot start does: exit 3), for the test
of what the supervisor does then. Its exit code is the supervisor's."""

from __future__ import annotations

import socket
import sys

from gateway.app.processes import STARTUP_FAILED, Supervisor, listen_shared
from gateway.app.settings import Settings
from gateway.config.loader import GatewayConfig, load_config
from gateway.logging import configure_logging

__all__ = ["main"]


def _cannot_start(settings: Settings, config: GatewayConfig, sock: socket.socket) -> int:
    return STARTUP_FAILED


def main(port: int) -> int:
    settings = Settings(port=port, processes=2)
    configure_logging("info")
    sockets = listen_shared(settings.host, port, settings.processes)
    config = load_config(settings.config_path)
    return Supervisor(settings, config, sockets, _cannot_start, None).run()


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1])))
