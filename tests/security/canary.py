"""TCP canaries: listeners that only count who connected, to prove a refusal sent no byte.

Every address gets a listener on the same port, so a URL can name any of them with that port.
Create them where the addresses live (inside a `Sandbox`, through `Sandbox.run`); the accept
loop is a plain thread, and a socket once made stays in its namespace.
"""

from __future__ import annotations

import selectors
import socket
import threading
import time
from collections import Counter
from collections.abc import Sequence
from ipaddress import ip_address

__all__ = ["Canaries"]


class Canaries:
    def __init__(self, addresses: Sequence[str]) -> None:
        self.port = 0
        self.hits: Counter[str] = Counter()
        self._listeners: dict[socket.socket, str] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        try:
            for address in addresses:
                family = socket.AF_INET if ip_address(address).version == 4 else socket.AF_INET6
                sock = socket.socket(family, socket.SOCK_STREAM)
                self._listeners[sock] = address
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                sock.bind((address, self.port))
                sock.listen(64)
                sock.setblocking(False)
                self.port = sock.getsockname()[1]  # the first one picks; the others share it
        except OSError:
            for sock in self._listeners:
                sock.close()
            raise
        self._thread = threading.Thread(target=self._accept, name="canaries", daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        with selectors.DefaultSelector() as selector:
            for sock in self._listeners:
                selector.register(sock, selectors.EVENT_READ)
            while not self._stop.is_set():
                for key, _ in selector.select(timeout=0.05):
                    listener = key.fileobj
                    assert isinstance(listener, socket.socket)
                    try:
                        conn, _ = listener.accept()
                    except BlockingIOError:
                        continue
                    conn.close()
                    with self._lock:
                        self.hits[self._listeners[listener]] += 1

    def total(self) -> int:
        time.sleep(0.1)  # let a connection already queued be counted
        with self._lock:
            return sum(self.hits.values())

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        for sock in self._listeners:
            sock.close()
