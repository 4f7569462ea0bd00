"""The shared HTTP options: strict decoding that names the field, and how the key is found."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from providers.options import HttpOptions, Seconds


class AdapterOptions(HttpOptions, kw_only=True, forbid_unknown_fields=True, frozen=True):
    """What an adapter does: extend the shared fields, redeclare a default."""

    region: str = "eu"
    timeout_seconds: Seconds = 600.0


@pytest.mark.parametrize("options_type", [HttpOptions, AdapterOptions])
@pytest.mark.parametrize(
    ("table", "field"),
    [
        ({"base_url": "http://x/v1", "timout_seconds": 3}, "timout_seconds"),
        ({"base_url": "api.example.com/v1"}, "base_url"),
        ({}, "base_url"),
        ({"base_url": "http://x", "timeout_seconds": 0}, "timeout_seconds"),
        ({"base_url": "http://x", "connect_timeout_seconds": -1}, "connect_timeout_seconds"),
        ({"base_url": "http://x", "stream_read_timeout_seconds": 0}, "stream_read_timeout_seconds"),
        ({"base_url": "http://x", "max_connections": 0}, "max_connections"),
        ({"base_url": "http://x", "extra_headers": {"X-A": 1}}, "extra_headers"),
    ],
)
def test_config_errors_name_the_field(
    options_type: type[HttpOptions], table: dict[str, Any], field: str
) -> None:
    with pytest.raises(msgspec.ValidationError, match=field):
        msgspec.convert(table, options_type)


def test_an_adapter_extends_the_shared_fields() -> None:
    options = msgspec.convert(
        {"base_url": "https://x", "region": "us", "api_key": "k", "max_connections": 4},
        AdapterOptions,
    )
    assert (options.region, options.api_key, options.max_connections) == ("us", "k", 4)
    assert options.timeout_seconds == 600.0  # the adapter's default
    assert HttpOptions(base_url="http://x").timeout_seconds == 60.0  # the shared one
    with pytest.raises(msgspec.ValidationError, match="regoin"):
        msgspec.convert({"base_url": "https://x", "regoin": "us"}, AdapterOptions)


def test_api_key_resolution() -> None:
    options = HttpOptions(base_url="http://x", api_key="from-config", api_key_env="KEY")
    assert options.resolve_api_key({"KEY": "from-env"}) == "from-env"
    assert options.resolve_api_key({}) == "from-config"
    assert options.resolve_api_key({"KEY": ""}) == "from-config"
    assert HttpOptions(base_url="http://x").resolve_api_key({"KEY": "k"}) is None
    assert HttpOptions(base_url="http://x", api_key="").resolve_api_key({}) is None


@pytest.mark.parametrize("environ", [{}, {"UPSTREAM_KEY": ""}])
def test_an_unset_api_key_env_is_an_error_naming_the_variable(environ: dict[str, str]) -> None:
    options = HttpOptions(base_url="http://x", api_key_env="UPSTREAM_KEY")
    with pytest.raises(ValueError, match=r"^api_key_env: .*'UPSTREAM_KEY' is not set"):
        options.resolve_api_key(environ)


@pytest.mark.parametrize("base_url", ["http://up:8000/v1", "http://up:8000/v1/"])
def test_url_joins_base_and_path(base_url: str) -> None:
    url = HttpOptions(base_url=base_url).url("/chat/completions")
    assert str(url) == "http://up:8000/v1/chat/completions"
