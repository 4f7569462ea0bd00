"""Routing-file checks: each problem names the file, the field and what is wrong."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from gateway.config.loader import ConfigError, load_config

ROOT = Path(__file__).resolve().parents[2]

BASE = """
[providers.sim]
kind = "simulator"

[[models]]
id = "m1"
provider = "sim"
capability = "chat"
pricing = { input_usd_per_mtok = 0.5, output_usd_per_mtok = 1.5 }

[routing.auto]
chat = ["m1"]

[tenants.default]
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "gateway.toml"
    path.write_text(text)
    return path


def test_the_shipped_default_config_loads() -> None:
    config = load_config(ROOT / "config" / "gateway.toml")
    assert "default" in config.tenants
    assert {m.provider for m in config.models.values()} == {"sim"}
    assert config.tenants["default"].allowed_models is None


def test_prices_are_decimals_and_defaults_apply(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, BASE))
    model = config.models["m1"]
    assert model.pricing.input_usd_per_mtok == Decimal("0.5")
    assert model.upstream_model == "m1"
    assert config.tenants["default"].limits.requests_per_minute == 600
    assert config.tenants["default"].credits_per_usd == 1000


@pytest.mark.parametrize(
    ("change", "field", "problem"),
    [
        (('provider = "sim"', 'provider = "nope"'), "models[0].provider", "unknown provider"),
        (('capability = "chat"', 'capability = "poetry"'), "models[0].capability", ""),
        (('kind = "simulator"', 'kind = "magic"'), "providers.sim.kind", "unknown provider kind"),
        (('chat = ["m1"]', 'chat = ["m2"]'), "routing.auto.chat[0]", "unknown model"),
        (
            ("[tenants.default]", '[tenants.default]\nmodels = ["zzz"]'),
            "tenants.default.models[0]",
            "unknown model",
        ),
        (
            ("[tenants.default]", "[tenants.default]\nrequests_per_minit = 5"),
            "tenants.default.requests_per_minit",
            "unknown field",
        ),
        (
            ("output_usd_per_mtok = 1.5", "output_usd_per_mtok = -1"),
            "models[0].pricing",
            "negative",
        ),
        (
            ('kind = "simulator"', 'kind = "simulator"\nlatency_ms = "slow"'),
            "providers.sim.latency_ms",
            "",
        ),
    ],
)
def test_errors_name_file_field_and_problem(
    tmp_path: Path, change: tuple[str, str], field: str, problem: str
) -> None:
    path = write(tmp_path, BASE.replace(*change))
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: ")
    assert field in message
    assert problem in message


def test_duplicate_model_ids(tmp_path: Path) -> None:
    text = BASE + BASE[BASE.index("[[models]]") : BASE.index("[routing.auto]")]
    with pytest.raises(ConfigError, match=r"models\[1\]\.id: duplicate model id 'm1'"):
        load_config(write(tmp_path, text))


def test_unreadable_and_malformed_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.toml")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(write(tmp_path, "[providers.sim\nkind="))


MEDIA = """
[providers.sim]
kind = "simulator"

[providers.up]
kind = "anthropic"
base_url = "http://127.0.0.1:1/v1"
api_key = "x"

[[models]]
id = "img"
provider = "{provider}"
capabilities = ["text_to_image", "image_to_image"]
pricing = {{ credits_per_image = {{ {prices} }} }}
"""


def test_a_model_serving_several_capabilities_with_prices_per_capability(tmp_path: Path) -> None:
    prices = 'standard = 50, hd = 300, "image_to_image.standard" = 60, "image_to_image.hd" = 320'
    config = load_config(write(tmp_path, MEDIA.format(provider="sim", prices=prices)))
    model = config.models["img"]
    assert model.capabilities == ["text_to_image", "image_to_image"]
    assert model.serves("image_to_image") and not model.serves("chat")

    from gateway.billing.pricing import media_unit_price

    assert media_unit_price(model, "text_to_image", "hd") == 300 * 10_000
    assert media_unit_price(model, "image_to_image", "standard") == 60 * 10_000


@pytest.mark.parametrize(
    ("provider", "prices", "field", "problem"),
    [
        ("up", "standard = 50, hd = 300", "models[0].capabilities", "cannot serve text_to_image"),
        ("sim", "standard = 50", "models[0].pricing.credits_per_image", "no hd price"),
        ("sim", "standard = 1, hd = 2, ultra = 3", "credits_per_image.ultra", "use a quality"),
        (
            "sim",
            'standard = 1, hd = 2, "chat.hd" = 3',
            "credits_per_image.chat.hd",
            "use a quality",
        ),
    ],
)
def test_media_model_errors_name_the_field(
    tmp_path: Path, provider: str, prices: str, field: str, problem: str
) -> None:
    with pytest.raises(ConfigError) as error:
        load_config(write(tmp_path, MEDIA.format(provider=provider, prices=prices)))
    assert field in str(error.value) and problem in str(error.value)


def test_capability_and_capabilities_together_are_refused(tmp_path: Path) -> None:
    text = BASE.replace('capability = "chat"', 'capability = "chat"\ncapabilities = ["chat"]')
    with pytest.raises(ConfigError, match="not both"):
        load_config(write(tmp_path, text))


POLICY = """
[providers.sim]
kind = "simulator"

[[models]]
id = "m1"
provider = "sim"
capability = "chat"
features = ["tools"]
pricing = { input_usd_per_mtok = 0.5, output_usd_per_mtok = 1.5 }

[[models]]
id = "img"
provider = "sim"
capability = "text_to_image"
pricing = { credits_per_image = { standard = 50, hd = 300 } }

[routing.policies.chat]
strategy = "weighted"
candidates = [{ model = "m1", weight = 2, when = { tools = true } }]
max_price = 1500
max_attempts = 3
backoff_ms = 50
max_retry_after_ms = 1000

[routing.breaker]
failure_threshold = 3
open_seconds = 0.5

[tenants.default]
"""


def test_a_full_policy_and_breaker_settings_load(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, POLICY))
    policy = config.file.routing.policies["chat"]
    assert policy.strategy == "weighted" and policy.candidates[0].weight == 2
    assert policy.candidates[0].when.tools is True
    assert policy.max_price == Decimal(1500) and policy.max_attempts == 3
    assert config.file.routing.breaker.open_seconds == Decimal("0.5")
    assert config.models["m1"].features == ["tools"]


