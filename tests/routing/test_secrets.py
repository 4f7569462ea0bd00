"""Which upstream credentials the router masks, and how a provider error is scrubbed."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.config.loader import load_config
from gateway.routing.resolver import Router
from gateway.routing.secrets import MASK, Scrubber, provider_secrets
from providers.errors import ProviderError, UpstreamRejectedRequest

CONFIG = """
[providers.a]
kind = "openai"
base_url = "http://127.0.0.1:9/v1"
api_key = "sk-from-the-file-123456"
extra_headers = { "X-Org" = "org", "X-Token" = "Bearer tok-from-a-header-9876" }

[providers.b]
kind = "anthropic"
base_url = "http://127.0.0.1:9"
api_key_env = "B_KEY"

[providers.sim]
kind = "simulator"

[[models]]
id = "m"
provider = "a"
capability = "chat"
pricing = { input_usd_per_mtok = 1, output_usd_per_mtok = 1 }
"""


@pytest.fixture
def config_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("B_KEY", "sk-ant-from-the-env-5555")
    path = tmp_path / "gateway.toml"
    path.write_text(CONFIG)
    return path


def test_every_credential_a_provider_sends_is_a_secret(config_path: Path) -> None:
    secrets = provider_secrets(load_config(config_path), {"B_KEY": "sk-ant-from-the-env-5555"})
    assert secrets == {
        "sk-from-the-file-123456",
        "Bearer tok-from-a-header-9876",
        "tok-from-a-header-9876",
        "sk-ant-from-the-env-5555",
    }  # "org" is too short to be a credential, and masking it would garble words


def test_a_provider_error_is_scrubbed_in_place(config_path: Path) -> None:
    router = Router(load_config(config_path), {"a": object(), "b": object(), "sim": object()})
    error = UpstreamRejectedRequest(
        "bad key sk-from-the-file-123456; header Bearer tok-from-a-header-9876",
        upstream_status=400,
    )
    router.route_of("m").scrub(error)
    assert error.message == f"bad key {MASK}; header {MASK}"
    assert str(error) == error.message and error.upstream_status == 400
    untouched = ValueError("sk-from-the-file-123456")
    router.scrubber.error(untouched)  # only provider errors carry upstream text
    assert "sk-from" in str(untouched)


def test_an_empty_scrubber_changes_nothing() -> None:
    error = ProviderError("nothing secret here")
    Scrubber().error(error)
    assert error.message == "nothing secret here"
    assert Scrubber(["abcdefgh", "abcdefghijk"]).text("xabcdefghijkx") == f"x{MASK}x"
