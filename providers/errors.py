"""What an adapter raises when the upstream does not give a usable answer, or a task stops.

    ProviderError                 the upstream failed (bad status, broken or malformed answer)
    ├── UpstreamRejectedRequest   the upstream says the request itself is invalid (4xx)
    ├── UpstreamUnavailable       cannot connect, overloaded, rate limited upstream (503/429)
    ├── UpstreamTimeout           no answer, or no next chunk, in time
    └── TaskCanceled              the caller canceled a media task (not an upstream failure)

Each carries `message` and, when the upstream answered, `upstream_status` and the seconds its
`Retry-After` asked for (`retry_after`, None when it gave none). `providers.status` picks the
class for an HTTP status and `providers.http` for an aiohttp exception, so every adapter fails
the same way; the gateway maps these to its own envelope codes in one place.

`TaskCanceled` is raised by the gateway's own `TaskControl.checkpoint` and passes through the
adapter unchanged; it is a ProviderError so that an adapter's cleanup for "the call stopped"
covers it too, which means a worker must test for it before treating a ProviderError as a
failure.
"""

from __future__ import annotations

__all__ = [
    "ProviderError",
    "TaskCanceled",
    "UpstreamRejectedRequest",
    "UpstreamTimeout",
    "UpstreamUnavailable",
]


class ProviderError(Exception):
    def __init__(
        self,
        message: str,
        *,
        upstream_status: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        self.message = message
        self.upstream_status = upstream_status
        self.retry_after = retry_after
        super().__init__(message)


class UpstreamRejectedRequest(ProviderError):
    pass


class UpstreamUnavailable(ProviderError):
    pass


class UpstreamTimeout(ProviderError):
    pass


class TaskCanceled(ProviderError):
    pass
