"""Behind Sentinel with one sentinel unreachable, a primary killed and left dead: the gateway
follows the promotion and keeps serving, the books exact afterwards.

A primary, a replica and three sentinels (tests/support/redis_sentinel.py, `appendfsync
always`), and one `gateway serve --processes 2` whose store URL names the three sentinels, the
first by an address whose route drops every packet (tests/security/sandbox.py, `dropped`): a
partition between the gateway and that sentinel, a slow failure (a connect that hangs until its
timeout), not a refused one. The sentinels themselves see each other, so they still fail the
primary over. Everything runs in a network namespace of its own, the test's own calls too.

The primary is killed (`kill -9`) under a steady mix of chats and creates, left dead
`DOWN_SECONDS`, then started again (it rejoins as the new primary's replica). The test prints
the success share and p50/p99 latency per phase and asserts: at least 99 % successes from
`SETTLE_SECONDS` after the promotion until the return, and after the return; `/v1/health`
saying the primary's durability is reduced while it has no replica; every 2xx charged once,
nothing charged behind a retryable failure, the wallet equal to its ledger, nothing held.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from tests.e2e.availability_load import Run, Timeline, check_tenant_books, run_fault
from tests.e2e.test_cluster_availability import (
    DOWN_SECONDS,
    GOAL,
    SETTLE_SECONDS,
    STEADY_SECONDS,
    WAIT_OPTIONS,
    reported_reduced,
)
from tests.security.sandbox import Sandbox, require_sandbox
from tests.support.gateway_process import ROOT, GatewayProcess
from tests.support.process_group import serving_pids, start_processes
from tests.support.redis_sentinel import SERVICE, LocalSentinel
from tests.support.routing_files import MEDIA_CONFIG
from tests.support.serial import STORE_FAULTS
from tests.support.waiting import wait_until

pytestmark = STORE_FAULTS

UNREACHABLE = "198.18.0.7"
"""The address the gateway is given for one sentinel: packets to it are dropped."""
TENANT = "default"


def _cli(gateway: GatewayProcess, launcher: Sequence[str], *args: str) -> str:
    """`gateway ARGS` inside the namespace, with the gateway's settings; its output."""
    done = subprocess.run(
        [*launcher, sys.executable, "-m", "gateway.app.cli", *args],
        env=gateway.env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, f"gateway {' '.join(args)}: {done.stderr}"
    return done.stdout.strip()


def _scenario(box: Sandbox, redis_binary: str, workdir: Path) -> Run:
    with LocalSentinel.running(redis_binary, workdir / "sentinel", durable=True) as sentinel:
        first, *others = sentinel.sentinel_ports
        nodes = [f"{UNREACHABLE}:{first}", *(f"127.0.0.1:{port}" for port in others)]
        url = f"redis+sentinel://{','.join(nodes)}/{SERVICE}{WAIT_OPTIONS}"
        gateway = start_processes(
            workdir / "gw", MEDIA_CONFIG, url, processes=2, launcher=box.launcher
        )
        try:
            assert len(serving_pids(gateway)) == 2
            key = _cli(gateway, box.launcher, "keys", "create", "--tenant", TENANT)
            grant = ["credits", "grant", "--tenant", TENANT, "--amount", "100000"]
            _cli(gateway, box.launcher, *grant, "--reason", "test")
            primary = sentinel.primary

            def fault(timeline: Timeline) -> None:
                before = sentinel.primary_port()
                killed = timeline.mark("election")
                primary.kill()
                wait_until(
                    sentinel.primary_port,
                    lambda port: port != before,
                    timeout=30,
                    what="a new primary",
                )
                timeline.mark("promoted")
                time.sleep(max(0.0, killed + DOWN_SECONDS - time.monotonic()))
                timeline.mark("returned")
                primary.start()  # back, as the new primary's replica
                wait_until(sentinel.replicated, timeout=30, what="the new primary's replica")

            title = f"primary killed, a sentinel unreachable (tenant {TENANT})"
            run = run_fault(gateway, {TENANT: key}, title, fault, steady_seconds=STEADY_SECONDS)
            check_tenant_books(gateway, run.loads[0])
            return run
        finally:
            gateway.stop()


def test_a_primary_killed_with_a_sentinel_unreachable_costs_the_election_only(
    redis_binary: str, tmp_path: Path
) -> None:
    require_sandbox()
    with Sandbox.start(dropped=[UNREACHABLE]) as box:
        run = box.run(_scenario, box, redis_binary, tmp_path)
    returned = run.timeline.at("returned")
    problems = []
    windows = [
        ("after the promotion", run.timeline.at("promoted") + SETTLE_SECONDS, returned),
        ("after the return", returned + SETTLE_SECONDS, run.end),
    ]
    for what, since, until in windows:
        share, count = run.share(TENANT, since, until)
        if not count or share < GOAL:
            problems.append(f"{share:.1%} of {count} calls {what}")
    if not reported_reduced(run, "promoted"):
        problems.append("/v1/health never said durability_reduced after the promotion")
    assert not problems, "\n".join([*problems, run.table()])
