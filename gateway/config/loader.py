"""Load and check the routing file; every problem names the file, the field and what is wrong."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import ipaddress
import os
import re
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import msgspec

from gateway.config.limits import RateLimits
from gateway.config.schema import (
    CAPABILITIES,
    FEATURES,
    IMAGE_QUALITIES,
    ConfigFile,
    ModelEntry,
    RoutingPolicy,
    TenantEntry,
    ceiling_price,
    image_price,
)
from gateway.errors import decode_detail
from providers.registry import serves, spec_for

__all__ = ["ConfigError", "GatewayConfig", "ProviderConfig", "Tenant", "load_config"]

_MODEL_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$")


class ConfigError(Exception):
    """The routing file cannot be used; the message is meant for the operator as it is (one
    line per problem; `problems` lists them when there are several)."""

    def __init__(self, message: str, *, problems: list[ConfigError] | None = None) -> None:
        super().__init__(message)
        self.problems = problems or [self]


@dataclass(frozen=True, slots=True)
class ProviderConfig:
    name: str
    kind: str
    options: msgspec.Struct


@dataclass(frozen=True, slots=True)
class Tenant:
    name: str
    allowed_models: frozenset[str] | None
    """None: every configured model."""
    limits: RateLimits
    credits_per_usd: Decimal

    def may_use(self, model_id: str) -> bool:
        return self.allowed_models is None or model_id in self.allowed_models


@dataclass(frozen=True, slots=True)
class GatewayConfig:
    path: Path
    file: ConfigFile
    providers: dict[str, ProviderConfig]
    models: dict[str, ModelEntry]
    tenants: dict[str, Tenant]
    version: str = ""
    """The file's checksum (12 hex digits of its SHA-256): which routing file is in force."""


def load_config(path: str | os.PathLike[str]) -> GatewayConfig:
    where = Path(path)
    try:
        text = where.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{where}: cannot read the routing file: {exc.strerror}") from exc
    try:
        raw = tomllib.loads(text, parse_float=Decimal)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{where}: not valid TOML: {exc}") from exc
    config = _build(where, raw)
    version = hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]
    return dataclasses.replace(config, version=version)


def _fail(where: Path, field: str, problem: str) -> ConfigError:
    return ConfigError(f"{where}: {field}: {problem}")


def _network(where: Path, field: str, network: str) -> None:
    """An IP network (`10.1.0.0/16`, `127.0.0.1/32`, `fd00::/8`), host bits clear."""
    try:
        ipaddress.ip_network(network)
    except ValueError as exc:
        raise _fail(where, field, f"not an IP network ({exc})") from None


def _convert(where: Path, raw: Any, type_: type[Any], prefix: str) -> Any:
    """`raw` as `type_`; a problem names the file, the field as written in it, and what is
    wrong, in the words the API uses for request bodies (`unknown field`, `expected ...`)."""
    try:
        return msgspec.convert(raw, type_)
    except msgspec.ValidationError as exc:
        detail = decode_detail(exc)
        inner = "" if detail.field == "body" else detail.field
        if inner.startswith("["):
            field = prefix + inner
        else:
            field = ".".join(part for part in (prefix, inner) if part)
        raise _fail(where, field or "(top level)", detail.message) from exc


