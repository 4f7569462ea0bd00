"""The chat request path: validate, resolve, admit, call, settle, answer.

Two store round trips per call: `admit` before the upstream call, and `settle` (or `release`
when the call failed before producing anything) before the last bytes reach the client, so the
charge in `usage.credits` is already real when the client reads it. When the store stalls,
`gateway.finisher` retries the finishing step: a call that ran is answered with its result
(never with a retryable error it was charged for), one that failed is released once the store
is back, and an admission whose outcome is unknown is released (and fenced) the same way.
"""

from __future__ import annotations

import time
from typing import Any

import msgspec

from gateway.admission import Gatekeeper
from gateway.auth import Caller
from gateway.chat.plan import ChatPlan, plan_call
from gateway.chat.streaming import ChatEventStream, StreamJob
from gateway.chat.usage import charge_for, usage_fields
from gateway.chat.validation import parse_chat_request
from gateway.context import RequestContext
from gateway.error_mapping import as_gateway_error
from gateway.errors import StoreUnavailable
from gateway.finisher import CallFinisher
from gateway.idempotency import chat_claim, replay
from gateway.ids import new_completion_id
from gateway.logging import get_logger
from gateway.responses import RawResponse
from gateway.routing.resolver import Route, Router
from gateway.store.base import IdempotencyClaim, Release, Settlement, StoredReply
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

    async def handle(
        self, caller: Caller, ctx: RequestContext, body: bytes, idempotency_key: str | None
    ) -> Any:
        request = parse_chat_request(body)
        route = self._router.resolve(request.model, caller.tenant, "chat")
        ctx.model = route.model.id
        plan = plan_call(request, route, len(body))
        claim = chat_claim(
            tenant=caller.tenant.name,
            key=idempotency_key,
            request=request,
            lease_seconds=self._hold_seconds,
        )
        completion_id = new_completion_id()
        call = _Call(caller, ctx, completion_id, route, plan, claim, len(body))
        try:
            admitted = await self._gatekeeper.admit(
                caller,
                ctx,
                call_id=completion_id,
                tokens=plan.tokens_reserved,
                hold_units=plan.hold_units,
                hold_seconds=self._hold_seconds,
                claim=claim,
            )
        except StoreUnavailable:
            # It may still reach the store: release it then, and fence it if it comes later.
            self._finisher.abandon(self._release_of(call))
            raise
        if admitted.reply is not None:
            ctx.replayed = True
            return replay(admitted.reply)
        try:
            if plan.stream:
                upstream = await route.chat.stream(plan.upstream_body)
                job = StreamJob(self, call, upstream)
                try:
                    await job.prefetch()
                except BaseException:
                    await job.close_upstream()
                    raise
                return ChatEventStream(job)
            completion = await route.chat.complete(plan.upstream_body)
        except Exception as exc:
            await self.release(call)
            self._note_failure(route, exc)
            raise as_gateway_error(exc) from exc
        except BaseException:  # cancelled: give back what admission took, stay cancelled
            await self.release(call)
            raise
        return await self._finish_sync(call, completion.body, completion.usage)

    async def _finish_sync(self, call: _Call, body: dict[str, Any], usage: Any) -> RawResponse:
        usage_body = body.get("usage") if isinstance(body.get("usage"), dict) else {}
        charge = charge_for(
            call.route.price, usage, body_size=call.body_size, usage_body=usage_body
        )
        body["id"] = call.completion_id
        body["model"] = call.route.model.id
        body["object"] = "chat.completion"
        body.setdefault("created", int(time.time()))
        body["usage"] = usage_fields(usage_body or {}, charge, call.caller.tenant.credits_per_usd)
        payload = _encode(body)
        reply = None
        if call.claim is not None:
            reply = StoredReply(status=200, content_type="application/json", body=payload)
        await self.settle(call, charge.units, charge.tokens, reply)
        return RawResponse(payload)

    async def settle(
        self, call: _Call, charge_units: int, tokens_used: int, reply: StoredReply | None
    ) -> None:
        """Charge the call; waits out a short store stall, never raises for one."""
        await self._finisher.settle(
            Settlement(
                tenant=call.caller.tenant.name,
                api_key_id=call.caller.key_id,
                call_id=call.completion_id,
                request_id=call.ctx.request_id,
                limits=call.caller.tenant.limits,
                charge_units=charge_units,
                tokens_reserved=call.plan.tokens_reserved,
                tokens_used=tokens_used,
                reason=f"chat {call.route.model.id}",
                idempotency=call.claim,
                reply=reply,
            )
        )

    async def release(self, call: _Call) -> None:
        await self._finisher.release(self._release_of(call))

    @staticmethod
    def _release_of(call: _Call) -> Release:
        return Release(
            tenant=call.caller.tenant.name,
            api_key_id=call.caller.key_id,
            call_id=call.completion_id,
            limits=call.caller.tenant.limits,
            tokens_reserved=call.plan.tokens_reserved,
            idempotency=call.claim,
        )

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


class _Call:
    """Everything about one admitted call that finishing it needs."""

    __slots__ = ("body_size", "caller", "claim", "completion_id", "ctx", "plan", "route")

    def __init__(
        self,
        caller: Caller,
        ctx: RequestContext,
        completion_id: str,
        route: Route,
        plan: ChatPlan,
        claim: IdempotencyClaim | None,
        body_size: int,
    ) -> None:
        self.caller = caller
        self.ctx = ctx
        self.completion_id = completion_id
        self.route = route
        self.plan = plan
        self.claim = claim
        self.body_size = body_size
