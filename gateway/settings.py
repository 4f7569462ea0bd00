"""Process settings from environment variables, read when asked (never at import time)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = ["DEFAULT_CONFIG", "DEFAULT_DATA_DIR", "Settings"]

DEFAULT_DATA_DIR = Path("data")
DEFAULT_CONFIG = Path("config/gateway.toml")


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
    """Tasks the in-process worker runs at once (0: none; run `gateway worker` instead)."""
    artifacts_dir: Path | None = None
    """Where artifact bytes live; None: `data_dir/artifacts`."""
    signing_secret: str = ""
    """Signs artifact content URLs; empty: a random key kept in `data_dir/signing.key`."""
    config_poll_seconds: float = 1.0
    """How often the routing file is checked for changes (0: only on SIGHUP)."""
    public_url: str = ""
    """Prefix of the content URLs in task outputs (e.g. https://gw.example.com); empty:
    relative URLs (/v1/artifacts/...)."""

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        cache = env.get("GATEWAY_KEY_CACHE_SECONDS")
        return cls(
            host=env.get("GATEWAY_HOST", "127.0.0.1"),
            port=int(env.get("GATEWAY_PORT", "8080")),
            store_url=env.get("GATEWAY_STORE_URL", ""),
            config_path=Path(env.get("GATEWAY_CONFIG", str(DEFAULT_CONFIG))),
            data_dir=Path(env.get("GATEWAY_DATA_DIR", str(DEFAULT_DATA_DIR))),
            log_level=env.get("GATEWAY_LOG_LEVEL", "info").lower(),
            key_cache_seconds=float(cache) if cache else None,
            workers=int(env.get("GATEWAY_WORKERS", "4")),
            artifacts_dir=Path(env["GATEWAY_ARTIFACTS_DIR"])
            if env.get("GATEWAY_ARTIFACTS_DIR")
            else None,
            signing_secret=env.get("GATEWAY_SIGNING_SECRET", ""),
            public_url=env.get("GATEWAY_PUBLIC_URL", ""),
            config_poll_seconds=float(env.get("GATEWAY_CONFIG_POLL_SECONDS", "1")),
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
        return 1.0 if self.resolved_store_url.startswith(("redis://", "rediss://")) else 0.0
