"""What an adapter raises when the upstream does not give a usable answer, or a task stops.

    ProviderError                 the upstream failed (bad status, broken or malformed answer)
    ├── UpstreamRejectedRequest   the upstream says the request itself is invalid (4xx)
    ├── UpstreamModelFailed       the upstream ran the request and the model failed at it
    ├── UpstreamUnavailable       cannot connect, overloaded, rate limited upstream (503/429)
    ├── UpstreamTimeout           no answer, or no next chunk, in time
    └── TaskCanceled              the caller canceled a media task (not an upstream failure)

Each carries `message` and, when the upstream answered, `upstream_status` and the seconds its
`Retry-After` asked for (`retry_after`, None when it gave none). `retryable` says whether the
same request may succeed when sent again: each class has its answer (a rejection or a model
failure is not, an overload or a timeout is), and an adapter that knows the cause better
passes its own. An `UpstreamModelFailed` message is the upstream's own account of the failure,
meant for the caller (the gateway shows it, credentials masked); other messages are for logs.
`providers.status` picks the class for an HTTP status and `providers.http` for an aiohttp
exception, so every adapter fails the same way; the gateway maps these to its own envelope
codes in one place.

`TaskCanceled` is raised by the gateway's own `TaskControl.checkpoint` and passes through the
adapter unchanged; it is a ProviderError so that an adapter's cleanup for "the call stopped"
covers it too, which means a worker must test for it before treating a ProviderError as a
failure.
"""

from __future__ import annotations

__all__ = [
    "ProviderError",
    "TaskCanceled",
    "UpstreamModelFailed",
    "UpstreamRejectedRequest",
    "UpstreamTimeout",
    "UpstreamUnavailable",
]


class ProviderError(Exception):
    retryable: bool = True
    """Whether sending the same request again may succeed (the class's answer, unless the
    adapter passed its own)."""

    def __init__(
        self,
        message: str,
        *,
        upstream_status: int | None = None,
        retry_after: float | None = None,
        retryable: bool | None = None,
    ) -> None:
        self.message = message
        self.upstream_status = upstream_status
        self.retry_after = retry_after
        if retryable is not None:
            self.retryable = retryable
        super().__init__(message)


class UpstreamRejectedRequest(ProviderError):
    retryable = False
    field: str | None = None
    """The request field at fault, when the adapter refused it before sending (a storage
    URL it may not pass on): the gateway names it in its 400."""

    def __init__(
        self,
        message: str,
        *,
        field: str | None = None,
        upstream_status: int | None = None,
        retry_after: float | None = None,
        retryable: bool | None = None,
    ) -> None:
        super().__init__(
            message, upstream_status=upstream_status, retry_after=retry_after, retryable=retryable
        )
        self.field = field


class UpstreamModelFailed(ProviderError):
    """The upstream took the request and reports that the model failed at it (a job that
    ended `failed`): its own words are the message. Not retryable unless the upstream says
    the failure was passing (an interrupted job), which the adapter says with `retryable`."""

    retryable = False


class UpstreamUnavailable(ProviderError):
    pass


class UpstreamTimeout(ProviderError):
    pass


class TaskCanceled(ProviderError):
    retryable = False
