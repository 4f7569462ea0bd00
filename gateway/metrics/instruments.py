"""What the gateway counts, as methods named for the events (services never see prometheus).

Every label comes from a bounded set: route templates (never paths), methods, status codes,
model and provider names from the routing file, capabilities, task states and short failure
words. No key, tenant, request id or task id is ever a label.

The hot path calls `request()` once per request and the chat service two or three methods per
call. Each resolves its labelled children through a plain dict keyed by the label tuple (the
library's `labels()` validates and locks on every call) and then increments or observes, so a
chat request costs a few microseconds of metrics (measured in docs/performance.md).

With `PROMETHEUS_MULTIPROC_DIR` set, prometheus-client keeps every value in a file per process
in that folder, and the scrape (`gateway.metrics.exposition`) sums them: a gateway and its
`gateway worker` processes on one host report as one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram

from gateway.errors import (
    IdempotencyInProgress,
    IdempotencyKeyReused,
    KeyBudgetExceeded,
    RateLimited,
)

__all__ = ["UNMATCHED_ROUTE", "DisabledMetrics", "Metrics"]

UNMATCHED_ROUTE = "unmatched"
"""The route label of a request no route matched (a 404 or 405 before routing)."""

_KEY_REFUSALS = frozenset({KeyBudgetExceeded.code, "model_not_found"})
_METHODS = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"})

# Seconds. The gateway's own time is sub-millisecond; a request's is bounded by upstreams.
_OVERHEAD_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 1.0)
_REQUEST_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
_TASK_BUCKETS = (0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800)
_CHUNK_BUCKETS = (1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000)


class _Children:
    """A labelled metric's children, cached by label tuple (label sets here are bounded)."""

    __slots__ = ("_children", "_metric")

    def __init__(self, metric: Any) -> None:
        self._metric = metric
        self._children: dict[tuple[str, ...], Any] = {}

    def __call__(self, *labels: str) -> Any:
        child = self._children.get(labels)
        if child is None:
            child = self._children[labels] = self._metric.labels(*labels)
        return child


