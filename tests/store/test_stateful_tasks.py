"""A stateful model of the task lifecycle and its money, run against SQLite and real Redis.

Hypothesis drives random sequences of grants, chat holds (they lower what a task may debit),
task creates (with and without idempotency keys, replayed by key and by task id, refused for
credits or by a tight request limit, or fenced by an earlier abandon), their confirmations
(the hold becomes the debit, the task is queued) and abandons (an unconfirmed task goes whole,
its id is fenced), claims by several workers under short leases, progress
touches (by the worker that runs the task, and by one that lost it), worker crashes (the clock
passes a lease nobody extended; another worker reclaims the task, until it runs out of
attempts and is failed with a full refund), cancels (queued: canceled and refunded; running:
requested), finalizations (succeeded, failed with a full refund, partial results with a
partial refund, a refund above the price refused) and finalizations of finished tasks (they
change nothing). A plain Python model says what each step must return; after every step:

- balance = the sum of the ledger (`check_wallets`: ids unique, so no task is refunded twice;
  each refund at most its task's debit; no debit takes the balance below zero);
- every task is as the model has it (status, attempts, worker, lease, refund, progress), and
  the queue depth is the number of queued tasks;
- a replayed create debits nothing (the ledger is the model's, entry by entry);
and at the end a worker drains the queue until nothing is left to claim: every task is then
terminal, and the balances are the model's.

Short form (CI) and full form as in test_stateful_wallet.py (`GATEWAY_STATEFUL_STEPS`).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import invariant, precondition, rule

from gateway.store.base import (
    Admission,
    AdmissionOutcome,
    Call,
    IdempotencyClaim,
    RateLimits,
    Release,
    TaskAbandon,
    TaskConfirm,
    TaskCreate,
    TaskFinal,
    TaskProgress,
    TaskRecord,
    TerminalStatus,
)
from gateway.store.tasks import WORKER_LOST
from tests.store.stateful_support import (
    CLAIM_LEASE_SECONDS,
    Backends,
    Hold,
    check_wallets,
    run_machine,
)
from tests.store.task_model import (
    FINGERPRINTS,
    HOLD_SECONDS,
    MAX_ATTEMPTS,
    PICK,
    RPM,
    SCOPES,
    TENANTS,
    WORKERS,
    C,
    TaskModel,
    TaskModelMachine,
    ids,
)


class TaskMachine(TaskModelMachine):
    @rule(
        tenant=st.sampled_from(TENANTS),
        slot=st.integers(min_value=0, max_value=2),
        amount=st.sampled_from([5_000, 60_000, 200_000]),
    )
    def grant(self, tenant: str, slot: int, amount: int) -> None:
        self.step("grant")
        entry_id = f"grant:{slot}"
        first = self.model.entries[tenant].get(entry_id)
        entry = self.run(self.store.grant(tenant, amount, entry_id=entry_id, reason="model"))
        if first is None:
            self.model.append(tenant, entry_id, "grant", amount)
        else:
            assert (entry.kind, entry.amount_units) == first

    @rule(
        tenant=st.sampled_from(TENANTS),
        hold=st.sampled_from([1_000, 20_000]),
        seconds=st.sampled_from([60, 900]),
    )
    def chat_hold(self, tenant: str, hold: int, seconds: int) -> None:
        """A chat call in flight: its hold lowers what a task may debit."""
        self.step("chat_hold")
        call_id = self.fresh("chat")
        call = Call(
            tenant=tenant,
            api_key_id="k-open",
            call_id=call_id,
            request_id=f"req-{call_id}",
            limits=RateLimits(requests_per_minute=0),
        )
        admitted = hold <= self.model.available(tenant, self.b.now)
        result = self.run(
            self.store.admit(Admission(call=call, hold_units=hold, hold_seconds=seconds))
        )
        want = AdmissionOutcome.ADMITTED if admitted else AdmissionOutcome.INSUFFICIENT_CREDITS
        assert result.outcome is want, result
        if admitted:
            self.model.holds[call_id] = Hold(tenant, hold, self.b.now + seconds)
            self.chats.append(call)

    @precondition(lambda self: self.chats)
    @rule(pick=PICK)
    def chat_release(self, pick: int) -> None:
        self.step("chat_release")
        call = self.chats.pop(pick % len(self.chats))
        self.model.holds.pop(call.call_id, None)
        self.run(self.store.release(Release(call=call)))

    @rule(
        tenant=st.sampled_from(TENANTS),
        key=st.sampled_from(sorted(RPM)),
        price=st.sampled_from([0, 400, 3_000, 25_000]),
        idem=st.one_of(
            st.none(), st.none(), st.tuples(st.sampled_from(SCOPES), st.sampled_from(FINGERPRINTS))
        ),
        retry=st.none() | PICK,
        reply_ttl=st.sampled_from([600, 86_400]),
    )
    def create(
        self,
        tenant: str,
        key: str,
        price: int,
        idem: tuple[str, str] | None,
        retry: int | None,
        reply_ttl: int,
    ) -> None:
        """A create; `retry` repeats an existing task's id (a client retry after a lost
        answer), which must find that task and debit nothing."""
        self.step("create")
        owned = [t for t in self.tasks.values() if t.tenant == tenant]
        others = [t for t in self.tasks.values() if t.tenant != tenant]
        task_id = self.fresh("task")
        if retry is not None and owned:
            task_id = owned[retry % len(owned)].task_id
        if retry is not None and retry % 8 == 7 and others and self.b.kind == "sqlite":
            # Another tenant's id: refused on SQLite (one table of ids); on Redis a task lives
            # in its tenant's keys, so the ids of two tenants never meet (test_redis_layout).
            task_id = others[retry % len(others)].task_id
        sqlite = self.b.kind == "sqlite"
        fenced = [i for i in sorted(self.fenced) if sqlite or self.fenced_for.get(i) == tenant]
        if retry is not None and retry % 8 == 6 and fenced:
            task_id = fenced[retry % len(fenced)]  # an abandoned create
        claim = None
        if idem is not None:
            scope = f"{tenant}:POST:/v1/images/generations:{idem[0]}"
            claim = IdempotencyClaim(scope=scope, fingerprint=idem[1])
        create = TaskCreate(
            task_id=task_id,
            tenant=tenant,
            api_key_id=f"{key}@{tenant}",  # a key is one tenant's
            request_id=f"req-{task_id}",
            limits=RateLimits(requests_per_minute=RPM[key]),
            capability="image",
            model="img-1",
            resolved_model="img-1",
            price_units=price,
            input={"prompt": task_id},
            metadata={},
            idempotency=claim,
            reply_ttl_seconds=reply_ttl,
            hold_seconds=HOLD_SECONDS,
        )
        available = self.model.available(tenant, self.b.now)
        expected, replayed = self.expect_create(create, available)
        if expected is None:  # the id is another tenant's task: refused, nothing changes
            with pytest.raises(ValueError, match="another tenant"):
                self.run(self.store.create_task(create))
            self.saw("create conflict")
            return
        result = self.run(self.store.create_task(create))
        self.saw(f"create {result.outcome.value}")
        assert result.outcome is expected, (result.outcome, expected)
        if expected is not C.ABANDONED:  # (fenced: nothing was looked at)
            assert result.available_units == available
        if replayed is not None:
            assert result.task is not None and result.task.task_id == replayed.task_id
            self.check_task(result.task, replayed)
        elif expected is C.CREATED:
            self.check_task(result.task, self.tasks[task_id])
        else:
            assert result.task is None

    @rule(pick=PICK, stranger=st.booleans(), gone=st.booleans())
    def confirm(self, pick: int, stranger: bool, gone: bool) -> None:
        """The second create step (or a repeat of it): an unconfirmed task's hold becomes its
        debit and it is queued; any other task is returned as it is; an abandoned one is None,
        and so is another tenant's."""
        self.step("confirm")
        unconfirmed = [t for t in self.tasks.values() if t.unconfirmed]
        pool = unconfirmed if unconfirmed and pick % 4 else list(self.tasks.values())
        if gone or not pool:
            gone_ids = sorted(set(self.fenced) - set(self.tasks)) or ["task_none"]
            task_id = gone_ids[pick % len(gone_ids)]
            seen = self.run(self.store.confirm_task(TaskConfirm(tenant="t1", task_id=task_id)))
            assert seen is None, seen
            self.saw("confirm gone")
            return
        task = pool[pick % len(pool)]
        if stranger:
            tenant = next(t for t in TENANTS if t != task.tenant)
            seen = self.run(
                self.store.confirm_task(TaskConfirm(tenant=tenant, task_id=task.task_id))
            )
            assert seen is None, seen
            return
        self.confirm_one(task)

    def confirm_one(self, task: TaskModel) -> None:
        if task.unconfirmed:
            self.saw("confirm")
            hold = self.model.holds.pop(task.task_id, None)
            if task.price > 0:
                self.model.append(task.tenant, f"debit:{task.task_id}", "debit", -task.price)
                if hold is None or hold.expires_at <= self.b.now:  # never reserved by then
                    self.late_debits.add(f"debit:{task.task_id}")
            task.unconfirmed, task.confirmed_as = False, self.confirmations
            self.confirmations += 1
        confirm = TaskConfirm(tenant=task.tenant, task_id=task.task_id)
        self.check_task(self.run(self.store.confirm_task(confirm)), task)

    @rule(pick=PICK, fresh=st.booleans())
    def abandon(self, pick: int, fresh: bool) -> None:
        """A create whose answer never came is undone: an unconfirmed task goes whole (hold,
        record, idempotency record); a confirmed one stays; the id is fenced either way."""
        self.step("abandon")
        unconfirmed = [t for t in self.tasks.values() if t.unconfirmed]
        if fresh or not self.tasks:
            task_id, tenant = self.fresh("task"), "t1"  # an abandon that beats its create
        else:
            pool = unconfirmed if unconfirmed and pick % 3 else list(self.tasks.values())
            task = pool[pick % len(pool)]
            task_id, tenant = task.task_id, task.tenant
        scope = next((s for s, rec in self.records.items() if rec.task_id == task_id), "")
        self.run(
            self.store.abandon_task(
                TaskAbandon(tenant=tenant, task_id=task_id, idempotency_scope=scope)
            )
        )
        self.fenced[task_id] = self.b.now + self.b.fence_seconds
        self.fenced_for[task_id] = tenant
        task_model = self.tasks.get(task_id)
        if task_model is not None and task_model.unconfirmed:
            self.saw("abandon removed")
            del self.tasks[task_id]
            self.model.holds.pop(task_id, None)
            if scope:
                del self.records[scope]
            assert self.run(self.store.get_task(tenant, task_id)) is None
        else:
            self.saw("abandon kept")

    @rule(worker=st.sampled_from(WORKERS))
    def claim(self, worker: str) -> None:
        self.step("claim")
        self.claim_as(worker)

    def claim_as(self, worker: str) -> TaskRecord | None:
        """A claim: a task whose lease ran out comes first (any of them: the backends pick in
        different orders), then the oldest queued one (on Redis the oldest of a queue shard);
        a task out of attempts met on the way is failed with a full refund."""
        now = self.b.now
        running = self.in_state("running")
        lapsed = [t for t in running if t.lease_until is not None and t.lease_until <= now]
        retryable = [t for t in lapsed if t.attempts < MAX_ATTEMPTS]
        queued = self.queued()
        if lapsed:
            self.b.before_claim()  # Redis: else XAUTOCLAIM may not see them yet
        got = self.run(
            self.store.claim_task(
                worker, lease_seconds=CLAIM_LEASE_SECONDS, max_attempts=MAX_ATTEMPTS
            )
        )
        if retryable:
            assert got is not None and got.task_id in {t.task_id for t in retryable}, got
        elif queued and self.b.kind == "sqlite":
            assert got is not None and got.task_id == queued[0].task_id, (got, queued[0])
        elif queued:  # Redis: the oldest of its shard, the shards in turn (a tenant is in one)
            assert got is not None, queued
            assert got.task_id == next(t for t in queued if t.tenant == got.tenant).task_id
        else:
            assert got is None, got
        # Tasks out of attempts that the claim met before the one it took are failed now: all
        # of them when it took none or a queued one (it looked at every lapsed lease first).
        for task in lapsed:
            if task.attempts < MAX_ATTEMPTS:
                continue
            seen = self.run(self.store.get_task(task.tenant, task.task_id))
            assert seen is not None
            if seen.status == "failed" or got is None or got.task_id not in ids(retryable):
                self.saw("claim failed worker_lost")
                self.finish(task, "failed", task.price)
                task.error_code = WORKER_LOST
            self.check_task(seen, task)
        self.saw(
            "claim none" if got is None else "claim reclaimed" if retryable else "claim queued"
        )
        if got is not None:
            task = self.tasks[got.task_id]
            task.status, task.worker, task.attempts = "running", worker, task.attempts + 1
            task.lease_until, task.started, task.stage = now + CLAIM_LEASE_SECONDS, True, "running"
            self.check_task(got, task)
        return got

    @precondition(lambda self: self.in_state("running", "succeeded", "failed", "canceled"))
    @rule(
        pick=PICK,
        lost=st.booleans(),
        lease=st.sampled_from([CLAIM_LEASE_SECONDS, 60.0, 600.0]),
        percent=st.sampled_from([10.0, 55.5]),
    )
    def touch(self, pick: int, lost: bool, lease: float, percent: float) -> None:
        """Progress from the worker that runs the task (its lease is extended), or from one
        that lost it or whose task ended (nothing changes; it sees so)."""
        self.step("touch")
        claimed = self.in_state("running", "succeeded", "failed", "canceled")
        running = self.in_state("running")
        pool = running if running and pick % 4 else claimed
        task = pool[pick % len(pool)]
        worker = task.worker or WORKERS[0]
        if lost:
            worker = next(w for w in WORKERS if w != task.worker)
        elif task.status == "running":
            task.lease_until = self.b.now + lease
            task.percent, task.stage = percent, "rendering"
        progress = TaskProgress(percent=percent, stage="rendering", message="")
        seen = self.run(
            self.store.touch_task(
                task.tenant, task.task_id, worker, lease_seconds=lease, progress=progress
            )
        )
        self.check_task(seen, task)

    @precondition(lambda self: self.tasks)
    @rule(pick=PICK, stranger=st.booleans())
    def cancel(self, pick: int, stranger: bool) -> None:
        self.step("cancel")
        tasks = list(self.tasks.values())
        task = tasks[pick % len(tasks)]
        tenant = task.tenant
        if stranger:  # another tenant's task is invisible: unknown, and nothing changes
            tenant = next(t for t in TENANTS if t != task.tenant)
            assert self.run(self.store.request_cancel(tenant, task.task_id)) is None
            return
        if task.status == "queued" and task.unconfirmed:  # never charged: its price goes
            task.cancel_requested, task.unconfirmed, task.price = True, False, 0
            self.model.holds.pop(task.task_id, None)
            self.finish(task, "canceled", 0)
        elif task.status == "queued":
            task.cancel_requested = True
            self.finish(task, "canceled", task.price)
        elif task.status == "running":
            task.cancel_requested = True
        self.check_task(self.run(self.store.request_cancel(tenant, task.task_id)), task)

    @precondition(lambda self: self.tasks)
    @rule(
        pick=PICK,
        how=st.sampled_from(["succeeded", "partial", "failed", "canceled", "too_much"]),
    )
    def finalize(self, pick: int, how: str) -> None:
        """A task's end, from its worker (or a second time: nothing changes then)."""
        self.step("finalize")
        tasks = list(self.tasks.values())
        self.finalize_task(tasks[pick % len(tasks)], how)

    def finalize_task(self, task: TaskModel, how: str) -> None:
        status: TerminalStatus = "succeeded"
        refund = 0
        if how == "partial":
            refund = task.price // 3
        elif how in ("failed", "canceled"):
            status, refund = how, task.price  # type: ignore[assignment]
        elif how == "too_much":
            refund = task.price + 1
        final = TaskFinal(
            tenant=task.tenant,
            task_id=task.task_id,
            status=status,
            output={"images": [task.task_id]} if status == "succeeded" else {},
            error={"code": "upstream_error"} if status == "failed" else None,
            refund_units=refund,
            reason=how,
        )
        if (how == "too_much" and not task.terminal) or task.unconfirmed:
            with pytest.raises(ValueError):  # (an unconfirmed task was never claimed)
                self.run(self.store.finalize_task(final))
            return
        if not task.terminal:
            self.finish(task, status, refund)
            task.error_code = "upstream_error" if status == "failed" else None
        self.check_task(self.run(self.store.finalize_task(final)), task)

    @rule(seconds=st.sampled_from([0.01, 1.0, 30.0, 59.0, 61.0, 700.0]))
    def advance_clock(self, seconds: float) -> None:
        """Time passes: claim leases run out (a worker that did not touch its task crashed),
        holds and idempotency records may end."""
        self.step("advance_clock")
        self.b.advance(seconds)
        self.model.expire(self.b.now)

    @precondition(lambda self: self.in_state("running"))
    @rule(pick=PICK, worker=st.sampled_from(WORKERS))
    def worker_crash(self, pick: int, worker: str) -> None:
        """The worker of a running task vanishes: its lease runs out, another claim takes it
        again (or fails it, out of attempts)."""
        self.step("worker_crash")
        running = self.in_state("running")
        task = running[pick % len(running)]
        assert task.lease_until is not None
        self.b.advance(max(0.0, task.lease_until - self.b.now) + 1.0)
        self.model.expire(self.b.now)
        self.claim_as(worker)

    # Invariants and the end ----------------------------------------------------------------

    @invariant()
    def state_matches(self) -> None:
        check_wallets(self, self.model, frozenset(self.late_debits))
        for task in self.tasks.values():
            self.check_task(self.run(self.store.get_task(task.tenant, task.task_id)), task)
        depth = self.run(self.store.task_queue_depth())
        assert depth == len(self.queued()), depth

    def teardown(self) -> None:
        """Every create is confirmed, then a worker drains the queue: every task ends,
        refunded at most once."""
        try:
            for task in [t for t in self.tasks.values() if t.unconfirmed]:
                self.confirm_one(task)
            for _ in range(len(self.tasks) * (MAX_ATTEMPTS + 1) + 1):
                self.b.advance(1_000.0)  # past every lease
                self.model.expire(self.b.now)
                got = self.claim_as("drain")
                if got is None:
                    break
                self.finalize_task(self.tasks[got.task_id], "succeeded")
            assert all(t.terminal for t in self.tasks.values()), self.tasks
            self.state_matches()
        finally:
            super().teardown()


@pytest.mark.parametrize("kind", ["sqlite", "redis"])
def test_tasks_follow_their_model(
    kind: str, request: pytest.FixtureRequest, runner: asyncio.Runner, tmp_path: Path
) -> None:
    redis_url = request.getfixturevalue("redis_url") if kind == "redis" else None
    backends = Backends(kind, runner, tmp_path, redis_url)
    machine = type(f"TaskMachine_{kind}", (TaskMachine,), {})
    figures = run_machine(machine, backends, examples=40, steps=50)
    assert figures.steps > 0
