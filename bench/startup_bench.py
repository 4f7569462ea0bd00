#!/usr/bin/env python3
"""Start-up of `gateway serve`, repeated: seconds and CPU until `/v1/health` answers 200.

One start is a noisy sample (bench/run.sh takes one per backend); this takes `--runs` of each
tree given, alternating them, on the embedded default (SQLite, simulator providers) or on a
routing file given with `--config`, and prints the medians and the spread.

    bench/startup_bench.py --runs 15 --tree before=/tmp/old-checkout --tree after=.

Each tree runs as `python -m gateway.app.cli serve` with that tree first on PYTHONPATH, in the
interpreter given by `--python` (a virtualenv with the gateway's dependencies only, as a
deployment has). CPU is the process's user + system time when it answered, read from /proc.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks  # utime, stime


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def one_start(python: str, tree: Path, config: str | None) -> tuple[float, float]:
    """(seconds, CPU seconds) from the fork until /v1/health answers 200."""
    port = _free_port()
    with tempfile.TemporaryDirectory() as data:
        env = {**os.environ, "PYTHONPATH": str(tree), "GATEWAY_DATA_DIR": data}
        env["GATEWAY_PORT"] = str(port)
        env.pop("GATEWAY_STORE_URL", None)
        if config:
            env["GATEWAY_CONFIG"] = config
        else:
            env.pop("GATEWAY_CONFIG", None)
        url = f"http://127.0.0.1:{port}/v1/health"
        started = time.perf_counter()
        process = subprocess.Popen(
            [python, "-m", "gateway.app.cli", "serve"],
            cwd=tree,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            while not _healthy(url):
                if process.poll() is not None:
                    raise RuntimeError(f"{tree}: serve exited with {process.returncode}")
                if time.perf_counter() - started > 30:
                    raise RuntimeError(f"{tree}: no health answer within 30 s")
                time.sleep(0.005)
            seconds = time.perf_counter() - started
            return seconds, _cpu_seconds(process.pid)
        finally:
            process.terminate()
            process.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--python", default=os.environ.get("VENV", "/tmp/gwvenv") + "/bin/python")
    parser.add_argument("--config", help="a routing file (default: the embedded default's)")
    parser.add_argument("--tree", action="append", required=True, help="label=path")
    args = parser.parse_args()
    trees = [(label, Path(path).resolve()) for label, path in (t.split("=", 1) for t in args.tree)]
    seen: dict[str, list[tuple[float, float]]] = {label: [] for label, _ in trees}
    for _ in range(args.runs):
        for label, tree in trees:
            seen[label].append(one_start(args.python, tree, args.config))
    for label, samples in seen.items():
        walls = sorted(s for s, _ in samples)
        cpus = sorted(c for _, c in samples)
        print(
            f"{label}: start-up median {statistics.median(walls):.3f} s "
            f"({walls[0]:.3f}-{walls[-1]:.3f}), CPU median {statistics.median(cpus):.3f} s "
            f"({cpus[0]:.3f}-{cpus[-1]:.3f}), {len(samples)} starts"
        )


if __name__ == "__main__":
    main()
