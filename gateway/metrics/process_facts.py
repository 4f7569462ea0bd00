"""What each serving process writes to the multiprocess folder for any of them to scrape.

With `PROMETHEUS_MULTIPROC_DIR`, one process answers a scrape but must show every one:
prometheus-client sums the counters and histograms from the folder's files. The facts that are a
process's state rather than events are written there too, as gauges whose multiprocess mode says
how they combine:

- `gateway_config_info` (version) and `gateway_circuit_breaker_state` (provider, state):
  `liveall`, one series per live process, labelled `pid`. Each process loads the routing file and
  learns about its upstreams on its own, so these are per-process facts: summed they would count
  processes (`max`/`livemax` would hide which one lags), while a process that refused a reload
  or whose breaker opened must stay visible. `max by (provider, state)` gives the host's view.
- the process metrics (`process_resident_memory_bytes`, `process_cpu_seconds_total`, ...):
  `liveall` too, each process's own. Otherwise a scrape would carry the CPU and memory of
  whichever process answered it, a counter jumping from one process to another.

`live` modes drop a process's series once it is marked dead (`retire` at its own end, the
supervisor's `mark_process_dead` for one that died), so no dead process's state lingers. A
version a process has left, or a provider a reload removed, stays at 0 in its file: prometheus-
client cannot delete a series from it.

The task queue's depth and whether the store answers are the store's facts, not a process's:
the process answering the scrape reads them then, once, as a single process does (nothing to
combine).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from prometheus_client import Gauge, ProcessCollector
from prometheus_client.multiprocess import mark_process_dead

__all__ = ["BREAKER_HELP", "BREAKER_STATES", "CONFIG_HELP", "ProcessFacts"]

BREAKER_STATES = ("closed", "half_open", "open")
CONFIG_HELP = "The loaded routing file (1), by version."
BREAKER_HELP = "Each upstream's circuit breaker: 1 for its current state, 0 for the others."


class ProcessFacts:
    """This process's facts as `liveall` gauges in the multiprocess folder `directory`."""

    def __init__(self, directory: str) -> None:
        self._directory = directory
        self._config = Gauge(
            "gateway_config_info",
            CONFIG_HELP,
            ["version"],
            registry=None,
            multiprocess_mode="liveall",
        )
        self._breakers = Gauge(
            "gateway_circuit_breaker_state",
            BREAKER_HELP,
            ["provider", "state"],
            registry=None,
            multiprocess_mode="liveall",
        )
        self._collector = ProcessCollector(registry=None)
        self._process: dict[str, Gauge] = {}
        self._version: str | None = None
        self._providers: set[str] = set()

    def publish(self, config_version: str, breakers: Mapping[str, str]) -> None:
        """Write the facts as they are now (a few microseconds of mmap writes, /proc reads)."""
        if config_version != self._version:
            if self._version is not None:
                self._config.labels(self._version).set(0)
            self._config.labels(config_version).set(1)
            self._version = config_version
        for provider in self._providers - breakers.keys():  # removed by a reload
            for name in BREAKER_STATES:
                self._breakers.labels(provider, name).set(0)
        for provider, state in breakers.items():
            for name in BREAKER_STATES:
                self._breakers.labels(provider, name).set(1 if state == name else 0)
        self._providers = set(breakers)
        for family in self._collector.collect():
            for sample in family.samples:
                gauge = self._process.get(sample.name)
                if gauge is None:
                    gauge = self._process[sample.name] = Gauge(
                        sample.name,
                        family.documentation,
                        registry=None,
                        multiprocess_mode="liveall",
                    )
                gauge.set(sample.value)

    def retire(self) -> None:
        """This process ends: its live series leave every scrape."""
        mark_process_dead(os.getpid(), self._directory)  # type: ignore[no-untyped-call]
