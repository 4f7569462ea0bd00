"""What only the SQLite backend has: durable state in a shared file, ephemeral state in memory.

The embedded store serves one gateway process; the CLI (another process) shares the file for
keys, grants and wallets. So a second store on the file sees everything durable (keys, ledger,
balances, completed replies) and nothing ephemeral (holds, rate buckets, in-flight leases).
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import msgspec
import pytest

from gateway.errors import StoreUnavailable
from gateway.store.base import AdmissionOutcome, ApiKeyRecord, StoredReply
from gateway.store.sqlite import SqliteStore, checkpoint
from gateway.store.sqlite.checkpoint import WalLimits
from gateway.store.sqlite.schema import SCHEMA_VERSION
from tests.store.support import Run, admission, claim, release, settlement
from tests.support.clock import Clock
from tests.support.serial import exclusive

ADMITTED = AdmissionOutcome.ADMITTED
REPLY = StoredReply(status=200, content_type="application/json", body=b'{"id":"x"}')


def _wal_size(path: Path) -> int:
    try:
        return os.stat(f"{path}-wal").st_size
    except FileNotFoundError:
        return 0


def test_a_second_store_on_the_file_sees_the_durable_state(tmp_path: Path, run: Run) -> None:
    a, b = SqliteStore(tmp_path / "g.db"), SqliteStore(tmp_path / "g.db")
    run(a.open())
    run(b.open())
    try:
        # Keys and grants made by one (the CLI) are seen by the other (the server).
        record = ApiKeyRecord(key_id="kid1", tenant="t1", created_at=1.0)
        run(b.create_key(record, "hash1"))
        assert run(a.get_key("hash1")) == record
        run(b.grant("t1", 1000, entry_id="g1", reason="top-up"))

        adm = admission("c1", hold=300, idempotency=claim())
        assert run(a.admit(adm)).outcome is ADMITTED
        assert run(a.settle(settlement(adm, charge=120, reply=REPLY))) == 880

        # Charges, balances and completed replies are durable and shared...
        assert run(b.wallet("t1")).balance_units == 880
        assert [e.id for e in run(b.ledger("t1", limit=5)).entries] == ["charge:c1", "g1"]
        replay = run(b.admit(admission("c2", idempotency=claim())))
        assert replay.outcome is AdmissionOutcome.REPLAY and replay.reply == REPLY
        assert run(b.revoke_key("kid1")) is True
        assert run(a.get_key("hash1")).revoked_at is not None  # type: ignore[union-attr]
    finally:
        run(a.close())
        run(b.close())


def test_ephemeral_state_is_per_process_and_lost_on_restart(tmp_path: Path, run: Run) -> None:
    """Holds, buckets and leases live in the serving process: a restart is their expiry."""
    path = tmp_path / "g.db"
    a = SqliteStore(path)
    run(a.open())
    run(a.grant("t1", 100, entry_id="g1", reason="top-up"))
    assert run(a.admit(admission("c1", rpm=1, hold=100, idempotency=claim()))).outcome is ADMITTED
    assert run(a.admit(admission("c2", rpm=1))).outcome is AdmissionOutcome.RATE_LIMITED
    assert run(a.wallet("t1")).held_units == 100

    b = SqliteStore(path)  # another process, or the same one after a crash
    run(b.open())
    try:
        assert run(b.wallet("t1")).held_units == 0
        again = run(b.admit(admission("c3", rpm=1, hold=100, idempotency=claim())))
        assert again.outcome is ADMITTED and again.available_units == 100
    finally:
        run(b.close())
        run(a.close())


def test_admission_and_release_write_nothing(tmp_path: Path, run: Run) -> None:
    store = SqliteStore(tmp_path / "g.db")
    run(store.open())
    try:
        run(store.grant("t1", 10**6, entry_id="g1", reason="top-up"))
        before = _wal_size(tmp_path / "g.db")
        for i in range(200):
            adm = admission(f"c{i}", tpm=10**6, tokens=100, hold=10, idempotency=claim(f"s{i}"))
            assert run(store.admit(adm)).outcome is ADMITTED
            run(store.release(release(adm)))
        free = admission("free", idempotency=claim("free"))
        run(store.admit(free))
        run(store.settle(settlement(free, charge=0)))  # nothing durable: no transaction
        assert _wal_size(tmp_path / "g.db") == before
        assert store.memory_sizes() == {
            "buckets": 1,
            "holds": 0,
            "leases": 0,
            "calls": 0,
            "fenced": 0,
        }
    finally:
        run(store.close())


def test_expired_memory_entries_are_swept(tmp_path: Path, run: Run) -> None:
    """Calls that never come back leave nothing behind once their hold and lease expire.

    The store reads the test's clock: on the wall's, a busy machine took longer than a bucket's
    0.1 s refill over the 50 admissions, and the sweeps removed buckets before they were counted.
    """
    clock = Clock()
    store = SqliteStore(tmp_path / "g.db", sweep_seconds=0.0, clock=clock)
    run(store.open())
    try:
        run(store.grant("t1", 10**6, entry_id="g1", reason="top-up"))
        for i in range(50):
            lost = admission(
                f"lost{i}",
                api_key_id=f"k{i}",
                rpm=600,
                tpm=60_000,
                tokens=10,
                hold=10,
                hold_seconds=1,
                idempotency=claim(f"s{i}", lease_seconds=1),
            )
            assert run(store.admit(lost)).outcome is ADMITTED
        assert store.memory_sizes() == {
            "buckets": 50,
            "holds": 50,
            "leases": 50,
            "calls": 50,
            "fenced": 0,
        }
        assert run(store.wallet("t1")).held_units == 500

        clock.advance(1.2)  # holds, leases and markers expired; buckets refilled (0.1 s)

        assert run(store.wallet("t1")).held_units == 0
        run(store.admit(admission("next", api_key_id="k-next", rpm=0)))  # sweeps
        assert store.memory_sizes() == {
            "buckets": 0,
            "holds": 0,
            "leases": 0,
            "calls": 0,
            "fenced": 0,
        }
    finally:
        run(store.close())


class _Load(msgspec.Struct, frozen=True):
    pairs: int
    largest: int
    """The WAL file's largest size, read after every settlement."""
    restarts: int
    holds: int


