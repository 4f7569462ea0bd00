"""A fake Vertex AI (Gemini under a project and location) with its OAuth token endpoint and
metadata server: one real aiohttp server on 127.0.0.1 and a free port.

    key = ServiceAccountKey.generate()          # a throwaway RSA key and its JSON file body
    async with FakeVertex(key) as fake:
        Options(base_url=fake.base_url, project="p", location="us-central1",
                credentials_file=..., token_url=fake.token_url)
        fake.enqueue(Reply(body=response(candidate(text("Hi")))))   # the Gemini fake's shapes
        fake.tokens_issued; fake.token_requests[0].form["assertion"]

The token endpoint (`POST /token`) verifies a service account's JWT as Google does: its
RS256 signature with the key's public half, `iss` the account's email, `aud` the endpoint,
`scope` cloud-platform, `iat`/`exp` around now. It also takes authorized-user refresh tokens.
`GET /computeMetadata/v1/instance/service-accounts/default/token` answers with
`Metadata-Flavor: Google`. Model calls (`/v1/projects/<p>/locations/<l>/publishers/google/
models/<model>:generateContent`, or `.../endpoints/<id>:...` for a tuned model) need a
token it issued and has not expired (`expires_in` per token, `expire_all()` to revoke,
`refuse_all` to refuse every token, new ones too), else Google's 401 `UNAUTHENTICATED`.

It can quote what it was sent, as a proxy or a verbose endpoint may: with `echo_headers` a
model call is answered 400 `INVALID_ARGUMENT` naming the request's `Authorization` header, with
`echo_grants` the token endpoint refuses each grant with its form (the signed JWT assertion,
the client secret, the refresh token) in `error_description`.
"""

from __future__ import annotations

import base64
import json
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

from aiohttp import web
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from tests.fakes.gemini_upstream import (
    DEFAULT_TEXT,
    Disconnect,
    FakeGemini,
    Reply,
    StreamReply,
    candidate,
    error_body,
    events_for,
    function_call,
    response,
    text,
    usage,
)

__all__ = [
    "DEFAULT_TEXT",
    "Disconnect",
    "FakeVertex",
    "Reply",
    "ServiceAccountKey",
    "StreamReply",
    "TokenRequest",
    "candidate",
    "error_body",
    "events_for",
    "function_call",
    "response",
    "text",
    "usage",
]

SCOPE = "https://www.googleapis.com/auth/cloud-platform"


@dataclass(frozen=True)
class ServiceAccountKey:
    """A throwaway service account: its RSA key, made by the test, and its JSON key file."""

    email: str
    key_id: str
    private_key: rsa.RSAPrivateKey

    @classmethod
    def generate(
        cls, email: str = "gateway@test-project.iam.gserviceaccount.com"
    ) -> ServiceAccountKey:
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        return cls(email=email, key_id="k" + str(id(key))[-8:], private_key=key)

    def info(self, token_uri: str = "https://oauth2.googleapis.com/token") -> dict[str, Any]:
        """The key file's content, as the Cloud console downloads it."""
        pem = self.private_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ).decode()
        return {
            "type": "service_account",
            "project_id": "test-project",
            "private_key_id": self.key_id,
            "private_key": pem,
            "client_email": self.email,
            "client_id": "1234567890",
            "token_uri": token_uri,
        }


@dataclass
class TokenRequest:
    path: str
    form: dict[str, str]
    headers: dict[str, str]
    claims: dict[str, Any] | None = None  # a verified JWT's claims
    refused: str | None = None  # why it was refused, if it was


@dataclass
class _Issued:
    expires_at: float


@dataclass
class _Tokens:
    issued: dict[str, _Issued] = field(default_factory=dict)
    count: int = 0


