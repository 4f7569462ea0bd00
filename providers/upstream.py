"""One upstream reached over HTTP: its connection pool and the two calls every adapter makes.

    upstream = Upstream(options, {"Content-Type": "application/json", **key_header(...)})
    raw = await upstream.request("POST", url, body)      2xx body as bytes, or raises
    response = await upstream.stream(url, body)           2xx event stream, open, or raises
        await response.read_chunk() ... b"" at its end; response.at_eof()
        response.release() once read to its end (the connection is reused), else .close()

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

A call's own headers (the signer's, an upload's content type) go over the upstream's, which
are the adapter's plus `extra_headers` from config (`providers.http.merged_headers`). A
transport failure is the most specific provider error (`providers.http.transport_error`),
unless a streamed reference in `uploads` failed to read: then that error, as it was.

Calls go through `providers.http1` (the stream handed out is its `Response`); a streamed
(multipart) upload body goes through an aiohttp session opened on the first one
(`providers.uploads`). The cost per call is one pooled HTTP/1.1 exchange and a bounded read:
no context manager (a `try` costs nothing until something is raised), no copy of the headers
for an unset signer, and one status comparison for the 401 retry.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import NoReturn, Protocol, runtime_checkable

import aiohttp
from yarl import URL

from providers.errors import ProviderError
from providers.http import (
    MAX_ANSWER_BYTES,
    TRANSPORT_ERRORS,
    call_timeouts,
    merged_headers,
    read_body,
    stream_timeouts,
    transport_error,
)
from providers.http1 import Client, Response, Timeouts
from providers.options import HttpOptions
from providers.reference_part import ReferencePart, source_error
from providers.secrets import SecretSink
from providers.status import error_for_response
from providers.uploads import Form, new_session, read_answer, upload_timeout

__all__ = [
    "NOT_A_STREAM",
    "ErrorReader",
    "NotAStream",
    "RenewingSigner",
    "RequestSigner",
    "Response",
    "Timeouts",
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
    """The connection pool of one upstream and its calls (in one event loop); `close()` it
    with the provider. `tls` replaces the default verification (`providers.http1.default_tls`)."""

    __slots__ = (
        "_client",
        "_errors",
        "_headers",
        "_not_a_stream",
        "_options",
        "_renews",
        "_sign",
        "_stream_timeouts",
        "_timeouts",
        "_uploads",
        "secrets",
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
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.secrets = SecretSink() if secrets is None else secrets
        """The provider's credentials, for the gateway to mask (`providers.secrets`)."""
        self.secrets.hold_configured(options)
        self._options = options
        self._headers = headers
        self._client = Client(
            merged_headers(options, headers),
            max_connections=options.max_connections,
            connect_timeout=options.connect_timeout_seconds,
            tls=tls,
        )
        self._uploads: aiohttp.ClientSession | None = None  # opened by the first upload
        self._timeouts = call_timeouts(options)
        self._stream_timeouts = stream_timeouts(options)
        self._errors = errors
        self._not_a_stream = not_a_stream
        self._sign = sign
        self._renews = sign if isinstance(sign, RenewingSigner) else None

    async def request(
        self,
        method: str,
        url: URL,
        body: bytes | Form | None = None,
        *,
        headers: Mapping[str, str] | None = None,
        timeouts: Timeouts | None = None,
        max_bytes: int = MAX_ANSWER_BYTES,
        errors: ErrorReader | None = None,
        uploads: Sequence[ReferencePart] = (),
    ) -> bytes:
        """The 2xx answer's body (at most `max_bytes`); else the error `errors` (or the
        upstream's reader) makes of it. `timeouts` replace the upstream's for this call; a
        multipart `providers.uploads.Form` goes through its aiohttp session."""
        sent = headers
        if self._sign is not None:
            sent = await _signed(self._sign, method, url, headers, body)
        timeout = self._timeouts if timeouts is None else timeouts
        status, raw, answered = await self._send(
            method, url, body, sent, timeout, max_bytes, uploads
        )
        renews = self._renews
        if (
            status == 401
            and renews is not None
            and sent is not None
            and not isinstance(body, Form)
            and renews.refused(sent)
        ):
            sent = await _signed(renews, method, url, headers, body)
            status, raw, answered = await self._send(
                method, url, body, sent, timeout, max_bytes, uploads
            )
        if 200 <= status < 300:
            return raw
        raise (errors or self._errors)(status, raw, answered.headers)

    async def _send(
        self,
        method: str,
        url: URL,
        body: bytes | Form | None,
        headers: Mapping[str, str] | None,
        timeouts: Timeouts,
        max_bytes: int,
        uploads: Sequence[ReferencePart],
    ) -> tuple[int, bytes, Response | aiohttp.ClientResponse]:
        """(status, body, the answer for its headers) of one request."""
        if isinstance(body, Form):
            return await self._upload(method, url, body, headers, timeouts, max_bytes, uploads)
        try:
            response = await self._client.request(
                method, url, b"" if body is None else body, timeouts, headers
            )
            try:
                raw = await read_body(response, max_bytes)
            finally:
                response.release()
        except TRANSPORT_ERRORS as exc:
            raise transport_error(exc) from exc
        return response.status, raw, response

    async def _upload(
        self,
        method: str,
        url: URL,
        body: Form,
        headers: Mapping[str, str] | None,
        timeouts: Timeouts,
        max_bytes: int,
        uploads: Sequence[ReferencePart],
    ) -> tuple[int, bytes, aiohttp.ClientResponse]:
        session = self._uploads
        if session is None:
            session = self._uploads = new_session(self._options, self._headers)
        timeout = upload_timeout(timeouts, self._options.connect_timeout_seconds)
        payload = body.payload()
        sent = {**headers, "Content-Type": payload.content_type} if headers else None
        if sent is None:
            sent = {"Content-Type": payload.content_type}  # over the upstream's JSON default
        try:
            response = await session.request(
                method, url, data=payload, headers=sent, timeout=timeout
            )
            try:
                raw = await read_answer(response, max_bytes)
            finally:
                response.release()
        except TRANSPORT_ERRORS as exc:
            source = source_error(uploads) if uploads else None
            if source is not None:  # reading a reference failed, not the upstream
                raise source from exc
            raise transport_error(exc) from exc
        return response.status, raw, response

    async def stream(
        self, url: URL, body: bytes, *, headers: Mapping[str, str] | None = None
    ) -> Response:
        """POST `body` and return the open 2xx event-stream response (the caller releases or
        closes it), each read within `stream_read_timeout_seconds`; an error status or a JSON
        answer raises, after reading it whole. `headers` go over the upstream's for this call."""
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

    async def _post(self, url: URL, body: bytes, headers: Mapping[str, str] | None) -> Response:
        try:
            return await self._client.request("POST", url, body, self._stream_timeouts, headers)
        except TRANSPORT_ERRORS as exc:
            raise transport_error(exc) from exc

    @property
    def closed(self) -> bool:
        """`close()` was called (the provider was retired)."""
        return self._client.closed

    async def close(self) -> None:
        await self._client.close()
        if self._uploads is not None:
            await self._uploads.close()

    async def _refuse(self, response: Response) -> NoReturn:
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
    body: bytes | Form | None,
) -> dict[str, str]:
    """The call's headers with what `sign` adds (a copy: the caller's stay as they were)."""
    signed = dict(headers) if headers else {}
    if body is None:
        body = b""
    await sign(method, url, signed, body if isinstance(body, bytes) else None)
    return signed
