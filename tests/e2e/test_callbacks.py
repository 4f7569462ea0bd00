"""Task callbacks end to end: a real gateway (SQLite, then Redis) delivers signed callbacks to a
local receiver that answers by script, on the schedule of `callback_retry_seconds`.

For a succeeded, a failed and a canceled task: attempts as scripted (500 twice then 200 with a
`Retry-After` honoured; 410 disables; a hang past the 10 s wait is retried; a 302 is never
followed), the same `webhook-id` on every attempt, every signature verified with the
`standardwebhooks` package as a receiver would, the body's `data` the task as the API shows
it, and the task's `callback` object.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from standardwebhooks import Webhook

from tests.e2e.media_support import post_task, root_of, wait_for_task
from tests.support.gateway_process import GatewayProcess, start_gateway
from tests.support.metrics_scrape import scrape, total, value
from tests.support.routing_files import MEDIA_CONFIG
from tests.support.waiting import wait_until
from tests.support.webhook_receiver import HANG, Answer, Receiver, receiver

CONFIG = MEDIA_CONFIG.replace(
    "[gateway]\n",
    '[gateway]\ncallback_allowed_networks = ["127.0.0.1/32"]\n'
    "callback_retry_seconds = [0.2, 0.2]\n",
    1,
)
IMAGE = "/v1/images/generations"
PER_HOST = 4
"""The delivery worker's cap of attempts at once to one destination host."""


def _task(client: httpx.Client, prompt: str, url: str | None) -> str:
    body: dict[str, Any] = {"model": "image-model-2", "prompt": prompt}
    if url is not None:
        body["callback"] = {"url": url}
    return str(post_task(client, IMAGE, body)["task_id"])


def _settled(client: httpx.Client, task_id: str) -> dict[str, Any]:
    """The task once its callback is delivered, failed or disabled."""

    def read() -> dict[str, Any]:
        return client.get(f"/v1/tasks/{task_id}").json()  # type: ignore[no-any-return]

    return wait_until(
        read,
        lambda task: task["callback"]["status"] in ("delivered", "failed", "disabled"),
        timeout=40,
        what=f"the callback of {task_id}",
    )


def _verified(secret: str, hits: list[Any]) -> list[dict[str, Any]]:
    """Each request's body, its signature verified as a receiver does."""
    webhook = Webhook(secret)
    return [webhook.verify(hit.body, hit.headers) for hit in hits]


@pytest.fixture(params=["sqlite", "redis"])
def world(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[GatewayProcess, Receiver, Receiver]]:
    store_url = None if request.param == "sqlite" else request.getfixturevalue("redis_server").url
    with receiver() as hooks, receiver() as elsewhere:
        gateway = start_gateway(tmp_path, CONFIG, store_url=store_url)
        try:
            yield gateway, hooks, elsewhere
        finally:
            gateway.stop()


