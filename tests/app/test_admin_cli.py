"""The administration commands (`admin token`, `keys list --prefix`, `tenants list`, `usage`)
as operators script them: a real subprocess on the embedded store, the admin API's rules."""

from __future__ import annotations

import asyncio
import hashlib
import os
import subprocess
import time
from pathlib import Path

from gateway.store.base import RateLimits, TaskCreate
from gateway.store.sqlite import SqliteStore
from tests.store.support import admission, create_confirmed, settlement
from tests.support import preloaded

ROOT = Path(__file__).resolve().parents[2]


def run(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None, config: Path | None = None
) -> subprocess.CompletedProcess[str]:
    environment = {
        **os.environ,
        "GATEWAY_DATA_DIR": str(tmp_path / "data"),
        "GATEWAY_CONFIG": str(config or ROOT / "config" / "gateway.toml"),
    }
    for name in ("GATEWAY_STORE_URL", "GATEWAY_ADMIN_TOKEN", "GATEWAY_ADMIN_TOKEN_HASH"):
        environment.pop(name, None)
    environment.update(env or {})
    result = preloaded.run(args, env=environment, cwd=tmp_path)
    assert "Traceback" not in result.stderr, result.stderr
    return result


def test_admin_token_prints_the_token_and_its_hash_setting(tmp_path: Path) -> None:
    broken = tmp_path / "broken.toml"
    broken.write_text("not toml [")
    # It needs neither the settings nor the routing file: it works when both are wrong.
    result = run(
        tmp_path, "admin", "token", env={"GATEWAY_ADMIN_TOKEN_HASH": "nope"}, config=broken
    )
    assert result.returncode == 0, result.stderr
    [token] = result.stdout.splitlines()
    assert token.startswith("gwadm-") and len(token) > 40
    digest = hashlib.sha256(token.encode()).hexdigest()
    assert result.stderr.strip() == f"GATEWAY_ADMIN_TOKEN_HASH=sha256:{digest}"
    again = run(tmp_path, "admin", "token").stdout.strip()
    assert again != token

    # The printed line is a setting every command accepts.
    setting = result.stderr.strip().split("=", 1)[1]
    ok = run(tmp_path, "tenants", "list", env={"GATEWAY_ADMIN_TOKEN_HASH": setting})
    assert ok.returncode == 0, ok.stderr
    plain = run(tmp_path, "tenants", "list", env={"GATEWAY_ADMIN_TOKEN": token})
    assert plain.returncode == 0, plain.stderr


def test_a_malformed_admin_token_setting_stops_every_command_in_one_line(tmp_path: Path) -> None:
    secret = "gw-not-an-admin-token-but-a-secret-all-the-same"
    cases = [
        ({"GATEWAY_ADMIN_TOKEN_HASH": "sha256:1234"}, "GATEWAY_ADMIN_TOKEN_HASH"),
        ({"GATEWAY_ADMIN_TOKEN_HASH": "md5:" + "a" * 64}, "GATEWAY_ADMIN_TOKEN_HASH"),
        ({"GATEWAY_ADMIN_TOKEN": secret}, "GATEWAY_ADMIN_TOKEN"),
        ({"GATEWAY_ADMIN_TOKEN": "gwadm-short"}, "GATEWAY_ADMIN_TOKEN"),
        (
            {
                "GATEWAY_ADMIN_TOKEN": "gwadm-" + "a" * 40,
                "GATEWAY_ADMIN_TOKEN_HASH": "sha256:" + "0" * 64,
            },
            "name different tokens",
        ),
    ]
    for env, expected in cases:
        for command in (("tenants", "list"), ("serve", "--port", "1")):
            result = run(tmp_path, *command, env=env)
            assert result.returncode == 2, (env, result.stderr)
            assert len(result.stderr.strip().splitlines()) == 1, result.stderr
            assert expected in result.stderr and result.stdout == ""
            assert secret not in result.stderr


