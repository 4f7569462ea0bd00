"""One upstream reached over HTTP: its pooled session and the two calls every adapter makes.

    upstream = Upstream(options, {"Content-Type": "application/json", **key_header(...)})
    raw = await upstream.request("POST", url, body)      2xx body as bytes, or raises
    response = await upstream.stream(url, body)           2xx event stream, open, or raises

What the adapter writes stays its own: the URL, the headers of its way of sending a key, the
body, the answer's decoding. What differs between upstreams plugs in without changing this:

    errors        reads a non-2xx answer (status, body, headers) into a ProviderError;
                  `providers.status.error_for_response` unless the upstream's body says more
    not_a_stream  what a 2xx JSON answer to a stream request means (an error object, most
                  often); by default ProviderError "... JSON instead of an event stream"
    sign          called before every request with (method, URL, headers, body): adds the
                  headers computed per request, a refreshed token or a signature over the
                  body (AWS SigV4); `body` is b"" for none, None for a streamed
                  (multipart) payload, whose bytes are not known before it is sent; a signer
                  that renews a token (`RenewingSigner`) is told of a 401, and a call whose
                  answer was 401 is sent once more, signed again, when it says the token it
                  carried was dropped (a revoked token: one retry, never a loop; a streamed
                  payload cannot be sent twice and is not retried)
    secrets       the provider's `SecretSink`: the configured key and `extra_headers` values
                  are reported to it here, what the signer obtains by the signer

A call's own headers (the signer's, an upload's content type) go over the session's, which
are the adapter's plus `extra_headers` from config (`providers.http.new_session`). A
transport failure is the most specific provider error (`providers.http.transport_error`),
unless a streamed reference in `uploads` failed to read: then that error, as it was.

The cost per call is one aiohttp request and a bounded read: no context manager (a `try`
costs nothing until something is raised), no copy of the headers for an unset signer, and one
status comparison for the 401 retry.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import NoReturn, Protocol, runtime_checkable

import aiohttp
from yarl import URL

from providers.errors import ProviderError
from providers.http import (
    MAX_ANSWER_BYTES,
    TRANSPORT_ERRORS,
    new_session,
    read_body,
    stream_timeout,
    transport_error,
)
from providers.options import HttpOptions
from providers.reference_part import ReferencePart, source_error
from providers.secrets import SecretSink
from providers.status import error_for_response

__all__ = [
    "NOT_A_STREAM",
    "ErrorReader",
    "NotAStream",
    "RenewingSigner",
    "RequestSigner",
    "Upstream",
    "json_instead_of_stream",
    "key_header",
]

NOT_A_STREAM = "the upstream answered with JSON instead of an event stream"

ErrorReader = Callable[[int, bytes, Mapping[str, str]], ProviderError]
"""(status, body, headers) of a non-2xx answer -> the error to raise."""

NotAStream = Callable[[bytes], ProviderError]
"""The body of a 2xx JSON answer to a stream request -> the error to raise."""


class RequestSigner(Protocol):
    """Adds to `headers` what must be computed per request (see the module docstring)."""

    def __call__(
        self, method: str, url: URL, headers: dict[str, str], body: bytes | None
    ) -> Awaitable[None]: ...


@runtime_checkable
class RenewingSigner(RequestSigner, Protocol):
    """A signer whose credential can be renewed when the upstream refuses it (401)."""

    def refused(self, headers: Mapping[str, str]) -> bool:
        """A call signed with `headers` was answered 401: drop the credential they carry;
        True when the call is worth sending once more (signed again)."""
        ...


def json_instead_of_stream(raw: bytes) -> ProviderError:
    """The default `not_a_stream`: the JSON answer says nothing the adapter knows."""
    return ProviderError(NOT_A_STREAM)


def key_header(options: HttpOptions, name: str, prefix: str = "") -> dict[str, str]:
    """`{name: prefix + key}` for a static key (`options.resolve_api_key`), {} without one;
    ValueError when `api_key_env` names an unset variable and there is no `api_key`."""
    api_key = options.resolve_api_key(os.environ)
    return {name: prefix + api_key} if api_key else {}


class Upstream:
    """The pooled session of one upstream and its calls; build it inside the running loop,
    `close()` it with the provider."""

    __slots__ = (
        "_errors",
        "_not_a_stream",
        "_renews",
        "_sign",
        "_stream_timeout",
        "_timeout",
        "secrets",
        "session",
    )

    def __init__(
        self,
        options: HttpOptions,
        headers: Mapping[str, str],
        *,
        errors: ErrorReader = error_for_response,
        not_a_stream: NotAStream = json_instead_of_stream,
        sign: RequestSigner | None = None,
        secrets: SecretSink | None = None,
    ) -> None:
        self.secrets = SecretSink() if secrets is None else secrets
        """The provider's credentials, for the gateway to mask (`providers.secrets`)."""
        self.secrets.hold_configured(options)
        self.session = new_session(options, headers)  # for a call of its own kind
        self._timeout = self.session.timeout
        self._stream_timeout = stream_timeout(options)
        self._errors = errors
        self._not_a_stream = not_a_stream
        self._sign = sign
        self._renews = sign if isinstance(sign, RenewingSigner) else None

    async def request(
        self,
        method: str,
        url: URL,
        body: bytes | aiohttp.Payload | None = None,
        *,
        headers: Mapping[str, str] | None = None,
        timeouts: aiohttp.ClientTimeout | None = None,
        max_bytes: int = MAX_ANSWER_BYTES,
        errors: ErrorReader | None = None,
        uploads: Sequence[ReferencePart] = (),
    ) -> bytes:
        """The 2xx answer's body (at most `max_bytes`); else the error `errors` (or the
        upstream's reader) makes of it. `timeouts` replace the session's for this call."""
        sent = headers
        if self._sign is not None:
            sent = await _signed(self._sign, method, url, headers, body)
        timeout = self._timeout if timeouts is None else timeouts
        status, raw, answered = await self._send(
            method, url, body, sent, timeout, max_bytes, uploads
        )
        renews = self._renews
        if (
            status == 401
            and renews is not None
            and sent is not None
            and not isinstance(body, aiohttp.Payload)
            and renews.refused(sent)
        ):
            sent = await _signed(renews, method, url, headers, body)
            status, raw, answered = await self._send(
                method, url, body, sent, timeout, max_bytes, uploads
            )
        if 200 <= status < 300:
            return raw
        raise (errors or self._errors)(status, raw, answered)

    async def _send(
        self,
        method: str,
        url: URL,
        body: bytes | aiohttp.Payload | None,
        headers: Mapping[str, str] | None,
        timeouts: aiohttp.ClientTimeout,
        max_bytes: int,
        uploads: Sequence[ReferencePart],
    ) -> tuple[int, bytes, Mapping[str, str]]:
        """(status, body, headers) of one request."""
        try:
            response = await self.session.request(
                method, url, data=body, headers=headers, timeout=timeouts
            )
            try:
                raw = await read_body(response, max_bytes)
            finally:
                response.release()
        except TRANSPORT_ERRORS as exc:
            source = source_error(uploads) if uploads else None
            if source is not None:  # reading a reference failed, not the upstream
                raise source from exc
            raise transport_error(exc) from exc
        return response.status, raw, response.headers

    async def stream(
        self, url: URL, body: bytes, *, headers: Mapping[str, str] | None = None
    ) -> aiohttp.ClientResponse:
        """POST `body` and return the open 2xx event-stream response (the caller closes it),
        each read within `stream_read_timeout_seconds`; an error status or a JSON answer
        raises, after reading it whole. `headers` go over the session's for this call."""
        sign = self._sign
        sent = headers
        if sign is not None:
            sent = await _signed(sign, "POST", url, headers, body)
        response = await self._post(url, body, sent)
        renews = self._renews
        if (
            response.status == 401
            and renews is not None
            and sent is not None
            and renews.refused(sent)
        ):
            response.close()  # its body is not needed: the call is made again
            sent = await _signed(renews, "POST", url, headers, body)
            response = await self._post(url, body, sent)
        if not 200 <= response.status < 300 or response.content_type == "application/json":
            await self._refuse(response)
        return response

    async def _post(
        self, url: URL, body: bytes, headers: Mapping[str, str] | None
    ) -> aiohttp.ClientResponse:
        try:
            return await self.session.post(
                url, data=body, headers=headers, timeout=self._stream_timeout
            )
        except TRANSPORT_ERRORS as exc:
            raise transport_error(exc) from exc

    async def close(self) -> None:
        await self.session.close()

    async def _refuse(self, response: aiohttp.ClientResponse) -> NoReturn:
        """Raise for an answer to a stream request that is an error status, or JSON."""
        try:
            raw = await read_body(response, MAX_ANSWER_BYTES)
        except TRANSPORT_ERRORS as exc:
            raise transport_error(exc) from exc
        finally:
            response.release()
        if not 200 <= response.status < 300:
            raise self._errors(response.status, raw, response.headers)
        raise self._not_a_stream(raw)


async def _signed(
    sign: RequestSigner,
    method: str,
    url: URL,
    headers: Mapping[str, str] | None,
    body: bytes | aiohttp.Payload | None,
) -> dict[str, str]:
    """The call's headers with what `sign` adds (a copy: the caller's stay as they were)."""
    signed = dict(headers) if headers else {}
    if body is None:
        body = b""
    await sign(method, url, signed, body if isinstance(body, bytes) else None)
    return signed
