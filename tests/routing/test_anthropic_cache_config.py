"""`cache_control` in an Anthropic provider's table: a per-model opt-in checked where the
routing file is loaded, so `gateway config check` names a bad value."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.config.loader import ConfigError, load_config

ROUTING = """
[providers.claude]
kind = "anthropic"
api_key = "sk-ant-test-key"
cache_control = {{ "claude-sonnet-4-5" = {value} }}

[[models]]
id = "sonnet"
provider = "claude"
upstream_model = "claude-sonnet-4-5"
capability = "chat"

[tenants.default]
"""


@pytest.mark.parametrize("value", ['"5m"', '"1h"'])
def test_a_lifetime_opts_the_model_in(tmp_path: Path, value: str) -> None:
    path = tmp_path / "gateway.toml"
    path.write_text(ROUTING.format(value=value))
    options = load_config(path).providers["claude"].options
    assert options.cache_ttl("claude-sonnet-4-5") == value.strip('"')  # type: ignore[attr-defined]
    assert options.cache_ttl("claude-haiku-4-5") is None  # type: ignore[attr-defined]


@pytest.mark.parametrize("value", ['"10m"', "true", '"ephemeral"'])
def test_a_bad_value_is_named(tmp_path: Path, value: str) -> None:
    path = tmp_path / "gateway.toml"
    path.write_text(ROUTING.format(value=value))
    with pytest.raises(ConfigError) as refused:
        load_config(path)
    assert "providers.claude.cache_control" in str(refused.value)
