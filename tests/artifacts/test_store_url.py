"""`blob_store_from_url`: the GATEWAY_ARTIFACTS_URL forms, and the mistakes it refuses."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.artifacts.blobs import LocalBlobStore
from gateway.artifacts.s3 import S3BlobStore
from gateway.artifacts.s3_client import S3Options
from gateway.artifacts.store_url import (
    blob_store_from_url,
    close_blob_store,
    open_blob_store,
    redact_url,
)
from tests.artifacts.conftest import Run


def test_empty_and_file_urls_are_local_folders(tmp_path: Path, run: Run) -> None:
    default = blob_store_from_url("", tmp_path)
    assert isinstance(default, LocalBlobStore) and default.root == tmp_path
    absolute = blob_store_from_url("file:///srv/artifacts", tmp_path)
    assert isinstance(absolute, LocalBlobStore) and absolute.root == Path("/srv/artifacts")
    relative = blob_store_from_url("file:data/blobs", tmp_path)
    assert isinstance(relative, LocalBlobStore) and relative.root == Path("data/blobs")
    run(open_blob_store(default))  # nothing to open or close for a folder
    run(close_blob_store(default))


def test_an_s3_url_names_bucket_prefix_and_connection() -> None:
    url = (
        "s3://gw-artifacts/prod/blobs/?endpoint=http://127.0.0.1:9000&region=eu-west-1"
        "&access_key=AK&secret_key=SK"
    )
    store = blob_store_from_url(url, Path("unused"))
    assert isinstance(store, S3BlobStore)
    assert (store.bucket, store.prefix) == ("gw-artifacts", "prod/blobs")
    assert store.options == S3Options(
        endpoint_url="http://127.0.0.1:9000",
        region="eu-west-1",
        access_key="AK",
        secret_key="SK",
        addressing="path",  # the default with an endpoint: what compatible servers need
    )
    assert "SK" not in repr(store)


def test_a_bare_s3_url_is_aws_with_the_standard_credentials() -> None:
    store = blob_store_from_url("s3://gw-artifacts", Path("unused"))
    assert isinstance(store, S3BlobStore)
    assert (store.bucket, store.prefix) == ("gw-artifacts", "")
    assert store.options == S3Options(addressing="auto")  # keys from AWS_* variables


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("redis://localhost/0", "expected an s3:// or file:// URL"),
        ("s3:///prefix", "needs a bucket"),
        ("s3://AK:SK@bucket/p", "needs a bucket name"),
        ("s3://My_Bucket", "needs a bucket name"),
        ("s3://bkt?endpoint=http://h:9000&acces_key=x", "unknown s3:// URL parameter(s) acces_key"),
        ("s3://bkt?endpoint=127.0.0.1:9000", "endpoint must be an http:// or https:// URL"),
        ("s3://bkt?addressing=dns", "addressing must be one of path, virtual, auto"),
        ("s3://bkt?access_key=AK", "give both access_key and secret_key"),
        ("file://host/srv", "expected file:///absolute/path"),
        ("file:", "expected file:///absolute/path"),
    ],
)
def test_mistakes_are_refused_by_name(url: str, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        blob_store_from_url(url, Path("unused"))
    assert message in str(caught.value)


def test_redact_hides_only_the_secret() -> None:
    url = "s3://bkt/p?endpoint=http://127.0.0.1:9000&access_key=AK&secret_key=S%2FK"
    assert (
        redact_url(url) == "s3://bkt/p?endpoint=http://127.0.0.1:9000&access_key=AK&secret_key=***"
    )
    assert redact_url("s3://bkt?region=us-east-1") == "s3://bkt?region=us-east-1"
    with pytest.raises(ValueError) as caught:
        blob_store_from_url("ftp://u:pw@h/?secret_key=hunter2", Path("unused"))
    assert "hunter2" not in str(caught.value)
