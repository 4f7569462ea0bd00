"""Google credentials for Vertex AI: an OAuth access token per request, renewed before expiry.

Where the credentials come from, in application-default order:

    credentials_file (routing file), else GOOGLE_APPLICATION_CREDENTIALS, else gcloud's
    application_default_credentials.json: a JSON file of one of two types
        service_account   a JWT (RS256, signed with the file's private key) exchanged at the
                          token endpoint: grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer
        authorized_user   its refresh token exchanged there: grant_type=refresh_token
    else the metadata server (GCE, Cloud Run, GKE): GET .../service-accounts/default/token
        with `Metadata-Flavor: Google` (its host from GCE_METADATA_HOST, as google-auth reads)

The token endpoint is the file's `token_uri` (Google's `https://oauth2.googleapis.com/token`)
unless `token_url` says otherwise, and the metadata server's URL is `metadata_url` when set, so
tests point both at fakes. Signing uses `cryptography` (PKCS#1 v1.5 with SHA-256); nothing
else here is cryptography. `providers.tokens` keeps the token and renews it before it runs
out; `GoogleSigner` puts it on each request as `Authorization: Bearer`. What it holds and
obtains is reported to the provider's `SecretSink`: the private key, the client secret and
refresh token, each signed JWT assertion and each access token.

`credential_problems` is what `gateway config check` reads of the same sources: a file that
is missing, not JSON, of another type, short of a field, or whose key does not load.
"""

from __future__ import annotations

import base64
import json
import os
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import msgspec
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from yarl import URL

from providers.errors import ProviderError
from providers.options import HttpOptions
from providers.secrets import SecretSink
from providers.tokens import BearerSigner, RefreshingToken, Token, exchange
from providers.upstream import Upstream

__all__ = ["GoogleSigner", "credential_problems", "credentials_source", "google_signer", "jwt"]

SCOPE = "https://www.googleapis.com/auth/cloud-platform"
TOKEN_URL = "https://oauth2.googleapis.com/token"
_JWT_GRANT = "urn:ietf:params:oauth:grant-type:jwt-bearer"
_JWT_LIFETIME = 3600
_METADATA_PATH = "/computeMetadata/v1/instance/service-accounts/default/token"
_NEEDS = {
    "service_account": ("client_email", "private_key"),
    "authorized_user": ("client_id", "client_secret", "refresh_token"),
}

_Fetch = Callable[[], Awaitable[Token]]


GoogleSigner = BearerSigner
"""The signer `google_signer` makes (`providers.tokens.BearerSigner`)."""


def credentials_source(
    credentials_file: str | None, environ: Mapping[str, str]
) -> tuple[str, Path | None]:
    """(the field that names it, the credentials file) by application-default order; the
    file is None when the metadata server is to be asked."""
    if credentials_file:
        return "credentials_file", Path(os.path.expanduser(credentials_file))
    named = environ.get("GOOGLE_APPLICATION_CREDENTIALS")
    if named:
        return "credentials_file (GOOGLE_APPLICATION_CREDENTIALS)", Path(named)
    home = Path(os.path.expanduser(environ.get("HOME", "~")))
    gcloud = home / ".config" / "gcloud" / "application_default_credentials.json"
    if gcloud.exists():
        return "credentials_file (gcloud's application default)", gcloud
    return "credentials_file", None


def credential_problems(
    credentials_file: str | None, environ: Mapping[str, str]
) -> list[tuple[str, str]]:
    """What is wrong with the credentials file that would be used (none: the metadata
    server, which only a running gateway can ask)."""
    field, path = credentials_source(credentials_file, environ)
    if path is None:
        return []
    try:
        _load(path)
    except ValueError as exc:
        return [(field, str(exc))]
    return []


