"""The routing file's shape: msgspec Structs, so a wrong field is named by its path.

Money-like numbers are Decimal (the file is parsed with `parse_float=Decimal`), never float.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated, Any, Literal

import msgspec

__all__ = [
    "CAPABILITIES",
    "FEATURES",
    "IMAGE_QUALITIES",
    "BreakerSection",
    "Capability",
    "ConfigFile",
    "GatewaySection",
    "ModelEntry",
    "PolicyCandidate",
    "Pricing",
    "RoutingPolicy",
    "RoutingSection",
    "TenantEntry",
    "TenantLimits",
    "When",
    "ceiling_price",
    "image_price",
]

Capability = Literal[
    "chat",
    "embeddings",
    "text_to_image",
    "image_to_image",
    "text_to_music",
    "reference_audio_to_music",
]
IMAGE_QUALITIES = ("standard", "hd")
CAPABILITIES: tuple[str, ...] = (
    "chat",
    "embeddings",
    "text_to_image",
    "image_to_image",
    "text_to_music",
    "reference_audio_to_music",
)
FEATURES = ("tools", "json_output", "vision", "hd")
"""What a model may declare in `features` and a request may need: `tools` (the request has
tools), `json_output` (response_format json_object or json_schema), `vision` (image parts in
messages), `hd` (an image task at quality hd)."""


class Pricing(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Chat: upstream USD per million tokens; embeddings: `input_usd_per_mtok` only. Media:
    credits per image or per task.

    `credits_per_image` is keyed by quality (`standard`, `hd`), or by `CAPABILITY.QUALITY` where
    one capability of the model costs otherwise (`image_to_image.hd = 320`)."""

    input_usd_per_mtok: Decimal = Decimal(0)
    output_usd_per_mtok: Decimal = Decimal(0)
    cached_input_usd_per_mtok: Decimal | None = None
    cache_write_usd_per_mtok: Decimal | None = None
    """Prompt tokens written to the upstream's cache (Anthropic); default: the input price."""
    use_reported_cost: bool = False
    """Charge the USD cost the upstream reports in `usage.cost` (x markup) instead of pricing
    the tokens; tokens are priced when it reports none."""
    credits_per_image: dict[str, Decimal] = {}
    credits_per_task: Decimal | None = None


def image_price(pricing: Pricing, capability: str, quality: str) -> Decimal | None:
    """Credits per image of `capability` at `quality`; None when the model has no such price."""
    prices = pricing.credits_per_image
    return prices.get(f"{capability}.{quality}", prices.get(quality))


def ceiling_price(model: ModelEntry, capability: str, quality: str = "standard") -> Decimal:
    """What a routing policy's `max_price` is compared with: chat in credits per million output
    tokens (output USD price x markup), embeddings in credits per million input tokens, images
    in credits per image at `quality`, music in credits per task."""
    pricing = model.pricing
    if capability == "chat":
        return pricing.output_usd_per_mtok * model.markup
    if capability == "embeddings":
        return pricing.input_usd_per_mtok * model.markup
    if capability.endswith("_music"):
        return pricing.credits_per_task or Decimal(0)
    return image_price(pricing, capability, quality) or Decimal(0)


