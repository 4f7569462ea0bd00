"""The adapters' shared HTTP calls (`providers.upstream`): whole answers and streams, against
a real local server (`tests/providers/upstream_server.py`).
"""

from __future__ import annotations

import socket
from collections.abc import Mapping
from typing import Any

import aiohttp
import pytest
from yarl import URL

from providers.errors import (
    ProviderError,
    UpstreamRejectedRequest,
    UpstreamTimeout,
    UpstreamUnavailable,
)
from providers.http import read_body
from providers.http1 import ConnectFailed
from providers.reference_part import ReferencePart
from providers.uploads import Form
from providers.upstream import NOT_A_STREAM, Timeouts
from tests.providers.references import ReferenceSource, SourceBroke
from tests.providers.upstream_server import JSON, Reply, run, serving

# --- whole answers -------------------------------------------------------------------------------


def test_a_call_sends_its_body_with_the_session_headers_and_returns_the_answer() -> None:
    async def test() -> None:
        headers = {**JSON, "Authorization": "Bearer k"}
        async with serving(headers, extra_headers={"X-Org": "o"}) as (server, options, upstream):
            server.replies.append(Reply(body=b'{"id":"a"}'))
            url = options.url("/call")
            assert await upstream.request("POST", url, b'{"q":1}') == b'{"id":"a"}'
            assert await upstream.request("GET", url, headers={"Accept": "text/plain"}) == (
                b'{"ok":true}'
            )
        first, second = server.seen
        assert (first.method, first.path, first.body) == ("POST", "/call", b'{"q":1}')
        assert first.headers["content-type"] == "application/json"
        assert first.headers["authorization"] == "Bearer k"
        assert first.headers["x-org"] == "o"
        assert (second.method, second.body, second.headers["accept"]) == ("GET", b"", "text/plain")
        assert second.client_port == first.client_port  # answer read, connection reused

    run(test)


def test_an_error_status_is_read_by_the_upstreams_error_reader() -> None:
    async def test() -> None:
        async with serving() as (server, options, upstream):
            url = options.url("/call")
            server.replies.append(
                Reply(429, b'{"error":{"message":"slow down"}}', headers={"Retry-After": "3"})
            )
            with pytest.raises(UpstreamUnavailable, match="slow down") as unavailable:
                await upstream.request("POST", url, b"{}")
            assert (unavailable.value.upstream_status, unavailable.value.retry_after) == (429, 3.0)
            server.replies.append(Reply(400, b'{"error":{"message":"bad field"}}'))
            with pytest.raises(UpstreamRejectedRequest, match=r"^bad field$"):
                await upstream.request("POST", url, b"{}")
            first, second = server.seen
            assert first.client_port == second.client_port  # error bodies read, too

    run(test)


def test_an_adapter_reads_its_own_error_bodies() -> None:
    read: list[tuple[int, bytes, str | None]] = []

    def errors(status: int, body: bytes, headers: Mapping[str, str]) -> ProviderError:
        read.append((status, body, headers.get("X-Request-Id")))
        return UpstreamTimeout("the body said it ran out of time", upstream_status=status)

    def per_call(status: int, body: bytes, headers: Mapping[str, str]) -> ProviderError:
        return UpstreamRejectedRequest(f"policy: {body.decode()}", upstream_status=status)

    async def test() -> None:
        async with serving(errors=errors) as (server, options, upstream):
            url = options.url("/call")
            server.replies.append(Reply(504, b"deadline", headers={"X-Request-Id": "r1"}))
            with pytest.raises(UpstreamTimeout, match="ran out of time"):
                await upstream.request("POST", url, b"{}")
            server.replies.append(Reply(400, b"blocked"))
            with pytest.raises(UpstreamRejectedRequest, match="policy: blocked"):
                await upstream.request("POST", url, b"{}", errors=per_call)
        assert read == [(504, b"deadline", "r1")]

    run(test)


def test_an_answer_over_max_bytes_fails() -> None:
    async def test() -> None:
        async with serving() as (server, options, upstream):
            url = options.url("/call")
            server.replies.extend([Reply(body=b"x" * 1001), Reply(body=b"x" * 1000)])
            with pytest.raises(ProviderError, match="over 1000 bytes"):
                await upstream.request("POST", url, b"{}", max_bytes=1000)
            assert await upstream.request("POST", url, b"{}", max_bytes=1000) == b"x" * 1000

    run(test)


def test_transport_failures_are_provider_errors_with_their_cause() -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]

    async def test() -> None:
        async with serving(timeout_seconds=0.2) as (server, options, upstream):
            with pytest.raises(UpstreamUnavailable) as refused:
                await upstream.request("POST", URL(f"http://127.0.0.1:{closed}/call"), b"{}")
            assert isinstance(refused.value.__cause__, ConnectFailed)
            with pytest.raises(UpstreamTimeout) as stalled:
                await upstream.request("POST", options.url("/stall"), b"{}")
            assert isinstance(stalled.value.__cause__, TimeoutError)
            # A call's own timeouts replace the upstream's 0.2 s total.
            server.replies.append(Reply(pause=0.4))
            longer = Timeouts(total=30)
            assert await upstream.request("POST", options.url("/call"), timeouts=longer)

    run(test)