def google_signer(
    options: HttpOptions,
    *,
    credentials_file: str | None = None,
    token_url: str | None = None,
    metadata_url: str | None = None,
    environ: Mapping[str, str] | None = None,
    clock: Callable[[], float] = time.monotonic,
    now: Callable[[], float] = time.time,
    secrets: SecretSink | None = None,
) -> GoogleSigner:
    """The signer for the configured credentials (inside the running loop); ValueError when
    the credentials file is missing or wrong (config check names it first). `options` are
    the upstream's timeouts, which the token endpoint's calls keep."""
    env = os.environ if environ is None else environ
    _, path = credentials_source(credentials_file, env)
    info = _load(path) if path is not None else None  # refused before any session opens
    sink = SecretSink() if secrets is None else secrets
    # The token endpoint gets a session of its own: none of the upstream's extra headers.
    endpoint = Upstream(msgspec.structs.replace(options, extra_headers={}), {})
    fetch: _Fetch
    if info is None:
        fetch = _metadata_server(endpoint, metadata_url, env)
    else:
        url = URL(token_url or info.get("token_uri") or TOKEN_URL)
        if info["type"] == "service_account":
            sink.hold(info["private_key"])
            fetch = _service_account(endpoint, info, url, now, sink)
        else:
            sink.hold(info["client_secret"], info["refresh_token"])
            fetch = _authorized_user(endpoint, info, url)
    return GoogleSigner(RefreshingToken(fetch, clock=clock, secrets=sink), endpoint)


def _load(path: Path) -> dict[str, Any]:
    """The credentials file, checked; ValueError saying what is wrong with it."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"cannot read {str(path)!r}: {exc.strerror}") from exc
    try:
        info = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"{str(path)!r} is not JSON: {exc}") from exc
    if not isinstance(info, dict):
        raise ValueError(f"{str(path)!r} is not a credentials object")
    kind = info.get("type")
    if kind not in _NEEDS:
        raise ValueError(
            f"{str(path)!r} holds credentials of type {kind!r}; "
            "use a service_account key or authorized_user credentials"
        )
    for name in _NEEDS[kind]:
        if not isinstance(info.get(name), str) or not info[name]:
            raise ValueError(f"{str(path)!r} has no {name}")
    if kind == "service_account":
        info["_key"] = _private_key(info["private_key"], path)
    return info


def _private_key(pem: str, path: Path) -> rsa.RSAPrivateKey:
    try:
        key = serialization.load_pem_private_key(pem.encode(), password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm) as exc:
        raise ValueError(f"the private_key of {str(path)!r} does not load: {exc}") from exc
    if not isinstance(key, rsa.RSAPrivateKey):
        raise ValueError(f"the private_key of {str(path)!r} is not an RSA key")
    return key


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def jwt(info: Mapping[str, Any], audience: str, issued_at: float) -> str:
    """The signed assertion a service account exchanges for an access token."""
    header = {"alg": "RS256", "typ": "JWT"}
    if info.get("private_key_id"):
        header["kid"] = info["private_key_id"]
    iat = int(issued_at)
    claims = {
        "iss": info["client_email"],
        "scope": SCOPE,
        "aud": audience,
        "iat": iat,
        "exp": iat + _JWT_LIFETIME,
    }
    signing_input = _b64(msgspec.json.encode(header)) + "." + _b64(msgspec.json.encode(claims))
    key: rsa.RSAPrivateKey = info["_key"]
    signature = key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
    return signing_input + "." + _b64(signature)


def _service_account(
    endpoint: Upstream,
    info: dict[str, Any],
    token_url: URL,
    now: Callable[[], float],
    secrets: SecretSink,
) -> _Fetch:
    async def fetch() -> Token:
        assertion = jwt(info, str(token_url), now())
        secrets.renewed("assertion", assertion)
        return await exchange(
            endpoint, token_url, {"grant_type": _JWT_GRANT, "assertion": assertion}
        )

    return fetch


def _authorized_user(endpoint: Upstream, info: dict[str, Any], token_url: URL) -> _Fetch:
    form = {
        "grant_type": "refresh_token",
        "client_id": info["client_id"],
        "client_secret": info["client_secret"],
        "refresh_token": info["refresh_token"],
    }

    async def fetch() -> Token:
        return await exchange(endpoint, token_url, form)

    return fetch


def _metadata_server(
    endpoint: Upstream, metadata_url: str | None, environ: Mapping[str, str]
) -> _Fetch:
    if metadata_url:
        url = URL(metadata_url)
    else:
        host = environ.get("GCE_METADATA_HOST") or "metadata.google.internal"
        url = URL(f"http://{host}{_METADATA_PATH}")

    async def fetch() -> Token:
        try:
            return await exchange(endpoint, url, headers={"Metadata-Flavor": "Google"})
        except ProviderError as exc:
            raise type(exc)(
                f"no Google credentials file, and the metadata server failed: {exc.message}",
                upstream_status=exc.upstream_status,
            ) from exc

    return fetch