class FakeVertex(FakeGemini):
    """Vertex AI's model calls, its token endpoint and a metadata server (see the module)."""

    base_path = "/v1"
    thread_name = "fake-vertex"

    def __init__(
        self,
        key: ServiceAccountKey | None = None,
        *,
        expires_in: int = 3600,
        refresh_tokens: dict[str, tuple[str, str]] | None = None,
        text: str = DEFAULT_TEXT,
    ) -> None:
        super().__init__(text=text)
        self.key = key
        self.expires_in = expires_in
        self.refresh_tokens = refresh_tokens or {}  # refresh token -> (client id, secret)
        self.token_requests: list[TokenRequest] = []
        self.token_failures: list[int] = []  # statuses to answer the next token requests with
        self._tokens = _Tokens()
        self.unauthorized = 0
        self.refuse_all = False
        self.echo_headers = False
        self.echo_grants = False

    @property
    def token_url(self) -> str:
        return self.base_url.removesuffix("/v1") + "/token"

    @property
    def metadata_url(self) -> str:
        root = self.base_url.removesuffix("/v1")
        return root + "/computeMetadata/v1/instance/service-accounts/default/token"

    @property
    def tokens_issued(self) -> int:
        return self._tokens.count

    def expire_all(self) -> None:
        """Every token issued so far stops working (as after their expiry)."""
        for issued in self._tokens.issued.values():
            issued.expires_at = 0.0

    def routes(self, app: web.Application) -> None:
        app.router.add_post(
            "/v1/projects/{project}/locations/{location}/publishers/{publisher}/models/{call}",
            self._model_call,
        )
        app.router.add_post(
            "/v1/projects/{project}/locations/{location}/endpoints/{call}", self._model_call
        )
        app.router.add_post("/token", self._token)
        app.router.add_get(
            "/computeMetadata/v1/instance/service-accounts/default/token", self._metadata
        )

    async def _model_call(self, request: web.Request) -> web.StreamResponse:
        authorization = request.headers.get("Authorization", "")
        if self.echo_headers:
            await request.read()
            message = f"Invalid request headers: Authorization={authorization}"
            return web.json_response(error_body(400, "INVALID_ARGUMENT", message), status=400)
        issued = self._tokens.issued.get(authorization.removeprefix("Bearer "))
        if self.refuse_all or issued is None or issued.expires_at <= time.time():
            self.unauthorized += 1
            await request.read()
            body = error_body(
                401,
                "UNAUTHENTICATED",
                "Request had invalid authentication credentials. Expected OAuth 2 access token,"
                " login cookie or other valid authentication credential.",
            )
            return web.json_response(body, status=401)
        return await self._generate(request)

    async def _token(self, request: web.Request) -> web.Response:
        raw = await request.read()
        form = dict(parse_qsl(raw.decode()))
        seen = TokenRequest(request.path, form, {k.lower(): v for k, v in request.headers.items()})
        self.token_requests.append(seen)
        if self.token_failures:
            status = self.token_failures.pop(0)
            seen.refused = f"scripted {status}"
            return web.json_response({"error": "internal_failure"}, status=status)
        grant = form.get("grant_type")
        if self.echo_grants:
            seen.refused = "echo"
            quoted = ", ".join(f"{name}={value}" for name, value in sorted(form.items()))
            return web.json_response(
                {"error": "invalid_grant", "error_description": f"Bad grant: {quoted}"},
                status=400,
            )
        if grant == "urn:ietf:params:oauth:grant-type:jwt-bearer":
            claims, problem = self._verify(form.get("assertion", ""))
            seen.claims = claims
            if problem is not None:
                seen.refused = problem
                return web.json_response(
                    {"error": "invalid_grant", "error_description": problem}, status=400
                )
        elif grant == "refresh_token":
            client = self.refresh_tokens.get(form.get("refresh_token", ""))
            if client != (form.get("client_id"), form.get("client_secret")):
                seen.refused = "unknown refresh token or client"
                return web.json_response(
                    {"error": "invalid_grant", "error_description": "Bad Request"}, status=400
                )
        else:
            seen.refused = f"grant_type {grant!r}"
            return web.json_response({"error": "unsupported_grant_type"}, status=400)
        return web.json_response(self._issue())

    async def _metadata(self, request: web.Request) -> web.Response:
        if request.headers.get("Metadata-Flavor") != "Google":
            return web.Response(status=403, text="Missing Metadata-Flavor:Google header.")
        self.token_requests.append(
            TokenRequest(request.path, {}, {k.lower(): v for k, v in request.headers.items()})
        )
        return web.json_response(self._issue())

    def _issue(self) -> dict[str, Any]:
        self._tokens.count += 1
        token = f"ya29.fake-{self._tokens.count}"
        self._tokens.issued[token] = _Issued(time.time() + self.expires_in)
        return {"access_token": token, "expires_in": self.expires_in, "token_type": "Bearer"}

    def _verify(self, assertion: str) -> tuple[dict[str, Any] | None, str | None]:
        """(claims, None) for a JWT this endpoint accepts, else (claims or None, why not)."""
        if self.key is None:
            return None, "no service account is known here"
        parts = assertion.split(".")
        if len(parts) != 3:
            return None, "not a JWT"
        try:
            header = json.loads(_unb64(parts[0]))
            claims = json.loads(_unb64(parts[1]))
            signature = _unb64(parts[2])
        except ValueError:
            return None, "not a JWT"
        if header.get("alg") != "RS256" or header.get("kid") != self.key.key_id:
            return claims, f"unexpected header {header}"
        try:
            self.key.private_key.public_key().verify(
                signature, f"{parts[0]}.{parts[1]}".encode(), padding.PKCS1v15(), hashes.SHA256()
            )
        except InvalidSignature:
            return claims, "Invalid JWT Signature."
        now = time.time()
        if claims.get("iss") != self.key.email:
            return claims, "Invalid issuer"
        if claims.get("aud") != self.token_url or claims.get("scope") != SCOPE:
            return claims, "Invalid audience or scope"
        iat, exp = claims.get("iat", 0), claims.get("exp", 0)
        if not (iat - 60 <= now <= exp) or exp - iat > 3600:
            return (
                claims,
                "Invalid JWT: Token must be a short-lived token and in a reasonable timeframe",
            )
        return claims, None


def _unb64(value: str) -> bytes:
    return base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
