"""One HTTP exchange with the gateway, tried again per `RetryPolicy`, errors made typed.

httpx's exceptions stop here: a request that got no answer becomes `TransportError`, a non-2xx
answer the `ApiError` subclass of its envelope (`raise ... from exc`, as httpx itself does at its
own boundary). The transport is injected, so a test can hand in any httpx transport.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import IO

import httpx

from gateway.client.errors import ApiError, ClientError, TransportError, error_from_response
from gateway.client.retry import RetryPolicy, parse_retry_after

__all__ = ["Sender"]

_USER_AGENT = "generation-gateway-client/0.1"


class Sender:
    """The pooled connection to one gateway and the retry loop around every request."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float,
        transport: httpx.BaseTransport | None,
        retry: RetryPolicy,
        sleep: Callable[[float], None],
        clock: Callable[[], float],
    ) -> None:
        self.base_url = httpx.URL(base_url.rstrip("/") + "/")
        self.retry = retry
        self.sleep = sleep
        self.clock = clock
        self.rng = random.Random()
        self._auth = {"Authorization": f"Bearer {api_key}"}
        self._http = httpx.Client(
            base_url=self.base_url,
            timeout=timeout,
            transport=transport,
            headers={"User-Agent": _USER_AGENT},
        )

    def close(self) -> None:
        self._http.close()

    def build(
        self,
        method: str,
        url: str | httpx.URL,
        *,
        authorized: bool = True,
        headers: dict[str, str] | None = None,
        params: dict[str, str] | None = None,
        json: object = None,
        files: dict[str, tuple[str, IO[bytes], str]] | None = None,
    ) -> httpx.Request:
        """A request relative to the base URL (`tasks`) or absolute (a signed artifact link,
        sent without the API key: the signature is the credential)."""
        sent = {**(self._auth if authorized else {}), **(headers or {})}
        return self._http.build_request(
            method, url, headers=sent, params=params, json=json, files=files
        )

    def absolute(self, url: str) -> httpx.URL:
        """An output link (absolute, or relative to the gateway's root) as an absolute URL."""
        return self.base_url.join(url)

    def send(
        self,
        build: Callable[[], httpx.Request],
        *,
        replayable: bool,
        deadline: float | None = None,
        stream: bool = False,
    ) -> httpx.Response:
        """The 2xx response (open, when `stream`), after the retries the policy allows.

        `replayable`: repeating the request cannot do anything twice (GET, cancel, a create
        with its Idempotency-Key). `deadline` (a `clock()` value): keep retrying until then
        instead of `max_retries` times, waiting out any Retry-After that ends before it.
        """
        attempt = 0
        while True:
            error: ClientError
            api_error: ApiError | None = None
            request = build()
            try:
                response = self._http.send(request, stream=stream)
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                error, again = _transport_error(request, exc), True
            except httpx.TransportError as exc:
                error, again = _transport_error(request, exc), replayable
            else:
                if response.is_success:
                    return response
                response.read()
                response.close()
                api_error = error = _api_error(response)
                again = self.retry.retries_error(api_error) and (
                    replayable or api_error.status == 429
                )
            wait = self._wait(error, api_error, attempt, again, deadline)
            if wait is None:
                raise error
            self.sleep(wait)
            attempt += 1

    def _wait(
        self,
        error: ClientError,
        api_error: ApiError | None,
        attempt: int,
        again: bool,
        deadline: float | None,
    ) -> float | None:
        if not again:
            return None
        if deadline is None:
            if attempt >= self.retry.max_retries:
                return None
            return self.retry.wait_for(api_error, attempt, self.rng)
        left = deadline - self.clock()
        if api_error is not None and api_error.retry_after is not None:
            return api_error.retry_after if api_error.retry_after <= left else None
        wait = self.retry.backoff(min(attempt, 16), self.rng)
        return min(wait, left) if left > 0 else None


def _transport_error(request: httpx.Request, exc: httpx.TransportError) -> TransportError:
    kind = type(exc).__name__
    detail = str(exc) or kind
    error = TransportError(f"{request.method} {request.url.copy_with(query=None)}: {detail}")
    error.__cause__ = exc
    return error


def _api_error(response: httpx.Response) -> ApiError:
    return error_from_response(
        response.status_code,
        response.content,
        request_id=response.headers.get("x-request-id"),
        retry_after=parse_retry_after(response.headers.get("retry-after")),
    )