def test_callbacks_are_signed_retried_and_shown_on_the_task(
    world: tuple[GatewayProcess, Receiver, Receiver],
) -> None:
    gateway, hooks, elsewhere = world
    secret = gateway.cli("callbacks", "secret", "--tenant", "default").stdout.strip()
    assert secret.startswith("whsec_")
    hooks.scripts = {
        "/flaky": [Answer(500, {"Retry-After": "1"}), Answer(500), Answer(200)],
        "/ok": [Answer(204)],
        "/gone": [Answer(410), Answer(200)],
        "/hang": [HANG, Answer(200)],
        "/redirect": [Answer(302, {"Location": elsewhere.url("/never")})],
    }
    elsewhere.scripts = {"/never": [Answer(200)]}
    gateway.grant("default", "1000")
    headers = {"Authorization": f"Bearer {gateway.new_key('default')}"}
    with httpx.Client(base_url=root_of(gateway.base_url), headers=headers, timeout=30) as client:
        ids = {
            "flaky": _task(client, "a fox", hooks.url("/flaky")),
            "ok": _task(client, "a fox [[sim:fail=500]]", hooks.url("/ok")),
            "gone": _task(client, "a fox [[sim:task_ms=20000]]", hooks.url("/gone")),
            "hang": _task(client, "a fox", hooks.url("/hang")),
            "redirect": _task(client, "a fox", hooks.url("/redirect")),
            "none": _task(client, "a fox", None),
        }
        wait_for_task(client, ids["gone"], statuses=frozenset({"running"}))
        assert client.post(f"/v1/tasks/{ids['gone']}/cancel").status_code == 200
        tasks = {name: _settled(client, task_id) for name, task_id in ids.items() if name != "none"}
        plain = wait_for_task(client, ids["none"])

    assert plain["callback"] == {
        "url": None, "status": None, "attempt_count": 0, "delivered_at": None,
        "last_error": None, "next_attempt_at": None,
    }  # fmt: skip
    expected = {  # name: (task status, callback status, attempts)
        "flaky": ("succeeded", "delivered", 3),
        "ok": ("failed", "delivered", 1),
        "gone": ("canceled", "disabled", 1),
        "hang": ("succeeded", "delivered", 2),
        "redirect": ("succeeded", "failed", 3),
    }
    for name, (status, callback_status, attempts) in expected.items():
        task, hits = tasks[name], hooks.hits(f"/{name}")
        cb = task["callback"]
        assert (task["status"], cb["status"], cb["attempt_count"]) == (
            status, callback_status, attempts
        ), (name, task)  # fmt: skip
        assert cb["url"] == hooks.url(f"/{name}") and cb["next_attempt_at"] is None
        assert len(hits) == attempts, name
        assert len({hit.headers["webhook-id"] for hit in hits}) == 1, name
        assert hits[0].headers["webhook-id"].startswith("cb_")
        for event in _verified(secret, hits):
            assert event["type"] == f"task.{status}"
            assert event["data"]["task_id"] == task["task_id"]
            assert event["data"]["status"] == status
            assert event["data"]["billing"] == task["billing"]
            assert event["data"]["callback"]["status"] == "pending"
        if callback_status == "delivered":
            assert cb["delivered_at"] is not None and cb["last_error"] is None
        else:
            assert cb["delivered_at"] is None and cb["last_error"]

    flaky = hooks.hits("/flaky")
    assert flaky[1].at - flaky[0].at >= 0.9  # Retry-After: 1 outlasts the 0.2 s schedule
    assert "410" in tasks["gone"]["callback"]["last_error"]
    assert "redirect" in tasks["redirect"]["callback"]["last_error"]
    assert elsewhere.received == []  # the redirect was never followed
    assert json.loads(hooks.hits("/ok")[0].body)["data"]["error"] is not None

    def counted() -> dict[str, float]:
        _, samples = scrape(gateway)
        counts = {
            outcome: total(samples, "gateway_callback_deliveries_total", outcome=outcome)
            for outcome in ("delivered", "retrying", "failed", "disabled")
        }
        return {**counts, "backlog": value(samples, "gateway_callback_backlog")}

    # delivered: flaky, ok, hang; retrying: flaky twice, hang once, redirect twice. (Counted
    # just after each outcome is stored: the scrape may come a moment before the last.)
    expected_counts = {"delivered": 3, "retrying": 5, "failed": 1, "disabled": 1, "backlog": 0}
    wait_until(counted, lambda counts: counts == expected_counts, timeout=10, what="the counts")

    # The secret rotated, the disabled callback redelivered: one more attempt, same id, signed
    # with the new secret and the replaced one.
    rotated = gateway.cli("callbacks", "secret", "--tenant", "default").stdout.strip()
    assert rotated.startswith("whsec_") and rotated != secret
    again = gateway.cli("callbacks", "redeliver", ids["gone"]).stdout.strip().split("\t")
    assert again == [ids["gone"], "default", "pending"]
    with httpx.Client(base_url=root_of(gateway.base_url), headers=headers, timeout=30) as client:
        redelivered = _settled(client, ids["gone"])["callback"]
    assert (redelivered["status"], redelivered["attempt_count"]) == ("delivered", 2)
    first, last = hooks.hits("/gone")
    assert last.headers["webhook-id"] == first.headers["webhook-id"]
    assert len(last.headers["webhook-signature"].split(" ")) == 2
    assert _verified(rotated, [last]) == _verified(secret, [last])


