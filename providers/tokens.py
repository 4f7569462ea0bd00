"""A bearer token that is renewed before it runs out: Google's OAuth access tokens (Vertex
AI), Microsoft Entra ID tokens (Azure OpenAI).

    token = RefreshingToken(fetch)          fetch() -> Token(value, expires_in): one exchange
    headers["Authorization"] = "Bearer " + await token.value()

`value()` hands out the token it holds while it is not yet due for renewal (no I/O, no lock:
the hot path is one comparison). It is due `REFRESH_MARGIN` (five minutes) before it expires,
or half way through its life for a short-lived one, so a call never leaves with a token that
expires on its way. Then one caller fetches a new one and the others wait for that same fetch:
a burst of calls costs one exchange, not one each. When the renewal fails while the token
still has time left, the old one is used and renewal is tried again `RETRY_SECONDS` later (or
half way to its expiry); with no usable token the failure is raised (a ProviderError: the
gateway's own credentials, not the client's request).

An upstream that answers 401 has revoked the token (or it ran out early): `refused(value)`
drops it, so the next `value()` fetches a new one, and the caller sends its call once more
(`providers.upstream`). A token refused within `RETRY_SECONDS` of its fetch is kept and the
call is not sent again: a token that fresh is refused because of the credential itself, and
fetching more would only cost the token endpoint one exchange per call.

Every token it obtains is reported to `secrets` (`providers.secrets`), replacing the previous
one in its slot, so the gateway masks it wherever an upstream quotes it.

Time comes from `clock` (monotonic seconds), so tests move it instead of sleeping.

`exchange(upstream, url, form)` is the one OAuth request both need: a form posted to a token
endpoint (or a GET from a metadata server), `{access_token, expires_in}` read from the answer.
It goes through an `Upstream` of its own, with no signer and none of the upstream's extra
headers, so the token endpoint never sees what is meant for the model's API.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from urllib.parse import urlencode

import msgspec
from yarl import URL

from providers.errors import ProviderError, UpstreamUnavailable
from providers.secrets import SecretSink
from providers.status import message_from_body, retry_after_seconds
from providers.upstream import Upstream

__all__ = [
    "REFRESH_MARGIN",
    "RETRY_SECONDS",
    "BearerSigner",
    "RefreshingToken",
    "Token",
    "exchange",
]

REFRESH_MARGIN = 300.0
RETRY_SECONDS = 10.0


@dataclass(frozen=True, slots=True)
class Token:
    value: str
    expires_in: float  # seconds from when it was issued


class RefreshingToken:
    """One credential's current token; share it between the calls of one provider."""

    __slots__ = (
        "_clock",
        "_expires_at",
        "_fetch",
        "_obtained_at",
        "_pending",
        "_refresh_at",
        "_secrets",
        "_value",
        "fetches",
    )

    def __init__(
        self,
        fetch: Callable[[], Awaitable[Token]],
        *,
        clock: Callable[[], float] = time.monotonic,
        secrets: SecretSink | None = None,
    ) -> None:
        self._fetch = fetch
        self._clock = clock
        self._secrets = SecretSink() if secrets is None else secrets
        self._value = ""
        self._obtained_at = 0.0
        self._expires_at = 0.0
        self._refresh_at = 0.0
        self._pending: asyncio.Future[str] | None = None
        self.fetches = 0
        """Exchanges made so far (for tests and logs)."""

    async def value(self) -> str:
        """The token to send now; renews it first when it is within its margin of expiry."""
        if self._value and self._clock() < self._refresh_at:
            return self._value
        pending = self._pending
        if pending is None:
            pending = self._pending = asyncio.ensure_future(self._renew())
            pending.add_done_callback(self._settled)
        return await asyncio.shield(pending)

    def refused(self, value: str) -> bool:
        """An upstream answered 401 to a call that carried `value`. True when the call is worth
        sending once more: the token is dropped (the next `value()` fetches a new one), or
        another call has already had it replaced. False for a token refused within
        `RETRY_SECONDS` of its fetch (see the module)."""
        if value != self._value:
            return True
        if self._clock() - self._obtained_at < RETRY_SECONDS:
            return False
        self._value = ""
        self._refresh_at = 0.0
        return True

    def _settled(self, future: asyncio.Future[str]) -> None:
        self._pending = None
        if not future.cancelled():
            future.exception()  # retrieved here, so an unawaited failure is never reported

    async def _renew(self) -> str:
        started = self._clock()
        self.fetches += 1
        try:
            token = await self._fetch()
        except ProviderError:
            left = self._expires_at - started
            if self._value and left > 1:  # still valid: use it, and try again a little later
                self._refresh_at = started + min(RETRY_SECONDS, left / 2)
                return self._value
            raise
        lifetime = max(token.expires_in, 0.0)
        self._secrets.renewed("access_token", token.value)
        self._value = token.value
        self._obtained_at = started
        self._expires_at = started + lifetime
        self._refresh_at = started + lifetime - min(REFRESH_MARGIN, lifetime / 2)
        return token.value


