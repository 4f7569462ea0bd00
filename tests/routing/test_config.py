"""Routing-file checks: each problem names the file, the field and what is wrong."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from gateway.routing.config import ConfigError, load_config

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
            "tenants.default",
            "unknown field `requests_per_minit`",
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
