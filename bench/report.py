#!/usr/bin/env python3
"""Combine one bench/run.sh run (bench/results/<LABEL>/) into one markdown report with the
headline tables per backend and the check against the performance targets.

Usage: python bench/report.py bench/results/<LABEL>      (stdlib only; run.sh calls it)

Reads run.json, and per variant folder (<backend>, <backend>-idem): wrk.jsonl, cpu.jsonl,
stream.jsonl, meta.json and summary.md (the per-round tables written by summarize.py).
"""

from __future__ import annotations

import json
import os
import statistics
import sys

# The targets of bench/README.md.
T_ADDED_P50_MS = 1.0
T_ADDED_P99_MS = 3.0
T_RPS = 1500.0
T_CPU_MS = 0.7
T_RSS_MB = 100.0
T_STARTUP_S = 1.0


def load_jsonl(path: str) -> list[dict]:
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def load_json(path: str) -> dict:
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        return json.load(f)


def fmt(x: float | None, nd: int = 2) -> str:
    return "-" if x is None else f"{x:.{nd}f}"


def med(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def wrk_table(wrk: list[dict], cpu: list[dict]) -> dict[int, dict]:
    rows: dict[int, dict] = {}
    for c in sorted({r["concurrency"] for r in wrk}):
        row: dict = {"c": c}
        for role in ("baseline", "target"):
            rs = [r for r in wrk if r["concurrency"] == c and r["role"] == role]
            for k in ("rps", "p50_ms", "p90_ms", "p99_ms"):
                row[f"{role}_{k}"] = med([r[k] for r in rs])
            row[f"{role}_err"] = sum(
                r["err_connect"]
                + r["err_read"]
                + r["err_write"]
                + r["err_status"]
                + r["err_timeout"]
                for r in rs
            )
        cs = [x for x in cpu if x["concurrency"] == c and x["requests"]]
        wal = [x["wal_mib"] for x in cs if x.get("wal_mib") is not None]
        row["wal_mib"] = max(wal) if wal else None
        row["cpu_ms"] = (
            sum(x["cpu_s"] for x in cs) * 1000 / sum(x["requests"] for x in cs) if cs else None
        )
        for k in ("p50_ms", "p90_ms", "p99_ms"):
            b, t = row[f"baseline_{k}"], row[f"target_{k}"]
            row[f"added_{k}"] = t - b if None not in (b, t) else None
        rows[c] = row
    return rows


def pooled_cpu_ms(cpu: list[dict]) -> float | None:
    n = sum(x["requests"] for x in cpu)
    return sum(x["cpu_s"] for x in cpu) * 1000 / n if n else None


def row(*cells: object) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def verdict(ok: bool | None) -> str:
    return "n/a" if ok is None else ("**met**" if ok else "**NOT met**")


def main() -> None:
    d = sys.argv[1].rstrip("/")
    run = load_json(os.path.join(d, "run.json"))
    order = run.get("knobs", {}).get("BACKENDS", "sqlite redis").split()

    def rank(v: str) -> tuple[int, str]:
        base = v.removesuffix("-idem")
        return (order.index(base) if base in order else len(order), v)

    variants = sorted(
        (v for v in os.listdir(d) if os.path.isfile(os.path.join(d, v, "wrk.jsonl"))), key=rank
    )
    out: list[str] = [f"# Gateway overhead benchmark: {run.get('label', os.path.basename(d))}", ""]
    if run:
        pk = run.get("packages", {})
        out += [
            f"- date (UTC): {run.get('date_utc')}; commit {run.get('git_commit')} "
            f"({run.get('git_uncommitted_paths')} uncommitted paths in the work tree"
            + (f": {', '.join(run['git_uncommitted'])}" if run.get("git_uncommitted") else "")
            + ")",
            f"- machine: {run.get('cpus')} CPUs ({run.get('cpu')}), kernel {run.get('kernel')}; "
            "wrk, the mock upstream and the gateway share them",
            f"- Python {run.get('python')}; " + ", ".join(f"{k} {v}" for k, v in pk.items() if v),
            f"- {run.get('wrk')}; {run.get('redis_server')}"
            + (f"; Redis at {run['redis_url']}" if run.get("redis_url") else ""),
            "- knobs: " + ", ".join(f"{k}={v}" for k, v in run.get("knobs", {}).items()),
            "",
        ]

    data = {}
    for v in variants:
        vd = os.path.join(d, v)
        wrk, cpu = (
            load_jsonl(os.path.join(vd, "wrk.jsonl")),
            load_jsonl(os.path.join(vd, "cpu.jsonl")),
        )
        data[v] = {
            "rows": wrk_table(wrk, cpu),
            "cpu": pooled_cpu_ms(cpu),
            "stream": load_jsonl(os.path.join(vd, "stream.jsonl")),
            "meta": load_json(os.path.join(vd, "meta.json")),
        }

    out += [
        "## Non-streaming (wrk closed loop; medians over rounds; ms; +pXX = gateway minus direct)",
        "",
        "| variant | conc | direct RPS | gateway RPS | RPS ratio | +p50 | +p90 | +p99 | "
        "gateway p99 | gateway CPU ms/req | errors direct/gw | SQLite WAL MiB |",
        "|---|" + "---:|" * 11,
    ]
    for v, x in data.items():
        for c, r in x["rows"].items():
            ratio = (
                (r["target_rps"] / r["baseline_rps"])
                if r["baseline_rps"] and r["target_rps"]
                else None
            )
            out.append(
                row(
                    v,
                    c,
                    fmt(r["baseline_rps"], 0),
                    fmt(r["target_rps"], 0),
                    fmt(ratio, 3),
                    fmt(r["added_p50_ms"]),
                    fmt(r["added_p90_ms"]),
                    fmt(r["added_p99_ms"]),
                    fmt(r["target_p99_ms"]),
                    fmt(r["cpu_ms"], 3),
                    f"{r['baseline_err']}/{r['target_err']}",
                    fmt(r["wal_mib"], 0),
                )
            )
    out += [
        "",
        "CPU ms/req: the gateway process's CPU time (user+system) over each gateway wrk run "
        "(warm-up included) divided by the chat requests it logged in that time. "
        "SQLite WAL: size of gateway.db-wal right after the gateway run (largest over rounds).",
        "",
    ]

    streams = [(v, x["stream"]) for v, x in data.items() if x["stream"]]
    if streams:
        out += [
            "## Streaming (sequential, 1 in flight, 20 content chunks; ms)",
            "",
            "| variant | TTFT direct p50 | TTFT gw p50 | +p50 | +p90 | +p99 | total direct p50 | "
            "total gw p50 | +p50 | +p90 | +p99 | ok direct/gw |",
            "|---|" + "---:|" * 11,
        ]
        for v, ss in streams:
            by = {s["label"]: s for s in ss}
            b = by.get("direct")
            t = next((s for s in ss if s["label"] != "direct"), None)
            if not (b and t):
                continue

            def add(m: str, k: str, b=b, t=t) -> str:
                x, y = b[m][k], t[m][k]
                return fmt(y - x) if None not in (x, y) else "-"

            out.append(
                row(
                    v,
                    fmt(b["ttft_ms"]["p50"]),
                    fmt(t["ttft_ms"]["p50"]),
                    add("ttft_ms", "p50"),
                    add("ttft_ms", "p90"),
                    add("ttft_ms", "p99"),
                    fmt(b["total_ms"]["p50"]),
                    fmt(t["total_ms"]["p50"]),
                    add("total_ms", "p50"),
                    add("total_ms", "p90"),
                    add("total_ms", "p99"),
                    f"{b['ok']}/{b['requests']} / {t['ok']}/{t['requests']}",
                )
            )
        out.append("")

    metas = [(v, x["meta"]) for v, x in data.items() if x["meta"]]
    if metas:
        out += [
            "## Process facts (one gateway process per backend)",
            "",
            "| backend | start-up to /v1/health 200 | to first completion | RSS idle | "
            "RSS after non-stream | RSS after all load | CPU ms/req (non-stream phase) | "
            "CPU ms/stream | Redis server CPU ms/req |",
            "|---|" + "---:|" * 8,
        ]
        for v, m in metas:
            out.append(
                row(
                    v,
                    f"{fmt(m.get('startup_to_health_200_s'), 3)} s",
                    f"{fmt(m.get('startup_to_first_completion_s'), 3)} s",
                    f"{fmt(m.get('gateway_idle_rss_mib'), 1)} MiB",
                    f"{fmt(m.get('gateway_rss_after_nonstream_load_mib'), 1)} MiB",
                    f"{fmt(m.get('gateway_rss_after_all_load_mib'), 1)} MiB",
                    fmt(m.get("nonstream_cpu_ms_per_request (whole phase)"), 3),
                    fmt(m.get("stream_cpu_ms_per_stream (whole phase)"), 3),
                    fmt(m.get("redis_server_cpu_ms_per_gateway_request"), 3),
                )
            )
        out += [
            "",
            "RSS idle: after start-up, one completion and IDLE_WAIT seconds of quiet. "
            "'non-stream phase' CPU includes the gateway's idle time during the direct runs.",
            "",
        ]

    # ---- targets
    out += [
        "## Against the targets",
        "",
        "| target | " + " | ".join(data) + " |",
        "|---|" + "---:|" * len(data),
    ]

    def cell(v: str, value: float | None, ok: bool | None, unit: str, nd: int = 2) -> str:
        if value is None:
            return "n/a"
        return f"{fmt(value, nd)}{unit} {verdict(ok)}"

    lines = {
        f"added p50 at c=1 <= {T_ADDED_P50_MS} ms": [],
        f"added p99 at c=1 <= {T_ADDED_P99_MS} ms": [],
        f">= {T_RPS:.0f} requests/s (best concurrency)": [],
        f"<= {T_CPU_MS} ms CPU per request (all gateway wrk runs)": [],
        f"<= {T_RSS_MB:.0f} MB RSS (after all load)": [],
        f"start-up <= {T_STARTUP_S} s": [],
    }
    keys = list(lines)
    for v, x in data.items():
        rows, m = x["rows"], x["meta"]
        r1 = rows.get(1)
        p50 = r1["added_p50_ms"] if r1 else None
        p99 = r1["added_p99_ms"] if r1 else None
        best = max((r["target_rps"] for r in rows.values() if r["target_rps"]), default=None)
        lines[keys[0]].append(cell(v, p50, None if p50 is None else p50 <= T_ADDED_P50_MS, " ms"))
        lines[keys[1]].append(cell(v, p99, None if p99 is None else p99 <= T_ADDED_P99_MS, " ms"))
        lines[keys[2]].append(cell(v, best, None if best is None else best >= T_RPS, "", 0))
        cpu = x["cpu"]
        lines[keys[3]].append(cell(v, cpu, None if cpu is None else cpu <= T_CPU_MS, " ms", 3))
        rss = m.get("gateway_rss_after_all_load_mib")
        rss_mb = rss * 1.048576 if rss is not None else None
        lines[keys[4]].append(
            cell(v, rss_mb, None if rss_mb is None else rss_mb <= T_RSS_MB, " MB", 1)
        )
        st = m.get("startup_to_health_200_s")
        lines[keys[5]].append(cell(v, st, None if st is None else st <= T_STARTUP_S, " s", 3))
    for k, cells in lines.items():
        out.append(f"| {k} | " + " | ".join(cells) + " |")
    out += [
        "",
        "(-idem variants run in the same gateway process as their backend, after its plain "
        "load: RSS and start-up are reported on the backend's column.)",
        "",
    ]

    out += [
        "## Reference points",
        "",
        "- bare Litestar + aiohttp pass-through (shared/perf-notes.md): +0.42 ms p50, "
        "~4,000 requests/s at c=16/64, 0.24-0.40 ms CPU per request",
        "- LiteLLM 1.106.2 (shared/bench/RESULTS-litellm.md): +11.1 ms p50 / +16.5 ms p99 at c=1, "
        "~87 requests/s, ~12 ms CPU per request, TTFT +12.7 ms, 332 MiB idle, 6.8 s start-up",
        "",
    ]

    out += ["# Per-variant detail (summarize.py)", ""]
    for v in variants:
        p = os.path.join(d, v, "summary.md")
        if os.path.exists(p):
            with open(p) as f:
                out += [("\n" + f.read()).replace("\n## ", "\n### ").strip(), ""]
    print("\n".join(out))


if __name__ == "__main__":
    main()
