"""The instruments count in plain floats and fold at scrape: the exposition is what
prometheus-client's own counting renders for the same events, series order and values."""

from __future__ import annotations

import math

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from gateway.metrics import instruments
from gateway.metrics.instruments import Metrics
from gateway.metrics.tally import DirectCounter, DirectHistogram

UNITS_PER_CREDIT = 10_000
CHAT = "/v1/chat/completions"


def _first_half(m: Metrics) -> None:
    m.upstream_call("mock", "gpt-x", "chat", 0.0003)
    m.chat_charged("gpt-x", 7_531, 12, 40)
    m.request(CHAT, "POST", 200, "gpt-x", 0.0021, 0.0007, None, False)
    m.dialect_request("openai", CHAT, 200)
    m.upstream_failed("mock", "gpt-y", "chat", "timeout", 30.0)
    m.request(CHAT, "POST", 504, "gpt-y", 30.1, None, "upstream_timeout", False)
    m.request(CHAT, "POST", 429, "", 0.0001, 0.0001, "rate_limited", False)
    m.request(CHAT, "BREW", 405, "", 0.00025, 0.00025, None, False)  # a bucket's own bound
    m.request("unmatched", "GET", 404, "", 1e-9, -0.001, None, False)
    m.first_token("gpt-x", 0.004)
    m.stream_ended("gpt-x", 39)
    m.stream_ended("gpt-x", 100_000)  # past the last bound: +Inf only


def _second_half(m: Metrics) -> None:
    for i in range(257):  # float sums over many uneven amounts, in arrival order
        m.chat_charged("gpt-x", 1 + (i * 7919) % 1013, i % 5, i % 11)
        m.upstream_call("mock", "gpt-x", "chat", 0.0001 * (i % 13) + 1e-7)
        m.request(CHAT, "POST", 200, "gpt-x", 0.001 * (i % 17), 0.00003 * i, None, i % 3 == 0)
    m.request(CHAT, "POST", 409, "gpt-x", 0.002, 0.001, "idempotency_in_progress", False)
    m.request(CHAT, "POST", 422, "gpt-x", 0.002, 0.001, "idempotency_key_reused", False)
    m.hold_exceeded("gpt-x")
    m.embeddings_charged("emb", 333, 17)
    m.task_created("text_to_image", "img", 500_000)
    m.task_finished("text_to_image", "img", "failed", 250_000, 12.5)
    m.task_finished("text_to_image", "img", "succeeded", 0, -1.0)
    m.artifact_stored("output", 123_456)
    m.callback_attempt("delivered")
    m.callback_attempt("retrying")
    m.upstream_failed("mock", "gpt-x", "chat", "502", math.inf)


def _without_created(text: bytes) -> bytes:
    """The `_created` series carry the wall time a child was made (the gateway turns them off
    in `open_metrics`); everything else must be byte for byte the same."""
    return b"\n".join(line for line in text.split(b"\n") if b"_created{" not in line)


def _scrapes(direct: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[bytes, bytes]:
    if direct:  # prometheus-client counts each event itself, as before the tallies
        monkeypatch.setattr(instruments, "counter_tally", lambda metric, _: DirectCounter(metric))
        monkeypatch.setattr(
            instruments, "histogram_tally", lambda metric, _, __: DirectHistogram(metric)
        )
    registry = CollectorRegistry(auto_describe=False)
    metrics = Metrics(registry, units_per_credit=UNITS_PER_CREDIT)
    _first_half(metrics)
    first = _without_created(generate_latest(registry))
    _second_half(metrics)
    return first, _without_created(generate_latest(registry))


def test_the_scrape_is_the_one_prometheus_client_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    tallied = _scrapes(False, monkeypatch)
    with monkeypatch.context() as patched:
        direct = _scrapes(True, patched)
    assert b"gateway_requests_total" in tallied[0]
    assert b'gateway_stream_chunks_bucket{le="+Inf",model="gpt-x"} 2.0' in tallied[0]
    assert tallied[0] == direct[0]
    assert tallied[1] == direct[1]


def test_a_read_of_the_registry_folds_first() -> None:
    registry = CollectorRegistry(auto_describe=False)
    metrics = Metrics(registry, units_per_credit=UNITS_PER_CREDIT)
    metrics.hold_exceeded("gpt-x")
    assert registry.get_sample_value("gateway_hold_exceeded_total", {"model": "gpt-x"}) == 1
    metrics.hold_exceeded("gpt-x")
    metrics.first_token("gpt-x", 0.3)
    assert registry.get_sample_value("gateway_hold_exceeded_total", {"model": "gpt-x"}) == 2
    labels = {"model": "gpt-x", "le": "0.5"}
    assert registry.get_sample_value("gateway_stream_first_token_seconds_bucket", labels) == 1
