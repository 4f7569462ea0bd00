"""A steady mix of chats and task creates per tenant, timed, and its answers by phase of a fault
(the availability tests: tests/e2e/test_cluster_availability.py).

Each tenant has two chat loops and one create loop (image and music in turn), each pausing
`PAUSE_SECONDS` after every call, so the load is steady rather than flat out. Every call is
kept with its tenant, when it started, how long it took and its status (-1: no answer). The
test marks when each phase began (`Timeline`); `phase_table` gives per tenant and per phase the
share of successes and p50/p99 latency, which the tests print and the deploy guide quotes.
Latency is recorded, never asserted.
"""

from __future__ import annotations

import itertools
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import httpx

from tests.e2e.failover_load import Answer, check_books
from tests.support.gateway_process import GatewayProcess, client_for
from tests.support.waiting import wait_until

__all__ = [
    "PAUSE_SECONDS",
    "Call",
    "HealthWatch",
    "PhaseRow",
    "Run",
    "TenantLoad",
    "Timeline",
    "check_tenant_books",
    "format_table",
    "phase_table",
    "run_fault",
    "success_share",
]

PAUSE_SECONDS = 0.1
"""After each call, per loop: about 15 chats and 5 creates a second per tenant."""
HEALTH_SECONDS = 0.25

CHAT = {"model": "sim-chat-1", "messages": [{"role": "user", "content": "Hello"}]}
IMAGE: tuple[str, dict[str, Any]] = (
    "/v1/images/generations",
    {"model": "image-model-2", "prompt": "a lighthouse", "n": 1},
)
MUSIC: tuple[str, dict[str, Any]] = (
    "/v1/music/text-to-music",
    {"model": "alpha-5.5", "prompt": "a shanty"},
)


@dataclass(frozen=True)
class Call:
    tenant: str
    kind: str  # chat, image or music
    request_id: str
    started: float  # time.monotonic()
    seconds: float
    status: int  # -1: the connection broke, no answer
    body: dict[str, Any]

    @property
    def ok(self) -> bool:
        return self.status in (200, 202)

    @property
    def error(self) -> str:
        """`503 store_unavailable`, `-1 no answer`, ... (for a call that is not ok)."""
        if self.status == -1:
            return "-1 no answer"
        found = self.body.get("error")
        return f"{self.status} {found.get('code') if isinstance(found, dict) else found}"


@dataclass
class Timeline:
    """When each phase began (monotonic); a call belongs to the phase it started in (one in
    flight when a fault came counts in the phase before it)."""

    marks: list[tuple[str, float]] = field(default_factory=list)

    def mark(self, phase: str) -> float:
        now = time.monotonic()
        self.marks.append((phase, now))
        return now

    def at(self, phase: str) -> float:
        return next(t for name, t in self.marks if name == phase)

    def span(self, phase: str, end: float) -> tuple[float, float]:
        """When `phase` began, and when the next one did (`end` for the last)."""
        names = [name for name, _ in self.marks]
        i = names.index(phase)
        return self.marks[i][1], self.marks[i + 1][1] if i + 1 < len(self.marks) else end

    def phase_of(self, started: float) -> str:
        current = self.marks[0][0]
        for name, begun in self.marks:
            if started >= begun:
                current = name
        return current


