"""The Lua scripts behind the Redis store's atomic operations.

Each `*.lua` file is one operation; `common.lua` (helpers and server time) is prepended to each,
and `task_common.lua` too to the `task_*` ones, so a script is still one self-contained
EVALSHA. Every key a script touches is in its KEYS, all of one hash slot (keys.py).

Two ways to run them: the pipelined client (`pipeline.py`: the request path's scripts and
every one that moves money, which may wait for replicas on the same connection), as
`LuaScript`s; and redis-py (the rest), as registered `AsyncScript`s, which run by SHA and
reload on NOSCRIPT (after a restart or SCRIPT FLUSH).
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.resources import files

from redis.asyncio import Redis, RedisCluster
from redis.commands.core import AsyncScript

from gateway.store.redis.pipeline import LuaScript

__all__ = ["PIPELINED", "REGISTERED", "PipelinedScripts", "Scripts", "script_source"]

PIPELINED = (
    "admit",
    "settle",
    "release",
    "grant",
    "task_create",
    "task_confirm",
    "task_abandon",
    "task_claim",
    "task_unclaim",
    "task_cancel",
    "task_finalize",
    "queue_add",
    "queue_drop",
    "callback_secret",
)
"""Run through the pipelined client: sent once, answered or timed out, never resent."""

REGISTERED = (
    "wallet",
    "ledger",
    "ledger_range",
    "task_touch",
    "task_reindex",
    "task_callback_claim",
    "task_callback_record",
    "task_callback_redeliver",
    "key_rotate",
    "key_state",
)
"""Run through redis-py: reads, and steps whose loss a later one repairs."""

Source = Callable[[str], str]


def script_source(name: str) -> str:
    """The full text of one script: the shared helpers, then the operation."""
    package = files(__package__ or "gateway.store.redis")
    helpers = ("common", "task_common") if name.startswith("task_") else ("common",)
    parts = [package.joinpath(f"{part}.lua").read_text(encoding="utf-8") for part in helpers]
    return "\n".join([*parts, package.joinpath(f"{name}.lua").read_text(encoding="utf-8")])


class PipelinedScripts:
    """The pipelined scripts, as request heads (made once per store; no Redis involved)."""

    __slots__ = PIPELINED
    admit: LuaScript
    settle: LuaScript
    release: LuaScript
    grant: LuaScript
    task_create: LuaScript
    task_confirm: LuaScript
    task_abandon: LuaScript
    task_claim: LuaScript
    task_unclaim: LuaScript
    task_cancel: LuaScript
    task_finalize: LuaScript
    queue_add: LuaScript
    queue_drop: LuaScript
    callback_secret: LuaScript

    def __init__(self, source: Source = script_source) -> None:
        for name in PIPELINED:
            setattr(self, name, LuaScript.of(source(name)))

    def __getitem__(self, name: str) -> LuaScript:
        script: LuaScript = getattr(self, name)
        return script


class Scripts:
    """The redis-py scripts of one client; registering does not talk to Redis."""

    __slots__ = REGISTERED
    wallet: AsyncScript
    ledger: AsyncScript
    ledger_range: AsyncScript
    task_touch: AsyncScript
    task_reindex: AsyncScript
    task_callback_claim: AsyncScript
    task_callback_record: AsyncScript
    task_callback_redeliver: AsyncScript
    key_rotate: AsyncScript
    key_state: AsyncScript

    def __init__(self, client: Redis | RedisCluster, source: Source = script_source) -> None:
        for name in REGISTERED:
            setattr(self, name, client.register_script(source(name)))
