"""The `[providers.<name>]` table of Gemini on Vertex AI.

The shared HTTP fields (`providers.options.HttpOptions`): `base_url` defaults to the
location's endpoint (`https://<location>-aiplatform.googleapis.com/v1`, or
`https://aiplatform.googleapis.com/v1` for `global`); `api_key`/`api_key_env` are not used
(Vertex takes OAuth tokens, `providers.vertex.credentials`). The Gemini options
(`include_thoughts`, `safety_settings`) are those of `kind = "gemini"`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated

import msgspec

from providers.options import HttpOptions
from providers.storage_urls import storage_prefix
from providers.vertex.credentials import credential_problems

__all__ = ["Options"]

Url = Annotated[str, msgspec.Meta(pattern=r"^https?://")]


class Options(HttpOptions, kw_only=True, forbid_unknown_fields=True, frozen=True):
    """Config of one Vertex AI project and location.

    Credentials: `credentials_file` (a service-account key or authorized-user JSON), else
    application-default credentials (GOOGLE_APPLICATION_CREDENTIALS, gcloud's file, the
    metadata server). `token_url` replaces the token endpoint of the file (`token_uri`),
    `metadata_url` the metadata server's token URL: for private endpoints, and tests.
    `allowed_storage_prefixes` lists the `gs://` buckets or folders whose objects a request
    may name as `fileData` (Vertex reads them with the gateway's service account); none by
    default (`providers.storage_urls`).
    """

    base_url: Annotated[str, msgspec.Meta(pattern=r"^(https?://.+)?$")] = ""
    project: Annotated[str, msgspec.Meta(pattern=r"^[a-z0-9][a-z0-9.:-]{1,62}$")]
    location: Annotated[str, msgspec.Meta(pattern=r"^[a-z]+(-[a-z]+[0-9]+)?$")]
    credentials_file: str | None = None
    token_url: Url | None = None
    metadata_url: Url | None = None
    include_thoughts: bool = False
    safety_settings: dict[str, str] = {}
    allowed_storage_prefixes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        try:
            prefixes = tuple(storage_prefix(p, "gs") for p in self.allowed_storage_prefixes)
        except ValueError as exc:
            raise ValueError(f"allowed_storage_prefixes: {exc}") from exc
        msgspec.structs.force_setattr(self, "allowed_storage_prefixes", prefixes)

    def api_root(self) -> str:
        """The versioned API root every model URL starts with."""
        if self.base_url:
            return self.base_url.rstrip("/")
        host = "aiplatform.googleapis.com"
        if self.location != "global":
            host = f"{self.location}-{host}"
        return f"https://{host}/v1"

    def config_problems(self, environ: Mapping[str, str]) -> list[tuple[str, str]]:
        """What `gateway config check` reports beyond the types (see the loader)."""
        problems = credential_problems(self.credentials_file, environ)
        if self.api_key or self.api_key_env:
            problems.append(("api_key", "Vertex AI takes OAuth credentials, not an API key"))
        return problems
