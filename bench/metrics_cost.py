"""CPU cost of the metrics one chat request records, in isolation from everything else.

Replays what a sync chat call and a stream make the instruments do (the middleware's
`request()`, the chat service's `upstream_call`, `chat_charged`, and for the stream
`first_token` and `stream_ended`) with real label values, many times, and reports process CPU
per request for the live instruments, the multiprocess (file-backed) ones and the disabled ones.

    .venv/bin/python bench/metrics_cost.py            # 200,000 requests per variant
    N=50000 .venv/bin/python bench/metrics_cost.py

The budget is 0.05 ms (50 us) per chat request.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

ROUTE = "/v1/chat/completions"


def measure(n: int, stream: bool) -> float:
    """Microseconds of process CPU per request."""
    from prometheus_client import CollectorRegistry

    from gateway.billing.money import UNITS_PER_CREDIT
    from gateway.metrics import DisabledMetrics, Metrics

    kind = os.environ.get("VARIANT", "live")
    metrics = (
        DisabledMetrics()
        if kind == "off"
        else Metrics(
            None if kind == "multiprocess" else CollectorRegistry(auto_describe=False),
            units_per_credit=UNITS_PER_CREDIT,
        )
    )
    started = time.process_time()
    for i in range(n):
        metrics.upstream_call("sim", "sim-chat-1", "chat", 0.0003)
        if stream:
            metrics.first_token("sim-chat-1", 0.002)
        metrics.chat_charged("sim-chat-1", 750 + (i & 7), 8, 39)
        if stream:
            metrics.stream_ended("sim-chat-1", 39)
        metrics.request(ROUTE, "POST", 200, "sim-chat-1", 0.0021, 0.0007, None, False)
    return (time.process_time() - started) / n * 1e6


def main() -> None:
    if os.environ.get("VARIANT"):
        n = int(os.environ.get("N", "200000"))
        print(json.dumps({"sync": measure(n, False), "stream": measure(n, True)}))
        return
    results = {}
    for variant in ("off", "live", "multiprocess"):
        env = {**os.environ, "VARIANT": variant}
        with tempfile.TemporaryDirectory() as folder:
            if variant == "multiprocess":
                env["PROMETHEUS_MULTIPROC_DIR"] = folder
            out = subprocess.run(
                [sys.executable, __file__], env=env, capture_output=True, text=True, check=True
            ).stdout
        results[variant] = json.loads(out)
    print("| variant | sync chat, us CPU/request | stream, us CPU/request |")
    print("|---|---:|---:|")
    for variant, r in results.items():
        print(f"| {variant} | {r['sync']:.2f} | {r['stream']:.2f} |")


if __name__ == "__main__":
    main()
