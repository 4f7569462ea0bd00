"""A bounded soak: mixed traffic against two gateway replicas on one Redis, with upstream faults
injected through `FaultProxy`s at intervals.

Client threads send chat (sync and streamed), image and music tasks (real HTTP adapters: the
OpenAI Images API and MusicGen on Replicate, faked), uploads, and idempotent replays, to both
replicas in turn. Every few seconds one upstream is reset, stalled, cut off mid-stream,
answered with garbage or with 5xx, or slowed, for a moment. At the end:
- no call hung and every failure was a retryable error in the envelope;
- zero lost tasks: every created task is terminal, and no replay made a second one;
- zero credit drift: each tenant's wallet equals its ledger and equals what the test expects
  from the answers it got (usage.credits of completed chats, task prices less refunds, and the
  one charge a broken stream may carry); every charge belongs to a call that answered;
- flat memory: each replica's RSS at the end is within 10 % of its RSS after the warm-up.

CI form: ~60 s of traffic. Full form (docs/reliability.md records its figures), 10 minutes:
    GATEWAY_SOAK_SECONDS=600 GATEWAY_SOAK_REPORT=soak.json \
        .venv/bin/pytest tests/e2e/test_soak.py -s -n 0
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from tests.e2e.fault_checks import Books, all_tasks, check_all
from tests.e2e.media_support import TERMINAL, ledger, root_of
from tests.e2e.soak_support import Client, FaultInjector, Outcome, RssSampler
from tests.fakes.openai_images_upstream import FakeOpenAIImages
from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.replicate_upstream import FakeReplicate
from tests.support.fault_proxy import FaultProxy
from tests.support.gateway_process import GatewayProcess, start_gateway
from tests.support.routing_files import UPSTREAM_MODELS
from tests.support.serial import SERIAL
from tests.support.serving import serving
from tests.support.waiting import wait_until

pytestmark = SERIAL

SECONDS = float(os.environ.get("GATEWAY_SOAK_SECONDS", "60"))
WARM_UP = min(60.0, SECONDS / 4)
CLIENTS_PER_TENANT = 3
GRANT = Decimal(1_000_000)
CONFIG = """
[gateway]
hold_seconds = 60
task_lease_seconds = 3

[limits]
requests_per_minute = 1000000
tokens_per_minute = 1000000000

[providers.chat]
kind = "openai"
base_url = "{chat}"
api_key = "sk-chat"
timeout_seconds = 1
stream_read_timeout_seconds = 1

[providers.images]
kind = "openai"
base_url = "{images}"
api_key = "sk-images"
image_timeout_seconds = 2
image_checkpoint_seconds = 0.5

[providers.music]
kind = "replicate"
base_url = "{music}"
api_key = "r8-music"
timeout_seconds = 1
poll_interval_seconds = 0.1
duration_seconds = 1

{models}
[routing.breaker]
failure_threshold = 3
open_seconds = 2