KILL_CONFIG = CONFIG.replace("callback_retry_seconds = [0.2, 0.2]", "callback_retry_seconds = [5]")


def test_a_gateway_killed_in_a_retry_schedule_delivers_once_after_restart(
    store_url: str | None, workdir: Path
) -> None:
    with receiver() as hooks:
        hooks.scripts = {"/once": [Answer(500), Answer(200)]}
        gateway = start_gateway(workdir, KILL_CONFIG, store_url=store_url)
        try:
            gateway.grant("default", "1000")
            key = gateway.new_key("default")
            headers = {"Authorization": f"Bearer {key}"}
            root = root_of(gateway.base_url)
            with httpx.Client(base_url=root, headers=headers, timeout=30) as client:
                task_id = _task(client, "a fox", hooks.url("/once"))
                wait_until(
                    lambda: client.get(f"/v1/tasks/{task_id}").json()["callback"],
                    lambda cb: cb["status"] == "retrying",
                    what="the first attempt's failure",
                )
            os.kill(gateway.process.pid, signal.SIGKILL)
            gateway.process.wait(timeout=10)
        finally:
            gateway.stop()
        assert len(hooks.hits("/once")) == 1  # killed before the retry was due

        restarted = start_gateway(workdir, KILL_CONFIG, store_url=store_url)
        try:
            root = root_of(restarted.base_url)
            with httpx.Client(base_url=root, headers=headers, timeout=30) as client:
                task = _settled(client, task_id)
        finally:
            restarted.stop()
    cb = task["callback"]
    assert (cb["status"], cb["attempt_count"]) == ("delivered", 2)
    hits = hooks.hits("/once")
    assert len(hits) == 2  # delivered once: the one 200 of the script
    assert hits[0].headers["webhook-id"] == hits[1].headers["webhook-id"]


def test_a_receiver_that_never_answers_leaves_chats_and_its_share_alone(tmp_path: Path) -> None:
    """Twelve callbacks to a receiver that hangs past the gateway's wait while 200 chats run:
    every chat is answered in full, and the receiver never sees more than the per-destination
    cap of attempts at once."""
    with receiver() as hooks:
        hooks.scripts = {"/stuck": [HANG]}
        gateway = start_gateway(tmp_path, CONFIG)
        try:
            headers = {"Authorization": f"Bearer {gateway.api_key}"}
            root = root_of(gateway.base_url)
            with httpx.Client(base_url=root, headers=headers, timeout=30) as client:
                for _ in range(12):
                    _task(client, "a fox", hooks.url("/stuck"))
                wait_until(lambda: hooks.in_flight, lambda n: n >= PER_HOST, what="stuck attempts")

                def chat(n: int) -> tuple[int, str]:
                    body = {
                        "model": "sim-chat-1",
                        "messages": [{"role": "user", "content": f"hello {n}"}],
                    }
                    response = client.post("/v1/chat/completions", json=body)
                    content = response.json()["choices"][0]["message"]["content"]
                    return response.status_code, content

                with ThreadPoolExecutor(8) as pool:
                    answers = list(pool.map(chat, range(200)))
                stuck_meanwhile = hooks.in_flight
        finally:
            gateway.stop()
    assert [status for status, _ in answers] == [200] * 200
    assert all(content for _, content in answers)
    assert stuck_meanwhile >= 1  # the receiver was still hanging while the chats ran
    assert hooks.most_in_flight == PER_HOST  # (a hung attempt counts until the gateway leaves)
