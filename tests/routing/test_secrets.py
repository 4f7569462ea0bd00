"""Which upstream credentials the router masks, and how a provider error is scrubbed: the
adapters report what they hold and obtain (`providers.secrets.SecretSink`), one scrubber reads
every provider's sink."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from gateway.config.loader import load_config
from gateway.routing.resolver import Router
from gateway.routing.secrets import MASK, Scrubber, sinks_of
from providers.errors import ProviderError, UpstreamRejectedRequest
from providers.registry import spec_for
from providers.secrets import SecretSink

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


def _with_providers(config_path: Path, check: Any) -> None:
    """`check(router, providers)` with the file's providers built (inside a loop), closed after."""

    async def scenario() -> None:
        config = load_config(config_path)
        providers = {
            name: spec_for(entry.kind).create(name, entry.options)
            for name, entry in config.providers.items()
        }
        try:
            check(Router(config, providers), providers)
        finally:
            for provider in providers.values():
                await provider.close()

    asyncio.run(scenario())


def test_every_credential_a_provider_sends_is_reported(config_path: Path) -> None:
    def check(router: Router, providers: dict[str, Any]) -> None:
        found = set().union(*(sink.values() for sink in sinks_of(providers.values())))
        assert found == {
            "sk-from-the-file-123456",
            "Bearer tok-from-a-header-9876",
            "tok-from-a-header-9876",
            "sk-ant-from-the-env-5555",
        }  # "org" is too short to be a credential, and masking it would garble words

    _with_providers(config_path, check)


def test_a_provider_error_is_scrubbed_in_place(config_path: Path) -> None:
    def check(router: Router, providers: dict[str, Any]) -> None:
        error = UpstreamRejectedRequest(
            "bad key sk-from-the-file-123456; header Bearer tok-from-a-header-9876;"
            " other sk-ant-from-the-env-5555",
            upstream_status=400,
        )
        router.route_of("m").scrub(error)
        assert error.message == f"bad key {MASK}; header {MASK}; other {MASK}"
        assert str(error) == error.message and error.upstream_status == 400
        untouched = ValueError("sk-from-the-file-123456")
        router.scrubber.error(untouched)  # only provider errors carry upstream text
        assert "sk-from" in str(untouched)

    _with_providers(config_path, check)


def test_credentials_obtained_after_start_are_masked_and_stay_bounded() -> None:
    """A token fetched after the scrubber was built is masked at once; the one it replaced
    too (a call that left with it may fail later), the one before that no longer."""
    sink = SecretSink()
    scrubber = Scrubber(sinks=[sink])
    assert scrubber.text("ya29.token-one") == "ya29.token-one"
    sink.renewed("access_token", "ya29.token-one")
    assert scrubber.text("Bearer ya29.token-one") == f"Bearer {MASK}"
    sink.renewed("access_token", "ya29.token-two")
    sink.renewed("access_token", "ya29.token-three")
    assert scrubber.text("ya29.token-three ya29.token-two ya29.token-one") == (
        f"{MASK} {MASK} ya29.token-one"
    )
    version = sink.version
    sink.renewed("access_token", "ya29.token-three")  # the same again: nothing changes
    assert sink.version == version


def test_the_pattern_is_rebuilt_only_when_a_sink_changes() -> None:
    sink = SecretSink()
    sink.hold("client-secret-value")
    scrubber = Scrubber(sinks=[sink])
    scrubber.text("x")
    built = scrubber._pattern
    scrubber.text("client-secret-value")
    assert scrubber._pattern is built
    sink.renewed("aws", "AKIDROTATED0001", "aws-secret-key-0001", "session-token-0001")
    assert scrubber.text("AKIDROTATED0001") == MASK
    assert scrubber._pattern is not built
    scrubber.forget([sink])
    assert scrubber.text("client-secret-value") == "client-secret-value"


def test_an_empty_scrubber_changes_nothing() -> None:
    error = ProviderError("nothing secret here")
    Scrubber().error(error)
    assert error.message == "nothing secret here"
    assert Scrubber(["abcdefgh", "abcdefghijk"]).text("xabcdefghijkx") == f"x{MASK}x"
