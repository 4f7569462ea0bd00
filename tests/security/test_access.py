"""Who can reach what, against real gateway processes: tenants cannot see each other, ids
cannot be guessed, and a signed artifact URL opens one artifact until it expires, nothing else.

Another tenant's task, artifact (record and bytes), upload and idempotent reply must be exactly
as if they did not exist: the same 404 as a made-up id (never a 403, which would confirm the id
is real), the same empty page, the same "no such artifact" for a reference, and an
Idempotency-Key another tenant used is simply unused for you. Run on the embedded store and on
Redis, where the scoping is written separately.

The gateways sign with a secret the tests know (GATEWAY_SIGNING_SECRET), so a test can make a
valid signature for any expiry: an expired link is refused although its signature is right.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import math
import os
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
import redis

from gateway.artifacts.signing import UrlSigner
from gateway.auth.issuing import issue_key
from gateway.config.loader import load_config
from gateway.store import store_from_url
from tests.e2e.media_support import png_bytes, post_task, root_of, wait_for_task, wallet_balance
from tests.support.gateway_process import GatewayProcess, client_for, start_gateway
from tests.support.routing_files import MEDIA_CONFIG

REDIS_DB = 9  # the one database this suite may flush
SIGNING_SECRET = "security-tests-signing-secret-0123456789"


@dataclass
class Tenants:
    gateway: GatewayProcess
    alice: httpx.Client
    bob: httpx.Client


CONFIG = MEDIA_CONFIG.replace("starting_grant_credits = 1000", "starting_grant_credits = 100000")


async def _provision(store_url: str, config_path: Path, tenants: list[str]) -> dict[str, str]:
    """Keys and credits straight in a shared store (Redis), without a CLI process each."""
    store = store_from_url(store_url)
    await store.open()
    try:
        config, keys = load_config(config_path), {}
        for tenant in tenants:
            keys[tenant], _ = await issue_key(store, config, tenant)
            await store.grant(tenant, 10**11, entry_id=f"grant:{tenant}", reason="test")
        return keys
    finally:
        await store.close()


@pytest.fixture(scope="module", params=["sqlite", "redis"])
def tenants(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Tenants]:
    workdir = tmp_path_factory.mktemp(request.param)
    store_url = None
    if request.param == "redis":
        base = request.getfixturevalue("redis_url")
        store_url = base.rsplit("/", 1)[0] + f"/{REDIS_DB}"
        redis.Redis.from_url(store_url).flushdb()
    gateway = start_gateway(
        workdir, CONFIG, store_url=store_url, extra_env={"GATEWAY_SIGNING_SECRET": SIGNING_SECRET}
    )
    try:
        if store_url is None:  # the embedded store: its default key, and the CLI for one more
            keys = {"default": gateway.api_key or "", "other": gateway.new_key("other")}
            gateway.grant("other", "100000")
        else:
            tenant_names = ["default", "other"]
            keys = asyncio.run(_provision(store_url, workdir / "gateway.toml", tenant_names))
        with (
            client_for(gateway, keys["default"]) as alice,
            client_for(gateway, keys["other"]) as bob,
        ):
            yield Tenants(gateway, alice, bob)
    finally:
        gateway.stop()
        if store_url:
            redis.Redis.from_url(store_url).flushdb()


def _without_request_id(response: httpx.Response) -> tuple[int, dict[str, Any]]:
    body = response.json()
    body["error"].pop("request_id", None)
    return response.status_code, body


def _alices_things(tenants: Tenants) -> dict[str, str]:
    alice = tenants.alice
    task = post_task(
        alice,
        "/v1/images/generations",
        {"model": "image-model-2", "prompt": "alice's secret plan"},
        **{"Idempotency-Key": "shared-key-1"},
    )
    task = wait_for_task(alice, task["task_id"])
    assert task["status"] == "succeeded", task
    upload = alice.post(
        "/v1/uploads", files={"file": ("alice.png", png_bytes(8, 8, (1, 2, 3)), "image/png")}
    )
    assert upload.status_code == 201, upload.text
    image = task["output"]["images"][0]
    return {
        "task": task["task_id"],
        "output": image["artifact_id"],
        "url": image["url"],
        "upload": upload.json()["artifact_id"],
    }


def test_another_tenants_things_do_not_exist(tenants: Tenants) -> None:
    alice, bob = tenants.alice, tenants.bob
    mine = _alices_things(tenants)
    made_up_task, made_up_art = "task_" + "0" * 32, "art_" + "0" * 32
    pairs = [
        (f"/v1/tasks/{mine['task']}", f"/v1/tasks/{made_up_task}", "GET"),
        (f"/v1/tasks/{mine['task']}/cancel", f"/v1/tasks/{made_up_task}/cancel", "POST"),
    ]
    for art in (mine["output"], mine["upload"]):
        pairs.append((f"/v1/artifacts/{art}", f"/v1/artifacts/{made_up_art}", "GET"))
        pairs.append(
            (f"/v1/artifacts/{art}/content", f"/v1/artifacts/{made_up_art}/content", "GET")
        )
    for real, invented, method in pairs:
        assert alice.request(method, real).status_code == 200, real  # it does exist
        theirs, nothing = bob.request(method, real), bob.request(method, invented)
        assert theirs.status_code == 404, (real, theirs.text)
        assert _without_request_id(theirs) == _without_request_id(nothing), real
        assert mine["task"] not in theirs.text and "alice" not in theirs.text

    # Listing: none of hers, and her task id as a cursor is the same as a made-up one.
    listed = bob.get("/v1/tasks", params={"limit": "100"}).json()["data"]
    assert all(t["task_id"] != mine["task"] for t in listed)
    after_hers = bob.get("/v1/tasks", params={"after": mine["task"]})
    after_nothing = bob.get("/v1/tasks", params={"after": made_up_task})
    assert after_hers.status_code == after_nothing.status_code == 200
    assert after_hers.json() == after_nothing.json()

    # A reference to her artifact is the same refusal as to no artifact at all.
    def reference(artifact_id: str) -> tuple[int, dict[str, Any]]:
        body = {
            "model": "image-model-2",
            "prompt": "p",
            "image": {"type": "artifact", "artifact_id": artifact_id},
        }
        return _without_request_id(bob.post("/v1/images/image-to-image", json=body))

    status, refused = reference(mine["upload"])
    assert status == 422 and refused["error"]["details"][0]["field"] == "image.artifact_id"
    assert (status, refused) == reference(made_up_art)

    # Her signed URL works for whoever holds it (that is what it is for), for that artifact only.
    root = root_of(tenants.gateway.base_url)
    assert httpx.get(root + mine["url"]).status_code == 200
    assert httpx.get(root + mine["url"].replace(mine["output"], mine["upload"])).status_code == 404


def test_another_tenants_idempotency_key_is_simply_unused(tenants: Tenants) -> None:
    alice, bob = tenants.alice, tenants.bob
    body = {"model": "image-model-2", "prompt": "same words"}
    headers = {"Idempotency-Key": "shared-key-2"}
    first = alice.post("/v1/images/generations", json=body, headers=headers)
    assert first.status_code == 202
    again = alice.post("/v1/images/generations", json=body, headers=headers)
    assert again.headers.get("idempotent-replayed") == "true"
    assert again.json()["task_id"] == first.json()["task_id"]

    before = wallet_balance(bob)
    same = bob.post("/v1/images/generations", json=body, headers=headers)
    assert same.status_code == 202, same.text
    assert "idempotent-replayed" not in same.headers
    assert same.json()["task_id"] != first.json()["task_id"]
    assert wallet_balance(bob) == before - 50  # charged: a new task of his own
    other_body = bob.post(
        "/v1/images/generations",
        json={**body, "prompt": "x"},
        headers={"Idempotency-Key": "shared-key-3"},
    )
    assert other_body.status_code == 202
    # Alice's key with a different body is not "reused" for Bob (that would confirm it).
    alice.post("/v1/images/generations", json=body, headers={"Idempotency-Key": "shared-key-4"})
    different = bob.post(
        "/v1/images/generations", json={**body, "n": 2}, headers={"Idempotency-Key": "shared-key-4"}
    )
    assert different.status_code == 202, different.text

    chat = {"model": "sim-chat-1", "messages": [{"role": "user", "content": "hello"}]}
    chat_headers = {"Idempotency-Key": "shared-chat-key"}
    hers = alice.post("/v1/chat/completions", json=chat, headers=chat_headers)
    his = bob.post("/v1/chat/completions", json=chat, headers=chat_headers)
    assert hers.status_code == his.status_code == 200
    assert "idempotent-replayed" not in his.headers
    assert his.json()["id"] != hers.json()["id"]


# --- signed URLs ---------------------------------------------------------------------------------


def _signer(now: float | None = None) -> UrlSigner:
    """The gateway's signer (same secret, as `resources.signing_secret` derives it)."""
    secret = hashlib.sha256(SIGNING_SECRET.encode()).digest()
    return UrlSigner(secret, (lambda: now) if now is not None else time.time)