def _build(where: Path, raw: dict[str, Any]) -> GatewayConfig:
    tables = raw.pop("tenants", {})
    if not isinstance(tables, dict):
        raise _fail(where, "tenants", "must be a table of [tenants.NAME] entries")
    routing = raw.get("routing")
    policies = routing.pop("policies", {}) if isinstance(routing, dict) else {}
    if not isinstance(policies, dict):
        raise _fail(where, "routing.policies", "must be a table of [routing.policies.CAPABILITY]")
    file: ConfigFile = _convert(where, raw, ConfigFile, "")
    problems = _Problems()
    for name, table in tables.items():
        with problems.each():
            file.tenants[name] = _convert(where, table, TenantEntry, f"tenants.{name}")
    for capability, table in policies.items():  # one by one, so that errors name the capability
        with problems.each():
            if capability not in CAPABILITIES:
                raise _fail(
                    where,
                    f"routing.policies.{capability}",
                    f"use one of {', '.join(CAPABILITIES)}",
                )
            field = f"routing.policies.{capability}"
            file.routing.policies[capability] = _convert(where, table, RoutingPolicy, field)
    for index, network in enumerate(file.gateway.callback_allowed_networks):
        with problems.each():
            _network(where, f"gateway.callback_allowed_networks[{index}]", network)
    providers = _providers(where, file, problems)
    models: dict[str, ModelEntry] = {}
    for index, model in enumerate(file.models):
        if model.provider in file.providers and model.provider not in providers:
            continue  # its provider's own error is reported; this model's would only echo it
        with problems.each():
            _model(where, f"models[{index}]", model, models, providers)
    tenants: dict[str, Tenant] = {}
    if not problems.errors:  # routing and tenants name models: check them on a sound list
        with problems.each():
            _check_routing(where, file, models)
        for name, entry in file.tenants.items():
            with problems.each():
                tenants[name] = _tenant(where, name, entry, file, models)
    problems.raise_any()
    return GatewayConfig(path=where, file=file, providers=providers, models=models, tenants=tenants)


def _model(
    where: Path,
    field: str,
    model: ModelEntry,
    models: dict[str, ModelEntry],
    providers: dict[str, ProviderConfig],
) -> None:
    if not _MODEL_ID.match(model.id) or model.id == "auto":
        raise _fail(where, f"{field}.id", f"{model.id!r} is not a usable model id")
    if model.id in models:
        raise _fail(where, f"{field}.id", f"duplicate model id {model.id!r}")
    if model.provider not in providers:
        raise _fail(
            where,
            f"{field}.provider",
            f"unknown provider {model.provider!r}; declare it under [providers.{model.provider}]",
        )
    model = _capabilities(where, field, model, providers)
    if model.markup < 0 or model.max_output_tokens < 1:
        raise _fail(where, field, "markup must be >= 0 and max_output_tokens >= 1")
    _check_pricing(where, field, model)
    _check_features(where, field, model)
    if not model.upstream_model:
        model = msgspec.structs.replace(model, upstream_model=model.id)
    models[model.id] = model


class _Problems:
    """Every independent item's first error, so that one check reports them all."""

    def __init__(self) -> None:
        self.errors: list[ConfigError] = []

    @contextlib.contextmanager
    def each(self) -> Iterator[None]:
        try:
            yield
        except ConfigError as exc:
            self.errors.extend(exc.problems)

    def raise_any(self) -> None:
        if len(self.errors) == 1:
            raise self.errors[0]
        if self.errors:
            raise ConfigError("\n".join(str(e) for e in self.errors), problems=self.errors)


def _providers(where: Path, file: ConfigFile, problems: _Problems) -> dict[str, ProviderConfig]:
    result: dict[str, ProviderConfig] = {}
    for name, table in file.providers.items():
        with problems.each():
            _provider(where, name, table, result)
    return result


def _provider(
    where: Path, name: str, table: dict[str, Any], result: dict[str, ProviderConfig]
) -> None:
    field = f"providers.{name}"
    options = dict(table)
    kind = options.pop("kind", None)
    if not isinstance(kind, str):
        raise _fail(where, f"{field}.kind", 'missing: name the adapter, e.g. kind = "openai"')
    try:
        spec = spec_for(kind)
    except KeyError as exc:
        raise _fail(where, f"{field}.kind", str(exc.args[0])) from exc
    parsed = _convert(where, options, spec.options_type, field)
    problems: list[ConfigError] = []
    resolve = getattr(parsed, "resolve_api_key", None)
    if resolve is not None:  # a key named by api_key_env must be there before anything runs
        try:
            resolve(os.environ)
        except ValueError as exc:
            problems.append(_fail(where, f"{field}.{exc}", "set it, or give api_key"))
    # What an adapter checks beyond its types: settings that depend on each other, and the
    # credentials it will need (variables set, files there and readable), one problem each.
    check = getattr(parsed, "config_problems", None)
    if check is not None:
        for at, problem in check(os.environ):
            problems.append(_fail(where, f"{field}.{at}", problem))
    if problems:
        raise ConfigError("\n".join(map(str, problems)), problems=problems)
    result[name] = ProviderConfig(name=name, kind=kind, options=parsed)


