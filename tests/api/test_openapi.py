"""GET /openapi.json: valid OpenAPI 3.1, every route of the app in it (but the deliberate
exclusions), and real answers of every operation, successes and errors, as it says."""

from __future__ import annotations

import asyncio
import base64
import io
import math
import wave
from pathlib import Path
from typing import Any

import httpx
import pytest
from litestar.routes import ASGIRoute, HTTPRoute
from openapi_spec_validator import validate

from gateway.admin.token import hash_admin_token, new_admin_token
from tests.api.openapi_support import Recorded, check_response
from tests.api.support import InProcessApp, in_process_app

pytestmark = [
    pytest.mark.filterwarnings("ignore::litestar.exceptions.LitestarDeprecationWarning"),
    pytest.mark.filterwarnings("ignore:Deprecated 'query' parameter:DeprecationWarning"),
]

TOKEN = new_admin_token()
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
    "0000000d49444154789c63fccfc0500f0004850180848c2cb30000000049454e44ae426082"
)
EXCLUDED = {
    "/metrics",  # Prometheus text for scrapers, not the public API
    "/admin",  # the admin page and its files
    "/admin/assets/{name}",
    "/openapi.json",  # the document itself
    "/api/hello",  # Claude Code's start-up probe (gateway/api/hello.py), not an API
    "/v1/messages",  # Anthropic's Messages API, described by Anthropic's reference
    "/v1/messages/count_tokens",
    "/v1/responses",  # OpenAI's Responses API, described by OpenAI's reference
    "/v1/responses/input_tokens",
    "/v1/responses/{response_id}",
    "/v1/responses/{response_id}/input_items",
    "/",  # the front door Claude Code probes (`gateway.api.root`), not an operation
}
"""Besides these, the Planned paths (501) are left out: the spec's public description lists
only callable endpoints."""
PLANNED_PREFIXES = ("/v1/audio/", "/v1/video", "/v1/realtime")
PLANNED = {"/v1/uploads/resumable"}
RELEASES = {  # the spec's labels
    "/v1/chat/completions": "Available",
    "/v1/embeddings": "Available",
    "/v1/health": "Available",
    "/v1/models": "Preview",
    "/v1/catalog/models": "Preview",
    "/v1/images/generations": "Preview",
    "/v1/music/text-to-music": "Preview",
    "/v1/tasks/{task_id}": "Preview",
    "/v1/uploads": "Preview",
}
PIXEL = base64.b64encode(PNG).decode()
CHAT = "/v1/chat/completions"
MESSAGES = [{"role": "user", "content": "Say hello"}]


def _run(tmp_path: Path, scenario: Any, **overrides: Any) -> Any:
    async def main() -> Any:
        async with in_process_app(tmp_path, **overrides) as gateway:
            return await scenario(gateway)

    return asyncio.run(main())


async def _document(gw: InProcessApp) -> dict[str, Any]:
    response = await gw.client.get("/openapi.json")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/json")
    assert response.headers["x-request-id"]
    document: dict[str, Any] = response.json()
    return document


def test_the_document_is_valid_openapi_3_1_and_covers_every_route(tmp_path: Path) -> None:
    async def scenario(gw: InProcessApp) -> None:
        document = await _document(gw)
        assert document["openapi"].startswith("3.1")
        validate(document)
        documented = {
            (method.upper(), path) for path, item in document["paths"].items() for method in item
        }
        expected = set()
        for route in gw.app.routes:
            path = route.path_format
            if path in EXCLUDED or path in PLANNED or path.startswith(PLANNED_PREFIXES):
                continue
            if path.startswith("/openapi.json/"):  # the plugin's extra routes: 404 each
                continue
            if isinstance(route, ASGIRoute):
                expected.add(("POST", path))
            else:
                assert isinstance(route, HTTPRoute)
                expected |= {(m, path) for m in route.methods if m != "OPTIONS"}
        assert expected == documented
        assert any(path.startswith("/admin/v1/") for _, path in documented)

    _run(tmp_path, scenario, admin_token_hash=hash_admin_token(TOKEN))


