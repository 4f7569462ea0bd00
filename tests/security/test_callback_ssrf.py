"""Task callback URLs as an attacker writes them, against a real gateway in a network sandbox.

The machinery of the reference suite (`test_ssrf.py`): a `Sandbox` whose loopback also carries
private, link-local and metadata addresses, each with a TCP canary, and whose /etc/hosts makes
DNS names resolve to them. The gateway may deliver to one "public" receiver (127.0.0.2, the only
network `callback_allowed_networks` allows) and nothing else: an address in any spelling is a
422 naming `callback.url` at create; a name that resolves to a forbidden address fails the
delivery at its first attempt, without retry; a redirect from the public receiver to a
forbidden place is never followed. Every canary stays at zero connections, and a positive
control delivers to the public receiver through the same gateway.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import httpx
import pytest

from tests.e2e.media_support import root_of, wallet_balance
from tests.security.canary import Canaries
from tests.security.sandbox import Sandbox, require_sandbox
from tests.security.test_ssrf import CANARY_ADDRESSES, FORBIDDEN_HOSTS, HOSTS, PUBLIC
from tests.support.gateway_process import GatewayProcess, start_gateway
from tests.support.routing_files import MEDIA_CONFIG
from tests.support.waiting import wait_until
from tests.support.webhook_receiver import Answer, Receiver

CONFIG = MEDIA_CONFIG.replace(
    "[gateway]\n",
    f'[gateway]\ncallback_allowed_networks = ["{PUBLIC}/32"]\ncallback_retry_seconds = [0.2]\n',
    1,
)
NAMES = [
    "localhost", "localhost.", "LOCALHOST", "metadata.google.internal", "internal.example",
    "loopback.example", "v6-loopback.example",
]  # fmt: skip
LITERALS = [host for host in FORBIDDEN_HOSTS if host not in NAMES]
REDIRECT_TARGETS = [
    "http://127.0.0.1:{port}/hook",
    "http://[::1]:{port}/hook",
    "http://2130706433:{port}/hook",
    "http://10.0.0.1:{port}/hook",
    "http://169.254.169.254:{port}/latest/meta-data/",
    "http://metadata.google.internal:{port}/computeMetadata/v1/",
    "http://internal.example:{port}/hook",
]


@dataclass
class World:
    box: Sandbox
    gateway: GatewayProcess
    canaries: Canaries
    public: Receiver
    key: str

    def client(self) -> httpx.Client:
        return httpx.Client(
            base_url=root_of(self.gateway.base_url),
            headers={"Authorization": f"Bearer {self.key}"},
            timeout=30,
        )


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    require_sandbox()
    addresses = [a for a in CANARY_ADDRESSES if a not in ("127.0.0.1", "::1")]
    with Sandbox.start(addresses=addresses, hosts=HOSTS) as box:
        canaries = box.run(Canaries, CANARY_ADDRESSES)
        public = box.run(Receiver, PUBLIC)
        thread = threading.Thread(target=public.server.serve_forever, daemon=True)
        thread.start()
        workdir = tmp_path_factory.mktemp("callback-ssrf")
        try:
            gateway = box.run(lambda: start_gateway(workdir, CONFIG, launcher=box.launcher))
            try:
                yield World(box, gateway, canaries, public, gateway.api_key or "")
            finally:
                gateway.stop()
        finally:
            public.server.shutdown()
            public.server.server_close()
            canaries.close()


def _create(world: World, urls: list[str]) -> list[httpx.Response]:
    def scenario() -> list[httpx.Response]:
        with world.client() as client:
            return [
                client.post(
                    "/v1/images/generations",
                    json={"model": "image-model-2", "prompt": "p", "callback": {"url": url}},
                )
                for url in urls
            ]

    return world.box.run(scenario)


def _callbacks_settled(world: World, task_ids: list[str]) -> list[dict[str, Any]]:
    def scenario() -> list[dict[str, Any]]:
        with world.client() as client:
            return [
                wait_until(
                    lambda task_id=task_id: client.get(f"/v1/tasks/{task_id}").json(),
                    lambda task: task["callback"]["status"] in ("delivered", "failed", "disabled"),
                    timeout=30,
                    what=f"the callback of {task_id}",
                )
                for task_id in task_ids
            ]

    return world.box.run(scenario)


def _balance(world: World) -> Decimal:
    def read() -> Decimal:
        with world.client() as client:
            return wallet_balance(client)

    return world.box.run(read)


def test_a_public_receiver_gets_its_callback_through_the_same_gateway(world: World) -> None:
    world.public.scripts["/control"] = [Answer(200)]
    (created,) = _create(world, [f"http://public.example:{world.public.port}/control"])
    assert created.status_code == 202, created.text
    (task,) = _callbacks_settled(world, [created.json()["task_id"]])
    assert (task["callback"]["status"], task["callback"]["attempt_count"]) == ("delivered", 1)
    assert len(world.public.hits("/control")) == 1


def test_forbidden_addresses_in_every_spelling_are_a_422_at_create(world: World) -> None:
    before = _balance(world)
    port = world.canaries.port
    urls = [f"{scheme}://{host}:{port}/hook" for host in LITERALS for scheme in ("https", "http")]
    wrong = []
    for url, response in zip(urls, _create(world, urls), strict=True):
        details = response.json()["error"].get("details") or []
        if response.status_code != 422 or [d["field"] for d in details] != ["callback.url"]:
            wrong.append((url, response.status_code, response.text))
    assert not wrong, wrong
    assert _balance(world) == before  # nothing created, nothing debited
    assert world.box.run(world.canaries.total) == 0


def test_names_resolving_to_forbidden_addresses_fail_at_their_first_attempt(
    world: World,
) -> None:
    port = world.canaries.port
    urls = [f"https://{name}:{port}/hook" for name in NAMES]
    created = _create(world, urls)
    assert [r.status_code for r in created] == [202] * len(urls), [r.text for r in created]
    tasks = _callbacks_settled(world, [r.json()["task_id"] for r in created])
    for url, task in zip(urls, tasks, strict=True):
        cb = task["callback"]
        if "could not be resolved" in (cb["last_error"] or ""):  # the sandbox's `localhost.`
            assert (cb["status"], cb["attempt_count"]) == ("failed", 2), (url, cb)
            continue  # (a lookup that failed is retried: DNS may be back)
        assert (cb["status"], cb["attempt_count"]) == ("failed", 1), (url, cb)
        assert "may not reach" in cb["last_error"], (url, cb)
    refused = [t for t in tasks if "may not reach" in (t["callback"]["last_error"] or "")]
    assert len(refused) >= len(NAMES) - 1
    assert world.box.run(world.canaries.total) == 0


def test_redirects_to_forbidden_places_are_never_followed(world: World) -> None:
    port = world.canaries.port
    paths = []
    for n, target in enumerate(REDIRECT_TARGETS):
        path = f"/redirect-{n}"
        world.public.scripts[path] = [Answer(302, {"Location": target.format(port=port)})]
        paths.append(path)
    created = _create(world, [f"http://public.example:{world.public.port}{p}" for p in paths])
    tasks = _callbacks_settled(world, [r.json()["task_id"] for r in created])
    for path, task in zip(paths, tasks, strict=True):
        cb = task["callback"]
        assert (cb["status"], cb["attempt_count"]) == ("failed", 2), (path, cb)
        assert "redirect" in cb["last_error"]
        assert len(world.public.hits(path)) == 2
    assert world.box.run(world.canaries.total) == 0