def _check_pricing(where: Path, field: str, model: ModelEntry) -> None:
    pricing = model.pricing
    numbers = [pricing.input_usd_per_mtok, pricing.output_usd_per_mtok]
    numbers += [pricing.cached_input_usd_per_mtok or Decimal(0)]
    numbers += [pricing.cache_write_usd_per_mtok or Decimal(0)]
    numbers += [pricing.credits_per_task or Decimal(0)]
    numbers += list(pricing.credits_per_image.values())
    if any(n < 0 for n in numbers):
        raise _fail(where, f"{field}.pricing", "prices cannot be negative")
    if not pricing.credits_per_image and any(
        model.serves(c) for c in ("text_to_image", "image_to_image")
    ):
        raise _fail(where, f"{field}.pricing.credits_per_image", "required for image models")
    for key in pricing.credits_per_image:
        capability, _, quality = key.rpartition(".")
        if quality not in IMAGE_QUALITIES or capability not in ("", *model.capabilities):
            raise _fail(
                where,
                f"{field}.pricing.credits_per_image.{key}",
                f"use a quality ({', '.join(IMAGE_QUALITIES)}), or CAPABILITY.QUALITY for a "
                "price of one of the model's capabilities (e.g. image_to_image.hd)",
            )
    for capability in model.capabilities:
        if capability.startswith(("text_to_image", "image_to_image")):
            for quality in IMAGE_QUALITIES:
                if image_price(pricing, capability, quality) is None:
                    raise _fail(
                        where,
                        f"{field}.pricing.credits_per_image",
                        f"no {quality} price for {capability}",
                    )
    if pricing.credits_per_task is None and any(c.endswith("_music") for c in model.capabilities):
        raise _fail(where, f"{field}.pricing.credits_per_task", "required for music models")


def _check_features(where: Path, field: str, model: ModelEntry) -> None:
    for position, feature in enumerate(model.features or ()):
        if feature not in FEATURES:
            raise _fail(
                where,
                f"{field}.features[{position}]",
                f"unknown feature {feature!r}; use {', '.join(FEATURES)}",
            )
        image_model = any(c.endswith("_to_image") for c in model.capabilities)
        if (feature == "hd") != image_model:
            kind = "image" if feature == "hd" else "chat"
            raise _fail(where, f"{field}.features[{position}]", f"{feature!r} is for {kind} models")


