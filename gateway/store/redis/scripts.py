"""The Lua scripts behind the Redis store's atomic operations.

Each `*.lua` file is one operation; `common.lua` (helpers and server time) is prepended to each,
so a script is still one self-contained EVALSHA. redis-py's `AsyncScript` runs it by SHA and
reloads it on NOSCRIPT (after a restart or SCRIPT FLUSH).
"""

from __future__ import annotations

from importlib.resources import files

from redis.asyncio import Redis

__all__ = ["Scripts", "script_source"]

_NAMES = ("admit", "settle", "release", "grant", "wallet", "ledger")


def script_source(name: str) -> str:
    """The full text of one script: the shared helpers, then the operation."""
    package = files(__package__ or "gateway.store.redis")
    common = package.joinpath("common.lua").read_text(encoding="utf-8")
    body = package.joinpath(f"{name}.lua").read_text(encoding="utf-8")
    return f"{common}\n{body}"


class Scripts:
    """The registered scripts of one client; registering does not talk to Redis."""

    __slots__ = _NAMES

    def __init__(self, client: Redis) -> None:
        self.admit = client.register_script(script_source("admit"))
        self.settle = client.register_script(script_source("settle"))
        self.release = client.register_script(script_source("release"))
        self.grant = client.register_script(script_source("grant"))
        self.wallet = client.register_script(script_source("wallet"))
        self.ledger = client.register_script(script_source("ledger"))
