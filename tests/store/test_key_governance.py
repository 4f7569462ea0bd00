"""Key governance in the store: settings, rotation, and the key's budget inside admission."""

from __future__ import annotations

import asyncio
import datetime as dt

import msgspec
from redis.crc import key_slot

from gateway.store.base import (
    Admission,
    AdmissionOutcome,
    ApiKeyRecord,
    KeyBudget,
    KeySettings,
    Store,
    TaskCreate,
    TaskCreateOutcome,
)
from gateway.store.key_tags import tenant_tag
from gateway.store.periods import PERIODS, period_start_day
from gateway.store.redis import RedisStore
from gateway.store.redis.scripts import script_source
from tests.store.support import Run, admission, create_confirmed, release, settlement
from tests.store.task_support import create

ADMITTED = AdmissionOutcome.ADMITTED
OVER = AdmissionOutcome.KEY_BUDGET_EXCEEDED
SETTINGS = KeySettings(
    name="team-a",
    models=("m1", "m2"),
    budget=KeyBudget(units=300, period="month"),
    expires_at=2_000_000_000.0,
    requests_per_minute=10,
    tokens_per_minute=1000,
    metadata={"team": "a"},
)


def _record(key_id: str = "key_1", settings: KeySettings | None = None) -> ApiKeyRecord:
    return ApiKeyRecord(
        key_id=key_id, tenant="t1", created_at=1.0, settings=settings or KeySettings()
    )


def _budgeted(call_id: str, hold: int, *, key: str = "k1", units: int = 300) -> Admission:
    adm = admission(call_id, hold=hold, api_key_id=key)
    budget = KeyBudget(units=units, period="month")
    return msgspec.structs.replace(adm, call=msgspec.structs.replace(adm.call, budget=budget))


def test_settings_are_kept_found_by_the_tagged_secret_and_replaced_whole(
    store: Store, run: Run
) -> None:
    run(store.create_key(_record(settings=SETTINGS), "hash-1"))
    found = run(store.get_key("hash-1", tenant_tag("t1")))
    assert found is not None and found.settings == SETTINGS
    assert run(store.get_key("hash-1")) == found  # a secret without its tag finds it too

    changed = msgspec.structs.replace(SETTINGS, budget=None, models=())
    updated = run(store.update_key("key_1", changed))
    assert updated is not None and updated.settings == changed
    assert run(store.update_key("key_unknown", changed)) is None
    cleared = run(store.update_key("key_1", KeySettings()))
    assert cleared is not None and cleared.settings == KeySettings()


def test_rotation_keeps_id_and_settings_and_the_old_secret_for_its_grace(
    store: Store, run: Run
) -> None:
    run(store.create_key(_record(settings=SETTINGS), "hash-old"))
    rotated = run(store.rotate_key("key_1", "hash-new", "gw-new0000", grace_seconds=3600))
    assert rotated is not None and rotated.key_id == "key_1" and rotated.prefix == "gw-new0000"
    assert rotated.settings == SETTINGS

    new = run(store.get_key("hash-new", tenant_tag("t1")))
    old = run(store.get_key("hash-old", tenant_tag("t1")))
    assert new is not None and new.valid_until is None
    assert old is not None and old.key_id == "key_1" and old.valid_until is not None
    assert [r.key_id for r in run(store.list_keys("t1"))] == ["key_1"]

    # A second rotation retires the first old secret at once.
    run(store.rotate_key("key_1", "hash-newer", "gw-newer00", grace_seconds=0))
    assert run(store.get_key("hash-old", tenant_tag("t1"))) is None
    middle = run(store.get_key("hash-new", tenant_tag("t1")))
    assert middle is not None and middle.valid_until is not None

    # Revocation reaches the secret in its grace too; a revoked key does not rotate.
    run(store.revoke_key("key_1"))
    assert all(
        r is not None and r.revoked_at is not None
        for r in (run(store.get_key(h, tenant_tag("t1"))) for h in ("hash-new", "hash-newer"))
    )
    assert run(store.rotate_key("key_1", "hash-x", "gw-x", grace_seconds=1)) is None


def test_a_budget_bounds_holds_and_charges_and_other_keys_go_on(store: Store, run: Run) -> None:
    run(store.grant("t1", 10_000, entry_id="g1", reason="top-up"))
    first = _budgeted("c1", 200)
    assert run(store.admit(first)).outcome is ADMITTED
    refused = run(store.admit(_budgeted("c2", 200)))
    assert refused.outcome is OVER  # 200 held of 300: the wallet would cover it
    assert run(store.admit(_budgeted("c3", 200, key="k2"))).outcome is ADMITTED

    run(store.settle(settlement(first, charge=150)))
    assert run(store.key_spent("t1", "k1", "month")) == 150
    assert run(store.key_spent("t1", "k1", "total")) == 150
    assert run(store.admit(_budgeted("c4", 150))).outcome is ADMITTED
    assert run(store.admit(_budgeted("c5", 1))).outcome is OVER
    run(store.release(release(_budgeted("c4", 150))))
    assert run(store.admit(_budgeted("c6", 150))).outcome is ADMITTED

    entries = run(store.ledger("t1", limit=10)).entries
    assert [(e.kind, e.key_id) for e in entries if e.kind == "charge"] == [("charge", "k1")]


