"""The `gateway` command as operators script it (a real subprocess, the embedded store)."""

from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path

import pytest

from tests.support import preloaded
from tests.support.redis_server import RedisServer
from tests.support.serial import STORE_FAULTS
from tests.support.stale_replica import stale_replica

ROOT = Path(__file__).resolve().parents[2]


def run(
    tmp_path: Path, *args: str, config: Path | None = None, store_url: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "GATEWAY_DATA_DIR": str(tmp_path / "data"),
        "GATEWAY_CONFIG": str(config or ROOT / "config" / "gateway.toml"),
    }
    env.pop("GATEWAY_STORE_URL", None)
    if store_url is not None:
        env["GATEWAY_STORE_URL"] = store_url
    return preloaded.run(args, env=env, cwd=tmp_path)


def test_keys_create_prints_only_the_key(tmp_path: Path) -> None:
    result = run(tmp_path, "keys", "create", "--tenant", "default")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 1 and lines[0].startswith("gw-") and len(lines[0]) > 40
    listed = run(tmp_path, "keys", "list", "--tenant", "default").stdout
    assert listed.count("key_") == 1
    assert lines[0] not in listed
    db = (tmp_path / "data" / "gateway.db").read_bytes()
    assert lines[0].encode() not in db


def test_keys_revoke_by_id_and_unknown(tmp_path: Path) -> None:
    run(tmp_path, "keys", "create", "--tenant", "default")
    key_id = run(tmp_path, "keys", "list", "--tenant", "default").stdout.split("\t")[0]
    assert run(tmp_path, "keys", "revoke", key_id).stdout.strip() == "revoked"
    unknown = run(tmp_path, "keys", "revoke", "key_doesnotexist")
    assert unknown.returncode == 1 and "no such key" in unknown.stderr


def test_keys_for_an_unknown_tenant_are_refused(tmp_path: Path) -> None:
    result = run(tmp_path, "keys", "create", "--tenant", "ghost")
    assert result.returncode == 2 and "ghost" in result.stderr and result.stdout == ""


def test_credits_grant_and_balance(tmp_path: Path) -> None:
    granted = run(
        tmp_path, "credits", "grant", "--tenant", "default", "--amount", "12.5", "--reason", "test"
    )
    assert granted.returncode == 0 and granted.stdout.strip() == "12.5000"
    again = run(
        tmp_path,
        "credits",
        "grant",
        "--tenant",
        "default",
        "--amount",
        "0.0001",
        "--reason",
        "test",
    )
    assert again.stdout.strip() == "12.5001"
    assert run(tmp_path, "credits", "balance", "--tenant", "default").stdout.strip() == "12.5001"
    bad = run(
        tmp_path, "credits", "grant", "--tenant", "default", "--amount", "1.23456", "--reason", "x"
    )
    assert bad.returncode == 2 and "four decimal places" in bad.stderr


def test_credits_grant_with_an_id_happens_once(tmp_path: Path) -> None:
    for _ in range(2):
        result = run(
            tmp_path,
            "credits",
            "grant",
            "--tenant",
            "default",
            "--amount",
            "7",
            "--reason",
            "invoice",
            "--id",
            "invoice-7",
        )
        assert result.stdout.strip() == "7.0000"


def test_config_check(tmp_path: Path) -> None:
    good = run(tmp_path, "config", "check")
    assert good.returncode == 0 and ": ok (" in good.stdout
    broken = tmp_path / "broken.toml"
    broken.write_text('[[models]]\nid = "x"\nprovider = "none"\ncapability = "chat"\n')
    bad = run(tmp_path, "config", "check", "--config", str(broken))
    assert bad.returncode == 2
    assert f"{broken}: models[0].provider: unknown provider 'none'" in bad.stderr


def test_serve_refuses_a_bad_config(tmp_path: Path) -> None:
    broken = tmp_path / "broken.toml"
    broken.write_text('[tenants.default]\nmodels = ["nothing"]\n')
    result = run(tmp_path, "serve", "--port", "1", config=broken)
    assert result.returncode == 2
    assert "tenants.default.models[0]: unknown model 'nothing'" in result.stderr


def test_unknown_tenants_are_refused_the_same_way_everywhere(tmp_path: Path) -> None:
    commands = [
        ("keys", "create", "--tenant", "ghost"),
        ("keys", "list", "--tenant", "ghost"),
        ("credits", "balance", "--tenant", "ghost"),
        ("credits", "grant", "--tenant", "ghost", "--amount", "1", "--reason", "x"),
        ("credits", "adjust", "--tenant", "ghost", "--amount", "-1", "--reason", "x"),
    ]
    for command in commands:
        result = run(tmp_path, *command)
        assert result.returncode == 2, command
        assert result.stdout == ""
        assert "tenant 'ghost' is not declared in" in result.stderr, command
        assert "known tenants: default" in result.stderr


def test_an_id_reused_with_another_amount_is_refused(tmp_path: Path) -> None:
    grant = ("credits", "grant", "--tenant", "default", "--reason", "invoice", "--id", "inv-9")
    assert run(tmp_path, *grant, "--amount", "9").stdout.strip() == "9.0000"
    other = run(tmp_path, *grant, "--amount", "10")
    assert other.returncode == 2
    assert "--id 'inv-9' was already used for 9.0000 credits (grant)" in other.stderr
    assert run(tmp_path, "credits", "balance", "--tenant", "default").stdout.strip() == "9.0000"


def test_adjustments_are_their_own_command(tmp_path: Path) -> None:
    run(tmp_path, "credits", "grant", "--tenant", "default", "--amount", "5", "--reason", "x")
    negative = run(
        tmp_path, "credits", "grant", "--tenant", "default", "--amount", "-2", "--reason", "x"
    )
    assert negative.returncode == 2 and "credits adjust" in negative.stderr
    adjusted = run(
        tmp_path, "credits", "adjust", "--tenant", "default", "--amount", "-2", "--reason", "fix"
    )
    assert adjusted.returncode == 0 and adjusted.stdout.strip() == "3.0000"


@STORE_FAULTS
@pytest.mark.parametrize("action", ["grant", "adjust"])
def test_an_unconfirmed_grant_is_retried_with_its_own_id_and_applies_once(
    tmp_path: Path, redis_binary: str, action: str
) -> None:
    """On a Redis primary whose replica is online but never catches up (it acknowledges a stale
    offset), the CLI's write stands but is not confirmed: the CLI retries it with the id it
    made, once applied."""
    tenant = f"t{uuid.uuid4().hex[:10]}"
    routing = tmp_path / "routing.toml"
    routing.write_text(
        (ROOT / "config" / "gateway.toml").read_text() + f"\n[tenants.{tenant}]\nmodels = ['*']\n"
    )
    entry = ("credits", action, "--tenant", tenant, "--amount", "7", "--reason", "x")
    with RedisServer.running(redis_binary, tmp_path / "redis") as primary:
        store = f"{primary.url}?wait_replicas=1&wait_ms=500"
        with stale_replica(primary.port):
            result = run(tmp_path, *entry, config=routing, store_url=store)
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == "7.0000"
        assert "may have been applied" in result.stderr and "Retrying with --id " in result.stderr
        made = result.stderr.split("Retrying with --id ", 1)[1].split(".", 1)[0]
        assert made.startswith("grant:" if action == "grant" else "adjust:")
        balance = run(
            tmp_path, "credits", "balance", "--tenant", tenant, config=routing, store_url=store
        )
        assert balance.stdout.strip() == "7.0000"
