"""The routing file's tables of the cloud and self-hosted upstreams (Azure OpenAI, Bedrock,
Vertex AI, OpenAI-compatible servers): each kind's required settings and its credentials are
checked where the file is loaded, one problem per line naming the file and the field, so
`gateway config check` says everything that is wrong at once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gateway.config.loader import ConfigError, load_config
from tests.fakes.vertex_upstream import ServiceAccountKey

ROOT = Path(__file__).resolve().parents[2]

MODELS = """
[[models]]
id = "{name}-chat"
provider = "{name}"
upstream_model = "m"
capability = "chat"
pricing = {{ input_usd_per_mtok = 1, output_usd_per_mtok = 2 }}
"""


def _file(tmp_path: Path, providers: str, *names: str) -> Path:
    text = providers + "".join(MODELS.format(name=name) for name in names) + "\n[tenants.default]\n"
    path = tmp_path / "gateway.toml"
    path.write_text(text)
    return path


def _problems(path: Path) -> list[str]:
    with pytest.raises(ConfigError) as refused:
        load_config(path)
    return [str(problem) for problem in refused.value.problems]


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    for name in list(os.environ):
        if name.startswith(("AWS_", "GOOGLE_", "AZURE_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return monkeypatch


def test_every_kind_is_loaded_with_its_settings(
    tmp_path: Path, clean_env: pytest.MonkeyPatch
) -> None:
    key = tmp_path / "sa.json"
    key.write_text(json.dumps(ServiceAccountKey.generate().info()))
    clean_env.setenv("AZURE_KEY", "azure-key-value")
    clean_env.setenv("AWS_ACCESS_KEY_ID", "AKIDCONFIG")
    clean_env.setenv("AWS_SECRET_ACCESS_KEY", "config-secret")
    path = _file(
        tmp_path,
        f"""
[providers.azure]
kind = "azure_openai"
base_url = "https://contoso.openai.azure.com"
api_version = "2024-10-21"
api_key_env = "AZURE_KEY"

[providers.bedrock]
kind = "bedrock"
region = "us-east-1"
cache_points = ["*"]

[providers.vertex]
kind = "vertex"
project = "my-project"
location = "us-central1"
credentials_file = "{key}"

[providers.local]
kind = "openai_compatible"
base_url = "http://localhost:11434/v1"
stream_options = false
max_tokens_field = "max_tokens"
""",
        "azure",
        "bedrock",
        "vertex",
        "local",
    )
    config = load_config(path)
    assert {name: entry.kind for name, entry in config.providers.items()} == {
        "azure": "azure_openai",
        "bedrock": "bedrock",
        "vertex": "vertex",
        "local": "openai_compatible",
    }


def test_required_settings_are_named(tmp_path: Path, clean_env: pytest.MonkeyPatch) -> None:
    path = _file(
        tmp_path,
        """
[providers.azure]
kind = "azure_openai"
api_key = "k"
api_version = "2024-10-21"

[providers.bedrock]
kind = "bedrock"

[providers.vertex]
kind = "vertex"
location = "us-central1"

[providers.local]
kind = "openai_compatible"
""",
    )
    assert _problems(path) == [
        f"{path}: providers.azure.base_url: this field is required",
        f"{path}: providers.bedrock.region: this field is required",
        f"{path}: providers.vertex.project: this field is required",
        f"{path}: providers.local.base_url: this field is required",
    ]


def test_every_credential_problem_is_its_own_line(
    tmp_path: Path, clean_env: pytest.MonkeyPatch
) -> None:
    bad_json = tmp_path / "not-json.json"
    bad_json.write_text("{ not json")
    bad_key = tmp_path / "bad-key.json"
    bad_key.write_text(
        json.dumps({"type": "service_account", "client_email": "a@b", "private_key": "nope"})
    )
    clean_env.setenv("AWS_ACCESS_KEY_ID", "AKIDONLY")
    clean_env.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "missing-credentials"))
    path = _file(
        tmp_path,
        f"""
[providers.azure]
kind = "azure_openai"
base_url = "https://contoso.openai.azure.com"
entra = {{ tenant_id = "t", client_secret_env = "AZURE_UNSET_SECRET" }}

[providers.bedrock]
kind = "bedrock"
region = "eu-west-1"
profile = "gateway"