_HOLD = 2 << 20
_SLACK = 8 << 20
"""What writers may add to the WAL while the checkpointer looks away: it looks every 5 ms here,
and the fastest loop seen wrote ~300 MB/s (12,500 settlements a second, ~24 KB of WAL each), so
this is five looks' worth at that rate (~1.8 MB over the hold was measured)."""


def _settle_for(store: SqliteStore, seconds: float, run: Run) -> _Load:
    """Admit and settle back to back for `seconds`, as a busy server would."""
    path = store.path

    async def load() -> _Load:
        await store.open()
        try:
            await store.grant("t1", 10**12, entry_id="g1", reason="top-up")
            largest, pairs = 0, 0
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                adm = admission(
                    f"c{pairs}", tpm=10**9, tokens=10, hold=5, idempotency=claim(f"s{pairs}")
                )
                await store.admit(adm)
                await store.settle(settlement(adm, charge=3, used=5, reply=REPLY))
                await asyncio.sleep(0)  # a server yields between requests
                largest = max(largest, _wal_size(path))
                pairs += 1
            assert (await store.wallet("t1")).balance_units == 10**12 - 3 * pairs
            checkpointer = store.checkpointer
            assert checkpointer is not None
            return _Load(pairs, largest, checkpointer.restarts, checkpointer.holds)
        finally:
            await store.close()

    return run(load())


