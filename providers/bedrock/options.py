"""The `[providers.<name>]` table of Amazon Bedrock (the Converse API).

The shared HTTP fields (`providers.options.HttpOptions`), where `base_url` defaults to the
region's endpoint (`https://bedrock-runtime.<region>.amazonaws.com`; set it for a VPC
endpoint, or a test's fake), and `api_key_env`/`api_key` holds a Bedrock API key (sent as
`Authorization: Bearer`) instead of the AWS credential chain.
"""

from __future__ import annotations

import configparser
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated

import msgspec

from providers.options import HttpOptions
from providers.storage_urls import storage_prefix

__all__ = ["Options", "credential_problems"]

Region = Annotated[str, msgspec.Meta(pattern=r"^[a-z]{2}(-[a-z]+)+-\d+$")]


class Options(HttpOptions, kw_only=True, forbid_unknown_fields=True, frozen=True):
    """Config of one Bedrock region.

    Without a key, requests are signed (SigV4) with the credentials botocore's chain finds:
    the environment, the shared files with `profile` (else AWS_PROFILE), the container or
    instance metadata endpoints (`providers.bedrock.credentials`). `cache_points` names the
    upstream models (or `"*"`) whose requests mark the system prompt and the tools with a
    `cachePoint`, so that Bedrock caches them (their reads and writes are billed at the
    model's cached and cache-write prices). `allowed_storage_prefixes` lists the `s3://`
    buckets or folders whose objects a request may name as images (Bedrock reads them with
    the gateway's AWS identity); none by default (`providers.storage_urls`).
    """

    base_url: Annotated[str, msgspec.Meta(pattern=r"^(https?://.+)?$")] = ""
    region: Region
    profile: str | None = None
    cache_points: list[str] = []
    allowed_storage_prefixes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        try:
            prefixes = tuple(storage_prefix(p, "s3") for p in self.allowed_storage_prefixes)
        except ValueError as exc:
            raise ValueError(f"allowed_storage_prefixes: {exc}") from exc
        msgspec.structs.force_setattr(self, "allowed_storage_prefixes", prefixes)

    def endpoint(self) -> str:
        return (self.base_url or f"https://bedrock-runtime.{self.region}.amazonaws.com").rstrip("/")

    def config_problems(self, environ: Mapping[str, str]) -> list[tuple[str, str]]:
        """What `gateway config check` reports beyond the types (see the loader)."""
        if self.api_key or self.api_key_env:
            return []  # a Bedrock API key: the chain is not used
        return credential_problems(self.profile, environ)


def credential_problems(profile: str | None, environ: Mapping[str, str]) -> list[tuple[str, str]]:
    """What the environment and the shared files say is wrong with the credentials, as
    botocore would read them (the metadata endpoints are not asked: they are only there at
    run time)."""
    problems: list[tuple[str, str]] = []
    key, secret = environ.get("AWS_ACCESS_KEY_ID"), environ.get("AWS_SECRET_ACCESS_KEY")
    if bool(key) != bool(secret):
        missing = "AWS_SECRET_ACCESS_KEY" if key else "AWS_ACCESS_KEY_ID"
        problems.append(("profile", f"environment variable {missing!r} is not set"))
    name = profile or environ.get("AWS_PROFILE") or None
    field = "profile" if profile else "profile (AWS_PROFILE)"
    # The files matter when a profile is named (an explicit one even wins over the keys in the
    # environment, as in botocore), or when nothing else gives keys.
    files_needed = name is not None or not (key and secret)
    files = {
        "credentials": _path(environ, "AWS_SHARED_CREDENTIALS_FILE", "credentials"),
        "config": _path(environ, "AWS_CONFIG_FILE", "config"),
    }
    sections: set[str] = set()
    for kind, path in files.items():
        variable = "AWS_SHARED_CREDENTIALS_FILE" if kind == "credentials" else "AWS_CONFIG_FILE"
        if not path.exists():
            if variable in environ and files_needed:
                problems.append((field, f"{variable} names {str(path)!r}, which does not exist"))
            continue
        parser = configparser.RawConfigParser()
        try:
            parser.read_string(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, configparser.Error) as exc:
            problems.append((field, f"the AWS {kind} file {str(path)!r} does not parse: {exc}"))
            continue
        for section in parser.sections():
            sections.add(section.removeprefix("profile ") if kind == "config" else section)
    if name is not None and name not in sections:
        problems.append((field, f"no profile {name!r} in the AWS credentials or config files"))
    return problems


def _path(environ: Mapping[str, str], variable: str, name: str) -> Path:
    value = environ.get(variable)
    if value:
        return Path(os.path.expanduser(value))
    return Path(os.path.expanduser(environ.get("HOME", "~"))) / ".aws" / name