[tenants.alpha]
[tenants.beta]
"""


@dataclass
class Soak:
    replicas: list[GatewayProcess]
    keys: dict[str, str]
    store_url: str
    artifacts: Path
    injector: FaultInjector


def _port(url: str) -> int:
    return int(url.split("://", 1)[1].split("/", 1)[0].rsplit(":", 1)[1])


@pytest.fixture
def soak(redis_url: str, tmp_path: Path) -> Iterator[Soak]:
    store_url = redis_url.rsplit("/", 1)[0] + "/10"
    redis.Redis.from_url(store_url).flushdb()
    chat, images, music = FakeOpenAI(), FakeOpenAIImages(), FakeReplicate()
    chat_url, stop_chat = chat.start_in_thread()
    replicas: list[GatewayProcess] = []
    proxies: dict[str, FaultProxy] = {}
    try:
        with serving(images), serving(music):
            for name, url in (("chat", chat_url), ("images", images.base_url)):
                proxies[name] = FaultProxy(("127.0.0.1", _port(url))).start()
            proxies["music"] = FaultProxy(("127.0.0.1", _port(music.base_url))).start()
            urls = {name: p.url("/v1") for name, p in proxies.items()}
            config = CONFIG.format(**urls, models=UPSTREAM_MODELS)
            shared = {
                "GATEWAY_ARTIFACTS_DIR": str(tmp_path / "artifacts"),
                "GATEWAY_SIGNING_SECRET": "soak-replicas-share-this",
            }
            for name in ("a", "b"):
                replicas.append(
                    start_gateway(
                        tmp_path / name, config, store_url=store_url, extra_env=shared, fresh=True
                    )
                )
            keys = {}
            for tenant in ("alpha", "beta"):
                keys[tenant] = replicas[0].new_key(tenant)
                replicas[0].grant(tenant, str(GRANT))
            injector = FaultInjector(proxies, chat, images, every=4.0, hold=1.5)
            yield Soak(replicas, keys, store_url, tmp_path / "artifacts", injector)
    finally:
        for gateway in replicas:
            gateway.stop()
        for proxy in proxies.values():
            proxy.stop()
        stop_chat()


def _run(soak: Soak) -> tuple[list[Outcome], RssSampler, float]:
    outcomes: list[Outcome] = []
    bases = [root_of(g.base_url) for g in soak.replicas]
    clients = [
        Client(f"{tenant}{i}", bases[i % 2 :] + bases[: i % 2], tenant, key, outcomes, seed=i)
        for tenant, key in soak.keys.items()
        for i in range(CLIENTS_PER_TENANT)
    ]
    stop = threading.Event()
    errors: list[BaseException] = []

    def drive(client: Client) -> None:
        try:
            while not stop.is_set():
                client.step()
        except BaseException as exc:  # an assertion in a thread fails the test below
            errors.append(exc)

    sampler = RssSampler([g.process.pid for g in soak.replicas])
    threads = [threading.Thread(target=drive, args=(c,)) for c in clients]
    threads += [
        threading.Thread(target=soak.injector.run, args=(stop,)),
        threading.Thread(target=sampler.run, args=(stop,)),
    ]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    stop.wait(SECONDS)
    stop.set()
    for thread in threads:
        thread.join(timeout=60)
    elapsed = time.monotonic() - started
    for client in clients:
        client.close()
    assert not errors, errors[0]
    assert not any(t.is_alive() for t in threads), "a client thread hung"
    return outcomes, sampler, elapsed


def _tasks_settle(soak: Soak, outcomes: list[Outcome]) -> dict[str, dict[str, Any]]:
    """Every task created is terminal (each tenant's whole list, so none is missed)."""
    created = {o.task_id for o in outcomes if o.task_id}
    tasks: dict[str, dict[str, Any]] = {}
    deadline = time.monotonic() + 60
    for key in soak.keys.values():
        base = root_of(soak.replicas[0].base_url)
        with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}) as client:
            listed = wait_until(
                lambda: all_tasks(client),
                lambda now: all(t["status"] in TERMINAL for t in now),
                timeout=max(deadline - time.monotonic(), 0.0),
                interval=0.5,
                what="every task terminal (tasks lost?)",
            )
        tasks.update({t["task_id"]: t for t in listed})
    assert set(tasks) == created, "a task nobody created, or a created task missing"
    return tasks