[providers.vertex_a]
kind = "vertex"
project = "p-1"
location = "us-central1"
credentials_file = "{bad_json}"

[providers.vertex_b]
kind = "vertex"
project = "p-1"
location = "europe-west4"
credentials_file = "{bad_key}"

[providers.vertex_c]
kind = "vertex"
project = "p-1"
location = "global"
credentials_file = "{tmp_path / "absent.json"}"
""",
        "azure",
    )
    problems = _problems(path)
    assert problems[:4] == [
        f"{path}: providers.azure.api_version: "
        'required with api = "deployments" (e.g. "2024-10-21")',
        f"{path}: providers.azure.entra.client_secret_env: "
        "environment variable 'AZURE_UNSET_SECRET' is not set",
        f"{path}: providers.azure.entra.client_id: required with client_secret_env",
        f"{path}: providers.bedrock.profile: "
        "environment variable 'AWS_SECRET_ACCESS_KEY' is not set",
    ]
    assert problems[4] == (
        f"{path}: providers.bedrock.profile: AWS_SHARED_CREDENTIALS_FILE names "
        f"'{tmp_path / 'missing-credentials'}', which does not exist"
    )
    assert problems[5] == (
        f"{path}: providers.bedrock.profile: "
        "no profile 'gateway' in the AWS credentials or config files"
    )
    assert problems[6].startswith(
        f"{path}: providers.vertex_a.credentials_file: '{bad_json}' is not JSON"
    )
    assert problems[7].startswith(
        f"{path}: providers.vertex_b.credentials_file: the private_key of '{bad_key}' does not load"
    )
    assert problems[8] == (
        f"{path}: providers.vertex_c.credentials_file: cannot read '{tmp_path / 'absent.json'}': "
        "No such file or directory"
    )
    assert len(problems) == 9


def test_application_default_credentials_are_checked_too(
    tmp_path: Path, clean_env: pytest.MonkeyPatch
) -> None:
    adc = tmp_path / "adc.json"
    adc.write_text(json.dumps({"type": "external_account", "audience": "x"}))
    clean_env.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(adc))
    path = _file(
        tmp_path, '[providers.v]\nkind = "vertex"\nproject = "p-1"\nlocation = "us-east5"\n'
    )
    assert _problems(path) == [
        f"{path}: providers.v.credentials_file (GOOGLE_APPLICATION_CREDENTIALS): '{adc}' holds "
        "credentials of type 'external_account'; use a service_account key or authorized_user "
        "credentials"
    ]


def test_a_profile_in_the_config_file_is_found(
    tmp_path: Path, clean_env: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "aws-config"
    config.write_text("[profile ops]\nrole_arn = arn:aws:iam::123456789012:role/gateway\n")
    clean_env.setenv("AWS_CONFIG_FILE", str(config))
    path = _file(
        tmp_path, '[providers.b]\nkind = "bedrock"\nregion = "us-west-2"\nprofile = "ops"\n', "b"
    )
    assert load_config(path).providers["b"].kind == "bedrock"


def test_gateway_config_check_prints_one_line_each(
    tmp_path: Path, clean_env: pytest.MonkeyPatch
) -> None:
    path = _file(
        tmp_path,
        """
[providers.b]
kind = "bedrock"
region = "us-east-1"
profile = "nobody"

[providers.a]
kind = "azure_openai"
base_url = "https://contoso.openai.azure.com"
api_key_env = "AZURE_NOT_SET_FOR_CHECK"
""",
    )
    env = {**os.environ, "GATEWAY_DATA_DIR": str(tmp_path / "data")}
    env.pop("GATEWAY_STORE_URL", None)
    result = subprocess.run(
        [sys.executable, "-m", "gateway.app.cli", "config", "check", "--config", str(path)],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"gateway: config error: {path}: providers.b.profile: "
        "no profile 'nobody' in the AWS credentials or config files",
        f"gateway: config error: {path}: providers.a.api_key_env: environment variable "
        "'AZURE_NOT_SET_FOR_CHECK' is not set: set it, or give api_key",
        f"gateway: config error: {path}: providers.a.api_version: "
        'required with api = "deployments" (e.g. "2024-10-21")',
    ]
