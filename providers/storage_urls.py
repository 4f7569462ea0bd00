"""Cloud-storage object URLs in a request: refused unless under a prefix the operator allowed.

An upstream that reads `s3://` (Bedrock's `s3Location`) or `gs://` (Vertex's `fileData`)
objects reads them with the gateway's own cloud identity, so a tenant naming one would read
whatever that identity can, the gateway's artifact bucket included. An adapter therefore sends
such a URL only when it lies under one of its `allowed_storage_prefixes`, and sends it in the
canonical form that was checked.

Canonical form: the scheme and the bucket in lower case (bucket names are lower case on both
clouds), then the key as given. A key must be printable ASCII without `%`, `\\`, `?`, `#`,
empty, `.` or `..` segments: nothing a reader could decode or resolve into another object. A
prefix is a bucket or a folder and always ends at a `/` (`s3://team-bucket` is
`s3://team-bucket/`), so it never matches a longer bucket or folder name (`team-bucket-evil`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import NamedTuple
from urllib.parse import unquote

__all__ = [
    "StorageUrl",
    "StorageUrlRefused",
    "allowed_storage_url",
    "google_storage_url",
    "storage_prefix",
]

_BUCKET = re.compile(r"[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]")
_KEY_CHARACTER = re.compile(r"[\x21-\x7e]")
_KEY_REFUSED = frozenset("%\\?#")
_GOOGLE_PATH_HOSTS = frozenset({"storage.googleapis.com", "storage.cloud.google.com"})


class StorageUrlRefused(ValueError):
    """The URL names a storage object that may not be read; the message says why."""


class StorageUrl(NamedTuple):
    scheme: str
    bucket: str
    key: str

    def __str__(self) -> str:
        return f"{self.scheme}://{self.bucket}/{self.key}"


def storage_prefix(text: str, scheme: str) -> str:
    """A configured prefix in canonical form, ending at a `/`; ValueError when it is not a
    `<scheme>://bucket[/folder/...]` prefix."""
    head = f"{scheme}://"
    if text[: len(head)].lower() != head:
        raise ValueError(f"{text!r} must start with {head}")
    bucket, _, folder = text[len(head) :].partition("/")
    if not _BUCKET.fullmatch(bucket.lower()):
        raise ValueError(f"{text!r} does not name a bucket")
    folder = folder.rstrip("/")
    if folder:
        _check_key(folder, what="prefix")
    return f"{head}{bucket.lower()}/" + (f"{folder}/" if folder else "")


def allowed_storage_url(url: str, scheme: str, prefixes: Sequence[str]) -> StorageUrl:
    """`url` (a `<scheme>://` URL, the scheme in any case) in canonical form when it lies under
    one of `prefixes` (canonical, from `storage_prefix`); StorageUrlRefused otherwise."""
    head = f"{scheme}://"
    if url[: len(head)].lower() != head:
        raise StorageUrlRefused(f"is not a {head} URL")
    bucket, slash, key = url[len(head) :].partition("/")
    return _allowed(StorageUrl(scheme, bucket.lower(), key if slash else ""), prefixes)


def google_storage_url(url: str) -> StorageUrl | None:
    """The `gs://` object an https URL of Cloud Storage names (`storage.googleapis.com/b/k`,
    `b.storage.googleapis.com/k`, ...), or None when the URL is not on a Google API host;
    StorageUrlRefused for a Google API URL that names no object plainly."""
    rest = url.split("://", 1)[1] if "://" in url else ""
    authority, _, path = rest.partition("/")
    host = authority.rsplit("@", 1)[-1].split(":", 1)[0].lower().rstrip(".")
    google_api = host == "googleapis.com" or host.endswith(".googleapis.com")
    if not google_api and host not in _GOOGLE_PATH_HOSTS:
        return None
    path = unquote(path.split("?", 1)[0].split("#", 1)[0])
    if host in _GOOGLE_PATH_HOSTS:
        bucket, _, key = path.partition("/")
    elif host.endswith(".storage.googleapis.com"):
        bucket, key = host.removesuffix(".storage.googleapis.com"), path
    else:
        raise StorageUrlRefused("names a Google API URL, which is not an image to fetch")
    return StorageUrl("gs", bucket.lower(), key)


def _allowed(url: StorageUrl, prefixes: Sequence[str]) -> StorageUrl:
    if not _BUCKET.fullmatch(url.bucket):
        raise StorageUrlRefused("does not name a bucket")
    _check_key(url.key, what="object key")
    canonical = str(url)
    if not any(canonical.startswith(prefix) for prefix in prefixes):
        if not prefixes:
            raise StorageUrlRefused(
                f"names a {url.scheme}:// object, which this upstream may not read for a request"
            )
        raise StorageUrlRefused(
            f"{url.scheme}://{url.bucket}/... is not under a storage prefix this upstream allows"
        )
    return url


def _check_key(key: str, *, what: str) -> None:
    if not key:
        raise StorageUrlRefused(f"names no object ({what} is empty)")
    if any(not _KEY_CHARACTER.fullmatch(c) or c in _KEY_REFUSED for c in key):
        raise StorageUrlRefused(
            f"has a character the {what} may not hold here (only printable ASCII, without % \\ ? #)"
        )
    if any(segment in ("", ".", "..") for segment in key.split("/")):
        raise StorageUrlRefused(f"has an empty, '.' or '..' segment in its {what}")
