"""The embeddings call: validate, resolve, admit with a hold, call (falling back), settle.

A postpaid call as chat is (`gateway.chat.service`), without streams: one `admit` (the
requests and tokens per minute, the Idempotency-Key, a hold priced from the input's token
bound at the dearest route's input price) and one `settle` (the charge from the upstream's
`usage.prompt_tokens`, or the estimate when it reports none; never past the bound, so never
past the hold). Routing is chat's: `auto` follows the `embeddings` policy, a route whose
breaker is open is passed over, an upstream's own failure feeds its breaker and moves on.

The answer (`gateway.embeddings.answer`) is OpenAI's `list` of `embedding` objects, floats or
base64 as the client asked, with `usage.credits`; it is the idempotent reply when the call
has a key. The service knows no HTTP: it raises `gateway.errors` errors carrying the model,
the route and the rate state as far as the call got.
"""

from __future__ import annotations

import asyncio
import time
from decimal import Decimal

import msgspec

from gateway.admission.finisher import CallFinisher
from gateway.admission.gatekeeper import Gatekeeper
from gateway.admission.idempotency import claim_for
from gateway.auth import Caller
from gateway.billing.pricing import ChatPrice
from gateway.embeddings.answer import embeddings_answer
from gateway.embeddings.route_report import too_poor
from gateway.embeddings.validation import EmbeddingInputs, check_embeddings_request
from gateway.errors import (
    InsufficientCredits,
    InvalidRequest,
    KeyBudgetExceeded,
    StoreUnavailable,
)
from gateway.ids import new_call_id
from gateway.metrics import DisabledMetrics, Metrics
from gateway.routing.fallback import (
    RouteNote,
    failure_reason,
    falls_back,
    retry_delay,
    route_note,
)
from gateway.routing.report import (
    PINNED,
    all_open,
    annotated,
    call_failure,
    log_upstream_failure,
)
from gateway.routing.resolver import Choice, ModelNotFound, Route, Router
from gateway.schemas.embeddings import EmbeddingsRequest
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
                raise all_open(choice, [RouteNote(r.model.id, "breaker_open") for r in routes])
            call = Call(
                tenant=tenant.name,
                api_key_id=caller.key_id,
                call_id=new_call_id(),
                request_id=request_id,
                limits=tenant.limits,
                budget=caller.budget,
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
            except KeyBudgetExceeded:
                raise
            except InsufficientCredits as exc:
                raise too_poor(exc) from exc
            rate = admitted.rate
            if admitted.reply is not None:
                reply = admitted.reply
                model = reply.headers.get(MODEL_HEADER, routes[0].model.id)
                return EmbeddingsReplayed(reply=reply, model=model, rate=rate)
            return await self._run(call, choice, request, inputs, tenant.credits_per_usd, rate)
        except Exception as exc:
            error = annotated(exc, choice, rate)
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
                    log_upstream_failure(route, exc, fallback=False)
                    await self._finisher.release(Release(call=call))
                    error = call_failure(exc, choice, route, failed, answered=True)
                    error.upstream_seconds = waited
                    raise error from exc
                breaker.failed()
                log_upstream_failure(route, exc, fallback=True)
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
                note = PINNED if choice.pinned else route.note
            body, tokens, units = embeddings_answer(
                route.model.id, self._price(route), inputs, result, credits_per_usd
            )
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
            self._metrics.key_charged(call.api_key_id, units)
            return EmbeddingsAnswered(
                body=body, model=model, route=note, rate=rate, upstream_seconds=waited
            )
        await self._finisher.release(Release(call=call))
        if last is None:
            raise all_open(choice, failed)
        failed_route, cause = last
        error = call_failure(cause, choice, failed_route, failed, answered=False)
        error.upstream_seconds = waited
        raise error from cause

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
