"""Headers an adapter computes per request (`providers.upstream.RequestSigner`) and a static
key's header (`key_header`), against a real local server.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac

import aiohttp
import pytest
from aiohttp.test_utils import TestServer
from yarl import URL

from providers.options import HttpOptions
from providers.uploads import Form
from providers.upstream import RequestSigner, Upstream, key_header
from tests.providers.upstream_server import JSON, Server, run, serving

SECRET = b"signing secret"


def signature(method: str, path: str, body: bytes | None) -> str:
    """What an upstream checks: an HMAC over the method, the path and the body's hash (a
    streamed body is declared unsigned, as SigV4's UNSIGNED-PAYLOAD)."""
    payload = hashlib.sha256(body).hexdigest() if body is not None else "UNSIGNED-PAYLOAD"
    message = f"{method}\n{path}\n{payload}".encode()
    return hmac.new(SECRET, message, hashlib.sha256).hexdigest()


class Signer:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, dict[str, str], bytes | None]] = []

    async def __call__(
        self, method: str, url: URL, headers: dict[str, str], body: bytes | None
    ) -> None:
        self.calls.append((method, str(url), dict(headers), body))
        headers["X-Payload"] = "signed" if body is not None else "UNSIGNED-PAYLOAD"
        headers["Authorization"] = "HMAC " + signature(method, url.raw_path_qs, body)


def test_a_signer_signs_every_request_over_what_is_sent() -> None:
    signer = Signer()
    call_headers = {"Accept": "text/plain"}

    async def test() -> None:
        headers = {**JSON, "Authorization": "Bearer static"}  # the signer's goes over it
        async with serving(headers, sign=signer) as (server, options, upstream):
            url = options.url("/call")
            await upstream.request("POST", url, b'{"a":1}', headers=call_headers)
            await upstream.request("GET", url)
            multipart = Form()
            multipart.add_field("field", "value")
            await upstream.request("POST", url, multipart, headers={"X-Call": "x"})
            response = await upstream.stream(options.url("/events"), b'{"s":1}')
            response.close()
        for seen in server.seen:
            body = seen.body if seen.headers["x-payload"] == "signed" else None
            assert seen.headers["authorization"] == "HMAC " + signature(
                seen.method, seen.path, body
            )
        assert [seen.headers["x-payload"] for seen in server.seen] == [
            "signed",
            "signed",
            "UNSIGNED-PAYLOAD",
            "signed",
        ]
        assert [(method, body) for method, _, _, body in signer.calls] == [
            ("POST", b'{"a":1}'),
            ("GET", b""),
            ("POST", None),
            ("POST", b'{"s":1}'),
        ]
        assert signer.calls[0][2] == {"Accept": "text/plain"}  # it sees the call's headers
        assert call_headers == {"Accept": "text/plain"}  # and signs a copy of them
        assert server.seen[0].headers["accept"] == "text/plain"

    run(test)


def test_a_signer_may_await_a_token_and_keep_it() -> None:
    """A token fetched once and reused until it expires (here: never), as OAuth would be."""

    class TokenSigner:
        def __init__(self, token_url: URL) -> None:
            self.token_url = token_url
            self.token: str | None = None
            self.lock = asyncio.Lock()

        async def __call__(
            self, method: str, url: URL, headers: dict[str, str], body: bytes | None
        ) -> None:
            async with self.lock:
                if self.token is None:
                    async with (
                        aiohttp.ClientSession() as session,
                        session.post(self.token_url) as response,
                    ):
                        self.token = await response.text()
            headers["Authorization"] = f"Bearer {self.token}"

    async def test() -> None:
        server = Server()
        async with TestServer(server.app()) as test_server:
            options = HttpOptions(base_url=str(test_server.make_url("")))
            signer: RequestSigner = TokenSigner(options.url("/token"))
            upstream = Upstream(options, JSON, sign=signer)
            try:
                await asyncio.gather(
                    *(upstream.request("POST", options.url("/call"), b"{}") for _ in range(3))
                )
            finally:
                await upstream.close()
        assert server.tokens == 1
        assert [seen.headers["authorization"] for seen in server.seen] == ["Bearer token-1"] * 3

    run(test)


# --- a static key --------------------------------------------------------------------------------


def test_key_header_puts_the_resolved_key_in_the_upstreams_header(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("UPSTREAM_TEST_KEY", "from-env")
    monkeypatch.delenv("UPSTREAM_TEST_UNSET", raising=False)
    with_env = HttpOptions(base_url="http://x", api_key="k", api_key_env="UPSTREAM_TEST_KEY")
    assert key_header(with_env, "Authorization", "Bearer ") == {"Authorization": "Bearer from-env"}
    assert key_header(HttpOptions(base_url="http://x", api_key="k"), "x-api-key") == {
        "x-api-key": "k"
    }
    assert key_header(HttpOptions(base_url="http://x"), "x-api-key") == {}
    unset = HttpOptions(base_url="http://x", api_key_env="UPSTREAM_TEST_UNSET")
    with pytest.raises(ValueError, match="UPSTREAM_TEST_UNSET"):
        key_header(unset, "x-api-key")
