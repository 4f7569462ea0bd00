"""The upstream HTTP/1.1 client (`providers.http1`) against raw local servers that write exact
bytes: keep-alive reuse, a connection the upstream closed between requests, chunked,
content-length and until-close bodies, an event stream split at every byte boundary, each
timeout phase, and TLS against a real local TLS server with its own CA.
"""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from yarl import URL

from providers.http import read_body
from providers.http1 import (
    BrokenBody,
    Client,
    Disconnected,
    Response,
    Timeouts,
    TLSFailed,
)
from providers.http1.connection import Connection
from providers.sse import SSEDecoder

Script = Callable[[asyncio.StreamReader, asyncio.StreamWriter, int], Awaitable[None]]
"""Answers the requests of one connection: (reader, writer, connection number)."""

SSE_BODY = b'data: {"a":1}\n\ndata: {"b":"two"}\r\n\r\n: note\ndata: [DONE]\n\n'
SSE_ANSWER = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    b"f\r\n" + SSE_BODY[:15] + b"\r\n"
    b"%x;ext=1\r\n" % (len(SSE_BODY) - 15) + SSE_BODY[15:] + b"\r\n0\r\n\r\n"
)


def run(test: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(test())


def sized(body: bytes, extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n%s\r\n" % (len(body), extra) + body


async def read_request(reader: asyncio.StreamReader) -> bytes:
    """One request's head and body (by its Content-Length); b"" when the client closed."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return b""
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    return head + await reader.readexactly(length)


class Server:
    """A raw TCP (or TLS) server running `script` per connection; counts connections and
    keeps every request it read."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.connections = 0
        self.requests: list[bytes] = []
        self.url = URL()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            await self.script(reader, writer, self.connections)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def request(self, reader: asyncio.StreamReader) -> bytes:
        request = await read_request(reader)
        if request:
            self.requests.append(request)
        return request


@asynccontextmanager
async def serving(script: Script, tls: ssl.SSLContext | None = None) -> AsyncIterator[Server]:
    server = Server(script)
    listener = await asyncio.start_server(server.handle, "127.0.0.1", 0, ssl=tls)
    port = listener.sockets[0].getsockname()[1]
    server.url = URL(f"{'https' if tls else 'http'}://localhost:{port}/v1/call")
    try:
        yield server
    finally:
        listener.close()
        await listener.wait_closed()


def client(**kwargs: Any) -> Client:
    return Client({"Authorization": "Bearer k"}, max_connections=4, connect_timeout=5.0, **kwargs)


async def whole(response: Response) -> bytes:
    try:
        return await read_body(response, 1_000_000)
    finally:
        response.release()


TOTAL = Timeouts(total=30.0)


# --- keep-alive and bodies -----------------------------------------------------------------------


def test_keep_alive_carries_sized_chunked_and_empty_answers_on_one_connection() -> None:
    answers = [
        sized(b'{"id":1}', b"Content-Type: application/json\r\n"),
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
        b"HTTP/1.1 204 No Content\r\n\r\n",
        sized(b"last"),
    ]

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, _: int) -> None:
        for answer in answers:
            if not await server.request(reader):
                return
            writer.write(answer)

    async def test() -> None:
        nonlocal server
        async with serving(script) as server:
            http = client()
            try:
                first = await http.request("POST", server.url, b'{"q":1}', TOTAL)
                assert (first.status, first.content_type) == (200, "application/json")
                assert await whole(first) == b'{"id":1}'
                assert await whole(await http.request("GET", server.url, b"", TOTAL)) == b"abcde"
                empty = await http.request("DELETE", server.url, b"", TOTAL)
                assert empty.status == 204
                assert await whole(empty) == b""
                call = {"X-Call": "c", "authorization": "Bearer call"}
                last = await http.request("POST", server.url, b"x", TOTAL, call)
                assert await whole(last) == b"last"
            finally:
                await http.close()
        assert server.connections == 1
        post, get, delete, own = server.requests
        assert post.startswith(b"POST /v1/call HTTP/1.1\r\nHost: localhost:")
        assert b"\r\nAuthorization: Bearer k\r\n" in post
        assert post.endswith(b"\r\nContent-Length: 7\r\n\r\n" + b'{"q":1}')
        assert b"Content-Length" not in get and b"Content-Length" not in delete
        assert b"Bearer k" not in own  # the call's header replaced the client's, in any case
        assert b"\r\nX-Call: c\r\n" in own and b"\r\nauthorization: Bearer call\r\n" in own

    server = Server(script)
    run(test)


def test_a_body_until_the_close_is_read_whole_and_its_connection_not_reused() -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, _: int) -> None:
        await server.request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\npart one, ")
        await writer.drain()
        writer.write(b"part two")
        await writer.drain()
        writer.write_eof()  # half-closed: the answer ends here

    async def test() -> None:
        nonlocal server
        async with serving(script) as server:
            http = client()
            try:
                for _ in range(2):
                    response = await http.request("GET", server.url, b"", TOTAL)
                    assert await whole(response) == b"part one, part two"
            finally:
                await http.close()
        assert server.connections == 2

    server = Server(script)
    run(test)


