"""The embeddings call: validate, resolve, admit with a hold, call (falling back), settle.

A postpaid call as chat is (`gateway.chat.service`), without streams: one `admit` (the
requests and tokens per minute, the Idempotency-Key, a hold priced from the input's token
bound at the dearest route's input price) and one `settle` (the charge from the upstream's
`usage.prompt_tokens`, or the estimate when it reports none; never past the bound, so never
past the hold). Routing is chat's: `auto` follows the `embeddings` policy, a route whose
breaker is open is passed over, an upstream's own failure feeds its breaker and moves on.

The answer is OpenAI's `list` of `embedding` objects, floats or base64 of little-endian
float32 as the client asked, with `usage.credits`; it is the idempotent reply when the call
has a key. The service knows no HTTP: it raises `gateway.errors` errors carrying the model,
the route and the rate state as far as the call got.
"""

from __future__ import annotations

import asyncio
import base64
import math
import struct
import time
from decimal import Decimal

import msgspec

from gateway.admission.finisher import CallFinisher
from gateway.admission.gatekeeper import Gatekeeper
from gateway.admission.idempotency import claim_for
from gateway.auth import Caller
from gateway.billing.money import format_credits, format_usd
from gateway.billing.pricing import ChatPrice
from gateway.embeddings.validation import EmbeddingInputs, check_embeddings_request
from gateway.errors import (
    ErrorDetail,
    GatewayError,
    InsufficientCredits,
    InvalidRequest,
    ModelUnavailable,
    StoreUnavailable,
)
from gateway.ids import new_call_id
from gateway.logging import get_logger
from gateway.metrics import DisabledMetrics, Metrics
from gateway.routing.fallback import (
    RouteNote,
    failure_reason,
    falls_back,
    retry_delay,
    route_note,
)
from gateway.routing.resolver import Choice, ModelNotFound, Route, Router
from gateway.routing.upstream_errors import as_gateway_error
from gateway.schemas.embeddings import Embedding, EmbeddingList, EmbeddingsRequest, EmbeddingUsage
from gateway.store.base import Call, RateState, Release, Settlement, StoredReply
from providers.base import EmbeddingResult, EmbeddingsProvider
from providers.errors import ProviderError

__all__ = [
    "EMBEDDINGS_PATH",
    "EmbeddingsAnswered",
    "EmbeddingsOutcome",
    "EmbeddingsReplayed",
    "EmbeddingsService",
]

EMBEDDINGS_PATH = "/v1/embeddings"
MODEL_HEADER = "x-gateway-model"
ROUTE_HEADER = "x-gateway-route"
_PINNED = "pinned"
_encode = msgspec.json.Encoder().encode
_log = get_logger("gateway.embeddings")


class EmbeddingsAnswered(msgspec.Struct, kw_only=True, frozen=True):
    """The answer's JSON, already charged; the model that answered and how it was routed."""

    body: bytes
    model: str
    route: str
    rate: RateState
    upstream_seconds: float = 0.0


class EmbeddingsReplayed(msgspec.Struct, kw_only=True, frozen=True):
    """A repeated Idempotency-Key: the first call's reply as it was kept."""

    reply: StoredReply
    model: str
    rate: RateState


EmbeddingsOutcome = EmbeddingsAnswered | EmbeddingsReplayed