def test_keys_list_finds_keys_by_prefix_or_id_across_tenants(tmp_path: Path) -> None:
    first = run(tmp_path, "keys", "create", "--tenant", "default").stdout.strip()
    second = run(tmp_path, "keys", "create", "--tenant", "default").stdout.strip()
    everything = run(tmp_path, "keys", "list")
    assert everything.returncode == 0, everything.stderr
    rows = [line.split("\t") for line in everything.stdout.splitlines()]
    assert len(rows) == 2 and all(len(row) == 13 for row in rows)
    assert all(row[5:] == ["-"] * 8 for row in rows)  # no limits: every new column "-"
    assert {row[4] for row in rows} == {first[:10], second[:10]}
    assert {row[3] for row in rows} == {"default"}
    assert first not in everything.stdout and second not in everything.stdout

    by_prefix = run(tmp_path, "keys", "list", "--prefix", first[:10]).stdout.splitlines()
    [row] = [line.split("\t") for line in by_prefix]
    assert row[4] == first[:10] and row[2] == "-"
    by_id = run(tmp_path, "keys", "list", "--prefix", row[0], "--tenant", "default")
    assert by_id.stdout.splitlines() == by_prefix
    assert run(tmp_path, "keys", "list", "--prefix", "gw-nothing").stdout == ""

    assert run(tmp_path, "keys", "revoke", first).stdout.strip() == "revoked"  # by the key
    revoked = run(tmp_path, "keys", "list", "--prefix", first[:10]).stdout.split("\t")
    assert revoked[2] != "-"
    ghost = run(tmp_path, "keys", "list", "--tenant", "ghost", "--prefix", "gw-")
    assert ghost.returncode == 2 and "tenant 'ghost' is not declared" in ghost.stderr


def test_tenants_list_shows_balance_and_active_keys(tmp_path: Path) -> None:
    run(tmp_path, "credits", "grant", "--tenant", "default", "--amount", "12.5", "--reason", "x")
    key = run(tmp_path, "keys", "create", "--tenant", "default").stdout.strip()
    run(tmp_path, "keys", "create", "--tenant", "default")
    run(tmp_path, "keys", "revoke", key)
    result = run(tmp_path, "tenants", "list")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["default\t12.5000\t1"]


def test_credit_mistakes_name_the_option_and_exit_2(tmp_path: Path) -> None:
    grant = ("credits", "grant", "--tenant", "default", "--amount", "1")
    reserved = run(tmp_path, *grant, "--reason", "x", "--id", "debit:task_1")
    assert reserved.returncode == 2 and reserved.stderr.startswith("gateway: --id: ")
    blank = run(tmp_path, *grant, "--reason", "  ")
    assert blank.returncode == 2 and blank.stderr.startswith("gateway: --reason: ")
    zero = run(
        tmp_path, "credits", "adjust", "--tenant", "default", "--amount", "0", "--reason", "x"
    )
    assert zero.returncode == 2 and "--amount: must not be zero" in zero.stderr
    assert run(tmp_path, "credits", "balance", "--tenant", "default").stdout.strip() == "0.0000"


def _spend(data_dir: Path) -> None:
    """What a serving gateway would have written: two chat charges and a refunded task."""

    async def write() -> None:
        store = SqliteStore(data_dir / "gateway.db")
        await store.open()
        try:
            await store.grant("default", 10_000_000, entry_id="g1", reason="top-up")
            for call_id in ("c1", "c2"):
                adm = admission(call_id, tenant="default", hold=1000)
                await store.admit(adm)
                await store.settle(settlement(adm, charge=1500, model="sim-chat-1"))
            await create_confirmed(
                store,
                TaskCreate(
                    task_id="task_1",
                    tenant="default",
                    api_key_id="k1",
                    request_id="req_1",
                    limits=RateLimits(requests_per_minute=100),
                    capability="text_to_image",
                    model="auto",
                    resolved_model="image-model-2",
                    price_units=500_000,
                    input={"prompt": "a fox"},
                    metadata={},
                ),
            )
            await store.request_cancel("default", "task_1")
        finally:
            await store.close()

    asyncio.run(write())


