"""A `gateway serve --processes N` as tests meet it: its serving processes and what each logged.

The supervisor logs `process_started` (and `process_exited`, `process_stopped`) with the
serving process's pid in `process`; every line a serving process writes carries its own `pid`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests.support.gateway_process import GatewayProcess, start_gateway
from tests.support.waiting import wait_until

__all__ = [
    "alive",
    "events",
    "identity",
    "serving_pids",
    "start_processes",
    "wait_for_events",
]


def events(gateway: GatewayProcess, name: str | None = None) -> list[dict[str, Any]]:
    """The JSON log lines (the banner's plain lines left out), of one event if `name`."""
    found = []
    for line in gateway.logs().splitlines():
        if not line.startswith("{"):
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:  # the last line, half written
            continue
        if name is None or record.get("event") == name:
            found.append(record)
    return found


def serving_pids(gateway: GatewayProcess) -> set[int]:
    """The serving processes the supervisor started and has not seen end."""
    started = {record["process"] for record in events(gateway, "process_started")}
    ended = {
        record["process"]
        for record in events(gateway)
        if record.get("event") in ("process_exited", "process_stopped", "process_start_failed")
    }
    return started - ended


def wait_for_events(
    gateway: GatewayProcess, name: str, pids: set[int], **fields: Any
) -> list[dict[str, Any]]:
    """Waits until each of `pids` has logged `name` with `fields`; those lines."""

    def matching() -> list[dict[str, Any]]:
        return [
            record
            for record in events(gateway, name)
            if record.get("pid") in pids and all(record.get(k) == v for k, v in fields.items())
        ]

    return wait_until(
        matching,
        lambda found: {record["pid"] for record in found} >= pids,
        what=f"{name} {fields or ''} from each of {sorted(pids)}",
    )


def start_processes(
    workdir: Path,
    config_text: str,
    store_url: str,
    *,
    processes: int = 2,
    extra_env: dict[str, str] | None = None,
    launcher: Sequence[str] = (),
) -> GatewayProcess:
    """`gateway serve` with GATEWAY_PROCESSES on `store_url`, once every process has loaded
    its routing file; its private metrics folder goes under `workdir` (TMPDIR). `launcher`:
    as `start_gateway`'s."""
    tmp = workdir / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    env = {"GATEWAY_PROCESSES": str(processes), "TMPDIR": str(tmp), **(extra_env or {})}
    gateway = start_gateway(
        workdir, config_text, store_url=store_url, extra_env=env, launcher=launcher
    )
    pids = wait_until(
        lambda: serving_pids(gateway),
        lambda found: len(found) == processes,
        what=f"{processes} serving processes",
    )
    wait_for_events(gateway, "config_loaded", pids)
    return gateway


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command name (state first), None if gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except (FileNotFoundError, ProcessLookupError):
        return None


def identity(pid: int, parent: int) -> tuple[int, str]:
    """`pid` with its start time, after checking it is a child of `parent`: a pid read from a
    log is only signalled or watched as this one process, never one that reused the number."""
    fields = _stat(pid)
    assert fields is not None, f"process {pid} is gone"
    assert int(fields[1]) == parent, f"process {pid} is not a child of {parent}"
    return pid, fields[19]  # starttime, in clock ticks since boot


def alive(process: tuple[int, str]) -> bool:
    """Whether the process `identity` named has not ended (a zombie counts as ended)."""
    pid, started = process
    fields = _stat(pid)
    return fields is not None and fields[0] != "Z" and fields[19] == started
