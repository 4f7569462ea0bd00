"""API keys: stored by hash, revoked in place, listed per tenant."""

from __future__ import annotations

from gateway.store.base import ApiKeyRecord, Store
from tests.store.support import Run


def _record(key_id: str, tenant: str = "t1", created_at: float = 1_700_000_000.5) -> ApiKeyRecord:
    return ApiKeyRecord(key_id=key_id, tenant=tenant, created_at=created_at)


def test_create_then_get_by_hash(store: Store, run: Run) -> None:
    record = _record("key_1")
    run(store.create_key(record, "hash-1"))

    assert run(store.get_key("hash-1")) == record
    assert run(store.get_key("hash-unknown")) is None


def test_revoke_is_idempotent_and_keeps_the_record(store: Store, run: Run) -> None:
    run(store.create_key(_record("key_1"), "hash-1"))

    assert run(store.revoke_key("key_1")) is True
    revoked = run(store.get_key("hash-1"))
    assert revoked is not None and revoked.revoked_at is not None
    assert revoked.key_id == "key_1"

    assert run(store.revoke_key("key_1")) is True
    again = run(store.get_key("hash-1"))
    assert again is not None and again.revoked_at == revoked.revoked_at

    assert run(store.revoke_key("key_unknown")) is False


def test_list_keys_is_per_tenant_oldest_first(store: Store, run: Run) -> None:
    run(store.create_key(_record("key_b", created_at=2.0), "hash-b"))
    run(store.create_key(_record("key_a", created_at=1.0), "hash-a"))
    run(store.create_key(_record("key_x", tenant="t2", created_at=1.5), "hash-x"))
    run(store.revoke_key("key_b"))

    listed = run(store.list_keys("t1"))
    assert [k.key_id for k in listed] == ["key_a", "key_b"]
    assert listed[1].revoked_at is not None
    assert [k.key_id for k in run(store.list_keys("t2"))] == ["key_x"]
    assert run(store.list_keys("nobody")) == []


def test_a_key_keeps_its_display_prefix_and_is_found_by_id(store: Store, run: Run) -> None:
    record = ApiKeyRecord(key_id="key_p", tenant="t1", created_at=5.0, prefix="gw-AbCdEfG")
    run(store.create_key(record, "hash-p"))
    run(store.create_key(_record("key_old"), "hash-old"))  # issued before prefixes were kept

    assert run(store.get_key("hash-p")) == record
    assert run(store.key_by_id("key_p")) == record
    assert [k.prefix for k in run(store.list_keys("t1"))] == ["gw-AbCdEfG", ""]
    assert run(store.key_by_id("key_old")) == _record("key_old")
    assert run(store.key_by_id("key_unknown")) is None

    run(store.revoke_key("key_p"))
    revoked = run(store.key_by_id("key_p"))
    assert revoked is not None and revoked.revoked_at is not None
    assert revoked.prefix == "gw-AbCdEfG"