class ModelEntry(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    id: str
    provider: str
    capability: Capability | None = None
    """One capability; or `capabilities` for a model that serves several (an image model for
    text_to_image and image_to_image). Loading fills `capabilities` either way."""
    capabilities: list[Capability] = []
    upstream_model: str = ""
    owned_by: str = "gateway"
    markup: Decimal = Decimal(1000)
    """Credits charged per upstream USD of cost (1000 = at cost with the default wallet rate)."""
    max_output_tokens: int = 4096
    """Worst-case completion size used for the credit hold when a request sets no limit."""
    pricing: Pricing = msgspec.field(default_factory=Pricing)
    release_label: Literal["Available", "Preview", "Planned"] = "Available"
    options_namespace: str = ""
    """The `model_options` key requests may use for this model (e.g. "alpha"); other keys are
    refused. Empty: the model takes no options."""
    features: list[str] | None = None
    """What the model can do (`FEATURES`); `auto` passes over it for a request that needs
    something else. None (not given): everything, as before features existed."""

    def serves(self, capability: str) -> bool:
        return capability in self.capabilities


class TenantLimits(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    requests_per_minute: int = 600
    tokens_per_minute: int = 1_000_000


class TenantEntry(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    models: list[str] = msgspec.field(default_factory=lambda: ["*"])
    """Model ids the tenant may use; "*" allows every configured model."""
    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None
    credits_per_usd_rate: Decimal = Decimal(1000)


class When(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A candidate's condition: each field given must match the request (`tools = true`: only
    requests with tools; `tools = false`: only requests without)."""

    tools: bool | None = None
    json_output: bool | None = None
    vision: bool | None = None
    quality: Literal["standard", "hd"] | None = None


class PolicyCandidate(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    model: str
    weight: Annotated[int, msgspec.Meta(ge=1)] | None = None
    """Relative share of first picks under `strategy = "weighted"` (default 1)."""
    when: When = msgspec.field(default_factory=When)


class RoutingPolicy(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """How `auto` picks among the candidates of one capability, and how a call falls back."""

    strategy: Literal["ordered", "weighted"] = "ordered"
    candidates: list[PolicyCandidate]
    max_price: Decimal | None = None
    """A ceiling: chat in credits per million output tokens (output price x markup), embeddings
    per million input tokens, images in
    credits per image at the request's quality, music in credits per task."""
    max_attempts: Annotated[int, msgspec.Meta(ge=1, le=10)] | None = None
    """Upstream calls per client request at most. Default: each candidate once; more goes
    round again (so a pinned model is retried)."""
    backoff_ms: Annotated[int, msgspec.Meta(ge=0, le=60_000)] = 100
    """Before calling again an upstream that already failed this request: this, doubling per
    failure, with jitter (50 to 100 %)."""
    max_retry_after_ms: Annotated[int, msgspec.Meta(ge=0, le=600_000)] = 2_000
    """An upstream's `Retry-After` is waited out up to this; beyond, it is not called again."""


class BreakerSection(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The circuit breaker of every upstream (one per provider)."""

    failure_threshold: Annotated[int, msgspec.Meta(ge=1)] = 5
    """Consecutive failures (unavailable, timeout, 502/503/504, broken connection) that open it."""
    open_seconds: Decimal = Decimal(30)
    """How long it stays open; then one probe request is let through (half-open)."""


class RoutingSection(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    auto: dict[Capability, list[str]] = {}
    """Per capability, the models `auto` tries in order (the short form of a policy)."""
    policies: dict[Capability, RoutingPolicy] = {}
    """Per capability, the full form: strategy, candidates with conditions, ceiling, retries."""
    breaker: BreakerSection = msgspec.field(default_factory=BreakerSection)


class GatewaySection(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    starting_grant_credits: Decimal = Decimal(0)
    """Granted once to the `default` tenant by `gateway serve` on the embedded default store."""
    max_body_bytes: int = 10 * 1024 * 1024
    hold_seconds: int = 900
    """How long a chat's credit hold lives if its call dies without settling."""
    max_header_bytes: Annotated[int, msgspec.Meta(ge=1024)] = 32 * 1024
    """Request line and headers together, per request (431 beyond)."""
    max_headers: Annotated[int, msgspec.Meta(ge=8)] = 100
    """Header lines per request (431 beyond)."""
    header_timeout_seconds: Annotated[float, msgspec.Meta(gt=0)] = 10.0
    """Time for a request line and headers to arrive completely (408 beyond)."""
    body_idle_timeout_seconds: Annotated[float, msgspec.Meta(gt=0)] = 30.0
    """Longest pause between two reads of a request body (408 beyond)."""
    write_timeout_seconds: Annotated[float, msgspec.Meta(gt=0)] = 30.0
    """Longest wait for a client to take response bytes (its socket full): beyond it the
    connection is closed (a stream is settled for what was produced)."""
    task_lease_seconds: Annotated[float, msgspec.Meta(ge=1)] = 30.0
    """A worker renews its hold on a running task this often (/3); a task whose worker stopped
    is taken by another after this long."""
    task_max_attempts: Annotated[int, msgspec.Meta(ge=1)] = 3
    """Claims of one task (each worker that died costs one) before it fails, refunded."""
    artifact_retention_days: Annotated[float, msgspec.Meta(gt=0)] = 7.0
    """Uploads, references and outputs are removed this long after they were made."""
    task_retention_days: Annotated[float, msgspec.Meta(ge=1)] = 30.0
    """A task that ended is removed this long after (queued and running ones never are). At
    least a day: longer than a create's idempotency record, so a replay never finds it gone."""
    max_image_pixels: Annotated[int, msgspec.Meta(ge=1)] = 40_000_000
    """Width x height of an image an upload or a task reference may have (read from its
    header, before anything decodes it): larger ones are refused with a 422."""
    fetch_allow_http: bool = False
    """Reference URLs must be https unless this is set (tests, internal networks)."""
    fetch_allowed_networks: list[str] = []
    """Networks reference URLs may reach although they are not public (e.g. "10.1.0.0/16");
    loopback, private, link-local and metadata addresses are refused otherwise."""
    callback_allowed_networks: list[str] = []
    """Networks task callbacks may reach although they are not public, and the only ones a
    plain http callback URL may reach (tests, private deployments); never metadata."""
    callback_retry_seconds: list[Annotated[float, msgspec.Meta(ge=0)]] = []
    """The waits between callback attempts (the first attempt, then one retry after each);
    empty: the Standard Webhooks schedule (5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 14 h, 20 h,
    24 h)."""


class ConfigFile(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    gateway: GatewaySection = msgspec.field(default_factory=GatewaySection)
    limits: TenantLimits = msgspec.field(default_factory=TenantLimits)
    """Defaults for tenants that do not set their own."""
    providers: dict[str, dict[str, Any]] = {}
    models: list[ModelEntry] = []
    routing: RoutingSection = msgspec.field(default_factory=RoutingSection)
    tenants: dict[str, TenantEntry] = {}
