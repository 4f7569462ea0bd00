"""Choosing the blob store from one setting, `GATEWAY_ARTIFACTS_URL`.

    (empty)                       LocalBlobStore in the default folder (data_dir/artifacts)
    file:///srv/artifacts         LocalBlobStore in /srv/artifacts (file:relative/dir also works)
    s3://BUCKET[/PREFIX][?endpoint=URL&region=R&addressing=path|virtual|auto
                         &access_key=K&secret_key=S]
                                  S3BlobStore: objects `PREFIX/<key>` in BUCKET

`endpoint` names an S3-compatible server (MinIO, moto, R2...); without it, AWS itself.
`addressing` defaults to `path` with an endpoint (what most compatible servers need), `auto`
without. Credentials come from the standard AWS chain (AWS_ACCESS_KEY_ID and
AWS_SECRET_ACCESS_KEY, a profile, an instance role); `access_key`/`secret_key` in the URL
are for tests and local setups, never production (the URL ends up in process listings).
The bucket must exist: the gateway checks it at start and never creates it.

A mistake in the URL is a `ValueError` naming it, so start-up can refuse it before serving.
Stores that hold connections open and close through `open_blob_store`/`close_blob_store`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Protocol, runtime_checkable
from urllib.parse import parse_qsl, urlencode, urlsplit

from gateway.artifacts.blobs import BlobStore, LocalBlobStore

__all__ = ["blob_store_from_url", "close_blob_store", "open_blob_store", "redact_url"]

_PARAMS = frozenset({"endpoint", "region", "addressing", "access_key", "secret_key"})
_ADDRESSING = ("path", "virtual", "auto")
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")


@runtime_checkable
class _Lifecycle(Protocol):
    async def open(self) -> None: ...
    async def close(self) -> None: ...


def blob_store_from_url(url: str, default_dir: Path) -> BlobStore:
    """The store `url` names (not yet open); ValueError for a URL it cannot use."""
    if not url:
        return LocalBlobStore(default_dir)
    parts = urlsplit(url)
    if parts.scheme == "file":
        if parts.netloc not in ("", "localhost") or not parts.path or parts.query:
            raise ValueError(f"expected file:///absolute/path or file:relative/path, got {url!r}")
        return LocalBlobStore(Path(parts.path))
    if parts.scheme != "s3":
        raise ValueError(f"expected an s3:// or file:// URL, got {redact_url(url)!r}")
    if not _BUCKET.fullmatch(parts.netloc):
        raise ValueError(
            "an s3:// URL needs a bucket name (3-63 of a-z 0-9 . -): s3://BUCKET/PREFIX"
        )
    params = dict(parse_qsl(parts.query, keep_blank_values=True, strict_parsing=False))
    unknown = sorted(set(params) - _PARAMS)
    if unknown:
        raise ValueError(f"unknown s3:// URL parameter(s) {', '.join(unknown)}")
    endpoint = params.get("endpoint") or None
    if endpoint is not None and urlsplit(endpoint).scheme not in ("http", "https"):
        raise ValueError(f"endpoint must be an http:// or https:// URL, got {endpoint!r}")
    addressing = params.get("addressing") or ("path" if endpoint else "auto")
    if addressing not in _ADDRESSING:
        raise ValueError(f"addressing must be one of {', '.join(_ADDRESSING)}")
    if bool(params.get("access_key")) != bool(params.get("secret_key")):
        raise ValueError("give both access_key and secret_key, or neither")
    # Here, not at the top: a gateway on a local folder never loads botocore (~0.1 s).
    from gateway.artifacts.s3 import S3BlobStore
    from gateway.artifacts.s3_client import S3Options

    options = S3Options(
        endpoint_url=endpoint,
        region=params.get("region") or None,
        access_key=params.get("access_key") or None,
        secret_key=params.get("secret_key") or None,
        addressing=addressing,
    )
    return S3BlobStore(parts.netloc, prefix=parts.path, options=options)


def redact_url(url: str) -> str:
    """`url` fit for logs and start-up output: any secret_key replaced by `***`."""
    parts = urlsplit(url)
    if "secret_key" not in parts.query:
        return url
    params = [
        (name, "***" if name == "secret_key" else value)
        for name, value in parse_qsl(parts.query, keep_blank_values=True)
    ]
    return parts._replace(query=urlencode(params, safe="*:/")).geturl()


async def open_blob_store(store: BlobStore) -> None:
    """Open a store that holds connections (S3; `BucketUnusable` if its bucket cannot be
    used); nothing for a local folder."""
    if isinstance(store, _Lifecycle):
        await store.open()


async def close_blob_store(store: BlobStore) -> None:
    if isinstance(store, _Lifecycle):
        await store.close()
