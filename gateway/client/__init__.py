"""A typed client of the gateway's task API (images, music, uploads, artifacts) and the
`gateway tasks` commands built on it.

`TaskClient` and its helpers load httpx on first use, so the `gateway` command (which builds
the `tasks` parser on every run) does not pay for it unless it talks HTTP.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from gateway.client.errors import (
    ApiError,
    AuthenticationError,
    BadRequest,
    ClientError,
    Conflict,
    DownloadError,
    ErrorDetail,
    IdempotencyKeyReused,
    InsufficientCredits,
    NotFound,
    PayloadTooLarge,
    ProtocolError,
    RateLimited,
    ServerError,
    ServiceUnavailable,
    TaskNotFinished,
    TransportError,
    UnsupportedMediaType,
    UpstreamError,
    UpstreamTimeout,
    ValidationError,
    WaitTimeout,
)
from gateway.client.models import (
    TERMINAL_STATUSES,
    Artifact,
    Billing,
    Clip,
    Image,
    Progress,
    Task,
    TaskError,
    TaskOutput,
    TaskPage,
    TaskWarning,
    Usage,
    UsageLine,
)
from gateway.client.retry import RetryPolicy

if TYPE_CHECKING:
    from gateway.client.client import ProgressCallback, Reference, TaskClient, reference

__all__ = [
    "TERMINAL_STATUSES",
    "ApiError",
    "Artifact",
    "AuthenticationError",
    "BadRequest",
    "Billing",
    "ClientError",
    "Clip",
    "Conflict",
    "DownloadError",
    "ErrorDetail",
    "IdempotencyKeyReused",
    "Image",
    "InsufficientCredits",
    "NotFound",
    "PayloadTooLarge",
    "Progress",
    "ProgressCallback",
    "ProtocolError",
    "RateLimited",
    "Reference",
    "RetryPolicy",
    "ServerError",
    "ServiceUnavailable",
    "Task",
    "TaskClient",
    "TaskError",
    "TaskNotFinished",
    "TaskOutput",
    "TaskPage",
    "TaskWarning",
    "TransportError",
    "UnsupportedMediaType",
    "UpstreamError",
    "UpstreamTimeout",
    "Usage",
    "UsageLine",
    "ValidationError",
    "WaitTimeout",
    "reference",
]

_LAZY = frozenset({"ProgressCallback", "Reference", "TaskClient", "reference"})


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module("gateway.client.client"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