class Metrics:
    """The gateway's instruments, registered on `registry` (None in multiprocess mode: the
    values live in files and the scrape reads them). Amounts come in the store's integer
    units, `units_per_credit` to a credit (billing's, given by the composition root)."""

    enabled = True

    def __init__(self, registry: CollectorRegistry | None, *, units_per_credit: int) -> None:
        self._per_credit = units_per_credit

        def counter(name: str, doc: str, labels: Sequence[str]) -> _Children:
            return _Children(Counter(name, doc, labels, registry=registry))

        def histogram(
            name: str, doc: str, labels: Sequence[str], buckets: Sequence[float]
        ) -> _Children:
            return _Children(Histogram(name, doc, labels, registry=registry, buckets=buckets))

        self._requests = counter(
            "gateway_requests",
            "HTTP requests answered, by route template, method, status and model.",
            ("route", "method", "status", "model"),
        )
        self._dialects = counter(
            "gateway_dialect_requests",
            "Requests answered on the chat endpoints, by client dialect (openai, anthropic, "
            "responses), route template and status.",
            ("dialect", "route", "status"),
        )
        self._duration = histogram(
            "gateway_request_duration_seconds",
            "Time from a request's arrival to the end of its response.",
            ("route", "method"),
            _REQUEST_BUCKETS,
        )
        self._overhead = histogram(
            "gateway_overhead_seconds",
            "The gateway's own time: arrival to response start, minus the time spent waiting "
            "for upstreams before it (for a stream: its added time to first byte).",
            ("route",),
            _OVERHEAD_BUCKETS,
        )
        self._rate_limited = counter(
            "gateway_rate_limited",
            "Requests refused by a rate limit (429), by route template.",
            ("route",),
        )
        self._idempotency = counter(
            "gateway_idempotency",
            "Requests with an Idempotency-Key that did not run: replay (the stored reply), "
            "in_progress (409) or conflict (the key reused with another body, 422).",
            ("route", "outcome"),
        )
        self._upstream = histogram(
            "gateway_upstream_request_seconds",
            "Upstream calls: until the answer, or a stream's first chunk, or the failure.",
            ("provider", "model", "capability"),
            _REQUEST_BUCKETS,
        )
        self._upstream_errors = counter(
            "gateway_upstream_errors",
            "Upstream calls that failed, by reason: the upstream status, timeout, connect "
            "or error (a broken connection or an unusable answer).",
            ("provider", "model", "capability", "reason"),
        )
        self._first_token = histogram(
            "gateway_stream_first_token_seconds",
            "Streams: from the call's start to its first chunk, fallbacks included.",
            ("model",),
            _REQUEST_BUCKETS,
        )
        self._chunks = histogram(
            "gateway_stream_chunks",
            "Streams: content chunks sent per stream.",
            ("model",),
            _CHUNK_BUCKETS,
        )
        self._tokens = counter(
            "gateway_tokens",
            "Tokens charged for, by model and direction (in: prompt, out: completion).",
            ("model", "direction"),
        )
        self._charged = counter(
            "gateway_credits_charged",
            "Credits charged: chat and embeddings settlements and task debits.",
            ("capability", "model"),
        )
        self._hold_exceeded = counter(
            "gateway_hold_exceeded",
            "Chat calls charged more than their hold (a defect of the hold's bound: the "
            "excess is charged), by model.",
            ("model",),
        )
        self._refunded = counter(
            "gateway_credits_refunded",
            "Credits given back by task refunds (full or partial).",
            ("capability", "model"),
        )
        self._tasks_created = counter(
            "gateway_tasks_created",
            "Tasks accepted (202), by capability and model.",
            ("capability", "model"),
        )
        self._tasks_finished = counter(
            "gateway_tasks_finished",
            "Tasks that reached a terminal state, by capability, model and state.",
            ("capability", "model", "status"),
        )
        self._task_duration = histogram(
            "gateway_task_duration_seconds",
            "Tasks: from creation to their terminal state.",
            ("capability", "status"),
            _TASK_BUCKETS,
        )
        self._artifact_bytes = counter(
            "gateway_artifact_bytes",
            "Bytes stored as artifacts, by source (upload, reference, output).",
            ("source",),
        )
        self._callbacks = counter(
            "gateway_callback_deliveries",
            "Task callback delivery attempts, by outcome: delivered, retrying (it failed and "
            "is tried again later), failed (no more attempts) or disabled (the receiver "
            "answered 410).",
            ("outcome",),
        )
        self._key_charged = counter(
            "gateway_key_credits_charged",
            "Credits charged per API key (by its id, never the secret): chat and embeddings "
            "settlements and task debits.",
            ("key_id",),
        )
        self._key_refunded = counter(
            "gateway_key_credits_refunded",
            "Credits given back per API key by task refunds.",
            ("key_id",),
        )
        self._key_refusals = counter(
            "gateway_key_refusals",
            "Calls refused by a key's governance, by reason: key_budget_exceeded (402), "
            "model_not_found (404: a model the key or tenant may not use) or expired (401).",
            ("reason",),
        )
        self._artifacts = counter(
            "gateway_artifacts",
            "Artifacts stored, by source (upload, reference, output).",
            ("source",),
        )

    def request(
        self,
        route: str,
        method: str,
        status: int,
        model: str,
        seconds: float,
        overhead: float | None,
        error_code: str | None,
        replayed: bool,
    ) -> None:
        """One answered request (the middleware, after the response)."""
        if method not in _METHODS:
            method = "OTHER"
        self._requests(route, method, str(status), model).inc()
        self._duration(route, method).observe(seconds)
        if overhead is not None:
            self._overhead(route).observe(max(overhead, 0.0))
        if replayed:
            self._idempotency(route, "replay").inc()
        elif error_code is not None:
            if error_code == RateLimited.code:
                self._rate_limited(route).inc()
            elif error_code == IdempotencyInProgress.code:
                self._idempotency(route, "in_progress").inc()
            elif error_code == IdempotencyKeyReused.code:
                self._idempotency(route, "conflict").inc()
            elif error_code in _KEY_REFUSALS:
                self._key_refusals(error_code).inc()

    def dialect_request(self, dialect: str, route: str, status: int) -> None:
        """One answered request of a chat endpoint, in the dialect its client spoke."""
        self._dialects(dialect, route, str(status)).inc()

    def upstream_call(self, provider: str, model: str, capability: str, seconds: float) -> None:
        self._upstream(provider, model, capability).observe(seconds)

    def upstream_failed(
        self, provider: str, model: str, capability: str, reason: str, seconds: float
    ) -> None:
        self._upstream(provider, model, capability).observe(seconds)
        self._upstream_errors(provider, model, capability, reason).inc()

    def first_token(self, model: str, seconds: float) -> None:
        self._first_token(model).observe(seconds)

    def stream_ended(self, model: str, chunks: int) -> None:
        self._chunks(model).observe(chunks)

    def chat_charged(
        self, model: str, units: int, prompt_tokens: int, completion_tokens: int
    ) -> None:
        if units:
            self._charged("chat", model).inc(units / self._per_credit)
        if prompt_tokens:
            self._tokens(model, "in").inc(prompt_tokens)
        if completion_tokens:
            self._tokens(model, "out").inc(completion_tokens)

    def hold_exceeded(self, model: str) -> None:
        self._hold_exceeded(model).inc()

    def embeddings_charged(self, model: str, units: int, prompt_tokens: int) -> None:
        if units:
            self._charged("embeddings", model).inc(units / self._per_credit)
        if prompt_tokens:
            self._tokens(model, "in").inc(prompt_tokens)

    def task_created(self, capability: str, model: str, units: int) -> None:
        self._tasks_created(capability, model).inc()
        if units:
            self._charged(capability, model).inc(units / self._per_credit)

    def task_finished(
        self, capability: str, model: str, status: str, refund_units: int, seconds: float
    ) -> None:
        self._tasks_finished(capability, model, status).inc()
        self._task_duration(capability, status).observe(max(seconds, 0.0))
        if refund_units:
            self._refunded(capability, model).inc(refund_units / self._per_credit)

    def key_charged(self, key_id: str, units: int) -> None:
        if units:
            self._key_charged(key_id).inc(units / self._per_credit)

    def key_refunded(self, key_id: str, units: int) -> None:
        if units:
            self._key_refunded(key_id).inc(units / self._per_credit)

    def key_expired(self) -> None:
        """A call with an expired key (or a rotated secret past its grace)."""
        self._key_refusals("expired").inc()

    def artifact_stored(self, source: str, size: int) -> None:
        self._artifacts(source).inc()
        self._artifact_bytes(source).inc(size)

    def callback_attempt(self, outcome: str) -> None:
        self._callbacks(outcome).inc()


