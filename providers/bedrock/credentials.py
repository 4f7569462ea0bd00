"""AWS credentials as botocore finds them, and the SigV4 signature of each request.

    chain (botocore's order)   environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
                               AWS_SESSION_TOKEN), the shared credentials and config files
                               with the profile (`profile` in the routing file, else
                               AWS_PROFILE), SSO and assumed roles of that profile, the
                               container endpoint (AWS_CONTAINER_CREDENTIALS_FULL_URI or
                               _RELATIVE_URI), the instance metadata service (IMDSv2)
    signature                  botocore's SigV4Auth, service `bedrock`, the region's

Nothing here does cryptography of its own: aiobotocore resolves the credentials (its
providers fetch from the container and instance endpoints without blocking the loop, and
renew temporary credentials before they expire), botocore signs. The chain is resolved on the
first call, not at start-up, so a gateway starts while the metadata endpoint is slow; a
chain that finds nothing is a ProviderError then (`gateway config check` has already said
what it could see from the files and the environment).

Signing covers the method, the URL, the body's SHA-256 and the headers the request carries
(`Content-Type` among them): the signer is called with them and adds `X-Amz-Date`,
`X-Amz-Security-Token` (temporary credentials) and `Authorization`. Its cost is a few HMACs
per call, about 0.1 ms.

The credentials each call is signed with (the access key id, the secret, the session token)
are reported to the provider's `SecretSink` (`providers.secrets`) as they are found or renewed:
one tuple comparison per call while they stay the same. So are the chain's secrets in the
environment from the start (`_ENVIRONMENT`: the container endpoint's token among them, which a
failing endpoint may quote before any credentials are found).
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from aiobotocore.session import AioSession  # type: ignore[import-untyped]
from botocore.auth import SigV4Auth  # type: ignore[import-untyped]
from botocore.awsrequest import AWSRequest  # type: ignore[import-untyped]
from botocore.exceptions import BotoCoreError  # type: ignore[import-untyped]
from yarl import URL

from providers.errors import ProviderError
from providers.secrets import SecretSink

__all__ = ["SigV4Signer"]

_SERVICE = "bedrock"
_ENVIRONMENT = ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_CONTAINER_AUTHORIZATION_TOKEN")
_SIGNED = ("Authorization", "X-Amz-Date", "X-Amz-Security-Token")


class SigV4Signer:
    """A `providers.upstream.RequestSigner` for one region, with the chain's credentials."""

    __slots__ = ("_credentials", "_lock", "_profile", "_region", "_reported", "_secrets")

    def __init__(
        self, region: str, profile: str | None = None, *, secrets: SecretSink | None = None
    ) -> None:
        self._region = region
        self._profile = profile
        self._secrets = SecretSink() if secrets is None else secrets
        self._secrets.hold(*(os.environ.get(name) for name in _ENVIRONMENT))
        self._reported: Any = None  # the credentials last reported to `_secrets`
        self._credentials: Any = None  # aiobotocore's (refreshable) credentials, once found
        self._lock = asyncio.Lock()

    async def __call__(
        self, method: str, url: URL, headers: dict[str, str], body: bytes | None
    ) -> None:
        frozen = await self._frozen()
        request = AWSRequest(method=method, url=str(url), data=body or b"", headers=headers)
        SigV4Auth(frozen, _SERVICE, self._region).add_auth(request)
        for name in _SIGNED:
            value = request.headers.get(name)
            if value is not None:
                headers[name] = value

    async def _frozen(self) -> Any:
        """Credentials good for this call (botocore renews temporary ones before expiry)."""
        credentials = self._credentials
        if credentials is None:
            async with self._lock:
                credentials = self._credentials
                if credentials is None:
                    credentials = self._credentials = await self._resolve()
        try:
            frozen = await credentials.get_frozen_credentials()
        except BotoCoreError as exc:
            raise ProviderError(f"renewing the AWS credentials failed: {exc}") from exc
        if frozen != self._reported:  # three string comparisons while they stay the same
            self._secrets.renewed("aws", frozen.access_key, frozen.secret_key, frozen.token)
            self._reported = frozen
        return frozen

    async def _resolve(self) -> Any:
        try:
            session = AioSession(profile=self._profile)
            credentials = await session.get_credentials()
        except BotoCoreError as exc:
            raise ProviderError(f"the AWS credential chain failed: {exc}") from exc
        if credentials is None:
            raise ProviderError(
                "no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, name a"
                " profile, or run where the container or instance metadata endpoint has a role"
            )
        return credentials