class EmbeddingsService:
    def __init__(
        self,
        finisher: CallFinisher,
        router: Router,
        gatekeeper: Gatekeeper,
        *,
        hold_seconds: int,
        metrics: Metrics | None = None,
    ) -> None:
        self._finisher = finisher
        self._router = router
        self._gatekeeper = gatekeeper
        self._hold_seconds = hold_seconds
        self._metrics = metrics or DisabledMetrics()
        self._prices: dict[str, ChatPrice] = {}

    async def handle(
        self,
        caller: Caller,
        request: EmbeddingsRequest,
        *,
        request_id: str,
        idempotency_key: str | None,
    ) -> EmbeddingsOutcome:
        inputs = check_embeddings_request(request)
        tenant = caller.tenant
        try:
            choice = self._router.choose(request.model, tenant, "embeddings")
        except InvalidRequest as exc:  # a model of another capability: none of this endpoint's
            raise ModelNotFound(
                f"The model '{request.model}' does not exist or is not an embeddings model."
            ) from exc
        rate: RateState | None = None
        try:
            routes = choice.routes
            if idempotency_key is None and all(r.breaker.refuses() for r in routes):
                raise _all_open(choice, [RouteNote(r.model.id, "breaker_open") for r in routes])
            call = Call(
                tenant=tenant.name,
                api_key_id=caller.key_id,
                call_id=new_call_id(),
                request_id=request_id,
                limits=tenant.limits,
                tokens_reserved=inputs.estimate,
                idempotency=claim_for(
                    tenant=tenant.name,
                    method="POST",
                    path=EMBEDDINGS_PATH,
                    key=idempotency_key,
                    request=request,
                    lease_seconds=self._hold_seconds,
                    invalid=InvalidRequest,
                ),
            )
            hold = max(self._price(r).hold_units(inputs.bound, 0) for r in routes)
            try:
                admitted = await self._gatekeeper.admit(
                    call, hold_units=hold, hold_seconds=self._hold_seconds
                )
            except StoreUnavailable:
                self._finisher.abandon(Release(call=call))
                raise
            except InsufficientCredits as exc:
                raise _too_poor(exc) from exc
            rate = admitted.rate
            if admitted.reply is not None:
                reply = admitted.reply
                model = reply.headers.get(MODEL_HEADER, routes[0].model.id)
                return EmbeddingsReplayed(reply=reply, model=model, rate=rate)
            return await self._run(call, choice, request, inputs, tenant.credits_per_usd, rate)
        except Exception as exc:
            error = as_gateway_error(exc)
            if error.model is None:
                error.model = choice.routes[0].model.id
            if rate is not None:
                error.rate = rate
            if error is exc:
                raise
            raise error from exc

    async def _run(
        self,
        call: Call,
        choice: Choice,
        request: EmbeddingsRequest,
        inputs: EmbeddingInputs,
        credits_per_usd: Decimal,
        rate: RateState,
    ) -> EmbeddingsAnswered:
        """The upstream calls in the choice's order until one answers (chat's retry rules);
        what admission took is given back when none does."""
        routes, retry = choice.routes, choice.retry
        cycle = retry.max_attempts is not None
        limit = retry.max_attempts or len(routes)
        failed: list[RouteNote] = []
        failures: dict[str, tuple[int, float | None]] = {}
        last: tuple[Route, Exception] | None = None
        waited = 0.0
        attempts = visits = idle = 0
        while attempts < limit and idle < len(routes) and (cycle or visits < len(routes)):
            route = routes[visits % len(routes)]
            visits += 1
            delay = 0.0
            seen = failures.get(route.model.provider)
            if seen is not None:
                wait = retry_delay(retry, seen[0], seen[1], self._router.rng)
                if wait is None:
                    failed.append(RouteNote(route.model.id, "retry_after"))
                    idle += 1
                    continue
                delay = wait
            breaker = route.breaker
            if not breaker.allow():
                failed.append(RouteNote(route.model.id, "breaker_open"))
                idle += 1
                continue
            idle = 0
            attempts += 1
            if delay:
                await asyncio.sleep(delay)
            started = time.perf_counter()
            try:
                provider: EmbeddingsProvider = route.provider
                result = await provider.embed(_upstream_body(request, inputs, route))
                _check_result(result, inputs)
            except Exception as exc:
                route.scrub(exc)
                elapsed = time.perf_counter() - started
                waited += elapsed
                self._metrics.upstream_failed(
                    route.model.provider,
                    route.model.id,
                    "embeddings",
                    failure_reason(exc),
                    elapsed,
                )
                if not falls_back(exc):
                    if isinstance(exc, ProviderError):
                        breaker.succeeded()
                    else:
                        breaker.abandon()
                    _log_failure(route, exc, fallback=False)
                    await self._finisher.release(Release(call=call))
                    error = _failure(exc, choice, route, failed, answered=True)
                    error.upstream_seconds = waited
                    raise error from exc
                breaker.failed()
                _log_failure(route, exc, fallback=True)
                count = failures.get(route.model.provider, (0, None))[0] + 1
                retry_after = exc.retry_after if isinstance(exc, ProviderError) else None
                failures[route.model.provider] = (count, retry_after)
                failed.append(RouteNote(route.model.id, failure_reason(exc)))
                last = (route, exc)
                continue
            except BaseException:
                breaker.abandon()
                await self._finisher.release(Release(call=call))
                raise
            breaker.succeeded()
            elapsed = time.perf_counter() - started
            waited += elapsed
            self._metrics.upstream_call(route.model.provider, route.model.id, "embeddings", elapsed)
            if failed:
                note = route_note(choice.pinned, route.model.id, failed)
            else:
                note = _PINNED if choice.pinned else route.note
            body, tokens, units = self._answer(route, inputs, result, credits_per_usd)
            reply = None
            if call.idempotency is not None:
                reply = StoredReply(
                    status=200,
                    content_type="application/json",
                    body=body,
                    headers={MODEL_HEADER: route.model.id, ROUTE_HEADER: note},
                )
            model = route.model.id
            await self._finisher.settle(
                Settlement(
                    call=call,
                    charge_units=units,
                    tokens_used=tokens,
                    reason=f"embeddings {model}",
                    model=model,
                    reply=reply,
                )
            )
            self._metrics.embeddings_charged(model, units, tokens)
            return EmbeddingsAnswered(
                body=body, model=model, route=note, rate=rate, upstream_seconds=waited
            )
        await self._finisher.release(Release(call=call))
        if last is None:
            raise _all_open(choice, failed)
        failed_route, cause = last
        error = _failure(cause, choice, failed_route, failed, answered=False)
        error.upstream_seconds = waited
        raise error from cause

    def _answer(
        self,
        route: Route,
        inputs: EmbeddingInputs,
        result: EmbeddingResult,
        credits_per_usd: Decimal,
    ) -> tuple[bytes, int, int]:
        """The answer's JSON, the input tokens charged and the charge in units."""
        reported = result.prompt_tokens
        estimated = reported is None or reported <= 0
        tokens = inputs.estimate if estimated or reported is None else min(reported, inputs.bound)
        units = self._price(route).charge_units(tokens, 0)
        data = [
            Embedding(index=index, embedding=_encoded(vector) if inputs.base64 else vector)
            for index, vector in enumerate(result.vectors)
        ]
        usage = EmbeddingUsage(
            prompt_tokens=tokens,
            total_tokens=tokens,
            credits=format_credits(units),
            credits_usd_reference=format_usd(units, credits_per_usd),
            estimated=estimated,
        )
        body = _encode(EmbeddingList(data=data, model=route.model.id, usage=usage))
        return body, tokens, units

    def _price(self, route: Route) -> ChatPrice:
        price = self._prices.get(route.model.id)
        if price is None:
            price = self._prices[route.model.id] = ChatPrice.of(route.model)
        return price


