"""A bearer token renewed before it expires (`providers.tokens`): the clock is moved, never
waited on; the token endpoint is a real local server (`exchange`)."""

from __future__ import annotations

import asyncio

import pytest
from aiohttp import web
from yarl import URL

from providers.errors import ProviderError, UpstreamUnavailable
from providers.options import HttpOptions
from providers.tokens import REFRESH_MARGIN, RETRY_SECONDS, RefreshingToken, Token, exchange
from providers.upstream import Upstream
from tests.providers.adapter_checks import run
from tests.support.clock import Clock


class Endpoint:
    """A scripted token source: each fetch takes the next result (a Token or an error)."""

    def __init__(self, *results: Token | ProviderError) -> None:
        self.results = list(results)
        self.calls = 0
        self.gate: asyncio.Event | None = None

    async def __call__(self) -> Token:
        self.calls += 1
        if self.gate is not None:
            await self.gate.wait()
        result = self.results.pop(0)
        if isinstance(result, ProviderError):
            raise result
        return result


def test_a_token_is_reused_until_its_margin_then_renewed_before_expiry() -> None:
    clock = Clock(1000.0)
    source = Endpoint(Token("one", 3600), Token("two", 3600))
    token = RefreshingToken(source, clock=clock)

    async def test() -> None:
        assert await token.value() == "one"
        clock.advance(3600 - REFRESH_MARGIN - 1)  # still outside the margin
        assert await token.value() == "one"
        assert source.calls == 1
        clock.advance(2)  # inside the margin: renewed while "one" is still valid
        assert await token.value() == "two"
        assert source.calls == 2

    run(test)


def test_a_short_lived_token_is_renewed_half_way() -> None:
    clock = Clock(0.0)
    source = Endpoint(Token("short", 60), Token("next", 60))
    token = RefreshingToken(source, clock=clock)

    async def test() -> None:
        assert await token.value() == "short"
        clock.advance(29)
        assert await token.value() == "short"
        clock.advance(2)
        assert await token.value() == "next"

    run(test)


def test_callers_at_once_share_one_exchange() -> None:
    source = Endpoint(Token("shared", 3600))
    source.gate = asyncio.Event()
    token = RefreshingToken(source, clock=Clock(0.0))

    async def test() -> None:
        waiting = [asyncio.ensure_future(token.value()) for _ in range(20)]
        await asyncio.sleep(0)
        assert source.gate is not None
        source.gate.set()
        assert await asyncio.gather(*waiting) == ["shared"] * 20
        assert source.calls == 1 and token.fetches == 1

    run(test)


def test_a_failed_renewal_keeps_the_valid_token_and_tries_again_later() -> None:
    clock = Clock(0.0)
    refused = ProviderError("the token endpoint answered HTTP 503")
    source = Endpoint(Token("one", 3600), refused, Token("two", 3600))
    token = RefreshingToken(source, clock=clock)

    async def test() -> None:
        assert await token.value() == "one"
        clock.advance(3600 - REFRESH_MARGIN + 1)
        assert await token.value() == "one"  # renewal failed: the old one is still good
        assert source.calls == 2
        clock.advance(RETRY_SECONDS - 1)
        assert await token.value() == "one"  # no new attempt before RETRY_SECONDS
        assert source.calls == 2
        clock.advance(2)
        assert await token.value() == "two"

    run(test)


def test_with_no_usable_token_the_failure_is_raised() -> None:
    clock = Clock(0.0)
    source = Endpoint(UpstreamUnavailable("down"), Token("late", 3600))
    token = RefreshingToken(source, clock=clock)

    async def test() -> None:
        with pytest.raises(UpstreamUnavailable):
            await token.value()
        assert await token.value() == "late"  # the next call tries again

    run(test)


def test_calls_refused_together_share_one_renewal() -> None:
    """Many calls met the 401 of one revoked token: the first drops it, the others see it
    gone, and all of them wait for the same one exchange."""
    clock = Clock(0.0)
    source = Endpoint(Token("revoked", 3600), Token("fresh", 3600))
    token = RefreshingToken(source, clock=clock)

    async def test() -> None:
        assert await token.value() == "revoked"
        clock.advance(RETRY_SECONDS + 1)
        assert all(token.refused("revoked") for _ in range(5))
        renewed = await asyncio.gather(*(token.value() for _ in range(5)))
        assert renewed == ["fresh"] * 5 and source.calls == 2
        assert token.refused("revoked")  # an old token's 401: the current one is worth a try
        assert await token.value() == "fresh" and source.calls == 2

    run(test)


def test_a_token_refused_right_after_its_fetch_is_kept() -> None:
    clock = Clock(0.0)
    source = Endpoint(Token("new", 3600), Token("newer", 3600))
    token = RefreshingToken(source, clock=clock)

    async def test() -> None:
        assert await token.value() == "new"
        clock.advance(RETRY_SECONDS - 1)
        assert not token.refused("new")  # the credential is refused, not this token
        assert await token.value() == "new" and source.calls == 1
        clock.advance(2)
        assert token.refused("new")
        assert await token.value() == "newer" and source.calls == 2

    run(test)


async def _serve(handler: web.RequestHandler) -> tuple[web.AppRunner, str]:
    app = web.Application()
    app.router.add_route("*", "/token", handler)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    return runner, f"http://127.0.0.1:{port}/token"


@pytest.mark.parametrize(
    ("status", "body", "error", "words"),
    [
        (
            400,
            {"error": "invalid_grant", "error_description": "Invalid JWT Signature."},
            ProviderError,
            "refused the gateway's credentials (HTTP 400): invalid_grant: Invalid JWT Signature.",
        ),
        (503, {"error": "backend_error"}, UpstreamUnavailable, "answered HTTP 503: backend_error"),
        (200, {"token_type": "Bearer"}, ProviderError, "is not a token"),
    ],
)
def test_exchange_reads_oauth_answers(
    status: int, body: dict[str, str], error: type[ProviderError], words: str
) -> None:
    seen: list[tuple[str, bytes, str | None]] = []

    async def handler(request: web.Request) -> web.Response:
        seen.append((request.method, await request.read(), request.content_type))
        return web.json_response(body, status=status)

    async def test() -> None:
        runner, url = await _serve(handler)
        upstream = Upstream(HttpOptions(base_url=url), {})
        try:
            with pytest.raises(error) as caught:
                await exchange(upstream, URL(url), {"grant_type": "x", "assertion": "a b"})
            assert words in caught.value.message
            assert caught.value.retryable
        finally:
            await upstream.close()
            await runner.cleanup()
        assert seen == [
            ("POST", b"grant_type=x&assertion=a+b", "application/x-www-form-urlencoded")
        ]

    run(test)


def test_exchange_without_a_form_is_a_get_with_its_headers() -> None:
    seen: list[tuple[str, str | None]] = []

    async def handler(request: web.Request) -> web.Response:
        seen.append((request.method, request.headers.get("Metadata-Flavor")))
        return web.json_response({"access_token": "t", "expires_in": "599"})

    async def test() -> None:
        runner, url = await _serve(handler)
        upstream = Upstream(HttpOptions(base_url=url), {})
        try:
            token = await exchange(upstream, URL(url), headers={"Metadata-Flavor": "Google"})
        finally:
            await upstream.close()
            await runner.cleanup()
        assert token == Token("t", 599.0)
        assert seen == [("GET", "Google")]

    run(test)