@pytest.mark.parametrize(
    ("change", "field", "problem"),
    [
        (('model = "m1", weight', 'model = "m9", weight'), "policies.chat.candidates[0].model", ""),
        (
            ('model = "m1", weight', 'model = "img", weight'),
            "routing.policies.chat.candidates[0].model",
            "is not a chat model",
        ),
        (
            ('strategy = "weighted"', 'strategy = "ordered"'),
            "routing.policies.chat.candidates[0].weight",
            "only with strategy",
        ),
        (
            ("when = { tools = true }", 'when = { quality = "hd" }'),
            "routing.policies.chat.candidates[0].when.quality",
            "only for image",
        ),
        (
            ("when = { tools = true }", "when = { tool = true }"),
            "routing.policies.chat.candidates[0].when.tool",
            "unknown field",
        ),
        (('strategy = "weighted"', 'strategy = "random"'), "routing.policies.chat.strategy", ""),
        (("max_price = 1500", "max_price = 1499"), "routing.policies.chat.max_price", "none"),
        (("max_price = 1500", "max_price = -1"), "routing.policies.chat.max_price", ">= 0"),
        (("max_attempts = 3", "max_attempts = 0"), "routing.policies.chat.max_attempts", ""),
        (("weight = 2", "weight = 0"), "routing.policies.chat.candidates[0].weight", ""),
        (("open_seconds = 0.5", "open_seconds = 0"), "routing.breaker.open_seconds", "> 0"),
        (
            ("failure_threshold = 3", "failure_threshold = 0"),
            "routing.breaker.failure_threshold",
            "",
        ),
        (('features = ["tools"]', 'features = ["telepathy"]'), "models[0].features[0]", "unknown"),
        (('features = ["tools"]', 'features = ["hd"]'), "models[0].features[0]", "image models"),
        (
            ("[tenants.default]", '[routing.auto]\nchat = ["m1"]\n\n[tenants.default]'),
            "routing.policies.chat",
            "not both",
        ),
        (
            ("candidates = [{ model", 'candidates = [{ model = "m1" }, { model'),
            "routing.policies.chat.candidates[1].model",
            "named twice",
        ),
    ],
)
def test_policy_errors_name_file_field_and_problem(
    tmp_path: Path, change: tuple[str, str], field: str, problem: str
) -> None:
    assert change[0] in POLICY
    path = write(tmp_path, POLICY.replace(*change))
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: ")
    assert field in message, message
    assert problem in message, message


def test_every_independent_problem_is_reported_at_once(tmp_path: Path) -> None:
    text = """
[providers.sim]
kind = "simulator"

[providers.broken]
kind = "nope"

[[models]]
id = "auto"
provider = "sim"
capability = "chat"

[[models]]
id = "orphan"
provider = "missing"
capability = "chat"

[[models]]
id = "via-broken"
provider = "broken"
capability = "chat"

[tenants.t]
requests_per_minute = "many"
"""
    with pytest.raises(ConfigError) as error:
        load_config(write(tmp_path, text))
    fields = [str(p).split(": ")[1] for p in error.value.problems]
    assert fields == [
        "tenants.t.requests_per_minute",
        "providers.broken.kind",
        "models[0].id",
        "models[1].provider",
    ]  # models[2] only echoes its provider's error: not repeated


def test_callback_keys_are_read_and_a_bad_network_is_named(tmp_path: Path) -> None:
    keys = '[gateway]\ncallback_allowed_networks = ["10.2.0.0/16"]\ncallback_retry_seconds = [1]\n'
    config = load_config(write(tmp_path, keys + BASE))
    assert config.file.gateway.callback_allowed_networks == ["10.2.0.0/16"]
    assert config.file.gateway.callback_retry_seconds == [1.0]
    assert load_config(write(tmp_path, BASE)).file.gateway.callback_retry_seconds == []
    bad = '[gateway]\ncallback_allowed_networks = ["10.2.0.1/16"]\n'
    with pytest.raises(ConfigError, match=r"gateway\.callback_allowed_networks\[0\]: not an IP"):
        load_config(write(tmp_path, bad + BASE))
    negative = "[gateway]\ncallback_retry_seconds = [-1]\n"
    with pytest.raises(ConfigError, match=r"callback_retry_seconds"):
        load_config(write(tmp_path, negative + BASE))