def _upstream_body(
    request: EmbeddingsRequest, inputs: EmbeddingInputs, route: Route
) -> dict[str, object]:
    """The OpenAI request the adapter gets: the upstream model, `input` as a list, the
    client's other fields as sent."""
    body: dict[str, object] = msgspec.to_builtins(request)
    body["model"] = route.model.upstream_model
    body["input"] = inputs.items
    return body


def _check_result(result: EmbeddingResult, inputs: EmbeddingInputs) -> None:
    """An answer with another number of vectors than inputs is the upstream's failure."""
    if len(result.vectors) != len(inputs.items):
        raise ProviderError(
            f"the upstream gave {len(result.vectors)} vectors for {len(inputs.items)} inputs"
        )


def _encoded(vector: list[float]) -> str:
    """OpenAI's base64 form: the vector's little-endian float32 values."""
    return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode("ascii")


def _too_poor(refused: InsufficientCredits) -> InsufficientCredits:
    """The 402 in an embeddings call's words: what its hold is made of, and how to need less
    (the gatekeeper's speaks of completion tokens, which embeddings do not have)."""
    amounts = {d.field: d.message for d in refused.details or [] if d.field.endswith("_credits")}
    needed, available = amounts.get("hold_credits", "?"), amounts.get("available_credits", "?")
    error = InsufficientCredits(
        f"This call needs a hold of {needed} credits and the wallet has {available} available. "
        "The hold prices the input's token bound (a text's UTF-8 bytes, a token array's "
        "length) at the model's input price: send fewer or shorter inputs, or add credits.",
        details=[
            ErrorDetail(field="hold_credits", message=needed),
            ErrorDetail(field="available_credits", message=available),
            ErrorDetail(field="input", message="send fewer or shorter inputs to hold less"),
        ],
    )
    error.rate = refused.rate
    return error


def _failure(
    exc: Exception, choice: Choice, route: Route, failed: list[RouteNote], *, answered: bool
) -> GatewayError:
    error = as_gateway_error(exc)
    error.model = route.model.id
    if failed:
        error.route = route_note(choice.pinned, route.model.id if answered else None, failed)
    else:
        error.route = _PINNED if choice.pinned else route.note
    return error


def _all_open(choice: Choice, failed: list[RouteNote]) -> ModelUnavailable:
    routes = choice.routes
    wait = min(route.breaker.retry_in() for route in routes)
    if choice.pinned:
        message = (
            f"The model '{routes[0].model.id}' is unavailable: its upstream is failing. "
            "Retry later, or with 'auto'."
        )
    else:
        message = "Every model 'auto' may use is unavailable: their upstreams are failing."
    error = ModelUnavailable(message, headers={"Retry-After": str(max(1, math.ceil(wait)))})
    error.model = routes[0].model.id
    error.route = route_note(choice.pinned, None, failed)
    return error


def _log_failure(route: Route, exc: Exception, *, fallback: bool) -> None:
    if isinstance(exc, ProviderError):
        _log.warning(
            "upstream_failed",
            model=route.model.id,
            provider=route.model.provider,
            error=type(exc).__name__,
            upstream_status=exc.upstream_status,
            detail=exc.message,
            fallback=fallback,
        )
