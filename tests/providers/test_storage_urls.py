"""Storage URLs a request may name: a prefix ends at a bucket or folder boundary, and no
spelling of a URL (case, `..`, percent-encoding) reaches an object outside it."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from providers.storage_urls import (
    StorageUrlRefused,
    allowed_storage_url,
    google_storage_url,
    storage_prefix,
)

_BUCKET = st.from_regex(r"[a-z0-9][a-z0-9-]{1,20}[a-z0-9]", fullmatch=True)
_SEGMENT = st.from_regex(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,10}", fullmatch=True).filter(
    lambda s: s not in (".", "..")
)
_KEY = st.lists(_SEGMENT, min_size=1, max_size=4).map("/".join)


@given(bucket=_BUCKET, suffix=st.from_regex(r"[a-z0-9._-]{1,8}", fullmatch=True), key=_KEY)
def test_a_bucket_prefix_allows_its_bucket_and_never_a_longer_name(
    bucket: str, suffix: str, key: str
) -> None:
    prefixes = (storage_prefix(f"s3://{bucket}", "s3"),)
    assert str(allowed_storage_url(f"s3://{bucket}/{key}", "s3", prefixes)) == (
        f"s3://{bucket}/{key}"
    )
    with pytest.raises(StorageUrlRefused):
        allowed_storage_url(f"s3://{bucket}{suffix}/{key}", "s3", prefixes)


@given(bucket=_BUCKET, folder=_SEGMENT, suffix=_SEGMENT, key=_KEY)
def test_a_folder_prefix_never_allows_a_sibling_or_an_escape(
    bucket: str, folder: str, suffix: str, key: str
) -> None:
    prefixes = (storage_prefix(f"gs://{bucket}/{folder}", "gs"),)
    allowed_storage_url(f"GS://{bucket.upper()}/{folder}/{key}", "gs", prefixes)
    for url in (
        f"gs://{bucket}/{folder}{suffix}/{key}",
        f"gs://{bucket}/{folder}/../{key}",
        f"gs://{bucket}/{folder}/./{key}",
        f"gs://{bucket}/{folder}//{key}",
        f"gs://{bucket}/{folder}/%2e%2e/{key}",
        f"gs://{bucket}/{folder}%2f..%2f{key}",
        f"gs://{bucket}/{folder}\\..\\{key}",
        f"gs://{bucket}/{folder}/{key}?generation=1",
        f"gs://{bucket}/{folder}/{key}#x",
        f"gs://{bucket}/{folder}/\u2024\u2024/{key}",
    ):
        with pytest.raises(StorageUrlRefused):
            allowed_storage_url(url, "gs", prefixes)


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("s3://team-bucket", "s3://team-bucket/"),
        ("S3://Team-Bucket/shared", "s3://team-bucket/shared/"),
        ("s3://team-bucket/shared/", "s3://team-bucket/shared/"),
        ("s3://team-bucket/a/b//", "s3://team-bucket/a/b/"),
    ],
)
def test_prefixes_are_read_in_canonical_form(text: str, canonical: str) -> None:
    assert storage_prefix(text, "s3") == canonical


@pytest.mark.parametrize(
    "text", ["gs://b/", "s3://", "s3:///x/", "s3://b_/", "s3://team/../x", "s3://team/%2e/"]
)
def test_a_prefix_that_names_no_folder_plainly_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        storage_prefix(text, "s3")


@pytest.mark.parametrize(
    ("url", "named"),
    [
        ("https://storage.googleapis.com/b-1/k/x.png", "gs://b-1/k/x.png"),
        ("https://b-1.storage.googleapis.com/k/x.png", "gs://b-1/k/x.png"),
        ("https://storage.cloud.google.com/b-1/k/x.png?authuser=1", "gs://b-1/k/x.png"),
        ("https://STORAGE.googleapis.com./b-1/k%20x.png", "gs://b-1/k x.png"),
        ("https://example.com/b-1/k/x.png", None),
        ("https://www.google.com/logo.png", None),
    ],
)
def test_the_https_forms_of_a_cloud_storage_object(url: str, named: str | None) -> None:
    found = google_storage_url(url)
    assert (str(found) if found is not None else None) == named


def test_other_google_api_urls_are_refused() -> None:
    with pytest.raises(StorageUrlRefused):
        google_storage_url("https://www.googleapis.com/download/storage/v1/b/b-1/o/x?alt=media")
