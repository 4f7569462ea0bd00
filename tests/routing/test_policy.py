"""`auto` policies: order, weights (on a seeded random source), conditions on what the request
needs, the price ceiling and the tenant's models."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import pytest

from gateway.config.loader import GatewayConfig, load_config
from gateway.errors import ModelUnavailable
from gateway.routing.resolver import Router

CONFIG = """
[providers.p1]
kind = "simulator"

[providers.p2]
kind = "simulator"

[[models]]
id = "cheap"
provider = "p1"
capability = "chat"
markup = 1000
features = ["json_output"]
pricing = { input_usd_per_mtok = 0.1, output_usd_per_mtok = 0.4 }

[[models]]
id = "tooler"
provider = "p2"
capability = "chat"
markup = 1000
features = ["tools", "json_output", "vision"]
pricing = { input_usd_per_mtok = 1, output_usd_per_mtok = 2 }

[[models]]
id = "premium"
provider = "p1"
capability = "chat"
markup = 1200
pricing = { input_usd_per_mtok = 5, output_usd_per_mtok = 15 }

[[models]]
id = "img-a"
provider = "p1"
capability = "text_to_image"
features = ["hd"]
pricing = { credits_per_image = { standard = 40, hd = 400 } }

[[models]]
id = "img-b"
provider = "p2"
capability = "text_to_image"
pricing = { credits_per_image = { standard = 60, hd = 250 } }

[routing.policies.chat]
strategy = "weighted"
candidates = [
    { model = "cheap", weight = 3 },
    { model = "tooler", weight = 1 },
    { model = "premium", weight = 1, when = { tools = false } },
]
max_price = 10000          # credits per million output tokens: premium (15 x 1200) is over

[routing.policies.text_to_image]
candidates = [{ model = "img-a" }, { model = "img-b" }]
max_price = 300            # credits per image: img-a at hd (400) is over

[tenants.default]

[tenants.narrow]
models = ["tooler", "premium"]
"""

TOOLS = frozenset({"tools"})
HD = frozenset({"hd"})


@pytest.fixture
def config(tmp_path: Path) -> GatewayConfig:
    path = tmp_path / "gateway.toml"
    path.write_text(CONFIG)
    return load_config(path)


def _router(config: GatewayConfig, seed: int = 1) -> Router:
    return Router(config, {"p1": object(), "p2": object()}, rng=random.Random(seed))


def _order(router: Router, config: GatewayConfig, needs: frozenset[str] = frozenset()) -> list[str]:
    choice = router.choose("auto", config.tenants["default"], "chat", needs)
    return [route.model.id for route in choice.routes]


def test_weighted_order_follows_the_weights_and_keeps_everyone_as_a_fallback(
    config: GatewayConfig,
) -> None:
    router = _router(config, seed=42)
    firsts: Counter[str] = Counter()
    for _ in range(4000):
        order = _order(router, config)
        assert sorted(order) == ["cheap", "tooler"]  # premium is over the ceiling
        firsts[order[0]] += 1
    assert 0.70 < firsts["cheap"] / 4000 < 0.80  # weight 3 of 4


def test_the_same_seed_gives_the_same_orders(config: GatewayConfig) -> None:
    one, two = _router(config, seed=5), _router(config, seed=5)
    assert [_order(one, config) for _ in range(50)] == [_order(two, config) for _ in range(50)]


def test_needs_pass_over_models_lacking_a_feature(config: GatewayConfig) -> None:
    router = _router(config)
    assert _order(router, config, TOOLS) == ["tooler"]
    assert sorted(_order(router, config, frozenset({"json_output"}))) == ["cheap", "tooler"]
    assert router.uses_needs("chat")


def test_when_conditions_and_the_ceiling(tmp_path: Path) -> None:
    text = CONFIG.replace("max_price = 10000 ", "max_price = 20000 ")
    path = tmp_path / "wide.toml"
    path.write_text(text)
    config = load_config(path)
    router = _router(config)
    assert sorted(_order(router, config)) == ["cheap", "premium", "tooler"]
    assert _order(router, config, TOOLS) == ["tooler"]  # premium only without tools


def test_tenant_models_filter_the_candidates(config: GatewayConfig) -> None:
    router = _router(config)
    narrow = config.tenants["narrow"]
    assert [r.model.id for r in router.choose("auto", narrow, "chat").routes] == ["tooler"]
    with pytest.raises(ModelUnavailable):
        router.choose("auto", narrow, "text_to_image")


def test_media_auto_takes_the_quality_into_account(config: GatewayConfig) -> None:
    router = _router(config)
    tenant = config.tenants["default"]
    assert router.resolve("auto", tenant, "text_to_image").model.id == "img-a"
    # img-a costs 400 at hd, over the ceiling of 300: img-b (250) is taken
    assert router.resolve("auto", tenant, "text_to_image", HD).model.id == "img-b"


def test_hd_needs_the_feature_when_a_model_lists_its_features(tmp_path: Path) -> None:
    text = CONFIG.replace('features = ["hd"]', "features = []").replace(
        "max_price = 300 ", "max_price = 1000 "
    )
    path = tmp_path / "nohd.toml"
    path.write_text(text)
    config = load_config(path)
    router = _router(config)
    tenant = config.tenants["default"]
    assert router.resolve("auto", tenant, "text_to_image").model.id == "img-a"
    assert router.resolve("auto", tenant, "text_to_image", HD).model.id == "img-b"


def test_the_short_form_is_an_ordered_policy(tmp_path: Path) -> None:
    text = CONFIG[: CONFIG.index("[routing.policies.chat]")] + (
        '[routing.auto]\nchat = ["premium", "cheap"]\n\n[tenants.default]\n'
    )
    path = tmp_path / "short.toml"
    path.write_text(text)
    config = load_config(path)
    router = _router(config)
    assert _order(router, config) == ["premium", "cheap"]
    assert _order(router, config, TOOLS) == ["premium"]  # features count in the short form too
    assert not router.uses_needs("text_to_image")  # no policy looks at image needs here


def test_without_features_or_conditions_needs_are_not_even_worked_out(tmp_path: Path) -> None:
    text = (
        CONFIG[: CONFIG.index("[routing.policies.chat]")]
        .replace('features = ["json_output"]', "")
        .replace('features = ["tools", "json_output", "vision"]', "")
    )
    path = tmp_path / "plain.toml"
    path.write_text(text + '[routing.auto]\nchat = ["premium", "cheap"]\n\n[tenants.default]\n')
    config = load_config(path)
    router = _router(config)
    assert not router.uses_needs("chat")
    assert _order(router, config, TOOLS) == ["premium", "cheap"]