def _check_routing(where: Path, file: ConfigFile, models: dict[str, ModelEntry]) -> None:
    """Every model named by `routing` exists and serves the capability it is named for."""

    def check_model(field: str, model_id: str, capability: str) -> None:
        if model_id not in models:
            raise _fail(where, field, f"unknown model {model_id!r}")
        if not models[model_id].serves(capability):
            raise _fail(where, field, f"model {model_id!r} is not a {capability} model")

    routing = file.routing
    if routing.breaker.open_seconds <= 0:
        raise _fail(where, "routing.breaker.open_seconds", "must be > 0")
    for capability, chain in routing.auto.items():
        for position, model_id in enumerate(chain):
            check_model(f"routing.auto.{capability}[{position}]", model_id, capability)
    for capability, policy in routing.policies.items():
        field = f"routing.policies.{capability}"
        if capability in routing.auto:
            raise _fail(where, field, f"give routing.auto.{capability} or this policy, not both")
        if not policy.candidates:
            raise _fail(where, f"{field}.candidates", "must name at least one model")
        seen: set[str] = set()
        for position, candidate in enumerate(policy.candidates):
            at = f"{field}.candidates[{position}]"
            check_model(f"{at}.model", candidate.model, capability)
            if candidate.model in seen:
                raise _fail(where, f"{at}.model", f"model {candidate.model!r} is named twice")
            seen.add(candidate.model)
            if candidate.weight is not None and policy.strategy != "weighted":
                raise _fail(where, f"{at}.weight", 'only with strategy = "weighted"')
            when = candidate.when
            image = capability.endswith("_to_image")
            if when.quality is not None and not image:
                raise _fail(where, f"{at}.when.quality", "only for image capabilities")
            for name in ("tools", "json_output", "vision"):
                if getattr(when, name) is not None and capability != "chat":
                    raise _fail(where, f"{at}.when.{name}", "only for chat")
        if policy.max_price is not None and policy.max_price < 0:
            raise _fail(where, f"{field}.max_price", "must be >= 0")
        if policy.max_price is not None and not _any_within(policy, capability, models):
            raise _fail(
                where,
                f"{field}.max_price",
                f"every candidate costs more than {policy.max_price}; none could ever be used",
            )


def _any_within(policy: RoutingPolicy, capability: str, models: dict[str, ModelEntry]) -> bool:
    ceiling = policy.max_price
    return any(
        ceiling_price(models[candidate.model], capability, quality) <= (ceiling or 0)
        for candidate in policy.candidates
        for quality in IMAGE_QUALITIES
    )


def _capabilities(
    where: Path, field: str, model: ModelEntry, providers: dict[str, ProviderConfig]
) -> ModelEntry:
    """`capability` or `capabilities` -> `capabilities`; each one its provider's kind serves."""
    if model.capability is not None and model.capabilities:
        raise _fail(where, field, "give `capability` or `capabilities`, not both")
    capabilities = list(model.capabilities) or ([model.capability] if model.capability else [])
    if not capabilities:
        raise _fail(where, f"{field}.capability", 'missing: e.g. capability = "chat"')
    if "chat" in capabilities and len(capabilities) > 1:
        raise _fail(where, f"{field}.capabilities", "a chat model serves chat only")
    if "embeddings" in capabilities and len(capabilities) > 1:
        raise _fail(where, f"{field}.capabilities", "an embeddings model serves embeddings only")
    kind = providers[model.provider].kind
    for capability in capabilities:
        if not serves(kind, capability):
            raise _fail(
                where,
                f"{field}.capabilities" if model.capabilities else f"{field}.capability",
                f"provider {model.provider!r} (kind {kind!r}) cannot serve {capability}",
            )
    return msgspec.structs.replace(
        model, capability=capabilities[0], capabilities=list(dict.fromkeys(capabilities))
    )


def _tenant(
    where: Path, name: str, entry: TenantEntry, file: ConfigFile, models: dict[str, ModelEntry]
) -> Tenant:
    field = f"tenants.{name}"
    allowed: frozenset[str] | None = None
    if "*" not in entry.models:
        for position, model_id in enumerate(entry.models):
            if model_id not in models:
                raise _fail(where, f"{field}.models[{position}]", f"unknown model {model_id!r}")
        allowed = frozenset(entry.models)
    rpm = entry.requests_per_minute or file.limits.requests_per_minute
    tpm = (
        entry.tokens_per_minute
        if entry.tokens_per_minute is not None
        else (file.limits.tokens_per_minute)
    )
    if rpm < 1 or tpm < 0:
        raise _fail(where, field, "requests_per_minute must be >= 1, tokens_per_minute >= 0")
    if entry.credits_per_usd_rate <= 0:
        raise _fail(where, f"{field}.credits_per_usd_rate", "must be > 0")
    return Tenant(
        name=name,
        allowed_models=allowed,
        limits=RateLimits(requests_per_minute=rpm, tokens_per_minute=tpm),
        credits_per_usd=entry.credits_per_usd_rate,
    )
