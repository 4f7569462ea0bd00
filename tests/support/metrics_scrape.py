"""Reading a gateway's `/metrics` as tests do: every sample by name and labels."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.support.gateway_process import GatewayProcess

__all__ = ["Samples", "scrape", "total", "value"]

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(gateway: GatewayProcess) -> tuple[str, Samples]:
    response = httpx.get(f"{gateway.base_url.removesuffix('/v1')}/metrics", timeout=5)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    samples: Samples = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return response.text, samples


def value(samples: Samples, name: str, **labels: str) -> float:
    """The sample's value; 0 when the series does not exist (a counter never incremented)."""
    return samples.get((name, frozenset(labels.items())), 0.0)


def total(samples: Samples, name: str, **labels: str) -> float:
    """Sum over every series of `name` whose labels include `labels`."""
    wanted = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and wanted <= ls)
