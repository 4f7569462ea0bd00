"""The chat request path: validate, resolve, admit, call, settle, and the outcome.

Two store round trips per call: `admit` before the upstream call, and `settle` (or `release`
when the call failed before producing anything) before the last bytes reach the client, so the
charge in `usage.credits` is already real when the client reads it. When the store stalls,
`gateway.finisher` retries the finishing step: a call that ran is answered with its result
(never with a retryable error it was charged for), one that failed is released once the store
is back, and an admission whose outcome is unknown is released (and fenced) the same way.

The service knows no HTTP: it takes the caller, the body's bytes, the request id and the
Idempotency-Key, and returns an outcome (`gateway.chat.outcomes`) or raises a
`gateway.errors.GatewayError` carrying the model and the rate state when the call got that far.
The call's identity (`gateway.store.base.Call`) is built once, here, and carried from
admission to settlement or release.
"""

from __future__ import annotations

import time
from decimal import Decimal

import msgspec

from gateway.admission import Gatekeeper
from gateway.auth import Caller
from gateway.billing.pricing import ChatPrice
from gateway.chat.outcomes import ChatCompleted, ChatOutcome, ChatReplayed, ChatStreaming
from gateway.chat.plan import ChatPlan, plan_call
from gateway.chat.streaming import StreamJob
from gateway.chat.usage import charge_for, usage_fields
from gateway.chat.validation import parse_chat_request
from gateway.error_mapping import as_gateway_error
from gateway.errors import StoreUnavailable
from gateway.finisher import CallFinisher
from gateway.idempotency import chat_claim
from gateway.ids import new_completion_id
from gateway.logging import get_logger
from gateway.routing.resolver import Route, Router
from gateway.store.base import Call, RateState, Release, Settlement, StoredReply
from providers.base import ChatCompletion
from providers.errors import ProviderError, UpstreamTimeout, UpstreamUnavailable

__all__ = ["ChatService"]

_encode = msgspec.json.Encoder().encode
_log = get_logger("gateway.chat")


class ChatService:
    def __init__(
        self,
        finisher: CallFinisher,
        router: Router,
        gatekeeper: Gatekeeper,
        *,
        hold_seconds: int,
    ) -> None:
        self._finisher = finisher
        self._router = router
        self._gatekeeper = gatekeeper
        self._hold_seconds = hold_seconds
        self._prices: dict[str, ChatPrice] = {}

    async def handle(
        self, caller: Caller, body: bytes, *, request_id: str, idempotency_key: str | None
    ) -> ChatOutcome:
        """One chat call, from the request's bytes to its outcome.

        Errors raised once the model is resolved carry it (`GatewayError.model`), and once the
        call was admitted its rate state (`GatewayError.rate`); a refusal at admission carries
        the rate state from `Gatekeeper`."""
        request = parse_chat_request(body)
        tenant = caller.tenant
        route = self._router.resolve(request.model, tenant, "chat")
        rate: RateState | None = None
        try:
            plan = plan_call(request, route, self._price(route), len(body))
            call = Call(
                tenant=tenant.name,
                api_key_id=caller.key_id,
                call_id=new_completion_id(),
                request_id=request_id,
                limits=tenant.limits,
                tokens_reserved=plan.tokens_reserved,
                idempotency=chat_claim(
                    tenant=tenant.name,
                    key=idempotency_key,
                    request=request,
                    lease_seconds=self._hold_seconds,
                ),
            )
            try:
                admitted = await self._gatekeeper.admit(
                    call, hold_units=plan.hold_units, hold_seconds=self._hold_seconds
                )
            except StoreUnavailable:
                # It may still reach the store: release it then, and fence it if it comes later.
                self._finisher.abandon(Release(call=call))
                raise
            rate = admitted.rate
            if admitted.reply is not None:
                return ChatReplayed(reply=admitted.reply, model=route.model.id, rate=rate)
            return await self._run(call, route, plan, tenant.credits_per_usd, len(body), rate)
        except Exception as exc:
            error = as_gateway_error(exc)  # anything else is a fault of the gateway's own: 500
            error.model = route.model.id
            if rate is not None:
                error.rate = rate
            if error is exc:
                raise
            raise error from exc

    async def _run(
        self,
        call: Call,
        route: Route,
        plan: ChatPlan,
        credits_per_usd: Decimal,
        body_size: int,
        rate: RateState,
    ) -> ChatCompleted | ChatStreaming:
        """The upstream call of an admitted call; what admission took is given back when it
        fails before producing anything."""
        try:
            if plan.stream:
                upstream = await route.chat.stream(plan.upstream_body)
                job = StreamJob(self, call, route, plan, credits_per_usd, body_size, upstream)
                try:
                    await job.prefetch()
                except BaseException:
                    await job.close()
                    raise
                return ChatStreaming(events=job, model=route.model.id, rate=rate)
            completion = await route.chat.complete(plan.upstream_body)
        except Exception as exc:
            await self._finisher.release(Release(call=call))
            self._note_failure(route, exc)
            raise as_gateway_error(exc) from exc
        except BaseException:  # cancelled: give back what admission took, stay cancelled
            await self._finisher.release(Release(call=call))
            raise
        payload = await self._finish_sync(
            call, route, plan.price, credits_per_usd, body_size, completion
        )
        return ChatCompleted(body=payload, model=route.model.id, rate=rate)

    async def _finish_sync(
        self,
        call: Call,
        route: Route,
        price: ChatPrice,
        credits_per_usd: Decimal,
        body_size: int,
        completion: ChatCompletion,
    ) -> bytes:
        body, usage = completion.body, completion.usage
        usage_body = body.get("usage") if isinstance(body.get("usage"), dict) else {}
        charge = charge_for(price, usage, body_size=body_size, usage_body=usage_body)
        body["id"] = call.call_id
        body["model"] = route.model.id
        body["object"] = "chat.completion"
        body.setdefault("created", int(time.time()))
        body["usage"] = usage_fields(usage_body or {}, charge, credits_per_usd)
        payload = _encode(body)
        reply = None
        if call.idempotency is not None:
            reply = StoredReply(status=200, content_type="application/json", body=payload)
        await self.settle(call, route, charge.units, charge.tokens, reply)
        return payload

    async def settle(
        self,
        call: Call,
        route: Route,
        charge_units: int,
        tokens_used: int,
        reply: StoredReply | None,
    ) -> None:
        """Charge the call; waits out a short store stall, never raises for one."""
        await self._finisher.settle(
            Settlement(
                call=call,
                charge_units=charge_units,
                tokens_used=tokens_used,
                reason=f"chat {route.model.id}",
                reply=reply,
            )
        )

    def _price(self, route: Route) -> ChatPrice:
        """The model's token prices in credit units, folded once per model."""
        price = self._prices.get(route.model.id)
        if price is None:
            price = self._prices[route.model.id] = ChatPrice.of(route.model)
        return price

    def _note_failure(self, route: Route, exc: Exception) -> None:
        if isinstance(exc, (UpstreamUnavailable, UpstreamTimeout)):
            self._router.mark_down(route)
        if isinstance(exc, ProviderError):
            _log.warning(
                "upstream_failed",
                model=route.model.id,
                provider=route.model.provider,
                error=type(exc).__name__,
                upstream_status=exc.upstream_status,
                detail=exc.message,
            )
