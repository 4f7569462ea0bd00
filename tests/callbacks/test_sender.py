"""One delivery attempt against a local receiver: the address is vetted once and pinned (a DNS
answer that changes between check and connect changes nothing), and a name with any refused
address is never connected to."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from gateway.callbacks.sender import AttemptResult, CallbackSender
from gateway.callbacks.urls import CallbackPolicy
from tests.support.webhook_receiver import Answer, receiver

LOCAL = CallbackPolicy.of(["127.0.0.1/32"])
ENDLESS = 64 * 1024 * 1024


def test_the_connection_goes_to_the_vetted_address_without_a_second_lookup() -> None:
    answers = [["127.0.0.1"], ["10.0.0.1"]]
    lookups: list[str] = []

    async def rebinding(host: str, port: int) -> Sequence[str]:
        lookups.append(host)
        return answers[min(len(lookups), 2) - 1]

    with receiver() as hooks:
        hooks.scripts["/in"] = [Answer(200)]
        sender = CallbackSender(LOCAL, resolve=rebinding)
        url = f"http://hooks.test:{hooks.port}/in"  # .test never resolves for real
        result = asyncio.run(sender.send(url, b"{}", {"webhook-id": "cb_1"}))
        assert result.outcome == "delivered"
        assert lookups == ["hooks.test"]
        (hit,) = hooks.hits("/in")
        assert hit.headers["host"] == f"hooks.test:{hooks.port}"
        assert hit.headers["webhook-id"] == "cb_1"


def test_a_name_with_one_refused_address_is_never_connected_to() -> None:
    async def mixed(host: str, port: int) -> Sequence[str]:
        return ["127.0.0.1", "10.0.0.1"]

    with receiver() as hooks:
        hooks.scripts["/in"] = [Answer(200)]
        sender = CallbackSender(LOCAL, resolve=mixed)
        result = asyncio.run(sender.send(f"http://hooks.test:{hooks.port}/in", b"{}", {}))
        assert result.outcome == "refused" and result.error is not None
        assert "10.0.0.1" not in result.error
        assert hooks.received == []


def test_an_answer_is_judged_by_its_status() -> None:
    with receiver() as hooks:
        hooks.scripts = {
            "/gone": [Answer(410)],
            "/busy": [Answer(503, {"Retry-After": "7"})],
            "/moved": [Answer(301, {"Location": "http://127.0.0.1:1/"})],
        }
        sender = CallbackSender(LOCAL)

        async def send(path: str) -> AttemptResult:
            return await sender.send(hooks.url(path), b"{}", {})

        gone, busy, moved = (asyncio.run(send(p)) for p in ("/gone", "/busy", "/moved"))
    assert gone.outcome == "gone"
    assert (busy.outcome, busy.retry_after) == ("retry", 7)
    assert moved.outcome == "retry" and "redirect" in (moved.error or "")


def test_the_answer_body_is_not_read_past_a_few_kilobytes() -> None:
    """A receiver answers 200 and then streams 64 MB: the attempt is delivered and closes the
    connection long before the receiver could send it all."""
    sent: list[int] = []
    answered = threading.Event()  # the handler's own thread, which the server does not join

    class Endless(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(200)
            self.send_header("Content-Length", str(ENDLESS))
            self.end_headers()
            chunk, written = bytes(65536), 0
            try:
                while written < ENDLESS:
                    self.wfile.write(chunk)
                    written += len(chunk)
            except OSError:
                pass
            sent.append(written)
            answered.set()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Endless)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/in"
        result = asyncio.run(CallbackSender(LOCAL).send(url, b"{}", {}))
        server.shutdown()
    finally:
        server.server_close()
    thread.join(5)
    assert result.outcome == "delivered"
    assert answered.wait(10), "the receiver is still writing: the gateway did not hang up"
    assert sent[0] < ENDLESS  # the gateway hung up: the rest was never taken
