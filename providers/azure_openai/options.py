"""The `[providers.<name>]` table of an Azure OpenAI resource.

The shared HTTP fields (`providers.options.HttpOptions`: `base_url` is the resource's
endpoint, `https://<resource>.openai.azure.com`; `api_key_env`/`api_key` is sent as
`api-key`), the API flavour and version, an optional fixed deployment, and Entra ID.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Literal

import msgspec

from providers.options import HttpOptions

__all__ = ["EntraOptions", "Options"]

_ENTRA_SCOPE = "https://cognitiveservices.azure.com/.default"


class EntraOptions(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, frozen=True):
    """Microsoft Entra ID instead of a key: a bearer token, renewed before it expires.

    With `client_secret_env`, a service principal's client-credentials grant at
    `token_url` (default `https://login.microsoftonline.com/<tenant_id>/oauth2/v2.0/token`);
    without it, the managed identity of the machine (`client_id` picks a user-assigned one)
    from the instance metadata endpoint (`token_url` default
    `http://169.254.169.254/metadata/identity/oauth2/token`)."""

    tenant_id: str | None = None
    client_id: str | None = None
    client_secret_env: str | None = None
    scope: str = _ENTRA_SCOPE
    token_url: Annotated[str, msgspec.Meta(pattern=r"^https?://")] | None = None

    @property
    def managed_identity(self) -> bool:
        return self.client_secret_env is None


class Options(HttpOptions, kw_only=True, forbid_unknown_fields=True, frozen=True):
    """Config of one Azure OpenAI resource.

    `api = "deployments"` (the default) calls `<base_url>/openai/deployments/<deployment>/
    chat/completions?api-version=<api_version>` and needs `api_version`; `api = "v1"` calls
    `<base_url>/openai/v1/chat/completions` with the deployment as `model`, no version. The
    deployment is `deployment` when set, else the model's `upstream_model`. `entra` replaces
    the key with Entra ID tokens. `stream_options` and `max_tokens_field` are as for
    `openai_compatible` (older API versions want `max_tokens`).
    """

    api: Literal["deployments", "v1"] = "deployments"
    api_version: str | None = None
    deployment: str | None = None
    entra: EntraOptions | None = None
    stream_options: bool = True
    max_tokens_field: Literal["max_completion_tokens", "max_tokens"] = "max_completion_tokens"

    def config_problems(self, environ: Mapping[str, str]) -> list[tuple[str, str]]:
        """What `gateway config check` reports beyond the types (see the loader)."""
        problems: list[tuple[str, str]] = []
        if self.api == "deployments" and not self.api_version:
            problems.append(
                ("api_version", 'required with api = "deployments" (e.g. "2024-10-21")')
            )
        if self.api == "v1" and self.api_version:
            problems.append(("api_version", "the v1 API takes no version: leave it out"))
        headers = {name.lower() for name in self.extra_headers}
        has_key = bool(self.api_key or self.api_key_env or headers & {"api-key", "authorization"})
        entra = self.entra
        if entra is None:
            if not has_key:
                problems.append(("api_key_env", "give api_key_env (or api_key), or entra"))
            return problems
        if has_key:
            problems.append(("entra", "give api_key_env/api_key or entra, not both"))
        if entra.client_secret_env is not None:
            if not environ.get(entra.client_secret_env):
                problems.append(
                    (
                        "entra.client_secret_env",
                        f"environment variable {entra.client_secret_env!r} is not set",
                    )
                )
            for name in ("tenant_id", "client_id"):
                if not getattr(entra, name):
                    problems.append((f"entra.{name}", "required with client_secret_env"))
        return problems
