"""Process settings from environment variables, read when asked (never at import time)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Any

from gateway.admin.token import parse_token_hash, token_hash

__all__ = [
    "DEFAULT_CONFIG",
    "DEFAULT_DATA_DIR",
    "LOG_LEVELS",
    "MAX_PROCESSES",
    "Settings",
    "SettingsError",
    "default_config",
]

DEFAULT_DATA_DIR = Path("data")
DEFAULT_CONFIG = Path("config/gateway.toml")


LOG_LEVELS = ("debug", "info", "warning", "error")
MAX_PROCESSES = 256


class SettingsError(ValueError):
    """An environment variable holds a value the gateway cannot use; the message names it."""


def default_config() -> Path:
    """`config/gateway.toml` in the working directory, else the copy shipped in the package
    (so `gateway serve` works from any directory)."""
    if DEFAULT_CONFIG.exists():
        return DEFAULT_CONFIG
    return Path(str(files("gateway.config").joinpath("default.toml")))


def _number(
    env: Mapping[str, str],
    name: str,
    default: str,
    kind: type[int] | type[float],
    low: float,
    high: float | None = None,
) -> Any:
    raw = env.get(name) or default
    try:
        value = kind(raw)
    except ValueError:
        value = None
    if value is None or value < low or (high is not None and value > high):
        bound = f"from {low:g} to {high:g}" if high is not None else f"of at least {low:g}"
        noun = "a whole number" if kind is int else "a number"
        raise SettingsError(f"{name} must be {noun} {bound} (got {raw!r})")
    return value


def _choice(env: Mapping[str, str], name: str, default: str, choices: tuple[str, ...]) -> str:
    value = (env.get(name) or default).lower()
    if value not in choices:
        raise SettingsError(f"{name} must be one of {', '.join(choices)} (got {value!r})")
    return value


def _admin_token_hash(env: Mapping[str, str]) -> str:
    """GATEWAY_ADMIN_TOKEN_HASH (preferred) or GATEWAY_ADMIN_TOKEN, hashed here so the plain
    token is not kept; both set must agree. "" when neither is set (admin API disabled)."""
    hashed, plain = env.get("GATEWAY_ADMIN_TOKEN_HASH", ""), env.get("GATEWAY_ADMIN_TOKEN", "")
    try:
        from_hash = parse_token_hash(hashed) if hashed else ""
        from_plain = token_hash(plain) if plain else ""
    except ValueError as exc:
        raise SettingsError(str(exc)) from None
    if from_hash and from_plain and from_hash != from_plain:
        raise SettingsError(
            "GATEWAY_ADMIN_TOKEN and GATEWAY_ADMIN_TOKEN_HASH name different tokens; "
            "set only GATEWAY_ADMIN_TOKEN_HASH"
        )
    return from_hash or from_plain


@dataclass(frozen=True, slots=True)
class Settings:
    host: str = "127.0.0.1"
    port: int = 8080
    store_url: str = ""
    """Empty: the embedded SQLite store in `data_dir`."""
    config_path: Path = DEFAULT_CONFIG
    data_dir: Path = DEFAULT_DATA_DIR
    log_level: str = "info"
    key_cache_seconds: float | None = None
    """How long a looked-up API key is trusted in process; None: 0 on SQLite, 1 s on Redis."""
    workers: int = 4
    """Tasks the in-process worker runs at once (0: none; run `gateway worker` instead); with
    several processes, split between them (`gateway.app.processes`)."""
    processes: int = 1
    """Processes serving the port (`serve --processes`); more than one needs a Redis store."""
    artifacts_dir: Path | None = None
    """Where artifact bytes live; None: `data_dir/artifacts`."""
    signing_secret: str = ""
    """Signs artifact content URLs; empty: a random key kept in `data_dir/signing.key`."""
    config_poll_seconds: float = 1.0
    """How often the routing file is checked for changes (0: only on SIGHUP)."""
    public_url: str = ""
    """Prefix of the content URLs in task outputs (e.g. https://gw.example.com); empty:
    relative URLs (/v1/artifacts/...)."""
    artifacts_url: str = ""
    """Where artifact bytes live (GATEWAY_ARTIFACTS_URL): empty for `resolved_artifacts_dir`,
    file:///path, or s3://BUCKET/PREFIX?endpoint=... (see gateway.artifacts.store_url)."""
    metrics: bool = True
    """GATEWAY_METRICS=off: no instruments and no `/metrics` (404)."""
    admin_token_hash: str = ""
    """SHA-256 (64 hex digits) of the admin token that opens /admin/v1; empty: the admin API
    answers 403 `admin_disabled` (see gateway.admin.token)."""

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """SettingsError (naming the variable) for a value that cannot be used."""
        env = os.environ if env is None else env
        cache = env.get("GATEWAY_KEY_CACHE_SECONDS")
        artifacts = env.get("GATEWAY_ARTIFACTS_DIR")
        return cls(
            host=env.get("GATEWAY_HOST", "127.0.0.1"),
            port=_number(env, "GATEWAY_PORT", "8080", int, 1, 65535),
            store_url=env.get("GATEWAY_STORE_URL", ""),
            config_path=Path(env["GATEWAY_CONFIG"])
            if env.get("GATEWAY_CONFIG")
            else default_config(),
            data_dir=Path(env.get("GATEWAY_DATA_DIR", str(DEFAULT_DATA_DIR))),
            log_level=_choice(env, "GATEWAY_LOG_LEVEL", "info", LOG_LEVELS),
            key_cache_seconds=_number(env, "GATEWAY_KEY_CACHE_SECONDS", cache or "0", float, 0)
            if cache
            else None,
            workers=_number(env, "GATEWAY_WORKERS", "4", int, 0, 1024),
            processes=_number(env, "GATEWAY_PROCESSES", "1", int, 1, MAX_PROCESSES),
            artifacts_dir=Path(artifacts) if artifacts else None,
            signing_secret=env.get("GATEWAY_SIGNING_SECRET", ""),
            public_url=env.get("GATEWAY_PUBLIC_URL", ""),
            artifacts_url=env.get("GATEWAY_ARTIFACTS_URL", ""),
            config_poll_seconds=_number(env, "GATEWAY_CONFIG_POLL_SECONDS", "1", float, 0),
            metrics=_choice(env, "GATEWAY_METRICS", "on", ("on", "off")) == "on",
            admin_token_hash=_admin_token_hash(env),
        )

    @property
    def embedded(self) -> bool:
        """True when running on the zero-setup default store."""
        return not self.store_url

    @property
    def resolved_store_url(self) -> str:
        if self.store_url:
            return self.store_url
        return f"sqlite:///{(self.data_dir / 'gateway.db').as_posix()}"

    @property
    def resolved_artifacts_dir(self) -> Path:
        return self.artifacts_dir or self.data_dir / "artifacts"

    @property
    def resolved_key_cache_seconds(self) -> float:
        if self.key_cache_seconds is not None:
            return self.key_cache_seconds
        return 0.0 if self.resolved_store_url.startswith("sqlite:") else 1.0
