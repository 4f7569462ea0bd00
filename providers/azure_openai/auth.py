"""Microsoft Entra ID for Azure OpenAI: a bearer token per request, renewed before expiry.

    client credentials   POST <token_url> grant_type=client_credentials, client_id,
                         client_secret (from its variable), scope
    managed identity     GET <token_url>?api-version=2018-02-01&resource=<scope's resource>
                         [&client_id=...] with `Metadata: true`

Both answers are `{access_token, expires_in}`; `providers.tokens` keeps the token and renews it
before it runs out, and `sign` puts it on each request as `Authorization: Bearer`. The client
secret and each token are reported to the provider's `SecretSink`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable

import msgspec
from yarl import URL

from providers.azure_openai.options import EntraOptions, Options
from providers.secrets import SecretSink
from providers.tokens import BearerSigner, RefreshingToken, Token, exchange
from providers.upstream import Upstream

__all__ = ["EntraSigner", "entra_signer"]

_Fetch = Callable[[], Awaitable[Token]]
_LOGIN = "https://login.microsoftonline.com/{tenant}/oauth2/v2.0/token"
_IMDS = "http://169.254.169.254/metadata/identity/oauth2/token"


EntraSigner = BearerSigner
"""The signer `entra_signer` makes (`providers.tokens.BearerSigner`)."""


def entra_signer(
    options: Options,
    entra: EntraOptions,
    *,
    secrets: SecretSink | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> EntraSigner:
    """The signer for `entra` (inside the running loop); ValueError when its secret's variable
    is unset (config check names it first)."""
    secret = None
    if entra.client_secret_env is not None:
        secret = os.environ.get(entra.client_secret_env)
        if not secret:
            raise ValueError(
                f"entra.client_secret_env: environment variable {entra.client_secret_env!r}"
                " is not set"
            )
    sink = SecretSink() if secrets is None else secrets
    sink.hold(secret)
    # The token endpoint gets a session of its own: none of the upstream's extra headers.
    endpoint = Upstream(msgspec.structs.replace(options, extra_headers={}), {})
    if secret is None:
        fetch = _managed_identity(endpoint, entra)
    else:
        fetch = _client_credentials(endpoint, entra, secret)
    return EntraSigner(RefreshingToken(fetch, clock=clock, secrets=sink), endpoint)


def _client_credentials(endpoint: Upstream, entra: EntraOptions, secret: str) -> _Fetch:
    url = URL(entra.token_url or _LOGIN.format(tenant=entra.tenant_id))
    form = {
        "grant_type": "client_credentials",
        "client_id": entra.client_id or "",
        "client_secret": secret,
        "scope": entra.scope,
    }

    async def fetch() -> Token:
        return await exchange(endpoint, url, form)

    return fetch


def _managed_identity(endpoint: Upstream, entra: EntraOptions) -> _Fetch:
    query = {"api-version": "2018-02-01", "resource": entra.scope.removesuffix("/.default")}
    if entra.client_id:
        query["client_id"] = entra.client_id
    url = URL(entra.token_url or _IMDS).update_query(query)

    async def fetch() -> Token:
        return await exchange(endpoint, url, headers={"Metadata": "true"})

    return fetch