def test_usage_prints_one_row_per_tenant_model_and_day(tmp_path: Path) -> None:
    assert run(tmp_path, "usage").stdout == ""  # nothing yet; grants are not usage
    _spend(tmp_path / "data")
    today = time.strftime("%Y-%m-%d", time.gmtime())
    result = run(tmp_path, "usage")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        f"default\timage-model-2\t{today}\t0\t1\t50.0000\t50.0000\t0.0000",
        f"default\tsim-chat-1\t{today}\t2\t0\t0.3000\t0.0000\t0.3000",
    ]
    ranged = run(tmp_path, "usage", "--from", today, "--to", today, "--tenant", "default")
    assert ranged.stdout == result.stdout
    assert run(tmp_path, "usage", "--from", "2020-01-01", "--to", "2020-01-02").stdout == ""

    backwards = run(tmp_path, "usage", "--from", "2026-02-01", "--to", "2026-01-01")
    assert backwards.returncode == 2 and "--from: must not be after 'to'" in backwards.stderr
    bad = run(tmp_path, "usage", "--to", "tomorrow")
    assert bad.returncode == 2 and bad.stderr.startswith("gateway: --to: ")
    ghost = run(tmp_path, "usage", "--tenant", "ghost")
    assert ghost.returncode == 2 and "tenant 'ghost' is not declared" in ghost.stderr


def test_keys_create_update_rotate_with_limits_and_list_them(tmp_path: Path) -> None:
    created = run(
        tmp_path,
        *("keys", "create", "--tenant", "default", "--name", "team-a"),
        *("--models", "sim-chat-1,sim-chat-pro", "--budget", "25", "--period", "month"),
        *("--expires", "2099-12-31T00:00:00Z", "--rpm", "10", "--tpm", "5000"),
    )
    assert created.returncode == 0, created.stderr
    [key] = created.stdout.splitlines()  # only the key
    [row] = [line.split("\t") for line in run(tmp_path, "keys", "list").stdout.splitlines()]
    assert row[5:] == [
        "team-a",
        "sim-chat-1,sim-chat-pro",
        "25.0000",
        "month",
        "0.0000",
        "2099-12-31T00:00:00Z",
        "10",
        "5000",
    ]

    updated = run(tmp_path, "keys", "update", row[0], "--budget", "none", "--rpm", "none")
    assert updated.returncode == 0 and updated.stdout == "", updated.stderr
    [after] = [line.split("\t") for line in run(tmp_path, "keys", "list").stdout.splitlines()]
    assert after[7:10] == ["-", "-", "-"] and after[11:] == ["-", "5000"]

    rotated = run(tmp_path, "keys", "rotate", row[0], "--grace", "60")
    assert rotated.returncode == 0, rotated.stderr
    [new_key] = rotated.stdout.splitlines()
    assert new_key != key and new_key.startswith("gw-")
    [last] = [line.split("\t") for line in run(tmp_path, "keys", "list").stdout.splitlines()]
    assert last[0] == row[0] and last[4] == new_key[:10]


def test_bad_key_flags_exit_2_with_one_line_naming_the_flag(tmp_path: Path) -> None:
    base = ("keys", "create", "--tenant", "default")
    cases = {
        ("--expires", "2020-01-01T00:00:00Z"): "--expires",
        ("--expires", "tomorrow"): "--expires",
        ("--budget", "25"): "--period",
        ("--budget", "1.23456", "--period", "day"): "--budget",
        ("--budget", "5", "--period", "year"): "--period",
        ("--rpm", "lots"): "--rpm",
        ("--tpm", "999999999999"): "--tpm",
        ("--models", "no-such-model"): "--models",
        ("--name", "x" * 65): "--name",
    }
    for flags, named in cases.items():
        result = run(tmp_path, *base, *flags)
        assert result.returncode == 2, (flags, result.stderr)
        assert result.stdout == ""
        [line] = result.stderr.splitlines()
        assert line.startswith(f"error: {named}: "), (flags, line)
    assert run(tmp_path, "keys", "list").stdout == ""  # nothing was created
    grace = run(tmp_path, "keys", "rotate", "key_nope", "--grace", "soon")
    assert grace.returncode == 2 and grace.stderr.startswith("error: --grace: ")