def _books(soak: Soak, outcomes: list[Outcome], tasks: dict[str, dict[str, Any]]) -> Decimal:
    """Each tenant's ledger against the answers; returns the largest drift (zero)."""
    drift = Decimal(0)
    for tenant, key in soak.keys.items():
        base = root_of(soak.replicas[1].base_url)
        with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}) as client:
            entries = ledger(client)
            wallet = client.get("/v1/wallet").json()
        charges: dict[str, list[Decimal]] = {}
        for entry in entries:
            if entry["kind"] == "charge":
                charges.setdefault(entry["request_id"], []).append(
                    -Decimal(entry["amount_credits"])
                )
        expected = GRANT
        mine = [o for o in outcomes if o.tenant == tenant]
        for outcome in mine:
            charged = charges.pop(outcome.request_id, [])
            if outcome.kind in ("chat", "stream") and outcome.ok:
                assert charged == [outcome.credits], (outcome, charged)
                expected -= outcome.credits or 0
            elif outcome.broken:
                assert len(charged) <= 1, (outcome, charged)
                expected -= sum(charged, Decimal(0))
            else:
                assert not charged, (outcome, charged)
        assert not charges, f"charges of no call: {list(charges)[:5]}"
        for outcome in mine:
            if outcome.task_id:
                billing = tasks[outcome.task_id]["billing"]
                expected -= Decimal(billing["charged_credits"]) - Decimal(
                    billing["refunded_credits"]
                )
        total = sum((Decimal(e["amount_credits"]) for e in entries), Decimal(0))
        balance = Decimal(wallet["balance_credits"])
        assert Decimal(wallet["held_credits"]) == 0, wallet
        assert balance == total, f"{tenant}: wallet {balance} != ledger {total}"
        drift = max(drift, abs(balance - expected))
        assert balance == expected, f"{tenant}: wallet {balance}, the answers say {expected}"
    return drift


def _report(
    outcomes: list[Outcome],
    tasks: dict[str, dict[str, Any]],
    sampler: RssSampler,
    injector: FaultInjector,
    elapsed: float,
) -> dict[str, Any]:
    kinds = Counter(o.kind for o in outcomes)
    errors = Counter(f"{o.kind}:{o.status}:{o.code}" for o in outcomes if not o.ok)
    ends = Counter(
        f"{t['capability']}:{t['status']}"
        + (f":{t['error']['code']}" if t["status"] == "failed" else "")
        for t in tasks.values()
    )
    curve = [
        {"t": round(t, 1), **{str(i): kib for i, kib in enumerate(s.values())}}
        for t, s in sampler.samples
    ]
    return {
        "seconds": round(elapsed, 1),
        "requests": dict(kinds),
        "ok": sum(1 for o in outcomes if o.ok),
        "faults": dict(injector.injected),
        "errors": dict(errors),
        "tasks": dict(ends),
        "slowest_seconds": round(max(o.seconds for o in outcomes), 2),
        "rss_kib": curve,
    }


def test_mixed_traffic_with_upstream_faults_loses_nothing_and_drifts_nothing(soak: Soak) -> None:
    outcomes, sampler, elapsed = _run(soak)
    tasks = _tasks_settle(soak, outcomes)
    drift = _books(soak, outcomes, tasks)
    report = _report(outcomes, tasks, sampler, soak.injector, elapsed)
    report["drift_credits"] = str(drift)
    print(json.dumps(report, indent=1))
    if os.environ.get("GATEWAY_SOAK_REPORT"):
        Path(os.environ["GATEWAY_SOAK_REPORT"]).write_text(json.dumps(report, indent=1))

    assert sum(soak.injector.injected.values()) >= SECONDS // 6, "too few faults injected"
    assert report["ok"] > len(outcomes) / 2, report
    for outcome in outcomes:
        assert outcome.status != -1, f"no answer: {outcome}"
        assert outcome.seconds < 20, f"{outcome.kind} took {outcome.seconds:.1f}s"
        if not outcome.ok:
            assert outcome.retryable is True, outcome
    check_all(
        soak.replicas[0].base_url,
        [Books(tenant, key) for tenant, key in soak.keys.items()],
        store_url=soak.store_url,
        blobs=soak.artifacts,
    )
    assert httpx.get(f"{soak.replicas[1].base_url}/health", timeout=5).status_code == 200
    warm, end = sampler.at(WARM_UP), sampler.samples[-1][1]
    for pid, kib in end.items():
        assert kib <= warm[pid] * 1.10, f"RSS of {pid} grew from {warm[pid]} to {kib} KiB"