def test_an_answer_cut_short_is_a_broken_body() -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, _: int) -> None:
        await server.request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nabcde\r\n9\r\nabc")

    async def test() -> None:
        nonlocal server
        async with serving(script) as server:
            http = client()
            try:
                response = await http.request("GET", server.url, b"", TOTAL)
                received = b""
                with pytest.raises(BrokenBody):
                    while True:
                        received += await response.read_chunk()
                response.close()
                assert received == b"abcdeabc"  # what came is handed out before the failure
            finally:
                await http.close()

    server = Server(script)
    run(test)


def test_an_interim_answer_is_skipped_and_a_second_answer_spoils_the_connection() -> None:
    answers = [
        b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n" + sized(b"after hints"),
        sized(b"one") + sized(b"two"),  # two answers to one request
        sized(b"fresh"),
    ]

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, _: int) -> None:
        while await server.request(reader):
            writer.write(answers[len(server.requests) - 1])

    async def test() -> None:
        nonlocal server
        async with serving(script) as server:
            http = client()
            try:
                hinted = await http.request("GET", server.url, b"", TOTAL)
                assert hinted.status == 200
                assert "Link" not in hinted.headers
                assert await whole(hinted) == b"after hints"
                assert await whole(await http.request("GET", server.url, b"", TOTAL)) == b"one"
                await until_closed(http)
                assert await whole(await http.request("GET", server.url, b"", TOTAL)) == b"fresh"
            finally:
                await http.close()
        assert server.connections == 2  # the one out of step was not used again

    server = Server(script)
    run(test)


# --- a connection closed by the upstream between requests ---------------------------------------


def test_a_connection_closed_while_idle_is_not_used_again() -> None:
    closed = asyncio.Event()

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, _: int) -> None:
        await server.request(reader)
        writer.write(sized(b"ok"))  # then closed, without saying so in a header
        writer.close()
        await writer.wait_closed()
        closed.set()

    async def test() -> None:
        nonlocal server
        async with serving(script) as server:
            http = client()
            try:
                assert await whole(await http.request("POST", server.url, b"1", TOTAL)) == b"ok"
                await closed.wait()
                await until_closed(http)
                assert await whole(await http.request("POST", server.url, b"2", TOTAL)) == b"ok"
            finally:
                await http.close()
        assert server.connections == 2
        assert len(server.requests) == 2

    server = Server(script)
    run(test)


async def until_closed(http: Client) -> None:
    """Until the client's idle connections have seen the upstream's close."""
    for _ in range(500):
        idle = [c for pooled in http._idle.values() for c in pooled]
        if not any(connection.usable() for connection in idle):
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the close never reached the client")


@pytest.mark.parametrize(("method", "sent_twice"), [("GET", True), ("PUT", True), ("POST", False)])
def test_a_request_the_upstream_drops_unanswered_is_resent_only_when_idempotent(
    method: str, sent_twice: bool
) -> None:
    """The first connection answers once, then closes on the next request without a byte:
    the race of a keep-alive connection the upstream drops just as a request goes out."""

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await server.request(reader)
        writer.write(sized(b"first" if n == 1 else b"again"))
        await writer.drain()
        if n == 1:
            await server.request(reader)  # read, then dropped unanswered

    async def test() -> None:
        nonlocal server
        async with serving(script) as server:
            http = client()
            try:
                assert await whole(await http.request(method, server.url, b"", TOTAL)) == b"first"
                if sent_twice:
                    again = await http.request(method, server.url, b"", TOTAL)
                    assert await whole(again) == b"again"
                else:
                    with pytest.raises(Disconnected):
                        await http.request(method, server.url, b"", TOTAL)
            finally:
                await http.close()
        assert len(server.requests) == (3 if sent_twice else 2)
        assert server.connections == (2 if sent_twice else 1)

    server = Server(script)
    run(test)


# --- an event stream split at every byte boundary -------------------------------------------------


class Transport(asyncio.Transport):
    """Takes what the connection writes; reading is never paused in these tests."""

    def __init__(self) -> None:
        super().__init__()
        self.written = b""
        self.closing = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written += bytes(data)

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.closing = True


async def events_read(pieces: list[bytes]) -> tuple[list[bytes], bool, bool]:
    """The events a stream decoder gets when `pieces` arrive as separate reads, whether it saw
    `[DONE]`, and whether the connection could carry the next request."""
    connection = Connection(asyncio.get_running_loop())
    connection.connection_made(Transport())
    connection.send(b"POST / HTTP/1.1\r\n\r\n", b"")
    decoder = SSEDecoder()
    events: list[bytes] = []
    for piece in pieces:
        connection.data_received(piece)
        if connection.has_chunks():  # what a reader waiting for the next read gets now
            events += decoder.feed(await connection.chunk())
    assert connection.status == 200
    assert connection.content_type == b"text/event-stream"
    assert await connection.chunk() == b""
    return events + decoder.flush(), decoder.done, connection.reusable()