class DisabledMetrics(Metrics):
    """GATEWAY_METRICS=off: every event is a no-op and nothing is registered."""

    enabled = False

    def __init__(self) -> None:
        pass

    def request(self, *args: Any, **kwargs: Any) -> None:
        pass

    def dialect_request(self, *args: Any, **kwargs: Any) -> None:
        pass

    def upstream_call(self, *args: Any, **kwargs: Any) -> None:
        pass

    def upstream_failed(self, *args: Any, **kwargs: Any) -> None:
        pass

    def first_token(self, *args: Any, **kwargs: Any) -> None:
        pass

    def stream_ended(self, *args: Any, **kwargs: Any) -> None:
        pass

    def chat_charged(self, *args: Any, **kwargs: Any) -> None:
        pass

    def hold_exceeded(self, *args: Any, **kwargs: Any) -> None:
        pass

    def embeddings_charged(self, *args: Any, **kwargs: Any) -> None:
        pass

    def task_created(self, *args: Any, **kwargs: Any) -> None:
        pass

    def task_finished(self, *args: Any, **kwargs: Any) -> None:
        pass

    def key_charged(self, *args: Any, **kwargs: Any) -> None:
        pass

    def key_refunded(self, *args: Any, **kwargs: Any) -> None:
        pass

    def key_expired(self, *args: Any, **kwargs: Any) -> None:
        pass

    def artifact_stored(self, *args: Any, **kwargs: Any) -> None:
        pass

    def callback_attempt(self, *args: Any, **kwargs: Any) -> None:
        pass
