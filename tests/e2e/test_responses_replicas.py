"""Stored Responses API responses on Redis, shared by two gateway processes (the embedded
default's simulator behind each): a conversation started on one replica continues on the
other by `previous_response_id`, each reads and deletes what the other kept, and a stream's
response is readable on the other replica as soon as its `response.completed` arrives."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
import redis

from tests.support.gateway_process import ROOT, GatewayProcess, client_for, start_gateway


@pytest.fixture(scope="module")
def replicas(
    redis_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[GatewayProcess, GatewayProcess]]:
    shared = redis_url.rsplit("/", 1)[0] + "/8"  # a database of its own, emptied
    redis.Redis.from_url(shared).flushdb()
    config = (ROOT / "config" / "gateway.toml").read_text()
    workdir: Path = tmp_path_factory.mktemp("gw-responses-replicas")
    first = start_gateway(workdir / "a", config, store_url=shared)
    try:
        second = start_gateway(workdir / "b", config, store_url=shared)
        try:
            first.grant("default", "1000")  # a shared store gets no starting grant or key
            yield first, second
        finally:
            second.stop()
    finally:
        first.stop()


def key_of(gateway: GatewayProcess) -> str:
    """A key of the tenant `default` (a gateway on a shared store makes none by itself)."""
    if gateway.api_key is None:
        gateway.api_key = gateway.new_key("default")
    return gateway.api_key


def sdk(gateway: GatewayProcess) -> openai.OpenAI:
    return openai.OpenAI(base_url=gateway.base_url, api_key=key_of(gateway), max_retries=0)


def test_a_conversation_moves_between_replicas(
    replicas: tuple[GatewayProcess, GatewayProcess],
) -> None:
    with sdk(replicas[0]) as a, sdk(replicas[1]) as b:
        first = a.responses.create(model="auto", input="Hello")
        second = b.responses.create(model="auto", input="And then?", previous_response_id=first.id)
        assert second.previous_response_id == first.id
        items = list(a.responses.input_items.list(second.id, order="asc"))
        assert [getattr(item, "role", None) for item in items] == ["user", "assistant", "user"]
        assert b.responses.retrieve(first.id).output_text == first.output_text
        b.responses.delete(first.id)
        with pytest.raises(openai.NotFoundError):
            a.responses.retrieve(first.id)


def test_a_streams_response_is_readable_on_the_other_replica(
    replicas: tuple[GatewayProcess, GatewayProcess],
) -> None:
    a, b = replicas
    completed: dict[str, Any] = {}
    retrieved: dict[str, Any] = {}
    body = {"model": "auto", "input": "Tell me a story", "stream": True}
    with (
        client_for(a, key_of(a)) as on_a,
        client_for(b, key_of(b)) as on_b,
        on_a.stream("POST", "/v1/responses", json=body) as answer,
    ):
        for line in answer.iter_lines():
            if line.startswith("data: "):
                event = json.loads(line.removeprefix("data: "))
                if event["type"] == "response.completed":
                    completed = event["response"]
                    retrieved = on_b.get(f"/v1/responses/{completed['id']}").json()
    assert completed["status"] == "completed" and retrieved == completed