def _content(root: str, artifact_id: str, expires: str | int, signature: str) -> httpx.Response:
    params = {"expires": str(expires), "signature": signature}
    return httpx.get(f"{root}/v1/artifacts/{artifact_id}/content", params=params, timeout=10)


def test_signed_urls_open_one_artifact_until_they_expire(tenants: Tenants) -> None:
    alice, root = tenants.alice, root_of(tenants.gateway.base_url)
    task = post_task(alice, "/v1/images/generations", {"model": "image-model-2", "prompt": "s"})
    task = wait_for_task(alice, task["task_id"])
    art = task["output"]["images"][0]["artifact_id"]
    query = parse_qs(urlsplit(task["output"]["images"][0]["url"]).query)
    expires, signature = query["expires"][0], query["signature"][0]
    upload = alice.post(
        "/v1/uploads", files={"file": ("o.png", png_bytes(4, 4, (0, 0, 0)), "image/png")}
    ).json()["artifact_id"]
    owned = alice.get(f"/v1/artifacts/{art}/content").content

    # What works: the gateway's own URL, and one the test signs the same way (the control).
    assert _content(root, art, expires, signature).content == owned
    fresh_expires, fresh = _signer().sign(art, 300)
    assert _content(root, art, fresh_expires, fresh).content == owned

    now = time.time()
    stale_expires, stale = _signer(now - 400).sign(art, 300)  # right signature, 100 s ago
    flipped = ("A" if signature[0] != "A" else "B") + signature[1:]
    other_secret = UrlSigner(b"x" * 32).sign(art, 300)
    upload_expires, upload_signature = _signer().sign(upload, 300)
    refused = {
        "expired": (art, stale_expires, stale),
        "expiry + 1": (art, int(expires) + 1, signature),
        "expiry - 1": (art, int(expires) - 1, signature),
        "expiry far out": (art, int(expires) + 10**6, signature),
        "signature flipped": (art, expires, flipped),
        "signature cut": (art, expires, signature[:-1]),
        "signature padded": (art, expires, signature + "="),
        "signature empty": (art, expires, ""),
        "signature of another secret": (art, *other_secret),
        "signature of another artifact": (art, upload_expires, upload_signature),
        "this signature on another artifact": (upload, expires, signature),
        "made-up artifact": ("art_" + "0" * 32, expires, signature),
        "expiry in other digits": (art, "\u00b2", signature),
        "expiry in wide digits": (art, "\uff11" * 10, signature),
        "expiry of 5000 digits": (art, "9" * 5000, signature),
        "expiry negative": (art, "-1", signature),
        "expiry as a float": (art, f"{expires}.0", signature),
        "expiry with a space": (art, f" {expires}", signature),
    }
    answers = {name: _content(root, *case) for name, case in refused.items()}
    wrong = {n: (r.status_code, r.text[:120]) for n, r in answers.items() if r.status_code != 404}
    assert not wrong, wrong
    for response in answers.values():
        assert response.json()["error"]["code"] == "not_found"
        assert response.content != owned

    # A signature opens the bytes only, never the record, and never without the pair.
    assert httpx.get(f"{root}/v1/artifacts/{art}", params=query).status_code == 401
    assert httpx.get(f"{root}/v1/artifacts/{art}/content").status_code == 401
    only = {"signature": signature}
    assert httpx.get(f"{root}/v1/artifacts/{art}/content", params=only).status_code == 401


