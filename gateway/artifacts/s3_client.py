"""The S3 wire side for `S3BlobStore`: the client it uses, typed, and the one error mapping.

aiobotocore ships no type hints, so the few client methods the store calls are a Protocol
here and nothing else in the gateway imports aiobotocore or botocore.

`s3_errors` translates failures at the boundary, like httpx's `map_httpcore_exceptions`:

    botocore ClientError NoSuchKey / 404          -> BlobNotFound     404 not_found
    ClientError refused (403, NoSuchBucket, bad
      credentials, clock skew), 429, 5xx, SlowDown -> StoreUnavailable 503 (retryable)
    connection refused, DNS, timeouts, a broken
      response stream, no credentials              -> StoreUnavailable 503 (retryable)
    anything else (a bad parameter: our bug)       -> passes through unchanged (500)
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Protocol

import aiohttp
from aiobotocore.config import AioConfig  # type: ignore[import-untyped]
from aiobotocore.session import AioSession  # type: ignore[import-untyped]
from botocore import exceptions as boto  # type: ignore[import-untyped]

from gateway.artifacts.errors import BlobNotFound
from gateway.errors import StoreUnavailable

__all__ = ["S3Body", "S3Client", "S3Options", "open_client", "s3_errors"]

UNAVAILABLE = "The artifact storage is unavailable; retry shortly."
_MISSING = frozenset({"NoSuchKey", "NotFound", "404"})
_REFUSED = frozenset(
    {"AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "NoSuchBucket",
     "ExpiredToken", "RequestTimeTooSkewed", "SlowDown", "RequestTimeout", "403"}
)  # fmt: skip
_TRANSPORT = (
    boto.ConnectionError,  # refused, DNS, connect timeout, TLS
    boto.HTTPClientError,  # closed mid-way, read timeout, broken response stream
    boto.IncompleteReadError,
    boto.NoCredentialsError,
    boto.PartialCredentialsError,
    boto.CredentialRetrievalError,
    aiohttp.ClientError,
    TimeoutError,
)


class S3Body(Protocol):
    """A GetObject body: read in pieces, close to give the connection back."""

    async def read(self, amt: int | None = None) -> bytes: ...

    def close(self) -> None: ...


class S3Client(Protocol):
    """The slice of the aiobotocore S3 client the store calls (keyword arguments as in boto3)."""

    async def head_bucket(self, **params: Any) -> dict[str, Any]: ...
    async def head_object(self, **params: Any) -> dict[str, Any]: ...
    async def get_object(self, **params: Any) -> dict[str, Any]: ...
    async def put_object(self, **params: Any) -> dict[str, Any]: ...
    async def delete_object(self, **params: Any) -> dict[str, Any]: ...
    async def create_multipart_upload(self, **params: Any) -> dict[str, Any]: ...
    async def upload_part(self, **params: Any) -> dict[str, Any]: ...
    async def complete_multipart_upload(self, **params: Any) -> dict[str, Any]: ...
    async def abort_multipart_upload(self, **params: Any) -> dict[str, Any]: ...


class _S3Errors:
    """Stateless and reentrant: one instance, entered around every client call."""

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if exc is None:
            return
        if isinstance(exc, boto.ClientError):
            code = str(exc.response.get("Error", {}).get("Code", ""))
            status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))
            if code in _MISSING:
                raise BlobNotFound() from exc
            if code in _REFUSED or status >= 500 or status == 429:
                raise StoreUnavailable(UNAVAILABLE) from exc
        elif isinstance(exc, _TRANSPORT):
            raise StoreUnavailable(UNAVAILABLE) from exc


s3_errors = _S3Errors()
"""`with s3_errors:` around a call into the client."""


@dataclass(frozen=True, slots=True, kw_only=True)
class S3Options:
    """Where and how to connect. Credentials left None come from botocore's chain
    (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, a profile, an instance role)."""

    endpoint_url: str | None = None
    """None: AWS itself; else an S3-compatible server such as http://127.0.0.1:9000."""
    region: str | None = None
    access_key: str | None = None
    secret_key: str | None = None
    addressing: str = "auto"
    """`path` for most S3-compatible servers, `virtual` or `auto` for AWS."""
    max_attempts: int = 3
    connect_timeout: float = 5.0
    read_timeout: float = 60.0
    max_connections: int = 64

    def __repr__(self) -> str:  # never the secret
        return f"S3Options(endpoint_url={self.endpoint_url!r}, region={self.region!r})"


def open_client(options: S3Options) -> AbstractAsyncContextManager[S3Client]:
    """A client as an async context manager: it owns an aiohttp session until exit."""
    config = AioConfig(
        s3={"addressing_style": options.addressing},
        retries={"max_attempts": options.max_attempts, "mode": "standard"},
        connect_timeout=options.connect_timeout,
        read_timeout=options.read_timeout,
        max_pool_connections=options.max_connections,
        # Many S3-compatible servers reject the CRC32 checksums botocore would otherwise
        # add to every upload; the store computes sha256 itself.
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
    )
    context: AbstractAsyncContextManager[S3Client] = AioSession().create_client(
        "s3",
        endpoint_url=options.endpoint_url,
        region_name=options.region,
        aws_access_key_id=options.access_key,
        aws_secret_access_key=options.secret_key,
        config=config,
    )
    return context
