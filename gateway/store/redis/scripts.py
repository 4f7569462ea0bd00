"""The Lua scripts behind the Redis store's atomic operations.

Each `*.lua` file is one operation; `common.lua` (helpers and server time) is prepended to each,
and `task_common.lua` too to the `task_*` ones, so a script is still one self-contained
EVALSHA. redis-py's `AsyncScript` runs it by SHA and reloads it on NOSCRIPT (after a restart or
SCRIPT FLUSH).
"""

from __future__ import annotations

from importlib.resources import files

from redis.asyncio import Redis

__all__ = ["Scripts", "script_source"]

_TASK_NAMES = (
    "task_create",
    "task_confirm",
    "task_abandon",
    "task_claim",
    "task_touch",
    "task_cancel",
    "task_finalize",
    "task_reindex",
)
_NAMES = ("admit", "settle", "release", "grant", "wallet", "ledger", "ledger_range", *_TASK_NAMES)


def script_source(name: str) -> str:
    """The full text of one script: the shared helpers, then the operation."""
    package = files(__package__ or "gateway.store.redis")
    helpers = ("common", "task_common") if name.startswith("task_") else ("common",)
    parts = [package.joinpath(f"{part}.lua").read_text(encoding="utf-8") for part in helpers]
    return "\n".join([*parts, package.joinpath(f"{name}.lua").read_text(encoding="utf-8")])


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
        self.ledger_range = client.register_script(script_source("ledger_range"))
        self.task_create = client.register_script(script_source("task_create"))
        self.task_confirm = client.register_script(script_source("task_confirm"))
        self.task_abandon = client.register_script(script_source("task_abandon"))
        self.task_claim = client.register_script(script_source("task_claim"))
        self.task_touch = client.register_script(script_source("task_touch"))
        self.task_cancel = client.register_script(script_source("task_cancel"))
        self.task_finalize = client.register_script(script_source("task_finalize"))
        self.task_reindex = client.register_script(script_source("task_reindex"))
