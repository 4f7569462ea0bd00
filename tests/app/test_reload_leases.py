"""A routing-file reload never closes providers that a running task or stream still uses: the
runtime, in process, against a fake Replicate over real HTTP, with a short grace.

A Replicate prediction may run 15 minutes; the previous generation of providers used to be
closed 10 minutes after a reload whatever ran on it, so the task's next poll met a closed
session: it failed and was refunded while the upstream kept billing.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from gateway.app.resources import Runtime
from gateway.app.settings import Settings
from gateway.auth.service import Caller
from gateway.billing.money import UNITS_PER_CREDIT
from gateway.chat.outcomes import ChatStreaming
from gateway.config.loader import load_config
from gateway.http.openai_sse import OPENAI_CHAT
from gateway.metrics import open_metrics
from gateway.routing.leases import Leases
from gateway.schemas.media import MusicRequest
from tests.chat.support import decode_chat_body
from tests.fakes.openai_upstream import FakeOpenAI, StreamReply
from tests.fakes.replicate_upstream import PROCESSING, FakeReplicate, Job
from tests.providers.adapter_checks import run

CONFIG = """
[gateway]
task_lease_seconds = 5

[providers.music]
kind = "replicate"
base_url = "{music_url}"
api_key = "r8-music-secret"
poll_interval_seconds = 0.02
duration_seconds = 1

[providers.oc]
kind = "openai_compatible"
base_url = "{oc_url}"

[[models]]
id = "musicgen"
provider = "music"
upstream_model = "meta/musicgen"
capabilities = ["text_to_music"]
pricing = {{ credits_per_task = 80 }}

[[models]]
id = "oc-chat"
provider = "oc"
capability = "chat"
pricing = {{ input_usd_per_mtok = 1, output_usd_per_mtok = 1 }}

[tenants.default]
{extra}
"""
GRACE = 0.01


async def until(condition: Callable[[], bool], what: str, within: float = 20.0) -> None:
    deadline = asyncio.get_running_loop().time() + within
    while not condition():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


@asynccontextmanager
async def runtime_on(path: Path, music_url: str, oc_url: str) -> AsyncIterator[Runtime]:
    text = CONFIG.format(music_url=music_url, oc_url=oc_url, extra="")
    await asyncio.to_thread(path.write_text, text)
    settings = Settings(config_path=path, data_dir=path.parent / "data", workers=1)
    metrics, _ = open_metrics(False, units_per_credit=UNITS_PER_CREDIT)
    runtime = Runtime(settings, metrics, retire_seconds=GRACE)
    await runtime.open()
    try:
        await runtime.configure(load_config(path))
        await runtime.store.grant("default", 10**6 * UNITS_PER_CREDIT, entry_id="g", reason="t")
        yield runtime
    finally:
        await runtime.close()


async def reload(runtime: Runtime, path: Path, version: int) -> None:
    """A new version of the file (a comment more), applied as the watcher applies it."""
    assert runtime.current is not None
    providers: Any = runtime.current.config.providers
    text = CONFIG.format(
        music_url=providers["music"].options.base_url,
        oc_url=providers["oc"].options.base_url,
        extra=f"# version {version}",
    )
    await asyncio.to_thread(path.write_text, text)
    await runtime.configure(load_config(path))


def test_a_task_spanning_a_reload_keeps_its_provider_until_it_ends(tmp_path: Path) -> None:
    async def test() -> None:
        async with (
            FakeReplicate() as fake,
            FakeOpenAI() as chat,
            runtime_on(tmp_path / "g.toml", fake.base_url, chat.base_url) as rt,
        ):
            first = rt.current
            assert first is not None
            old: Any = first.providers["music"]
            fake.enqueue(Job(stall=True))
            caller = Caller(key_id="key_1", tenant=first.config.tenants["default"])
            accepted = await first.tasks.create(
                caller,
                "text_to_music",
                MusicRequest(model="musicgen", prompt="a calm piano"),
                path="/v1/music/generations",
                request_id="req_1",
                idempotency_key=None,
            )
            await until(lambda: bool(fake.created) and fake.created[0].polls > 0, "polls")
            await reload(rt, tmp_path / "g.toml", 2)
            polls = fake.created[0].polls
            # The grace runs out many times over while the task keeps polling its upstream.
            await until(lambda: fake.created[0].polls >= polls + 10, "polls after the grace")
            assert not old._upstream.closed
            assert len(rt.generations) == 2 and first.router.leases.count == 1
            fake.created[0].job = Job(steps=PROCESSING[:1])  # it ends at the next poll
            task = accepted.task

            async def status() -> str:
                record = await rt.store.get_task(task.tenant, task.task_id)
                assert record is not None
                return record.status

            seen = ""
            for _ in range(2000):
                seen = await status()
                if seen not in ("queued", "running"):
                    break
                await asyncio.sleep(0.01)
            assert seen == "succeeded"
            await until(lambda: old._upstream.closed, "the old provider to close")
            assert len(rt.generations) == 1 and first.router.leases.count == 0
            assert not rt.current.providers["music"]._upstream.closed  # type: ignore[union-attr]

    run(test)


def test_a_stream_spanning_a_reload_keeps_its_provider_until_it_is_closed(
    tmp_path: Path,
) -> None:
    async def test() -> None:
        async with (
            FakeReplicate() as fake,
            FakeOpenAI() as chat,
            runtime_on(tmp_path / "g.toml", fake.base_url, chat.base_url) as rt,
        ):
            first = rt.current
            assert first is not None
            old: Any = first.providers["oc"]
            chat.enqueue(StreamReply(chunk_delay=0.05))  # ~10 chunks: half a second
            caller = Caller(key_id="key_1", tenant=first.config.tenants["default"])
            request = decode_chat_body(
                b'{"model": "oc-chat", "stream": true,'
                b' "messages": [{"role": "user", "content": "Hi"}]}'
            )
            outcome = await first.chat.handle(
                caller,
                request,
                body_size=100,
                dialect=OPENAI_CHAT,
                request_id="req_1",
                idempotency_key=None,
            )
            assert isinstance(outcome, ChatStreaming)
            await reload(rt, tmp_path / "g.toml", 2)  # the grace ends long before the stream
            async with asyncio.timeout(30):  # a read on a closed session never ends
                frames = b"".join([frame async for frame in outcome.events.events()])
            assert b"data: [DONE]" in frames and b'"error"' not in frames
            assert not old._upstream.closed
            await reload(rt, tmp_path / "g.toml", 3)  # the second generation, unused, goes
            await until(lambda: len(rt.generations) == 2, "the unused generation to close")
            assert first.router.leases.count == 1  # the edge has not closed the stream yet
            await outcome.events.close()
            await until(lambda: old._upstream.closed, "the streamed provider to close")
            assert len(rt.generations) == 1

    run(test)


def test_leases_count_and_release_once() -> None:
    async def test() -> None:
        leases = Leases()
        await leases.idle()  # none held: at once
        first, second = leases.take(), leases.take()
        waiting = asyncio.ensure_future(leases.idle())
        first.release()
        first.release()  # twice is once
        await asyncio.sleep(0)
        assert not waiting.done() and leases.count == 1
        with second:
            pass
        await waiting
        assert leases.count == 0

    run(test)
