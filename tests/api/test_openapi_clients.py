"""A client generated from the served OpenAPI document uploads and downloads files.

Client generators read bytes as `type: string, format: binary` (OpenAPI 3.1's
`contentMediaType` alone leaves the upload's `file` a string sent as text, and the content's
`image/*` answers unread). The document says both; a client made by openapi-python-client
uploads a PNG to a running gateway and downloads the same bytes back.
"""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from openapi_spec_validator import validate

from tests.support.gateway_process import ROOT, GatewayProcess, start_gateway

PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
    "0000000d49444154789c63fccfc0500f0004850180848c2cb30000000049454e44ae426082"
)
BINARY = {"type": "string", "format": "binary"}


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    config = (ROOT / "config" / "gateway.toml").read_text()
    workdir = tmp_path_factory.mktemp("gw")
    process = start_gateway(
        workdir, config, extra_env={"GATEWAY_ARTIFACTS_DIR": str(workdir / "artifacts")}
    )
    yield process
    process.stop()


@pytest.fixture(scope="module")
def document(gateway: GatewayProcess) -> dict[str, Any]:
    root = gateway.base_url.removesuffix("/v1")
    served: dict[str, Any] = httpx.get(f"{root}/openapi.json", timeout=30).json()
    validate(served)
    return served


def test_the_upload_declares_its_file_part_as_binary(document: dict[str, Any]) -> None:
    form = document["paths"]["/v1/uploads"]["post"]["requestBody"]["content"]
    schema = form["multipart/form-data"]["schema"]
    assert schema["required"] == ["file"]
    assert BINARY.items() <= schema["properties"]["file"].items()


def test_the_artifact_content_answers_binary(document: dict[str, Any]) -> None:
    operation = document["paths"]["/v1/artifacts/{artifact_id}/content"]["get"]
    for status in ("200", "206"):
        content = operation["responses"][status]["content"]
        assert next(iter(content)) == "application/octet-stream"
        for media in content.values():
            assert BINARY.items() <= media["schema"].items()


def _generator() -> Path:
    found = shutil.which("openapi-python-client", path=str(Path(sys.prefix) / "bin"))
    if found is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("openapi-python-client (a dev dependency) is required on CI")
        pytest.skip("openapi-python-client is not installed")
    return Path(found)


def test_a_generated_client_uploads_and_downloads(
    gateway: GatewayProcess, document: dict[str, Any], tmp_path: Path
) -> None:
    generator = _generator()
    source = tmp_path / "openapi.json"
    source.write_text(httpx.get(gateway.base_url.removesuffix("/v1") + "/openapi.json").text)
    package = "generated_gateway_client"
    env = {**os.environ, "PATH": f"{Path(sys.prefix) / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    made = subprocess.run(
        [
            str(generator),
            "generate",
            "--path",
            str(source),
            "--output-path",
            str(tmp_path / package),
            "--meta",
            "none",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert made.returncode == 0, made.stdout + made.stderr
    assert "Warning" not in made.stdout, made.stdout  # every operation and response was read
    sys.path.insert(0, str(tmp_path))
    try:
        client_module = importlib.import_module(f"{package}.client")
        upload = importlib.import_module(f"{package}.api.uploads.upload")
        get_content = importlib.import_module(f"{package}.api.artifacts.get_content")
        upload_body = importlib.import_module(f"{package}.models.upload_body")
        types = importlib.import_module(f"{package}.types")

        assert gateway.api_key
        client = client_module.AuthenticatedClient(
            base_url=gateway.base_url.removesuffix("/v1"), token=gateway.api_key
        )
        with client:
            file = types.File(payload=PNG, file_name="pixel.png", mime_type="image/png")
            sent = upload.sync_detailed(client=client, body=upload_body.UploadBody(file=file))
            assert sent.status_code == 201, sent.content
            artifact = sent.parsed
            assert artifact.filename == "pixel.png" and artifact.size_bytes == len(PNG)
            got = get_content.sync_detailed(client=client, artifact_id=artifact.artifact_id)
            assert got.status_code == 200
            assert got.parsed.payload.read() == PNG
    finally:
        sys.path.remove(str(tmp_path))
        for name in [m for m in sys.modules if m.startswith(package)]:
            del sys.modules[name]
