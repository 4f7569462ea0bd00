#!/usr/bin/env python3
"""Two gateway trees served at the same time against one mock upstream: CPU per request each.

This machine's speed drifts by a third within minutes (its two cores are shared), so a
before/after taken one after the other measures the drift. Here both trees serve the same load
at once, on the same mock, and swap their launch order every round; what differs between them
is the code.

    bench/side_by_side.py --tree before=/tmp/sbs-main --tree after=. --rounds 3

Each tree is a checkout of this repository (run from its own source: it goes first on
`PYTHONPATH`, with this interpreter). Per round and store (`sqlite`, and `redis` on a private
redis-server, one database per tree), both trees' `gateway serve` start at once (one process
each, task workers off, every other feature on: auth, limits, holds, settlement, metrics, the
access line at `info` to a file), then each workload runs `wrk` against both at once:

- `chat`: `POST /v1/chat/completions`, non-streamed (sqlite and redis);
- `stream`: the same with `"stream": true`, 20 chunks a stream (sqlite);
- `messages`: `POST /v1/messages` translated to the OpenAI mock (sqlite);
- `task`: `POST /v1/images/generations` on the simulator, creation only (sqlite);
- `latency`: `chat` at one connection, beside the mock served directly at one connection
  (added p50 and p99 = the gateway's minus the mock's, sqlite).

CPU per request is the gateway process's user + system time over the measured run (from
/proc) divided by the requests wrk completed; the mock's own CPU per upstream call is printed
as the yardstick (two gateways feed it, so it is its time over both sides' requests).
Start-up is process start to the first `/v1/health` 200 (both starting at once) and RSS is read
idle and after the load. Everything listens on 127.0.0.1, on free ports; every process started
here is stopped by its id at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")
GATEWAY = [
    sys.executable,
    "-P",
    "-c",
    "import sys; from gateway.app.cli import main; sys.exit(main())",
]
"""The `gateway` command of the tree first on PYTHONPATH, run by this interpreter (`-P`: `-c`
would put the working directory, whichever tree that is, before PYTHONPATH)."""

CHAT_BODY = (
    '{"model":"bench-model","messages":[{"role":"system","content":"You are a helpful '
    'assistant."},{"role":"user","content":"Say hello in one short sentence."}],"max_tokens":16}'
)
STREAM_BODY = CHAT_BODY[:-1] + ',"stream":true}'
MESSAGES_BODY = (
    '{"model":"bench-model","system":"You are a helpful assistant.","messages":[{"role":"user",'
    '"content":"Say hello in one short sentence."}],"max_tokens":16}'
)
TASK_BODY = (
    '{"model":"auto","prompt":"a lighthouse at dusk","quality":"standard",'
    '"aspect_ratio":"16:9","n":2,"metadata":{"run":"bench"}}'
)
TASK_MODEL = """
[providers.sim]
kind = "simulator"

[[models]]
id = "image-model-2"
provider = "sim"
capabilities = ["text_to_image", "image_to_image"]
pricing = { credits_per_image = { standard = 50, hd = 300 } }

[routing.auto]
text_to_image = ["image-model-2"]
"""


@dataclass(frozen=True)
class Workload:
    name: str
    store: str
    path: str
    body: str
    upstream: bool = True
    """The mock answers each request (its CPU per call is the yardstick)."""
    connections: int | None = None
    """None: --connections."""


WORKLOADS = {
    "chat": Workload("chat", "sqlite", "/v1/chat/completions", CHAT_BODY),
    "chat-redis": Workload("chat-redis", "redis", "/v1/chat/completions", CHAT_BODY),
    "stream": Workload("stream", "sqlite", "/v1/chat/completions", STREAM_BODY),
    "messages": Workload("messages", "sqlite", "/v1/messages", MESSAGES_BODY),
    "task": Workload("task", "sqlite", "/v1/images/generations", TASK_BODY, upstream=False),
    "latency": Workload("latency", "sqlite", "/v1/chat/completions", CHAT_BODY, connections=1),
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _tree_pids(pid: int) -> list[int]:
    """`pid` and its descendants, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, ()))
    return out


def cpu_seconds(pid: int) -> float:
    """User + system CPU of `pid` and its descendants."""
    total = 0
    for p in _tree_pids(pid):
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / CLK_TCK