# --- ids ----------------------------------------------------------------------------------------


def _shared_prefix(a: str, b: str) -> int:
    same = (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y)
    return next(same, min(len(a), len(b)))


def _check_random(ids: list[str], prefix: str) -> None:
    """128 random bits after the prefix: lower-case hex, unique, no shared stem, every digit
    about equally common, and no arithmetic pattern between consecutive ids."""
    assert len(set(ids)) == len(ids), f"{prefix} ids repeat"
    tails = []
    for value in ids:
        assert value.startswith(prefix), value
        tail = value.removeprefix(prefix)
        assert len(tail) >= 32 and all(c in "0123456789abcdef" for c in tail), value
        tails.append(tail)
    # Sequential or time-based ids share long prefixes; random ones share ~0.07 hex digits.
    shared = [_shared_prefix(a, b) for a, b in itertools.pairwise(tails)]
    assert max(shared) <= 4 and sum(shared) / len(shared) < 0.5, (prefix, shared)
    numbers = [int(t, 16) for t in tails]
    steps = {b - a for a, b in itertools.pairwise(numbers)}
    assert len(steps) == len(numbers) - 1, f"{prefix} ids step by a constant"
    # Chi-square over hex digits (15 degrees of freedom): 60 is far past p = 1e-6.
    digits = Counter("".join(tails))
    expected = sum(digits.values()) / 16
    chi = sum((digits.get(d, 0) - expected) ** 2 / expected for d in "0123456789abcdef")
    assert chi < 60, (prefix, chi, digits)
    # And per position: every one of the 32 positions takes many values.
    for position in range(32):
        assert len({t[position] for t in tails}) >= min(8, math.ceil(len(tails) / 4)), position


