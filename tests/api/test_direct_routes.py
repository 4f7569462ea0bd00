"""The request path's endpoints answer the same whether `DirectRoutes` serves them (the exact
path) or Litestar's router does (the same path with a trailing slash, which only the router
normalises): answers, errors in each dialect's envelope, headers, the metrics' route label."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api.support import in_process_app

pytestmark = [
    pytest.mark.filterwarnings("ignore::litestar.exceptions.LitestarDeprecationWarning"),
    pytest.mark.filterwarnings("ignore:Deprecated 'query' parameter:DeprecationWarning"),
]

CHAT = {"model": "auto", "messages": [{"role": "user", "content": "Say hello"}]}
MESSAGES = {"model": "auto", "max_tokens": 16, "messages": [{"role": "user", "content": "Hi"}]}
_VARYING = ("x-request-id", "date", "content-length")


def _same(direct: httpx.Response, routed: httpx.Response) -> None:
    assert direct.status_code == routed.status_code, (direct.text, routed.text)
    kept = {k: v for k, v in direct.headers.items() if k not in _VARYING}
    assert kept.keys() == {k for k in routed.headers if k not in _VARYING}
    assert kept["content-type"] == routed.headers["content-type"]
    shape = direct.json()
    other = routed.json()
    assert _keys(shape) == _keys(other)
    if "error" in shape and isinstance(shape["error"], dict):
        assert shape["error"].get("type") == other["error"].get("type")
        assert shape["error"].get("code") == other["error"].get("code")


def _keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _keys(v) for k, v in value.items() if k not in ("id", "created", "request_id")}
    return type(value).__name__


def test_answers_and_errors_match_the_routers_in_every_dialect(tmp_path: Path) -> None:
    async def main() -> None:
        async with in_process_app(tmp_path) as gw:
            cases: list[tuple[str, dict[str, Any], dict[str, str]]] = [
                ("/v1/chat/completions", CHAT, gw.auth()),
                ("/v1/chat/completions", CHAT, {}),  # no key: the OpenAI envelope
                ("/v1/chat/completions", {"model": 3}, gw.auth()),  # invalid: 400 details
                ("/v1/messages", MESSAGES, {"x-api-key": gw.key}),
                ("/v1/messages", MESSAGES, {}),  # no key: Anthropic's error shape
                ("/v1/messages", {"model": "auto"}, {"x-api-key": gw.key}),
                ("/v1/embeddings", {"model": "auto", "input": "hi"}, gw.auth()),
            ]
            for path, body, headers in cases:
                direct = await gw.client.post(path, json=body, headers=headers)
                routed = await gw.client.post(path + "/", json=body, headers=headers)
                _same(direct, routed)
            get = await gw.client.get("/v1/chat/completions", headers=gw.auth())
            assert get.status_code == 405, get.text
            metrics = (await gw.client.get("/metrics")).text
            assert 'route="/v1/chat/completions"' in metrics
            assert 'route="/v1/chat/completions/"' not in metrics, "one label, as the router gave"

    asyncio.run(main())


def test_a_host_the_router_refuses_is_refused_on_a_direct_path_too(tmp_path: Path) -> None:
    async def main() -> None:
        async with in_process_app(tmp_path) as gw:
            bad = gw.auth() | {"host": "bad host\\"}
            direct = await gw.client.post("/v1/chat/completions", json=CHAT, headers=bad)
            routed = await gw.client.post("/v1/models/x", json=CHAT, headers=bad)
            assert direct.status_code == routed.status_code == 422, (direct.text, routed.text)
            assert direct.json()["error"]["message"] == "Invalid host header"

    asyncio.run(main())