def test_an_event_stream_split_at_every_byte_boundary_gives_the_same_events() -> None:
    async def test() -> None:
        expected = ([b'{"a":1}', b'{"b":"two"}'], True, True)
        assert await events_read([SSE_ANSWER]) == expected
        for cut in range(1, len(SSE_ANSWER)):
            pieces = [SSE_ANSWER[:cut], SSE_ANSWER[cut:]]
            assert await events_read(pieces) == expected, cut
        single_bytes = [SSE_ANSWER[i : i + 1] for i in range(len(SSE_ANSWER))]
        assert await events_read(single_bytes) == expected

    run(test)


# --- timeouts per phase --------------------------------------------------------------------------


def test_the_connect_phase_has_its_own_timeout_tls_handshake_included() -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, _: int) -> None:
        await reader.read()  # accepts the TCP connection, never answers the TLS handshake

    async def test() -> None:
        async with serving(script) as server:
            http = client()
            try:
                url = server.url.with_scheme("https")
                with pytest.raises(TimeoutError):
                    await http.request("GET", url, b"", Timeouts(total=30.0, connect=0.2))
            finally:
                await http.close()
        assert server.connections == 1

    run(test)


def test_the_total_timeout_holds_on_a_reused_connection() -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, _: int) -> None:
        await read_request(reader)
        writer.write(sized(b"ok"))
        await read_request(reader)
        await reader.read()  # the second request is never answered

    async def test() -> None:
        async with serving(script) as server:
            http = client()
            try:
                assert await whole(await http.request("GET", server.url, b"", TOTAL)) == b"ok"
                with pytest.raises(TimeoutError):
                    await http.request("GET", server.url, b"", Timeouts(total=0.2))
            finally:
                await http.close()
        assert server.connections == 1  # the stalled call was not resent on a new connection

    run(test)


def test_a_stream_read_times_out_per_read_and_not_in_total() -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, _: int) -> None:
        await read_request(reader)
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        for _ in range(5):
            await asyncio.sleep(0.25)
            writer.write(b"9\r\ndata: x\n\n\r\n")
            await writer.drain()
        await reader.read()  # then silence

    async def test() -> None:
        async with serving(script) as server:
            http = client()
            try:
                response = await http.request("POST", server.url, b"{}", Timeouts(read=1.0))
                received = b""
                with pytest.raises(TimeoutError):
                    while True:
                        received += await response.read_chunk()
                response.close()
                assert received == b"data: x\n\n" * 5  # 1.25 s in all: past one read's 1.0
            finally:
                await http.close()

    run(test)


def test_waiting_for_a_free_connection_has_its_own_timeout() -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, _: int) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n")
        await reader.read()

    async def test() -> None:
        async with serving(script) as server:
            http = Client({}, max_connections=1, connect_timeout=5.0)
            try:
                held = await http.request("GET", server.url, b"", Timeouts(read=30))
                with pytest.raises(TimeoutError):
                    await http.request("GET", server.url, b"", Timeouts(pool=0.2, read=30))
                held.close()
            finally:
                await http.close()
        assert server.connections == 1

    run(test)


# --- TLS -----------------------------------------------------------------------------------------


def certificates(folder: Path) -> tuple[Path, Path, Path]:
    """A CA and a certificate it signs for localhost and 127.0.0.1: (ca, cert, key) files."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
        .sign(ca_key, hashes.SHA256())
    )
    paths = folder / "ca.pem", folder / "cert.pem", folder / "key.pem"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return paths


def test_tls_against_a_local_server_verifies_its_certificate(tmp_path: Path) -> None:
    ca, cert, key = certificates(tmp_path)
    served = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    served.load_cert_chain(cert, key)
    trusting = ssl.create_default_context(cafile=str(ca))

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, _: int) -> None:
        while await server.request(reader):
            writer.write(SSE_ANSWER)

    async def test() -> None:
        nonlocal server
        async with serving(script, tls=served) as server:
            http = client(tls=trusting)
            try:
                for _ in range(2):
                    response = await http.request("POST", server.url, b"{}", TOTAL)
                    assert await whole(response) == SSE_BODY
            finally:
                await http.close()
            assert server.connections == 1  # kept alive over TLS too
            default = client()  # the system's roots and certifi's: this CA is in neither
            try:
                with pytest.raises(TLSFailed, match="certificate"):
                    await default.request("POST", server.url, b"{}", TOTAL)
            finally:
                await default.close()

    server = Server(script)
    run(test)