def test_every_operation_has_its_release_security_and_the_envelope_on_errors(
    tmp_path: Path,
) -> None:
    async def scenario(gw: InProcessApp) -> None:
        document = await _document(gw)
        schemes = document["components"]["securitySchemes"]
        assert schemes["apiKey"] == schemes["apiKey"] | {"type": "http", "scheme": "bearer"}
        assert schemes["adminToken"]["scheme"] == "bearer"
        for path, item in document["paths"].items():
            for method, operation in item.items():
                where = f"{method} {path}"
                assert operation["x-release"] in ("Available", "Preview"), where
                if path in RELEASES:
                    assert operation["x-release"] == RELEASES[path], where
                names = {next(iter(s), None) for s in operation["security"]}
                if path.startswith("/admin/"):
                    assert names == {"adminToken"}, where
                elif path == "/v1/health":
                    assert operation["security"] == [], where
                else:
                    assert "apiKey" in names, where
                params = [p.get("$ref", "") for p in operation["parameters"]]
                assert "#/components/parameters/XRequestId" in params, where
                for status, response in operation["responses"].items():
                    assert "X-Request-Id" in response["headers"], (where, status)
                    if int(status) < 400 or (path, status) == ("/v1/health", "503"):
                        continue
                    schema = response["content"]["application/json"]["schema"]
                    assert schema == {"$ref": "#/components/schemas/ErrorBody"}, (where, status)
        chat = document["paths"][CHAT]["post"]
        assert set(chat["responses"]["200"]["content"]) == {"application/json", "text/event-stream"}
        assert {"x-gateway-model", "x-gateway-route"} <= set(chat["responses"]["200"]["headers"])
        assert "#/components/parameters/IdempotencyKey" in str(chat["parameters"])
        assert "Retry-After" in chat["responses"]["429"]["headers"]
        upload = document["paths"]["/v1/uploads"]["post"]["requestBody"]["content"]
        assert "multipart/form-data" in upload

    _run(tmp_path, scenario, admin_token_hash=hash_admin_token(TOKEN))


def test_the_document_is_built_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gateway.api.openapi import controller as openapi  # imports the controllers: lazily

    builds = []
    build = openapi.complete_document

    def counted(*args: Any) -> dict[str, Any]:
        builds.append(1)
        return build(*args)

    monkeypatch.setattr(openapi, "complete_document", counted)

    async def scenario(gw: InProcessApp) -> None:
        first = await gw.client.get("/openapi.json")
        again = await gw.client.get("/openapi.json")
        assert first.content == again.content
        assert len(builds) == 1
        for beyond in ("/openapi.json/other", "/openapi.json/openapi.json"):
            response = await gw.client.get(beyond)
            assert response.status_code == 404
            assert response.json()["error"]["code"] == "not_found"

    _run(tmp_path, scenario)


def _wav() -> bytes:
    out = io.BytesIO()
    with wave.open(out, "wb") as sound:
        sound.setnchannels(1)
        sound.setsampwidth(2)
        sound.setframerate(8000)
        frames = [int(8000 * math.sin(i / 10)) for i in range(8000)]
        sound.writeframes(b"".join(f.to_bytes(2, "little", signed=True) for f in frames))
    return out.getvalue()