def _busy_store(path: Path, hold_bytes: int = _HOLD) -> SqliteStore:
    limits = WalLimits(
        interval=0.005, passive_bytes=64 << 10, restart_bytes=512 << 10, hold_bytes=hold_bytes
    )
    return SqliteStore(path, wal=limits)


@exclusive  # a writer racing the checkpointer's thread: steady on a machine not loaded
def test_the_wal_is_rewound_under_continuous_writes(tmp_path: Path, run: Run) -> None:
    """PASSIVE checkpoints never catch up while writes keep coming: RESTART rewinds the WAL,
    and journal_size_limit trims a file that grew past the limit."""
    load = _settle_for(_busy_store(tmp_path / "g.db"), 1.5, run)
    # Each settlement writes at least three 4 KiB pages (wallet, ledger, reply): without
    # rewinding, the WAL would hold them all.
    assert load.pairs > 500 and load.restarts >= 2
    assert load.largest < min(_HOLD + _SLACK, load.pairs * 3 * 4096 // 4), load


def test_writers_wait_while_a_stalled_disk_holds_the_checkpoint(
    tmp_path: Path, run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A checkpoint's fsync stalled by other writers on the disk (100-300 ms were seen) let a
    fast loop grow the WAL to 67 MB against a 512 KiB limit: past `hold_bytes`, writers wait
    for the checkpoint and the RESTART after it, so the WAL stays bounded however slow the
    disk, and every write still lands."""
    real = checkpoint._checkpoint

    def stalled(conn: sqlite3.Connection, mode: str) -> int:
        if mode == "PASSIVE":
            time.sleep(0.5)  # the fsync of a disk busy with other writers
        return real(conn, mode)

    monkeypatch.setattr(checkpoint, "_checkpoint", stalled)
    hold = 1 << 20  # a slow loop (~200 settlements a second) writes it in one stall
    load = _settle_for(_busy_store(tmp_path / "g.db", hold), 1.0, run)
    assert load.holds >= 1 and load.restarts >= 1, load
    assert load.largest < hold + _SLACK, load


_SHM_DEAD_MAN_SWITCH = 128
"""The byte of the -shm file every connection holds a shared lock on (SQLite's unix VFS: after
the 8 WAL lock slots from byte 120). A process that can lock it exclusively takes itself for
the only one and resets the file, under any other process that has it mapped."""

_PROBE = f"""
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
try:
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, {_SHM_DEAD_MAN_SWITCH})
except OSError:
    print("held")
else:
    print("free")
"""


def _dead_man_switch_of(db: Path) -> str:
    """Whether another process finds the -shm's lock byte held ("held") or not ("free")."""
    probe = subprocess.run(
        [sys.executable, "-c", _PROBE, f"{db}-shm"], capture_output=True, text=True, check=True
    )
    return probe.stdout.strip()


def test_another_process_still_sees_the_store_while_the_checkpointer_reads(
    tmp_path: Path, run: Run
) -> None:
    """The checkpointer reads the WAL header from the -shm file many times a second. Closing a
    descriptor of that file would drop the process's locks on it: a `gateway` command starting
    meanwhile would reset the file under the server (which died of SIGBUS in the test suite)."""
    db = tmp_path / "gateway.db"
    store = SqliteStore(db, wal=WalLimits(interval=0.01))
    run(store.open())
    try:
        run(store.grant("t1", 100, entry_id="g1", reason="top-up"))
        run(asyncio.sleep(0.3))  # the behaviour under test: ~30 reads of the header
        assert _dead_man_switch_of(db) == "held"
        with sqlite3.connect(db) as other:  # as the CLI does: its connection does not reset it
            assert other.execute("SELECT COUNT(*) FROM ledger").fetchone()[0] == 1
        run(asyncio.sleep(0.05))
        assert run(store.wallet("t1")).balance_units == 100
    finally:
        run(store.close())
    assert _dead_man_switch_of(db) == "free"  # closed: nothing is left holding it


_STORE_BESIDE_OPENERS = """
import asyncio, subprocess, sys
from pathlib import Path
from gateway.store.sqlite import SqliteStore
from gateway.store.sqlite.checkpoint import WalLimits

OPENER = '''
import sqlite3, sys, time
for _ in range(200):
    connection = sqlite3.connect(sys.argv[1])
    connection.execute("SELECT COUNT(*) FROM ledger").fetchone()
    connection.close()
    time.sleep(0.005)
'''

async def main(db):
    store = SqliteStore(db, wal=WalLimits(interval=0.01))
    await store.open()
    await store.grant("t1", 100, entry_id="g1", reason="top-up")
    opener = subprocess.Popen([sys.executable, "-c", OPENER, str(db)])
    reads = 0
    while opener.poll() is None:
        assert (await store.wallet("t1")).balance_units == 100
        reads += 1
        await asyncio.sleep(0.001)
    await store.close()
    print(opener.returncode, reads)

asyncio.run(main(Path(sys.argv[1])))
"""


def test_a_store_outlives_another_process_opening_the_file_again_and_again(
    tmp_path: Path,
) -> None:
    """The failure itself, in a process of its own: a store reading while another process opens
    and closes the file 200 times (as `gateway` commands do beside a server). With the
    checkpointer dropping the locks, the store died of SIGBUS in 4 of 5 such runs."""
    done = subprocess.run(
        [sys.executable, "-c", _STORE_BESIDE_OPENERS, str(tmp_path / "gateway.db")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    opener_code, reads = map(int, done.stdout.split())
    assert opener_code == 0 and reads > 0


def test_a_schema_1_file_is_migrated(tmp_path: Path, run: Run) -> None:
    path = tmp_path / "g.db"
    old = sqlite3.connect(path, isolation_level=None)
    old.executescript(
        """
        CREATE TABLE holds (tenant TEXT, id TEXT, amount INTEGER, expires_at REAL,
                            PRIMARY KEY (tenant, id)) WITHOUT ROWID;
        CREATE TABLE rate_buckets (api_key_id TEXT PRIMARY KEY, r_level REAL, r_at REAL,
                                   t_level REAL, t_at REAL) WITHOUT ROWID;
        CREATE TABLE finished_calls (call_id TEXT PRIMARY KEY, expires_at REAL NOT NULL);
        CREATE TABLE idempotency (scope TEXT PRIMARY KEY, fingerprint TEXT NOT NULL,
                                  call_id TEXT NOT NULL, reply BLOB, expires_at REAL NOT NULL);
        CREATE INDEX idempotency_by_expiry ON idempotency (expires_at);
        PRAGMA user_version = 1;
        """
    )
    far = time.time() + 3600
    old.execute(
        "INSERT INTO idempotency VALUES"
        " ('done', 'fp-a', 'c0', ?, ?), ('busy', 'fp-a', 'c1', NULL, ?)",
        (msgspec.msgpack.encode(REPLY), far, far),
    )
    old.close()

    store = SqliteStore(path)
    run(store.open())
    try:
        replay = run(store.admit(admission("c2", idempotency=claim("done"))))
        assert replay.outcome is AdmissionOutcome.REPLAY and replay.reply == REPLY
        # The in-flight lease of the process that wrote schema 1 is gone with it.
        assert run(store.admit(admission("c3", idempotency=claim("busy")))).outcome is ADMITTED
    finally:
        run(store.close())
    check = sqlite3.connect(path)
    try:
        names = {row[0] for row in check.execute("SELECT name FROM sqlite_master")}
        assert names.isdisjoint({"holds", "rate_buckets", "finished_calls"})
        assert "idempotency_by_expiry" not in names
        assert check.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    finally:
        check.close()


def test_locked_database_is_store_unavailable(tmp_path: Path, run: Run) -> None:
    store = SqliteStore(tmp_path / "g.db", busy_timeout_ms=50)
    run(store.open())
    other = sqlite3.connect(tmp_path / "g.db", isolation_level=None)
    try:
        run(store.grant("t1", 100, entry_id="g1", reason="top-up"))
        adm = admission("c1", hold=10)
        other.execute("BEGIN IMMEDIATE")  # another process (the CLI) holds the write lock
        assert run(store.admit(adm)).outcome is ADMITTED  # admission needs no write lock
        with pytest.raises(StoreUnavailable) as caught:
            run(store.settle(settlement(adm, charge=5)))
        assert isinstance(caught.value.__cause__, sqlite3.OperationalError)
        assert run(store.wallet("t1")).held_units == 10  # a failed settlement changed nothing
        assert run(store.ping()) is True  # reads still work beside a writer (WAL)
        other.execute("ROLLBACK")
        assert run(store.settle(settlement(adm, charge=5))) == 95
        assert run(store.wallet("t1")).held_units == 0
    finally:
        other.close()
        run(store.close())


def test_ping_is_false_when_closed(tmp_path: Path, run: Run) -> None:
    store = SqliteStore(tmp_path / "g.db")
    assert run(store.ping()) is False
    run(store.open())
    assert run(store.ping()) is True
    run(store.close())
    assert run(store.ping()) is False


def test_a_schema_3_file_gains_the_model_and_prefix_columns(tmp_path: Path, run: Run) -> None:
    path = tmp_path / "g.db"
    old = sqlite3.connect(path, isolation_level=None)  # the two tables as schema 3 made them
    old.executescript(
        """
        CREATE TABLE api_keys (key_hash TEXT PRIMARY KEY, key_id TEXT NOT NULL UNIQUE,
                               tenant TEXT NOT NULL, created_at REAL NOT NULL, revoked_at REAL);
        CREATE TABLE wallets (tenant TEXT PRIMARY KEY, balance INTEGER NOT NULL,
                              seq INTEGER NOT NULL) WITHOUT ROWID;
        CREATE TABLE ledger (tenant TEXT NOT NULL, seq INTEGER NOT NULL, id TEXT NOT NULL,
                             kind TEXT NOT NULL, amount INTEGER NOT NULL,
                             balance_after INTEGER NOT NULL, created_at REAL NOT NULL,
                             reason TEXT NOT NULL, task_id TEXT, request_id TEXT,
                             PRIMARY KEY (tenant, seq), UNIQUE (tenant, id)) WITHOUT ROWID;
        INSERT INTO api_keys VALUES ('hash-old', 'key_old', 't1', 1.0, NULL);
        INSERT INTO wallets VALUES ('t1', 100, 1);
        INSERT INTO ledger VALUES ('t1', 1, 'g1', 'grant', 100, 100, 2.0, 'top-up', NULL, NULL);
        PRAGMA user_version = 3;
        """
    )
    old.close()

    store = SqliteStore(path)
    run(store.open())
    try:
        assert run(store.key_by_id("key_old")) == ApiKeyRecord(
            key_id="key_old", tenant="t1", created_at=1.0
        )
        [grant] = run(store.ledger("t1", limit=5)).entries
        assert (grant.id, grant.model, grant.balance_after_units) == ("g1", "", 100)
        adm = admission("c1", hold=10)
        run(store.admit(adm))
        run(store.settle(settlement(adm, charge=10, model="sim-chat-1")))
        page = run(store.ledger_range("t1", since=0.0, until=time.time() + 60, limit=5))
        assert [(e.id, e.model) for e in page.entries] == [("g1", ""), ("charge:c1", "sim-chat-1")]
        run(
            store.create_key(
                ApiKeyRecord(key_id="key_new", tenant="t1", created_at=3.0, prefix="gw-1234567"),
                "hash-new",
            )
        )
        assert [k.prefix for k in run(store.list_keys("t1"))] == ["", "gw-1234567"]
    finally:
        run(store.close())
    check = sqlite3.connect(path)
    try:
        assert check.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    finally:
        check.close()
