"""A fake Azure OpenAI resource, with Microsoft Entra ID's token endpoints: one real aiohttp
server on 127.0.0.1 and a free port. Chat answers and streams are the OpenAI fake's
(`tests.fakes.openai_upstream`: `Reply`, `StreamReply`, `Disconnect`), at Azure's URLs:

    POST /openai/deployments/<deployment>/chat/completions?api-version=<version>
    POST /openai/v1/chat/completions                       (the deployment is `model`)
    POST /<tenant>/oauth2/v2.0/token                        client credentials (Entra ID)
    GET  /metadata/identity/oauth2/token                    managed identity (`Metadata: true`)

    async with FakeAzure(api_key="k") as fake:              # or entra=("client", "secret")
        fake.enqueue(Reply(body=...)); fake.calls[0] == ("deployments", "gpt4o", "2024-10-21")

A call must carry the `api-key` the fake knows, or a bearer token it issued (and that has not
expired: `expire_all()` revokes them), else Azure's 401. A deployment path without
`api-version` gets Azure's 404 body. With `echo_headers` a call is answered 400 quoting its
`api-key` and `Authorization` headers; with `echo_grants` the token endpoint refuses with the
form it was sent (the client secret) in `error_description`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

import msgspec
from aiohttp import web

from tests.fakes.openai_upstream import (
    DEFAULT_TEXT,
    Disconnect,
    FakeOpenAI,
    RecordedRequest,
    Reply,
    StreamReply,
    default_chunks,
    default_completion,
)

__all__ = [
    "DEFAULT_TEXT",
    "Disconnect",
    "FakeAzure",
    "RecordedRequest",
    "Reply",
    "StreamReply",
    "azure_error",
    "default_chunks",
    "default_completion",
]


def azure_error(status: int, code: str, message: str, **extra: Any) -> Reply:
    """Azure's error answer: `{"error": {"code", "message", ...}}`."""
    return Reply(status=status, body={"error": {"code": code, "message": message, **extra}})


@dataclass
class EntraRequest:
    path: str
    form: dict[str, str]
    query: dict[str, str]
    headers: dict[str, str]


class FakeAzure(FakeOpenAI):
    """The Azure OpenAI fake (see the module); `base_url` is the resource's root."""

    base_path = ""
    thread_name = "fake-azure"

    def __init__(
        self,
        *,
        api_key: str | None = None,
        entra: tuple[str, str] | None = None,  # (client id, client secret)
        expires_in: int = 3600,
        text: str = DEFAULT_TEXT,
    ) -> None:
        super().__init__(text=text)
        self.api_key = api_key
        self.entra = entra
        self.expires_in = expires_in
        self.calls: list[tuple[str, str, str | None]] = []  # (api, deployment, api-version)
        self.entra_requests: list[EntraRequest] = []
        self._issued: dict[str, float] = {}
        self.echo_headers = False
        self.echo_grants = False
        self.unauthorized = 0

    def expire_all(self) -> None:
        """Every token issued so far stops working."""
        for token in self._issued:
            self._issued[token] = 0.0

    @property
    def tokens_issued(self) -> int:
        return len(self._issued)

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/openai/deployments/{deployment}/chat/completions", self._deployment)
        app.router.add_post("/openai/v1/chat/completions", self._v1)
        app.router.add_post("/openai/deployments/{deployment}/embeddings", self._deployment)
        app.router.add_post("/openai/v1/embeddings", self._v1)
        app.router.add_post("/{tenant}/oauth2/v2.0/token", self._client_credentials)
        app.router.add_get("/metadata/identity/oauth2/token", self._managed_identity)

    async def _deployment(self, request: web.Request) -> web.StreamResponse:
        version = request.query.get("api-version")
        self.calls.append(("deployments", request.match_info["deployment"], version))
        if version is None:
            await request.read()
            return _json(404, {"error": {"code": "404", "message": "Resource not found"}})
        return await self._authorized(request)

    async def _v1(self, request: web.Request) -> web.StreamResponse:
        body = msgspec.json.decode(await request.read())
        self.calls.append(("v1", str(body.get("model")), request.query.get("api-version")))
        return await self._authorized(request)

    async def _authorized(self, request: web.Request) -> web.StreamResponse:
        key = request.headers.get("api-key")
        authorization = request.headers.get("Authorization", "")
        if self.echo_headers:
            await request.read()
            quoted = f"api-key={key}, Authorization={authorization}"
            message = f"Invalid request headers: {quoted}"
            return _json(400, {"error": {"code": "BadRequest", "message": message}})
        expires = self._issued.get(authorization.removeprefix("Bearer "))
        if (self.api_key is None or key != self.api_key) and (
            expires is None or expires <= time.time()
        ):
            self.unauthorized += 1
            await request.read()
            return _json(
                401,
                {
                    "error": {
                        "code": "401",
                        "message": "Access denied due to invalid subscription key or wrong API"
                        " endpoint. Make sure to provide a valid key for an active subscription"
                        " and use a correct regional API endpoint for your resource.",
                    }
                },
            )
        return await self._chat(request)

    async def _client_credentials(self, request: web.Request) -> web.Response:
        form = dict(parse_qsl((await request.read()).decode()))
        self.entra_requests.append(self._seen(request, form))
        wanted = self.entra
        if self.echo_grants:
            quoted = ", ".join(f"{name}={value}" for name, value in sorted(form.items()))
            return _json(
                401, {"error": "invalid_client", "error_description": f"AADSTS7000215: {quoted}"}
            )
        if wanted is None or (form.get("client_id"), form.get("client_secret")) != wanted:
            return _json(
                401,
                {
                    "error": "invalid_client",
                    "error_description": "AADSTS7000215: Invalid client secret provided.",
                },
            )
        if form.get("grant_type") != "client_credentials":
            return _json(400, {"error": "unsupported_grant_type"})
        return _json(200, self._issue(expires_as_text=False))

    async def _managed_identity(self, request: web.Request) -> web.Response:
        self.entra_requests.append(self._seen(request, {}))
        if request.headers.get("Metadata") != "true":
            return _json(
                400,
                {
                    "error": "invalid_request",
                    "error_description": "Required metadata header not specified",
                },
            )
        return _json(200, self._issue(expires_as_text=True))

    def _seen(self, request: web.Request, form: dict[str, str]) -> EntraRequest:
        headers = {k.lower(): v for k, v in request.headers.items()}
        return EntraRequest(request.path, form, dict(request.query), headers)

    def _issue(self, *, expires_as_text: bool) -> dict[str, Any]:
        token = f"eyJ0eXAi.fake-entra-{len(self._issued) + 1}"
        self._issued[token] = time.time() + self.expires_in
        expires: int | str = str(self.expires_in) if expires_as_text else self.expires_in
        return {"token_type": "Bearer", "expires_in": expires, "access_token": token}


def _json(status: int, body: object) -> web.Response:
    return web.Response(
        status=status, body=msgspec.json.encode(body), content_type="application/json"
    )
