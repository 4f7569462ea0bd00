"""Model resolution: `auto` walks its chain and passes over a provider whose breaker is open,
on the router's clock (moved here, never slept)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.config.loader import GatewayConfig, load_config
from gateway.routing.resolver import ModelNotFound, Router
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


def test_auto_passes_over_a_provider_whose_breaker_is_open_until_it_may_probe(
    config: GatewayConfig,
) -> None:
    clock = Clock()
    router = _router(config, clock)
    tenant = config.tenants["default"]
    first = router.resolve("auto", tenant, "chat")
    assert first.model.id == "m1"

    for _ in range(5):  # the default threshold
        first.breaker.failed()
    assert router.breaker_states() == {"first": "open", "second": "closed"}
    assert router.resolve("auto", tenant, "chat").model.id == "m2"
    clock.advance(29.999)
    assert router.resolve("auto", tenant, "chat").model.id == "m2"
    clock.advance(0.001)
    assert router.breaker_states()["first"] == "half_open"
    assert router.resolve("auto", tenant, "chat").model.id == "m1"


def test_auto_takes_the_first_candidate_when_all_are_open(config: GatewayConfig) -> None:
    router = _router(config, Clock())
    tenant = config.tenants["default"]
    for name in ("m1", "m2"):
        breaker = router.resolve(name, tenant, "chat").breaker
        for _ in range(5):
            breaker.failed()
    assert router.resolve("auto", tenant, "chat").model.id == "m1"
    assert router.choose("auto", tenant, "chat").routes == tuple(
        router.resolve(name, tenant, "chat") for name in ("m1", "m2")
    )


def test_a_pinned_choice_is_one_route_and_reused(config: GatewayConfig) -> None:
    router = _router(config, Clock())
    tenant = config.tenants["default"]
    choice = router.choose("m2", tenant, "chat")
    assert choice.pinned and [r.model.id for r in choice.routes] == ["m2"]
    assert router.choose("m2", tenant, "chat") is choice
    assert router.choose("auto", tenant, "chat") is router.choose("auto", tenant, "chat")
    assert router.auto_capabilities() == ["chat"]


def test_breakers_outlive_a_router_when_handed_on(config: GatewayConfig) -> None:
    clock = Clock()
    router = _router(config, clock)
    tenant = config.tenants["default"]
    breaker = router.resolve("m1", tenant, "chat").breaker
    for _ in range(5):
        breaker.failed()
    again = Router(config, {"first": object(), "second": object()}, breakers=router.breakers)
    assert again.breaker_states()["first"] == "open"
    assert again.resolve("auto", tenant, "chat").model.id == "m2"


def test_auto_and_names_follow_the_tenant_s_models(config: GatewayConfig) -> None:
    router = _router(config, Clock())
    narrow = config.tenants["narrow"]
    assert router.resolve("auto", narrow, "chat").model.id == "m2"
    with pytest.raises(ModelNotFound):
        router.resolve("m1", narrow, "chat")
