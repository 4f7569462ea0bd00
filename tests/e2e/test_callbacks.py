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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from standardwebhooks import Webhook

from tests.e2e.media_support import post_task, root_of, wait_for_task
from tests.support.gateway_process import GatewayProcess, start_gateway
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
        "/gone": [Answer(410)],
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