class TenantLoad:
    """The loops of one tenant over one gateway (see the module docstring)."""

    def __init__(self, gateway: GatewayProcess, tenant: str, key: str, name: str) -> None:
        self.tenant, self.key, self.gateway = tenant, key, gateway
        self.calls: list[Call] = []
        self._name = name
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads = [
            threading.Thread(target=self._loop, args=(kind, n), daemon=True)
            for n, kind in enumerate(["chat", "chat", "create"])
        ]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def finish(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=90)

    def count(self) -> int:
        with self._lock:
            return len(self.calls)

    def _loop(self, kind: str, n: int) -> None:
        media: Iterator[tuple[str, str, dict[str, Any]]] = itertools.cycle(
            [("image", *IMAGE), ("music", *MUSIC)]
        )
        with client_for(self.gateway, self.key, timeout=60) as client:
            for i in itertools.count(1):
                if self._stop.is_set():
                    return
                body: dict[str, Any]
                if kind == "chat":
                    what, path, body = "chat", "/v1/chat/completions", CHAT
                else:
                    what, path, body = next(media)
                request_id = f"{self._name}-{self.tenant}-{what}-{n}-{i}"
                started = time.monotonic()
                try:
                    response = client.post(path, json=body, headers={"X-Request-Id": request_id})
                    status = response.status_code
                    answer: dict[str, Any] = response.json()
                except (httpx.TransportError, ValueError) as exc:
                    status, answer = -1, {"error": repr(exc)}
                call = Call(
                    self.tenant,
                    what,
                    request_id,
                    started,
                    time.monotonic() - started,
                    status,
                    answer,
                )
                with self._lock:
                    self.calls.append(call)
                time.sleep(PAUSE_SECONDS)


@dataclass(frozen=True)
class PhaseRow:
    tenant: str
    phase: str
    seconds: float  # how long the phase lasted
    calls: int
    ok: int
    p50_ms: float
    p99_ms: float
    errors: dict[str, int]  # "status code" -> count

    @property
    def share(self) -> float:
        return self.ok / self.calls if self.calls else 1.0


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def phase_table(calls: list[Call], timeline: Timeline, end: float) -> list[PhaseRow]:
    """Per tenant (in order of first appearance) and per phase (in the timeline's order)."""
    tenants = list(dict.fromkeys(c.tenant for c in calls))
    bounds = [*(t for _, t in timeline.marks[1:]), end]
    rows = []
    for tenant in tenants:
        for (phase, begun), until in zip(timeline.marks, bounds, strict=True):
            mine = [
                c for c in calls if c.tenant == tenant and timeline.phase_of(c.started) == phase
            ]
            errors: dict[str, int] = {}
            for call in mine:
                if not call.ok:
                    errors[call.error] = errors.get(call.error, 0) + 1
            latencies = [c.seconds * 1000 for c in mine]
            rows.append(
                PhaseRow(
                    tenant,
                    phase,
                    until - begun,
                    len(mine),
                    sum(c.ok for c in mine),
                    _percentile(latencies, 0.50),
                    _percentile(latencies, 0.99),
                    errors,
                )
            )
    return rows


def format_table(title: str, rows: list[PhaseRow]) -> str:
    lines = [
        title,
        "| tenant | phase | s | calls | ok | p50 ms | p99 ms | errors (status code: n) |",
        "|---|---|---:|---:|---:|---:|---:|---|",
    ]
    for row in rows:
        errors = ", ".join(f"{e}: {n}" for e, n in sorted(row.errors.items())) or "-"
        lines.append(
            f"| {row.tenant} | {row.phase} | {row.seconds:.1f} | {row.calls} "
            f"| {row.share:.1%} | {row.p50_ms:.0f} | {row.p99_ms:.0f} | {errors} |"
        )
    return "\n".join(lines)


def success_share(calls: list[Call], tenant: str, since: float, until: float) -> tuple[int, int]:
    """(successes, calls) of `tenant`'s calls started in [since, until)."""
    mine = [c for c in calls if c.tenant == tenant and since <= c.started < until]
    return sum(c.ok for c in mine), len(mine)


