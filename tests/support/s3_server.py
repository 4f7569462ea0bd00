"""A private S3-compatible server (moto in server mode) that tests start, stop and restart.

A real process on a free port, spoken to over HTTP by the real client: nothing in the client
is mocked. moto keeps everything in memory, so a stopped server comes back empty. It accepts
any credentials; `ACCESS_KEY`/`SECRET_KEY` are what the tests pass.

`s3_server_or_skip` is the fixture body: without moto, or when it will not start, S3 tests
skip locally and fail on CI (`CI=true`), where a missing server is a bug (as for Redis).
"""

from __future__ import annotations

import http.client
import importlib.util
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from xml.etree import ElementTree

import pytest

from tests.support.ports import free_port
from tests.support.waiting import answers_or_exits

__all__ = ["ACCESS_KEY", "REGION", "SECRET_KEY", "S3Server", "s3_server_or_skip"]

ACCESS_KEY = "test-access-key"
SECRET_KEY = "test-secret-key"
REGION = "us-east-1"
_NS = "{http://s3.amazonaws.com/doc/2006-03-01/}"


class S3Server:
    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def artifacts_url(self, bucket: str, prefix: str = "") -> str:
        """A GATEWAY_ARTIFACTS_URL for `bucket` on this server, credentials included."""
        path = f"/{prefix}" if prefix else ""
        return (
            f"s3://{bucket}{path}?endpoint={self.endpoint}&region={REGION}"
            f"&access_key={ACCESS_KEY}&secret_key={SECRET_KEY}"
        )

    def start(self, timeout: float = 30.0) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        log = (self.workdir / f"moto-{self.port}.log").open("ab")
        args = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)]
        with log:
            self.process = subprocess.Popen(
                args, cwd=self.workdir, stdout=log, stderr=subprocess.STDOUT
            )
        if answers_or_exits(self.process, self._answers, timeout):
            return
        self.stop()
        raise RuntimeError(f"moto did not answer on port {self.port} within {timeout:g} s")

    def _answers(self) -> bool:
        try:
            return self._request("GET", "/moto-api/")[0] == 200
        except OSError:
            return False

    def _request(self, method: str, path: str) -> tuple[int, bytes, http.client.HTTPMessage]:
        """One unsigned request (moto does not check signatures): what tests look at directly."""
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            connection.request(method, path)
            response = connection.getresponse()
            return response.status, response.read(), response.headers
        finally:
            connection.close()

    def create_bucket(self, name: str | None = None) -> str:
        """A new bucket; a unique name unless one is given."""
        bucket = name or f"test-{uuid.uuid4().hex[:20]}"
        status, body, _ = self._request("PUT", f"/{bucket}")
        if status != 200:
            raise RuntimeError(f"could not create bucket {bucket}: HTTP {status} {body!r}")
        return bucket

    def keys(self, bucket: str) -> list[str]:
        """Every visible object in `bucket` (up to 1000)."""
        return self._list(f"/{bucket}?list-type=2", "Contents")

    def pending_uploads(self, bucket: str) -> list[str]:
        """Keys of multipart uploads started and not aborted.

        moto keeps listing an upload after it completed, so only meaningful where none did.
        """
        return self._list(f"/{bucket}?uploads", "Upload")

    def etag(self, bucket: str, key: str) -> str:
        """The object's ETag, from the listing (moto refuses unsigned reads of objects);
        a multipart object's ends in `-<number of parts>`."""
        status, body, _ = self._request("GET", f"/{bucket}?list-type=2&prefix={key}")
        assert status == 200, f"listing {bucket}: {status} {body!r}"
        for item in ElementTree.fromstring(body).iter(f"{_NS}Contents"):
            if item.findtext(f"{_NS}Key") == key:
                return (item.findtext(f"{_NS}ETag") or "").strip('"')
        raise AssertionError(f"no object {key} in {bucket}")

    def _list(self, path: str, element: str) -> list[str]:
        status, body, _ = self._request("GET", path)
        assert status == 200, f"GET {path}: {status} {body!r}"
        root = ElementTree.fromstring(body)
        return sorted(
            key.text or ""
            for item in root.iter(f"{_NS}{element}")
            for key in item.iter(f"{_NS}Key")
        )

    def stop(self) -> None:
        proc, self.process = self.process, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextmanager
def s3_server_or_skip(workdir: Path) -> Iterator[S3Server]:
    """A started server for the `with` block; skips (locally) or fails (CI) when there is none."""
    on_ci = os.environ.get("CI", "").lower() == "true"
    reason = ""
    if importlib.util.find_spec("moto") is None:
        reason = "moto is not installed (pip install 'moto[server]')"
    else:
        server = S3Server(workdir)
        try:
            server.start()
        except (OSError, RuntimeError) as exc:
            reason = f"could not start moto: {exc}"
    if reason:
        if on_ci:
            pytest.fail(f"an S3 server is required on CI: {reason}")
        pytest.skip(f"no S3 server: {reason}")
    try:
        yield server
    finally:
        server.stop()