@pytest.mark.parametrize("tenants", ["sqlite"], indirect=True)  # the gateway makes ids
def test_ids_are_random_and_unguessable(tenants: Tenants) -> None:
    alice = tenants.alice
    request_ids = [alice.get("/v1/wallet").headers["x-request-id"] for _ in range(100)]
    _check_random(request_ids, "req_")
    tasks = [
        post_task(alice, "/v1/images/generations", {"model": "image-model-2", "prompt": f"{i}"})
        for i in range(40)
    ]
    _check_random([t["task_id"] for t in tasks], "task_")
    uploads = []
    for _ in range(40):
        response = alice.post(
            "/v1/uploads", files={"file": ("u.png", png_bytes(2, 2, (9, 9, 9)), "image/png")}
        )
        uploads.append(response.json()["artifact_id"])
    _check_random(uploads, "art_")
    chat = {"model": "sim-chat-1", "messages": [{"role": "user", "content": "hi"}]}
    completions = [alice.post("/v1/chat/completions", json=chat).json()["id"] for _ in range(40)]
    _check_random(completions, "chatcmpl_")


def test_the_randomness_check_catches_guessable_ids() -> None:
    """The instrument above fails on the kinds of ids it is there to catch."""
    counter = [f"task_{i:032x}" for i in range(1000, 1040)]
    timed = [f"task_{1_790_000_000_000 + i * 7:016x}{os.urandom(8).hex()}" for i in range(40)]
    uuid1 = [f"task_{uuid.uuid1().hex}" for _ in range(40)]  # time, then a fixed node
    for ids in (counter, timed, uuid1):
        with pytest.raises(AssertionError):
            _check_random(ids, "task_")
    _check_random([f"task_{os.urandom(16).hex()}" for _ in range(40)], "task_")