class HealthWatch:
    """`GET /v1/health` every `HEALTH_SECONDS`: when, and what it said (`ok`, `store
    unavailable`, `durability_reduced <shards>`, `no answer`)."""

    def __init__(self, gateway: GatewayProcess) -> None:
        self.seen: list[tuple[float, str]] = []
        self._url = f"{gateway.base_url}/health"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def finish(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _loop(self) -> None:
        while not self._stop.wait(HEALTH_SECONDS):
            when = time.monotonic()
            try:
                body = httpx.get(self._url, timeout=2).json()
            except (httpx.HTTPError, ValueError):
                self.seen.append((when, "no answer"))
                continue
            said = body.get("store") or body["status"]
            if body.get("shards"):
                said += " " + ",".join(body["shards"])
            self.seen.append((when, said))

    def said(self, since: float, until: float) -> list[str]:
        """What it said in [since, until), each answer once, in order of first sight."""
        return list(dict.fromkeys(s for t, s in self.seen if since <= t < until))


@dataclass
class Run:
    """The calls of every tenant's load over one fault, the fault's phases and what
    `/v1/health` said meanwhile."""

    title: str
    loads: list[TenantLoad]
    timeline: Timeline
    end: float
    health: HealthWatch

    def calls(self) -> list[Call]:
        return [c for load in self.loads for c in load.calls]

    def share(self, tenant: str, since: float, until: float) -> tuple[float, int]:
        """The share of successes among `tenant`'s calls started in [since, until), and
        their number."""
        ok, count = success_share(self.calls(), tenant, since, until)
        return (ok / count if count else 0.0), count

    def errors(self, tenant: str) -> list[Call]:
        return [c for c in self.calls() if c.tenant == tenant and not c.ok]

    def table(self) -> str:
        rows = format_table(self.title, phase_table(self.calls(), self.timeline, self.end))
        health = [
            f"- {phase}: {'; '.join(self.health.said(*self.timeline.span(phase, self.end)))}"
            for phase, _ in self.timeline.marks
        ]
        return "\n".join([rows, *self.costs(), "/v1/health said, by phase:", *health])

    def costs(self) -> list[str]:
        """Per tenant, its failed calls and when they started and ended, in seconds from the
        fault (the second phase's start)."""
        fault = self.timeline.marks[1][1]
        lines = []
        for tenant in dict.fromkeys(c.tenant for c in self.calls()):
            failed = self.errors(tenant)
            if not failed:
                lines.append(f"- {tenant}: no error")
                continue
            first = min(c.started for c in failed) - fault
            last = max(c.started + c.seconds for c in failed) - fault
            lines.append(f"- {tenant}: {len(failed)} errors, from {first:+.1f} s to {last:+.1f} s")
        return lines


def run_fault(
    gateway: GatewayProcess,
    keys: dict[str, str],
    title: str,
    fault: Callable[[Timeline], None],
    *,
    steady_seconds: float,
) -> Run:
    """Every tenant's load (`keys`: tenant -> API key) for `steady_seconds`, then over
    `fault` (which marks its phases and returns once the store is whole again), then
    `steady_seconds` more, with `/v1/health` watched throughout; the table is printed."""
    slug = re.sub(r"[^A-Za-z0-9._:-]+", "-", title.split(" (")[0])  # a valid X-Request-Id
    loads = [TenantLoad(gateway, tenant, key, slug) for tenant, key in keys.items()]
    timeline = Timeline()
    health = HealthWatch(gateway)
    health.start()
    for load in loads:
        load.start()
    try:
        timeline.mark("before")
        time.sleep(steady_seconds)
        fault(timeline)
        time.sleep(steady_seconds)
    finally:
        for load in loads:
            load.finish()
        health.finish()
    run = Run(title, loads, timeline, time.monotonic(), health)
    print()
    print(run.table())
    return run


def check_tenant_books(gateway: GatewayProcess, load: TenantLoad) -> None:
    """Every answer a success or a retryable 503; every 2xx charged exactly once (a chat's
    charge, a task's debit) and every accepted task ended; nothing charged behind a 503; the
    wallet equals its ledger; nothing held (tests/e2e/failover_load.py)."""
    broken = [c for c in load.calls if c.status == -1]
    assert not broken, broken[:5]
    answers = [
        Answer(c.request_id, "chat" if c.kind == "chat" else "task", c.status, c.body)
        for c in load.calls
    ]
    check_books(gateway, load.key, answers)
    with client_for(gateway, load.key) as client:
        wait_until(
            lambda: Decimal(client.get("/v1/wallet").json()["held_credits"]),
            lambda held: held == 0,
            timeout=30,
            what=f"{load.tenant}: nothing held",
        )
