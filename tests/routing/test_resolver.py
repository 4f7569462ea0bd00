"""Model resolution: `auto` walks its chain and passes over a provider marked down, for a
cool-down measured on the router's clock (moved here, never slept)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.config.loader import GatewayConfig, load_config
from gateway.routing.resolver import COOL_DOWN_SECONDS, ModelNotFound, Router
from tests.support.clock import Clock

CONFIG = """
[providers.first]
kind = "simulator"

[providers.second]
kind = "simulator"

[[models]]
id = "m1"
provider = "first"
capability = "chat"
pricing = { input_usd_per_mtok = 1, output_usd_per_mtok = 2 }

[[models]]
id = "m2"
provider = "second"
capability = "chat"
pricing = { input_usd_per_mtok = 1, output_usd_per_mtok = 2 }

[routing.auto]
chat = ["m1", "m2"]

[tenants.default]

[tenants.narrow]
models = ["m2"]
"""


@pytest.fixture
def config(tmp_path: Path) -> GatewayConfig:
    path = tmp_path / "gateway.toml"
    path.write_text(CONFIG)
    return load_config(path)


def _router(config: GatewayConfig, clock: Clock) -> Router:
    return Router(config, {"first": object(), "second": object()}, clock=clock)


def test_auto_skips_a_provider_marked_down_until_the_clock_passes_the_cool_down(
    config: GatewayConfig,
) -> None:
    clock = Clock()
    router = _router(config, clock)
    tenant = config.tenants["default"]
    first = router.resolve("auto", tenant, "chat")
    assert first.model.id == "m1"

    router.mark_down(first)
    assert router.resolve("auto", tenant, "chat").model.id == "m2"
    clock.advance(COOL_DOWN_SECONDS - 0.001)
    assert router.resolve("auto", tenant, "chat").model.id == "m2"
    clock.advance(0.001)
    assert router.resolve("auto", tenant, "chat").model.id == "m1"


def test_auto_takes_the_first_candidate_when_all_are_down(config: GatewayConfig) -> None:
    router = _router(config, Clock())
    tenant = config.tenants["default"]
    for name in ("m1", "m2"):
        router.mark_down(router.resolve(name, tenant, "chat"))
    assert router.resolve("auto", tenant, "chat").model.id == "m1"


def test_auto_and_names_follow_the_tenant_s_models(config: GatewayConfig) -> None:
    router = _router(config, Clock())
    narrow = config.tenants["narrow"]
    assert router.resolve("auto", narrow, "chat").model.id == "m2"
    with pytest.raises(ModelNotFound):
        router.resolve("m1", narrow, "chat")