async def _record(gw: InProcessApp) -> list[Recorded]:
    """One walk over the API: each operation's successes and refusals."""
    client, auth = gw.client, gw.auth()
    admin = {"Authorization": f"Bearer {TOKEN}"}
    out: list[Recorded] = []

    async def call(
        method: str, template: str, url: str | None = None, **kwargs: Any
    ) -> httpx.Response:
        response = await client.request(method, url or template, **kwargs)
        out.append((method, template, response))
        return response

    await call("GET", "/v1/health")
    await call("GET", "/v1/models", headers=auth)
    await call("GET", "/v1/models", headers={"Authorization": "Bearer gw-nope"})
    await call("GET", "/v1/models/{model_id}", "/v1/models/sim-chat-1", headers=auth)
    await call("GET", "/v1/models/{model_id}", "/v1/models/nope", headers=auth)
    nobody = {"Authorization": "Bearer gw-nope"}
    for catalog in ("/v1/catalog/models", "/v1/catalog/capabilities"):
        await call("GET", catalog, headers=auth)
        await call("GET", catalog, headers=nobody)
    # Chat: JSON, stream, replay, and what it refuses.
    body = {"model": "auto", "messages": MESSAGES}
    keyed = auth | {"Idempotency-Key": "openapi-1"}
    await call("POST", CHAT, json=body, headers=keyed)
    await call("POST", CHAT, json=body, headers=keyed)
    await call("POST", CHAT, json=body | {"temperature": 0.5}, headers=keyed)
    await call("POST", CHAT, json=body | {"stream": True}, headers=auth)
    await call("POST", CHAT, json=body | {"temperature": 9}, headers=auth)
    await call("POST", CHAT, json={"model": "nope", "messages": MESSAGES}, headers=auth)
    await call("POST", CHAT, content=b"hi", headers=auth | {"Content-Type": "text/plain"})
    await call("POST", CHAT, json=body, headers={"Authorization": "Bearer gw-nope"})
    failing = {"model": "sim-chat-1", "messages": [{"role": "user", "content": "[[sim:fail=502]]"}]}
    await call("POST", CHAT, json=failing, headers=auth)
    # Embeddings: floats, base64, a replay, and what it refuses.
    embed = "/v1/embeddings"
    texts = {"model": "auto", "input": ["hello", "world"]}
    replayed = auth | {"Idempotency-Key": "openapi-embed-1"}
    await call("POST", embed, json=texts, headers=replayed)
    await call("POST", embed, json=texts, headers=replayed)
    await call(
        "POST", embed, json=texts | {"encoding_format": "base64", "dimensions": 8}, headers=auth
    )
    await call("POST", embed, json=texts | {"dimensions": 0}, headers=auth)
    await call("POST", embed, json={"model": "sim-chat-1", "input": "x"}, headers=auth)
    await call("POST", embed, content=b"hi", headers=auth | {"Content-Type": "text/plain"})
    # Tasks: images and music, created, listed, looked up, canceled.
    created = await call(
        "POST", "/v1/images/generations", json={"model": "auto", "prompt": "a fox"}, headers=auth
    )
    task_id = created.json()["task_id"]
    await call("POST", "/v1/images/generations", json={"model": "auto", "n": 9}, headers=auth)
    await call(
        "POST",
        "/v1/images/image-to-image",
        json={
            "model": "auto",
            "prompt": "watercolour",
            "image": {"type": "data_uri", "data_uri": f"data:image/png;base64,{PIXEL}"},
        },
        headers=auth,
    )
    await call(
        "POST", "/v1/images/image-to-image", json={"model": "auto", "prompt": "x"}, headers=auth
    )
    await call(
        "POST",
        "/v1/music/text-to-music",
        json={"model": "auto", "prompt": "piano", "instrumental": True},
        headers=auth,
    )
    await call(
        "POST",
        "/v1/music/text-to-music",
        json={"model": "auto", "prompt": "x", "instrumental": True, "lyrics": "la"},
        headers=auth,
    )
    wav = await call(
        "POST", "/v1/uploads", files={"file": ("a.wav", _wav(), "audio/wav")}, headers=auth
    )
    await call(
        "POST",
        "/v1/music/reference-audio-to-music",
        json={
            "model": "auto",
            "prompt": "like this",
            "reference_audio": {"type": "artifact", "artifact_id": wav.json()["artifact_id"]},
        },
        headers=auth,
    )
    await call(
        "POST",
        "/v1/music/reference-audio-to-music",
        json={"model": "auto", "prompt": "x", "reference_audio": {"type": "data_uri"}},
        headers=auth,
    )
    await call("GET", "/v1/tasks", headers=auth)
    await call("GET", "/v1/tasks", "/v1/tasks?limit=0", headers=auth)
    await call("GET", "/v1/tasks/{task_id}", f"/v1/tasks/{task_id}", headers=auth)
    await call("GET", "/v1/tasks/{task_id}", "/v1/tasks/task_nope", headers=auth)
    await call("POST", "/v1/tasks/{task_id}/cancel", f"/v1/tasks/{task_id}/cancel", headers=auth)
    await call("POST", "/v1/tasks/{task_id}/cancel", "/v1/tasks/task_nope/cancel", headers=auth)
    # Uploads and artifacts.
    png = await call(
        "POST", "/v1/uploads", files={"file": ("a.png", PNG, "image/png")}, headers=auth
    )
    artifact = png.json()["artifact_id"]
    await call(
        "POST", "/v1/uploads", files={"file": ("a.txt", b"text", "text/plain")}, headers=auth
    )
    await call("POST", "/v1/uploads", files={"other": ("a.png", PNG, "image/png")}, headers=auth)
    await call("GET", "/v1/artifacts/{artifact_id}", f"/v1/artifacts/{artifact}", headers=auth)
    await call("GET", "/v1/artifacts/{artifact_id}", "/v1/artifacts/art_nope", headers=auth)
    content = "/v1/artifacts/{artifact_id}/content"
    await call("GET", content, f"/v1/artifacts/{artifact}/content", headers=auth)
    await call("GET", content, f"/v1/artifacts/{artifact}/content?expires=1&signature=x")
    await call("GET", content, f"/v1/artifacts/{artifact}/content?expires=1", headers=auth)
    await call(
        "GET", content, f"/v1/artifacts/{artifact}/content", headers=auth | {"Range": "bytes=0-9"}
    )
    await call(
        "GET", content, f"/v1/artifacts/{artifact}/content", headers=auth | {"Range": "bytes=999-"}
    )
    await call("HEAD", content, f"/v1/artifacts/{artifact}/content", headers=auth)
    await call("HEAD", content, "/v1/artifacts/art_nope/content", headers=auth)
    # Wallet.
    await call("GET", "/v1/wallet", headers=auth)
    await call("GET", "/v1/wallet/ledger", headers=auth)
    await call("GET", "/v1/wallet/ledger", "/v1/wallet/ledger?limit=500", headers=auth)
    # Rate limited: the `limited` tenant may make one request per minute.
    limited = gw.auth(gw.keys["limited"])
    await call("GET", "/v1/wallet", headers=limited)
    await call("GET", "/v1/wallet", headers=limited)
    # Admin.
    tenant = "/admin/v1/tenants/{tenant}"
    await call("GET", "/admin/v1/tenants", headers=admin)
    await call("GET", "/admin/v1/tenants", headers=auth)
    await call("GET", tenant, "/admin/v1/tenants/default", headers=admin)
    await call("GET", tenant, "/admin/v1/tenants/nope", headers=admin)
    await call("GET", "/admin/v1/keys", headers=admin)
    await call("GET", "/admin/v1/keys", "/admin/v1/keys?tenant=nope", headers=admin)
    key = await call("POST", "/admin/v1/keys", json={"tenant": "default"}, headers=admin)
    await call("POST", "/admin/v1/keys", json={"tenant": 5}, headers=admin)
    revoke = "/admin/v1/keys/{key_id}/revoke"
    await call("POST", revoke, f"/admin/v1/keys/{key.json()['id']}/revoke", headers=admin)
    await call("POST", revoke, "/admin/v1/keys/key_nope/revoke", headers=admin)
    one = "/admin/v1/keys/{key_id}"
    fresh = await call(
        "POST",
        "/admin/v1/keys",
        json={
            "tenant": "default",
            "name": "team",
            "budget": {"credits": "25", "period": "month"},
            "metadata": {"team": "a"},
        },
        headers=admin,
    )
    fresh_id = fresh.json()["id"]
    await call("GET", one, f"/admin/v1/keys/{fresh_id}", headers=admin)
    await call("GET", one, "/admin/v1/keys/key_nope", headers=admin)
    await call("PATCH", one, f"/admin/v1/keys/{fresh_id}", json={"budget": None}, headers=admin)
    await call("PATCH", one, f"/admin/v1/keys/{fresh_id}", json={"rpm": 1}, headers=admin)
    rotate = "/admin/v1/keys/{key_id}/rotate"
    await call("POST", rotate, f"/admin/v1/keys/{fresh_id}/rotate", json={}, headers=admin)
    await call("POST", rotate, "/admin/v1/keys/key_nope/rotate", json={}, headers=admin)
    entry = {"amount": "5", "reason": "test", "id": "inv-1"}
    grants = "/admin/v1/tenants/{tenant}/grants"
    await call("POST", grants, "/admin/v1/tenants/default/grants", json=entry, headers=admin)
    await call("POST", grants, "/admin/v1/tenants/default/grants", json=entry, headers=admin)
    await call(
        "POST",
        grants,
        "/admin/v1/tenants/default/grants",
        json=entry | {"amount": "6"},
        headers=admin,
    )
    await call(
        "POST",
        grants,
        "/admin/v1/tenants/default/grants",
        json=entry | {"amount": "-1"},
        headers=admin,
    )
    await call(
        "POST",
        "/admin/v1/tenants/{tenant}/adjustments",
        "/admin/v1/tenants/default/adjustments",
        json={"amount": "-1", "reason": "test", "id": "fix-1"},
        headers=admin,
    )
    await call(
        "POST",
        "/admin/v1/tenants/{tenant}/adjustments",
        "/admin/v1/tenants/default/adjustments",
        json={"amount": "0", "reason": "test"},
        headers=admin,
    )
    ledger = "/admin/v1/tenants/{tenant}/ledger"
    await call("GET", ledger, "/admin/v1/tenants/default/ledger", headers=admin)
    await call("GET", ledger, "/admin/v1/tenants/default/ledger?limit=x", headers=admin)
    await call("GET", "/admin/v1/usage", headers=admin)
    await call("GET", "/admin/v1/usage", "/admin/v1/usage?from=yesterday", headers=admin)
    await call("GET", "/admin/v1/tasks", headers=admin)
    await call("GET", "/admin/v1/tasks", "/admin/v1/tasks?limit=%C2%B2", headers=admin)
    await call("GET", "/admin/v1/routing", headers=admin)
    await call("GET", "/admin/v1/routing", headers=auth)
    secret = "/admin/v1/tenants/{tenant}/callback-secret"
    await call("POST", secret, "/admin/v1/tenants/default/callback-secret", headers=admin)
    await call("POST", secret, "/admin/v1/tenants/nope/callback-secret", headers=admin)
    hooked = await call(
        "POST",
        "/v1/images/generations",
        json={"model": "auto", "prompt": "x", "callback": {"url": "https://hooks.example/in"}},
        headers=auth,
    )
    hooked_id = hooked.json()["task_id"]
    await call("POST", "/v1/tasks/{task_id}/cancel", f"/v1/tasks/{hooked_id}/cancel", headers=auth)
    redeliver = "/admin/v1/tasks/{task_id}/callback/redeliver"
    await call("POST", redeliver, f"/admin/v1/tasks/{hooked_id}/callback/redeliver", headers=admin)
    await call("POST", redeliver, "/admin/v1/tasks/task_nope/callback/redeliver", headers=admin)
    await call("GET", "/admin/v1/callbacks/failed", headers=admin)
    await call(
        "GET", "/admin/v1/callbacks/failed", "/admin/v1/callbacks/failed?limit=0", headers=admin
    )
    return out


def test_real_answers_of_every_operation_are_as_documented(tmp_path: Path) -> None:
    async def scenario(gw: InProcessApp) -> tuple[dict[str, Any], list[Recorded]]:
        return await _document(gw), await _record(gw)

    document, recorded = _run(tmp_path, scenario, admin_token_hash=hash_admin_token(TOKEN))
    problems = [problem for r in recorded for problem in check_response(document, r)]
    assert not problems, "\n".join(problems)
    # Every operation was exercised, with a success and with an error.
    operations = {(m.upper(), p) for p, item in document["paths"].items() for m in item}
    succeeded = {(m, p) for m, p, r in recorded if r.status_code < 400}
    failed = {(m, p) for m, p, r in recorded if r.status_code >= 400}
    assert operations - succeeded == set()
    assert operations - failed == {("GET", "/v1/health")}  # its store does not fail here
    statuses = {r.status_code for _, _, r in recorded}
    assert {200, 201, 202, 206, 400, 401, 404, 409, 415, 416, 422, 429, 502} <= statuses