def test_a_reference_that_fails_mid_upload_is_raised_as_it_was() -> None:
    """Only the part knows its source failed: aiohttp reports a broken connection, which is
    what a call without `uploads` raises."""
    source = ReferenceSource()
    source.fail_after = 300_000

    def form(part: ReferencePart) -> Form:
        data = Form()
        data.add_file("file", part, filename="a.bin", content_type="application/octet-stream")
        return data

    async def test() -> None:
        async with serving() as (_, options, upstream):
            url = options.url("/call")
            part = ReferencePart(source.reference(1, 1024 * 1024, "application/octet-stream"), "")
            with pytest.raises(SourceBroke, match="broke after") as broke:
                await upstream.request("POST", url, form(part), uploads=(part,))
            assert isinstance(broke.value.__cause__, aiohttp.ClientError)
            part = ReferencePart(source.reference(2, 1024 * 1024, "application/octet-stream"), "")
            with pytest.raises(ProviderError) as unattributed:
                await upstream.request("POST", url, form(part))
            assert isinstance(unattributed.value.__cause__, aiohttp.ClientError)

    run(test)


# --- streams -------------------------------------------------------------------------------------


def test_a_stream_comes_back_open_and_has_no_total_timeout() -> None:
    async def test() -> None:
        settings: dict[str, Any] = {"timeout_seconds": 0.2, "stream_read_timeout_seconds": 30}
        async with serving(**settings) as (server, options, upstream):
            response = await upstream.stream(options.url("/events"), b'{"stream":true}')
            try:
                assert response.status == 200
                assert await read_body(response, 1000) == b"data: one\n\ndata: two\n\n"
            finally:
                response.release()
        assert server.seen[0].method == "POST"
        assert server.seen[0].body == b'{"stream":true}'
        assert server.seen[0].headers["content-type"] == "application/json"

    run(test)


def test_a_stream_read_to_its_end_gives_its_connection_back_and_one_closed_early_does_not() -> None:
    async def test() -> None:
        async with serving() as (server, options, upstream):
            read = await upstream.stream(options.url("/events"), b"{}")
            while await read.read_chunk():
                pass
            assert read.at_eof()
            read.release()
            await upstream.request("POST", options.url("/call"), b"{}")
            left = await upstream.stream(options.url("/events"), b"{}")
            assert await left.read_chunk() == b"data: one\n\n"
            left.close()  # mid-stream: the upstream sees the disconnect
            await upstream.request("POST", options.url("/call"), b"{}")
        ports = [seen.client_port for seen in server.seen]
        assert ports[0] == ports[1] == ports[2]  # the stream's connection carried the call
        assert ports[3] != ports[2]  # a stream closed early does not come back

    run(test)


def test_a_stream_request_answered_with_an_error_status_raises_through_the_reader() -> None:
    read: list[bytes] = []

    def errors(status: int, body: bytes, headers: Mapping[str, str]) -> ProviderError:
        read.append(body)
        return UpstreamUnavailable("overloaded", upstream_status=status)

    async def test() -> None:
        async with serving() as (server, options, upstream):
            server.replies.append(Reply(503, b'{"error":{"message":"busy"}}'))
            with pytest.raises(UpstreamUnavailable, match="busy") as caught:
                await upstream.stream(options.url("/call"), b"{}")
            assert caught.value.upstream_status == 503
        async with serving(errors=errors) as (server, options, upstream):
            server.replies.append(Reply(529, b"overloaded body"))
            with pytest.raises(UpstreamUnavailable, match="overloaded"):
                await upstream.stream(options.url("/call"), b"{}")
            await upstream.request("POST", options.url("/call"))
            first, second = server.seen
            assert first.client_port == second.client_port  # the refused answer was read
        assert read == [b"overloaded body"]

    run(test)


def test_a_json_answer_to_a_stream_request_is_not_a_stream() -> None:
    bodies: list[bytes] = []

    def not_a_stream(raw: bytes) -> ProviderError:
        bodies.append(raw)
        return UpstreamRejectedRequest("the JSON was an error object")

    async def test() -> None:
        async with serving() as (server, options, upstream):
            server.replies.append(Reply(body=b'{"id":"whole"}'))
            with pytest.raises(ProviderError, match=f"^{NOT_A_STREAM}$"):
                await upstream.stream(options.url("/call"), b"{}")
        async with serving(not_a_stream=not_a_stream) as (server, options, upstream):
            server.replies.append(Reply(body=b'{"error":{}}'))
            with pytest.raises(UpstreamRejectedRequest, match="error object"):
                await upstream.stream(options.url("/call"), b"{}")
        assert bodies == [b'{"error":{}}']

    run(test)


def test_a_stream_that_cannot_connect_is_unavailable() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]

    async def test() -> None:
        async with serving() as (_, _options, upstream):
            with pytest.raises(UpstreamUnavailable) as caught:
                await upstream.stream(URL(f"http://127.0.0.1:{closed}/events"), b"{}")
            assert isinstance(caught.value.__cause__, ConnectFailed)

    run(test)