def test_task_creates_count_against_the_budget_and_a_cancel_gives_it_back(
    store: Store, run: Run
) -> None:
    run(store.grant("t1", 10_000, entry_id="g1", reason="top-up"))
    budget = KeyBudget(units=250, period="day")

    def budgeted(task_id: str) -> TaskCreate:
        return msgspec.structs.replace(create(task_id, price=100), budget=budget)

    results = [run(create_confirmed(store, budgeted(f"task_{i}"))) for i in range(3)]
    assert [r.outcome for r in results] == [
        TaskCreateOutcome.CREATED,
        TaskCreateOutcome.CREATED,
        TaskCreateOutcome.KEY_BUDGET_EXCEEDED,
    ]
    assert run(store.key_spent("t1", "k1", "day")) == 200
    run(store.request_cancel("t1", "task_0"))  # queued: canceled, refunded in full
    assert run(store.key_spent("t1", "k1", "day")) == 100
    again = run(create_confirmed(store, budgeted("task_3")))
    assert again.outcome is TaskCreateOutcome.CREATED
    page = run(store.ledger("t1", limit=20)).entries
    assert sum(-e.amount_units for e in page if e.key_id == "k1") == 200


def test_concurrent_admissions_never_pass_the_budget(store: Store, run: Run) -> None:
    run(store.grant("t1", 100_000, entry_id="g1", reason="top-up"))

    async def one(i: int) -> AdmissionOutcome:
        adm = _budgeted(f"c{i}", 100, units=350)
        result = await store.admit(adm)
        if result.outcome is ADMITTED:
            await store.settle(settlement(adm, charge=100))
        return result.outcome

    async def all_of() -> list[AdmissionOutcome]:
        return list(await asyncio.gather(*(one(i) for i in range(40))))

    outcomes = run(all_of())
    assert outcomes.count(ADMITTED) == 3
    assert set(outcomes) == {ADMITTED, OVER}
    spent = run(store.key_spent("t1", "k1", "month"))
    entries = run(store.ledger("t1", limit=100)).entries
    assert spent == sum(-e.amount_units for e in entries if e.key_id == "k1") == 300


def test_a_key_record_lives_in_its_tenant_slot(redis_stores: object, run: Run) -> None:
    store: RedisStore = redis_stores()  # type: ignore[operator]
    run(store.create_key(_record(), "hash-1"))
    tag = tenant_tag("t1")
    assert key_slot(store.keys.api_key(tag, "hash-1").encode()) == key_slot(
        store.keys.wallet("t1").encode()
    )


def test_a_record_of_the_previous_layout_moves_on_first_read(
    redis_stores: object, run: Run
) -> None:
    store: RedisStore = redis_stores()  # type: ignore[operator]
    k = store.keys

    async def write_old() -> None:
        await store.client.hset(
            k.legacy_api_key("h" * 64),
            mapping={"key_id": "key_old", "tenant": "t1", "created_at": 1.0, "prefix": "gw-ab"},
        )
        await store.client.set(k.api_key_id("key_old"), "h" * 64)
        await store.client.zadd(k.tenant_keys("t1"), {"h" * 64: 1.0})

    run(write_old())
    found = run(store.get_key("h" * 64))
    assert found is not None and found.key_id == "key_old"
    assert run(store.client.exists(k.legacy_api_key("h" * 64))) == 0
    assert run(store.client.exists(k.api_key(tenant_tag("t1"), "h" * 64))) == 1
    updated = run(store.update_key("key_old", SETTINGS))
    assert updated is not None and updated.settings == SETTINGS
    assert [r.key_id for r in run(store.list_keys("t1"))] == ["key_old"]


def test_lua_periods_agree_with_python(redis_stores: object, run: Run) -> None:
    store: RedisStore = redis_stores()  # type: ignore[operator]
    body = script_source("wallet").split("-- wallet:")[0]
    probe = body + "\nreturn period_start_day(ARGV[1], tonumber(ARGV[2]))"
    script = store.client.register_script(probe)
    start = dt.datetime(1999, 12, 25, tzinfo=dt.UTC).timestamp()
    stamps = [start + i * 86_400 * 3.7 + 0.5 for i in range(3000)]  # ~30 years, odd hours
    stamps += [dt.datetime(2028, 2, 29, 23, 59, 59, tzinfo=dt.UTC).timestamp()]
    for at in stamps:
        for period in PERIODS:
            got = run(script(keys=[store.keys.wallet("t1")], args=[period, repr(at)]))
            assert got == period_start_day(period, at), (period, at)