class _TokenAnswer(msgspec.Struct):
    access_token: str
    expires_in: float | str = 3600.0  # Azure's managed identity sends a string


_decode_answer = msgspec.json.Decoder(_TokenAnswer).decode


async def exchange(
    upstream: Upstream,
    url: URL,
    form: Mapping[str, str] | None = None,
    *,
    headers: Mapping[str, str] | None = None,
) -> Token:
    """One OAuth token request: POST `form` (url-encoded), or GET when there is none (a
    metadata server), read `{access_token, expires_in}`. A refusal is a ProviderError naming
    OAuth's `error` and `error_description`; an overloaded or unreachable endpoint is
    UpstreamUnavailable (both retryable elsewhere: the client's request is not at fault)."""
    call_headers = dict(headers or {})
    body = None
    if form is not None:
        body = urlencode(form).encode()
        call_headers["Content-Type"] = "application/x-www-form-urlencoded"
    method = "POST" if form is not None else "GET"
    raw = await upstream.request(method, url, body, headers=call_headers, errors=_refused)
    try:
        answer = _decode_answer(raw)
        expires_in = float(answer.expires_in)
    except (msgspec.DecodeError, msgspec.ValidationError, ValueError) as exc:
        raise ProviderError(f"the token endpoint's answer is not a token: {exc}") from exc
    return Token(answer.access_token, expires_in)


def _refused(status: int, body: bytes, headers: Mapping[str, str]) -> ProviderError:
    """A token endpoint's error answer (`{"error": "invalid_grant", "error_description"}`)."""
    try:
        decoded = msgspec.json.decode(body)
    except msgspec.DecodeError:
        decoded = None
    detail = ""
    if isinstance(decoded, dict):
        parts = [decoded.get("error"), decoded.get("error_description")]
        detail = ": ".join(p for p in parts if isinstance(p, str))
        if not detail:
            detail = message_from_body(body)
    else:
        detail = message_from_body(body)
    retry_after = retry_after_seconds(headers.get("Retry-After"))
    if status == 429 or status >= 500:
        return UpstreamUnavailable(
            f"the token endpoint answered HTTP {status}: {detail}",
            upstream_status=status,
            retry_after=retry_after,
        )
    return ProviderError(
        f"the token endpoint refused the gateway's credentials (HTTP {status}): {detail}",
        upstream_status=status,
    )


class BearerSigner:
    """A `providers.upstream.RenewingSigner` adding a refreshing token to each request as
    `Authorization: Bearer` (Entra ID for Azure, Google's for Vertex); `close()` closes the
    session of the token endpoint."""

    __slots__ = ("_endpoint", "token")

    def __init__(self, token: RefreshingToken, endpoint: Upstream) -> None:
        self.token = token
        self._endpoint = endpoint

    async def __call__(
        self, method: str, url: URL, headers: dict[str, str], body: bytes | None
    ) -> None:
        headers["Authorization"] = "Bearer " + await self.token.value()

    def refused(self, headers: Mapping[str, str]) -> bool:
        """A call signed with `headers` was answered 401 (`RefreshingToken.refused`)."""
        return self.token.refused(headers.get("Authorization", "").removeprefix("Bearer "))

    async def close(self) -> None:
        await self._endpoint.close()