def rss_mib(pid: int) -> float:
    total = 0
    for p in _tree_pids(pid):
        try:
            total += int(Path(f"/proc/{p}/statm").read_text().split()[1]) * PAGE
        except OSError:
            continue
    return total / 2**20


@dataclass
class Side:
    label: str
    tree: Path
    results: dict[str, list[dict[str, float]]] = field(default_factory=dict)

    def add(self, key: str, row: dict[str, float]) -> None:
        self.results.setdefault(key, []).append(row)


class Bench:
    def __init__(self, args: argparse.Namespace, work: Path) -> None:
        self.args = args
        self.work = work
        self.procs: list[subprocess.Popen[bytes]] = []
        self.mock_port = free_port()
        self.redis_port = free_port()
        self.config = work / "routing.toml"
        template = (HERE / "gateway-bench.toml").read_text()
        self.config.write_text(
            template.replace("127.0.0.1:8001", f"127.0.0.1:{self.mock_port}") + TASK_MODEL
        )
        self.mock: subprocess.Popen[bytes] | None = None
        self.mock_rows: dict[str, list[float]] = {}
        self.direct: list[dict[str, float]] = []

    def spawn(
        self, argv: list[str], log: Path, env: dict[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(
            argv, stdout=log.open("wb"), stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
        self.procs.append(proc)
        return proc

    def stop(self, proc: subprocess.Popen[bytes]) -> None:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if proc in self.procs:
            self.procs.remove(proc)

    def stop_all(self) -> None:
        for proc in list(reversed(self.procs)):
            self.stop(proc)

    def start_mock(self) -> subprocess.Popen[bytes]:
        proc = self.spawn(
            [sys.executable, str(HERE / "mock_upstream.py"), "--port", str(self.mock_port)],
            self.work / "mock.log",
        )
        wait_http(f"http://127.0.0.1:{self.mock_port}/health", 20)
        return proc

    def start_redis(self) -> None:
        self.spawn(
            [
                "redis-server",
                "--bind",
                "127.0.0.1",
                "--port",
                str(self.redis_port),
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.work),
            ],
            self.work / "redis.log",
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.redis_port)) == 0:
                    return
            time.sleep(0.05)
        raise SystemExit("redis-server did not start")

    def gateway_env(self, side: Side, store: str, index: int, rnd: int) -> dict[str, str]:
        data = self.work / f"{side.label}-{store}-{rnd}"
        data.mkdir(exist_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("GATEWAY_")}
        env.update(
            PYTHONPATH=str(side.tree),
            GATEWAY_CONFIG=str(self.config),
            GATEWAY_DATA_DIR=str(data),
            GATEWAY_WORKERS="0",
            GATEWAY_LOG_LEVEL="info",
        )
        if store == "redis":
            env["GATEWAY_STORE_URL"] = f"redis://127.0.0.1:{self.redis_port}/{index + 1}"
        return env

    def prepare(self, env: dict[str, str]) -> str:
        """A fresh store: flushed (Redis), a key and credits for `default`; the key."""
        if "GATEWAY_STORE_URL" in env:
            db = env["GATEWAY_STORE_URL"].rsplit("/", 1)[1]
            subprocess.run(
                ["redis-cli", "-p", str(self.redis_port), "-n", db, "flushdb"],
                check=True,
                capture_output=True,
            )
        gw = GATEWAY
        key = (
            subprocess.run(
                [*gw, "keys", "create", "--tenant", "default"],
                env=env,
                check=True,
                capture_output=True,
                text=True,
            )
            .stdout.strip()
            .splitlines()[-1]
        )
        subprocess.run(
            [
                *gw,
                "credits",
                "grant",
                "--tenant",
                "default",
                "--amount",
                "1000000000",
                "--reason",
                "bench",
            ],
            env=env,
            check=True,
            capture_output=True,
        )
        return key


def wait_http(url: str, timeout: float) -> float:
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        try:
            with urllib.request.urlopen(url, timeout=1) as r:
                if r.status == 200:
                    return time.monotonic() - start
        except OSError:
            pass
        time.sleep(0.01)
    raise SystemExit(f"{url} did not answer 200 within {timeout} s")


def wait_all(ports: list[int], started: float, timeout: float) -> list[float]:
    """Seconds from `started` until each port's `/v1/health` answered 200 (polled together)."""
    up: dict[int, float] = {}
    while len(up) < len(ports):
        for port in ports:
            if port in up:
                continue
            try:
                url = f"http://127.0.0.1:{port}/v1/health"
                with urllib.request.urlopen(url, timeout=1) as r:
                    if r.status == 200:
                        up[port] = time.monotonic() - started
            except OSError:
                pass
        if time.monotonic() - started > timeout:
            raise SystemExit(f"a gateway did not answer /v1/health within {timeout} s")
        time.sleep(0.01)
    return [up[port] for port in ports]


def wrk(url: str, body: str, key: str, connections: int, seconds: float) -> subprocess.Popen[str]:
    env = dict(os.environ, BENCH_BODY=body, BENCH_API_KEY=key)
    return subprocess.Popen(
        [
            "wrk",
            "-t1",
            f"-c{connections}",
            f"-d{seconds:g}s",
            "--timeout",
            "10s",
            "-s",
            str(HERE / "wrk_chat.lua"),
            url,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )


def wrk_result(proc: subprocess.Popen[str]) -> dict[str, float]:
    out, _ = proc.communicate()
    for line in out.splitlines():
        if line.startswith("WRKJSON "):
            return json.loads(line[8:])  # type: ignore[no-any-return]
    raise SystemExit(f"wrk printed no result:\n{out}")


def run_round(bench: Bench, sides: list[Side], rnd: int, workloads: list[Workload]) -> None:
    args = bench.args
    order = sides if rnd % 2 == 0 else list(reversed(sides))
    for store in ("sqlite", "redis"):
        todo = [w for w in workloads if w.store == store]
        if not todo:
            continue
        envs = [bench.gateway_env(s, store, sides.index(s), rnd) for s in order]
        keys = [bench.prepare(env) for env in envs]
        ports = [free_port() for _ in order]
        started = time.monotonic()
        gws = []
        for side, env, port in zip(order, envs, ports, strict=True):
            gws.append(
                bench.spawn(
                    [*GATEWAY, "serve", "--host", "127.0.0.1", "--port", str(port)],
                    bench.work / f"{side.label}-{store}-{rnd}.log",
                    env,
                )
            )
        for side, seconds in zip(order, wait_all(ports, started, 30), strict=True):
            side.add(f"startup-{store}", {"seconds": seconds})
        for port, key in zip(ports, keys, strict=True):
            wrk_result(wrk(f"http://127.0.0.1:{port}/v1/chat/completions", CHAT_BODY, key, 1, 1))
        time.sleep(1)
        for side, gw in zip(order, gws, strict=True):
            side.add(f"rss-idle-{store}", {"mib": rss_mib(gw.pid)})
        for w in todo:
            conns = w.connections or args.connections
            if w.name == "latency":
                direct = wrk(
                    f"http://127.0.0.1:{bench.mock_port}{w.path}", w.body, "", 1, args.duration
                )
                bench.direct.append(wrk_result(direct))
            urls = [f"http://127.0.0.1:{p}{w.path}" for p in ports]
            warm = [wrk(u, w.body, k, conns, args.warmup) for u, k in zip(urls, keys, strict=True)]
            for p in warm:
                wrk_result(p)
            mock_pid = bench.mock.pid if bench.mock is not None else 0
            mock0 = cpu_seconds(mock_pid)
            cpu0 = [cpu_seconds(g.pid) for g in gws]
            runs = [
                wrk(u, w.body, k, conns, args.duration) for u, k in zip(urls, keys, strict=True)
            ]
            results = [wrk_result(p) for p in runs]
            cpu1 = [cpu_seconds(g.pid) for g in gws]
            mock1 = cpu_seconds(mock_pid)
            total = 0
            for side, r, c0, c1 in zip(order, results, cpu0, cpu1, strict=True):
                n = r["requests"]
                total += n
                errors = r["err_status"] + r["err_read"] + r["err_timeout"] + r["err_connect"]
                side.add(
                    w.name,
                    {
                        "cpu_ms": (c1 - c0) * 1000 / n if n else float("nan"),
                        "rps": r["rps"],
                        "p50_ms": r["p50_ms"],
                        "p99_ms": r["p99_ms"],
                        "errors": errors,
                    },
                )
            if w.upstream and total:
                bench.mock_rows.setdefault(w.name, []).append((mock1 - mock0) * 1000 / total)
        for side, gw in zip(order, gws, strict=True):
            side.add(f"rss-after-{store}", {"mib": rss_mib(gw.pid)})
            bench.stop(gw)


def med(values: list[float]) -> str:
    if not values:
        return "-"
    m = statistics.median(values)
    return f"{m:.3f} ({min(values):.3f}-{max(values):.3f})" if len(values) > 1 else f"{m:.3f}"


def report(bench: Bench, sides: list[Side], workloads: list[Workload]) -> None:
    a, b = sides
    print(
        f"\nCPU per request, ms: median (range) of {bench.args.rounds} rounds, "
        f"c={bench.args.connections}, {bench.args.duration:g} s a run\n"
    )
    print(
        f"| workload | {a.label} | {b.label} | change | req/s {a.label} / {b.label} "
        "| errors | mock per call |"
    )
    print("|---|---:|---:|---:|---|---:|---:|")
    for w in workloads:
        ra, rb = a.results.get(w.name, []), b.results.get(w.name, [])
        ca = [r["cpu_ms"] for r in ra]
        cb = [r["cpu_ms"] for r in rb]
        change = (statistics.median(cb) / statistics.median(ca) - 1) * 100 if ca and cb else 0.0
        rps = (
            f"{statistics.median([r['rps'] for r in ra]):,.0f} / "
            f"{statistics.median([r['rps'] for r in rb]):,.0f}"
        )
        errors = int(sum(r["errors"] for r in ra + rb))
        mock = med(bench.mock_rows.get(w.name, []))
        print(f"| {w.name} | {med(ca)} | {med(cb)} | {change:+.0f} % | {rps} | {errors} | {mock} |")
    if bench.direct:
        d50 = statistics.median([r["p50_ms"] for r in bench.direct])
        d99 = statistics.median([r["p99_ms"] for r in bench.direct])
        print(
            f"\nAdded latency at c=1, chat on SQLite (gateway minus the mock served directly, "
            f"{d50:.3f} / {d99:.3f} ms), ms:\n"
        )
        for s in sides:
            rows = s.results.get("latency", [])
            p50 = statistics.median([r["p50_ms"] for r in rows]) - d50
            p99 = statistics.median([r["p99_ms"] for r in rows]) - d99
            print(f"- {s.label}: +p50 {p50:.3f}, +p99 {p99:.3f}")
    print("\nProcess facts (median of rounds):\n")
    for s in sides:
        facts = []
        for key in sorted(s.results):
            if key.startswith(("startup-", "rss-")):
                vals = [next(iter(r.values())) for r in s.results[key]]
                unit = "s" if key.startswith("startup") else "MiB"
                facts.append(f"{key} {statistics.median(vals):.2f} {unit}")
        print(f"- {s.label}: " + ", ".join(facts))


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--tree",
        action="append",
        required=True,
        metavar="LABEL=PATH",
        help="a gateway tree (twice: the two sides)",
    )
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--duration", type=float, default=10.0, help="measured seconds per run")
    p.add_argument("--warmup", type=float, default=2.0, help="unmeasured seconds before each")
    p.add_argument("--connections", type=int, default=16)
    p.add_argument(
        "--workloads",
        default="chat,chat-redis,stream,messages,task,latency",
        help=f"comma-separated, of: {', '.join(WORKLOADS)}",
    )
    p.add_argument("--keep", action="store_true", help="keep the work folder (logs, stores)")
    args = p.parse_args()
    if len(args.tree) != 2:
        p.error("give exactly two --tree LABEL=PATH")
    sides = []
    for spec in args.tree:
        label, _, path = spec.partition("=")
        tree = Path(path).resolve()
        if not (tree / "gateway" / "__init__.py").is_file():
            p.error(f"{tree} is not a gateway tree")
        sides.append(Side(label, tree))
    workloads = [WORKLOADS[name] for name in args.workloads.split(",")]
    if shutil.which("wrk") is None:
        raise SystemExit("needs wrk (apt-get install -y wrk)")
    work = Path(tempfile.mkdtemp(prefix="side-by-side-"))
    bench = Bench(args, work)
    try:
        bench.mock = bench.start_mock()
        if any(w.store == "redis" for w in workloads):
            bench.start_redis()
        for rnd in range(args.rounds):
            first = sides[rnd % 2].label
            print(f"round {rnd + 1}/{args.rounds} ({first} launched first)", flush=True)
            run_round(bench, sides, rnd, workloads)
        report(bench, sides, workloads)
    finally:
        bench.stop_all()
        if args.keep:
            print(f"\nwork folder kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
