"""The chat request path: validate, resolve, admit, call (falling back), settle, the outcome.

Two store round trips per call: `admit` before the upstream call, and `settle` (or `release`
when the call failed before producing anything) before the last bytes reach the client, so the
charge in `usage.credits` is already real when the client reads it. When the store stalls,
`gateway.admission.finisher` retries the finishing step: a call that ran is answered with its result
(never with a retryable error it was charged for), one that failed is released once the store
is back, and an admission whose outcome is unknown is released (and fenced) the same way.

Fallback: the model name resolves to routes in order (`gateway.routing`). One hold covers the
dearest of them, taken once; each attempt that fails before anything reached the client in a
way that is the upstream's fault (`gateway.routing.fallback.falls_back`) feeds that upstream's
breaker and moves on, after a backoff only when calling an upstream that already failed; a
route whose breaker is open is passed over. The call settles once, at the price of the model
that answered; when none did, the hold is released and the last failure is the answer (a
pinned model whose breaker is open: 503 `model_unavailable` at once, before admission).

The service knows no HTTP: it takes the caller, the decoded request (and its body's size, which
bounds the prompt), the client's dialect (`gateway.chat.dialect`: how answers are framed for
it, and for a dialect some upstreams speak as is, the request in that dialect), the request id
and the Idempotency-Key, and returns an outcome (`gateway.chat.outcomes`) or raises a
`gateway.errors.GatewayError` carrying the model, the route and the rate state when the call
got that far. The call's identity (`gateway.store.base.Call`) is built once, here, and carried
from admission to settlement or release.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

import msgspec
from msgspec import UNSET

from gateway.admission.finisher import CallFinisher
from gateway.admission.gatekeeper import Gatekeeper
from gateway.admission.idempotency import claim_for
from gateway.auth import Caller
from gateway.billing.pricing import ChatPrice
from gateway.chat.answers import completion_answer, kept_reply, native_answer
from gateway.chat.dialect import (
    ChatDialect,
    NativeRequest,
    NativeUpstream,
    dropped_fields,
    new_call_id,
)
from gateway.chat.framing import StreamFramer
from gateway.chat.inputs import inventory_of
from gateway.chat.legacy_functions import to_legacy_completion
from gateway.chat.outcomes import (
    MODEL_HEADER,
    ROUTE_HEADER,
    ChatCompleted,
    ChatOutcome,
    ChatReplayed,
    ChatStreaming,
)
from gateway.chat.plan import (
    ChatPlan,
    HoldBound,
    chat_needs,
    keep_native_routes,
    limit_field,
    options_problems,
    plan_call,
)
from gateway.chat.route_report import refuse_if_all_open, route_taken
from gateway.chat.streaming import StreamJob
from gateway.chat.usage import Charge, output_limit
from gateway.chat.validation import check_chat_request
from gateway.errors import InvalidRequest, StoreUnavailable, fields_message
from gateway.logging import get_logger
from gateway.metrics import DisabledMetrics, Metrics
from gateway.routing.fallback import RouteNote, failure_reason, falls_back, retry_delay
from gateway.routing.report import all_open, annotated, call_failure, log_upstream_failure
from gateway.routing.resolver import NO_NEEDS, Choice, Route, Router
from gateway.schemas.chat import ChatRequest
from gateway.store.base import Call, RateState, Release, Settlement, StoredReply
from providers.base import ChatCompletion
from providers.errors import ProviderError

__all__ = ["ChatService"]

_encode = msgspec.json.Encoder().encode
_BOUNDS_LIMIT = 4096
_log = get_logger("gateway.chat")


class ChatService:
    def __init__(
        self,
        finisher: CallFinisher,
        router: Router,
        gatekeeper: Gatekeeper,
        *,
        hold_seconds: int,
        metrics: Metrics | None = None,
    ) -> None:
        self._metrics = metrics or DisabledMetrics()
        self._finisher = finisher
        self._router = router
        self._gatekeeper = gatekeeper
        self._hold_seconds = hold_seconds
        self._prices: dict[str, ChatPrice] = {}
        self._bounds: dict[Choice, HoldBound] = {}
        self._needs = router.uses_needs("chat")

    async def handle(
        self,
        caller: Caller,
        request: ChatRequest,
        *,
        body_size: int,
        dialect: ChatDialect,
        request_id: str,
        idempotency_key: str | None,
        native: NativeRequest | None = None,
        extensions: Mapping[str, Any] | None = None,
    ) -> ChatOutcome:
        """One chat call, from the decoded request to its outcome. `native`: the request in
        the client's dialect, for the routes whose provider speaks it (`gateway.chat.dialect`).
        `extensions`: the client's top-level fields beyond the request's, as sent; only routes
        whose provider takes them serve the call (`providers.base.extensions_refused`).

        Errors raised once the model is resolved carry it (`GatewayError.model`), once the
        call was admitted its rate state (`GatewayError.rate`), and once an upstream was tried
        the route (`GatewayError.route`) and the time spent waiting for upstreams
        (`GatewayError.upstream_seconds`); a refusal at admission carries the rate state from
        `Gatekeeper`."""
        started = time.perf_counter()
        legacy = request.functions is not UNSET
        request = check_chat_request(request)
        tenant = caller.tenant
        needs = chat_needs(request) if self._needs and request.model == "auto" else NO_NEEDS
        choice = self._router.choose(request.model, tenant, "chat", needs)
        rate: RateState | None = None
        try:
            if request.model_options is not UNSET:
                problems = options_problems(request.model_options, choice)
                if problems:
                    raise InvalidRequest(fields_message(problems), details=problems)
            inputs = inventory_of(request) if native is None else native.inputs
            plan = plan_call(
                request,
                choice,
                self._bound(choice),
                body_size,
                inputs=inputs,
                legacy_answer=legacy,
                lower_to_limit=dialect.lowers_max_tokens,
                extensions=extensions,
            )
            if native is not None and native.problems:
                keep_native_routes(plan, native)
            if not plan.routes[0].breaker.closed and idempotency_key is None:
                refuse_if_all_open(plan)  # (a repeated key may have a reply to replay)
            call = Call(
                tenant=tenant.name,
                api_key_id=caller.key_id,
                call_id=new_call_id(dialect),
                request_id=request_id,
                limits=tenant.limits,
                budget=caller.budget,
                tokens_reserved=plan.tokens_reserved,
                idempotency=claim_for(
                    tenant=tenant.name,
                    method="POST",
                    path=dialect.path,
                    key=idempotency_key,
                    request=_fingerprinted(request, native, extensions),
                    lease_seconds=self._hold_seconds,
                    invalid=InvalidRequest,
                ),
            )
            try:
                admitted = await self._gatekeeper.admit(
                    call,
                    hold_units=plan.hold_units,
                    hold_seconds=self._hold_seconds,
                    min_hold_units=plan.min_hold_units(),
                    min_tokens_reserved=plan.min_tokens_reserved(),
                    limit_field=dialect.limit_field or limit_field(request),
                )
            except StoreUnavailable:
                # It may still reach the store: release it then, and fence it if it comes later.
                self._finisher.abandon(Release(call=call))
                raise
            rate = admitted.rate
            if admitted.reply is not None:
                reply = admitted.reply
                return ChatReplayed(
                    reply=reply,
                    model=reply.headers.get(MODEL_HEADER, choice.routes[0].model.id),
                    route=reply.headers.get(ROUTE_HEADER),
                    rate=rate,
                )
            if 0 < admitted.hold_units < plan.hold_units:  # wallet-bounded: ask what it pays
                plan.hold_granted(admitted.hold_units)
                call = msgspec.structs.replace(call, tokens_reserved=admitted.tokens_reserved)
            lease = choice.routes[0].lease()  # a reload closes the providers after it ends
            try:
                outcome = await self._run(
                    call, plan, tenant.credits_per_usd, body_size, dialect, native, rate, started
                )
            except BaseException:
                lease.release()
                raise
            if isinstance(outcome, ChatStreaming) and isinstance(outcome.events, StreamJob):
                outcome.events.keep(lease)  # let go when the stream is closed
            else:
                lease.release()
            return outcome
        except Exception as exc:
            error = annotated(exc, choice, rate)
            if error is exc:
                raise
            raise error from exc

    async def _run(
        self,
        call: Call,
        plan: ChatPlan,
        credits_per_usd: Decimal,
        body_size: int,
        dialect: ChatDialect,
        native: NativeRequest | None,
        rate: RateState,
        started: float,
    ) -> ChatCompleted | ChatStreaming:
        """The upstream calls of an admitted call, in the plan's order, until one answers;
        what admission took is given back when none does. Each attempt is timed: the sum is
        the call's `upstream_seconds`, the time that was not the gateway's own. A route whose
        provider speaks the client's dialect (`native`) is called in it."""
        metrics = self._metrics
        waited = 0.0
        routes = plan.routes
        retry = plan.choice.retry
        cycle = retry.max_attempts is not None
        limit = retry.max_attempts or len(routes)
        failed: list[RouteNote] = []
        failures: dict[str, tuple[int, float | None]] = {}  # provider -> (count, retry_after)
        last: tuple[Route, Exception] | None = None  # the last failure, and whose
        body: dict[str, object] | None = plan.upstream_body
        attempts = visits = idle = 0
        while attempts < limit and idle < len(routes) and (cycle or visits < len(routes)):
            route = routes[visits % len(routes)]
            visits += 1
            delay = 0.0
            if failures:
                seen = failures.get(route.model.provider)
                if seen is not None:
                    wait = retry_delay(retry, seen[0], seen[1], self._router.rng)
                    if wait is None:  # its Retry-After is longer than the policy waits
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
            speaker: NativeUpstream | None = None
            if native is not None:
                speaker = native.upstream(route.provider)
            if speaker is not None:
                assert native is not None
                body = native.body_for(route.model.upstream_model, plan.lowered_for(route))
            elif body is None or route is not routes[0]:
                body = plan.body_for(route)
            job: StreamJob | None = None
            completion: ChatCompletion | None = None
            if delay:
                await asyncio.sleep(delay)
            attempt_started = time.perf_counter()
            try:
                if plan.stream:
                    framer: StreamFramer
                    if speaker is not None:
                        assert native is not None
                        upstream = await speaker.stream(body)
                        framer = native.framer(call_id=call.call_id, model=route.model.id)
                    else:
                        upstream = await route.chat.stream(body)
                        framer = dialect.framer(include_usage=plan.include_usage)
                    note = route_taken(plan, route, failed)
                    price = self._price(route)
                    job = StreamJob(
                        self,
                        framer,
                        call,
                        route,
                        plan,
                        price,
                        credits_per_usd,
                        body_size,
                        upstream,
                        note,
                        native=speaker is not None,
                    )
                    try:
                        await job.prefetch()
                    except BaseException:
                        await job.close()
                        raise
                elif speaker is not None:
                    completion = await speaker.complete(body)
                else:
                    completion = await route.chat.complete(body)
            except Exception as exc:
                route.scrub(exc)  # before it is logged or shown: it may quote a credential
                body = None
                elapsed = time.perf_counter() - attempt_started
                waited += elapsed
                metrics.upstream_failed(
                    route.model.provider, route.model.id, "chat", failure_reason(exc), elapsed
                )
                if not falls_back(exc):
                    if isinstance(exc, ProviderError):
                        breaker.succeeded()  # it answered: the request or its setup is at fault
                    else:
                        breaker.abandon()
                    log_upstream_failure(route, exc, fallback=False)
                    await self._finisher.release(Release(call=call))
                    error = call_failure(exc, plan.choice, route, failed, answered=True)
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
            except BaseException:  # cancelled: give back what admission took, stay cancelled
                breaker.abandon()
                await self._finisher.release(Release(call=call))
                raise
            breaker.succeeded()
            now = time.perf_counter()
            waited += now - attempt_started
            metrics.upstream_call(
                route.model.provider, route.model.id, "chat", now - attempt_started
            )
            dropped = dropped_fields(native) if native is not None and speaker is None else ()
            if job is not None:
                metrics.first_token(route.model.id, now - started)
                return ChatStreaming(
                    events=job,
                    model=route.model.id,
                    route=job.note,
                    rate=rate,
                    upstream_seconds=waited,
                    max_tokens=job.max_tokens,
                    dropped=dropped,
                )
            assert completion is not None
            note = route_taken(plan, route, failed)
            price = self._price(route)
            if speaker is not None:
                assert native is not None
                payload, charge = native_answer(
                    call, route, price, credits_per_usd, body_size, completion, native
                )
            else:
                if plan.legacy_answer:
                    to_legacy_completion(completion.body)
                payload, charge = completion_answer(
                    call,
                    route,
                    price,
                    credits_per_usd,
                    body_size,
                    completion,
                    dialect,
                    limit=output_limit(plan, route),
                )
            lowered = plan.lowered_for(route)
            reply = kept_reply(call, route, note, payload, lowered)
            await self.settle(call, route, charge, reply, hold_units=plan.held_units)
            return ChatCompleted(
                body=payload,
                model=route.model.id,
                route=note,
                rate=rate,
                upstream_seconds=waited,
                max_tokens=lowered,
                dropped=dropped,
            )
        await self._finisher.release(Release(call=call))
        if last is None:
            raise all_open(plan.choice, failed, plan.routes)
        failed_route, cause = last
        error = call_failure(cause, plan.choice, failed_route, failed, answered=False)
        error.upstream_seconds = waited
        raise error from cause

    async def settle(
        self,
        call: Call,
        route: Route,
        charge: Charge,
        reply: StoredReply | None,
        *,
        hold_units: int,
    ) -> None:
        """Charge the call; waits out a short store stall, never raises for one. A charge
        above the call's hold is charged all the same (the books follow the upstream's
        counts) and reported as the defect it is (`hold_exceeded`)."""
        model = route.model.id
        if charge.units > hold_units:
            self._metrics.hold_exceeded(model)
            _log.error(
                "hold_exceeded",
                request_id=call.request_id,
                call_id=call.call_id,
                model=model,
                hold_units=hold_units,
                charge_units=charge.units,
                prompt_tokens=charge.prompt_tokens,
                completion_tokens=charge.completion_tokens,
            )
        await self._finisher.settle(
            Settlement(
                call=call,
                charge_units=charge.units,
                tokens_used=charge.tokens,
                reason=f"chat {model}",
                model=model,
                reply=reply,
            )
        )
        self._metrics.chat_charged(
            model, charge.units, charge.prompt_tokens, charge.completion_tokens
        )
        self._metrics.key_charged(call.api_key_id, charge.units)

    def stream_ended(self, route: Route, chunks: int) -> None:
        """A stream is over, however it ended, having sent `chunks` content chunks."""
        self._metrics.stream_ended(route.model.id, chunks)

    def stream_broken(self, route: Route, exc: BaseException) -> None:
        """A stream broke off after its first chunk: the upstream's breaker hears of it."""
        if falls_back(exc):
            route.breaker.failed()

    def _price(self, route: Route) -> ChatPrice:
        """The model's token prices in credit units, folded once per model."""
        price = self._prices.get(route.model.id)
        if price is None:
            price = self._prices[route.model.id] = ChatPrice.of(route.model)
        return price

    def _bound(self, choice: Choice) -> HoldBound:
        """What sizes the hold over the choice's routes, folded once per choice."""
        bound = self._bounds.get(choice)
        if bound is None:
            if len(self._bounds) >= _BOUNDS_LIMIT:
                self._bounds.clear()
            routes = choice.routes
            bound = HoldBound.over(routes, [self._price(route) for route in routes])
            self._bounds[choice] = bound
        return bound


def _fingerprinted(
    request: ChatRequest, native: NativeRequest | None, extensions: Mapping[str, Any] | None
) -> object:
    """What an Idempotency-Key's fingerprint covers: the request as the client sent it."""
    if native is not None:
        return native.request
    return [request, dict(extensions)] if extensions else request
