"""The Responses API's state the gateway owns, through the official openai SDK on the embedded
default (the simulator) and on a translated upstream (the Anthropic fake, a real HTTP server):
`previous_response_id` continues a conversation from the gateway's store (the second upstream
request carries the first turn), `responses.retrieve`, `.delete` and `.input_items.list` serve
what was kept, another tenant's, a deleted and a `store: false` response are not found, and a
stream's response is readable as soon as its `response.completed` arrives."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from tests.fakes import anthropic_upstream as anthropic
from tests.support.gateway_process import ROOT, GatewayProcess, client_for, start_gateway

ANTHROPIC = """
[tenants.other]
models = ["*"]
credits_per_usd_rate = 1000

[providers.claude]
kind = "anthropic"
base_url = "{anthropic}"
api_key = "sk-ant-upstream"
timeout_seconds = 5
stream_read_timeout_seconds = 5

[[models]]
id = "claude-chat"
provider = "claude"
upstream_model = "claude-sonnet-4-0"
capability = "chat"
max_output_tokens = 8192
pricing = {{ input_usd_per_mtok = 3, output_usd_per_mtok = 15 }}
"""


@pytest.fixture(scope="module")
def claude() -> Iterator[anthropic.FakeAnthropic]:
    fake = anthropic.FakeAnthropic()
    _, stop = fake.start_in_thread()
    yield fake
    stop()


@pytest.fixture(scope="module")
def gateway(
    claude: anthropic.FakeAnthropic, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatewayProcess]:
    """`gateway serve` on the repository's routing file, with a second tenant and a model on
    the Anthropic fake."""
    config = (ROOT / "config" / "gateway.toml").read_text()
    config += ANTHROPIC.format(anthropic=claude.base_url)
    process = start_gateway(tmp_path_factory.mktemp("gw-responses-state"), config)
    yield process
    process.stop()


@pytest.fixture
def client(gateway: GatewayProcess) -> Iterator[openai.OpenAI]:
    assert gateway.api_key
    with openai.OpenAI(base_url=gateway.base_url, api_key=gateway.api_key, max_retries=0) as c:
        yield c


@pytest.fixture
def http(gateway: GatewayProcess) -> Iterator[httpx.Client]:
    assert gateway.api_key
    with client_for(gateway, gateway.api_key) as c:
        yield c


def not_found_as_previous(client: openai.OpenAI, response_id: str) -> None:
    """Continuing from `response_id` is refused as OpenAI refuses an unknown one."""
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="auto", input="Go on", previous_response_id=response_id)
    error = caught.value.body
    assert isinstance(error, dict)
    assert error["code"] == "previous_response_not_found"
    assert error["param"] == "previous_response_id" and response_id in error["message"]


def test_a_second_turn_on_the_simulator_carries_the_first(client: openai.OpenAI) -> None:
    first = client.responses.create(model="auto", instructions="Be brief.", input="Hello")
    second = client.responses.create(model="auto", input="And then?", previous_response_id=first.id)
    assert second.previous_response_id == first.id and second.id != first.id
    # The simulator answers from the messages it gets: the same history sent whole by the
    # client (as a stateless client does) gets the same answer from the same prompt.
    earlier = [
        item.model_dump() for item in client.responses.input_items.list(first.id, order="asc")
    ]
    whole = [*earlier, *(item.model_dump() for item in first.output)]
    stateless = client.responses.create(
        model="auto", input=[*whole, {"role": "user", "content": "And then?"}], store=False
    )
    alone = client.responses.create(model="auto", input="And then?", store=False)
    assert second.output_text == stateless.output_text
    assert second.usage is not None and stateless.usage is not None and alone.usage is not None
    assert second.usage.input_tokens == stateless.usage.input_tokens
    assert second.usage.input_tokens > alone.usage.input_tokens


def test_a_second_turn_on_a_translated_upstream_carries_the_first(
    client: openai.OpenAI, claude: anthropic.FakeAnthropic
) -> None:
    first = client.responses.create(model="claude-chat", instructions="Be brief.", input="Hello")
    assert first.output_text == anthropic.DEFAULT_TEXT
    second = client.responses.create(
        model="claude-chat", input="And then?", previous_response_id=first.id
    )
    assert second.output_text == anthropic.DEFAULT_TEXT
    sent = claude.requests[-1].json
    assert [m["role"] for m in sent["messages"]] == ["user", "assistant", "user"]
    turns = json.dumps(sent["messages"])
    assert "Hello" in turns and anthropic.DEFAULT_TEXT in turns and "And then?" in turns
    assert "system" not in sent  # instructions are not carried over, as on OpenAI


def test_a_kept_response_is_retrieved_listed_and_deleted(client: openai.OpenAI) -> None:
    first = client.responses.create(model="auto", input="Hello")
    second = client.responses.create(
        model="auto",
        input=[{"role": "user", "content": [{"type": "input_text", "text": "More"}]}],
        previous_response_id=first.id,
    )
    kept = client.responses.retrieve(second.id)
    assert kept.model_dump() == second.model_dump()  # as it was answered, usage included
    assert kept.usage is not None and kept.usage.output_tokens > 0

    newest = client.responses.input_items.list(second.id, limit=2)
    assert newest.has_more and len(newest.data) == 2
    assert newest.first_id == newest.data[0].id and newest.last_id == newest.data[1].id
    items = list(client.responses.input_items.list(second.id, order="asc"))
    assert [item.type for item in items] == ["message", "message", "message"]
    assert [getattr(item, "role", None) for item in items] == ["user", "assistant", "user"]
    assert items[1].id == first.output[0].id  # the first turn's output item, as answered
    assert all(item.id for item in items) and len({item.id for item in items}) == 3
    assert [i.id for i in reversed(items)][:2] == [i.id for i in newest.data]

    deleted = client.responses.delete(second.id)
    assert deleted is None or getattr(deleted, "deleted", True)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(second.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.delete(second.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.input_items.list(second.id)
    not_found_as_previous(client, second.id)
    assert client.responses.retrieve(first.id).id == first.id  # the earlier one is its own


def test_delete_answers_openais_object(client: openai.OpenAI, http: httpx.Client) -> None:
    response = client.responses.create(model="auto", input="Hello")
    answer = http.delete(f"/v1/responses/{response.id}")
    assert answer.status_code == 200
    assert answer.json() == {"id": response.id, "object": "response.deleted", "deleted": True}


def test_another_tenants_response_is_not_found(
    client: openai.OpenAI, gateway: GatewayProcess
) -> None:
    mine = client.responses.create(model="auto", input="Hello")
    key = gateway.new_key("other")
    with openai.OpenAI(base_url=gateway.base_url, api_key=key, max_retries=0) as other:
        with pytest.raises(openai.NotFoundError):
            other.responses.retrieve(mine.id)
        with pytest.raises(openai.NotFoundError):
            other.responses.input_items.list(mine.id)
        with pytest.raises(openai.NotFoundError):
            other.responses.delete(mine.id)
        not_found_as_previous(other, mine.id)
    assert client.responses.retrieve(mine.id).id == mine.id  # still there for its tenant


def test_store_false_keeps_nothing(client: openai.OpenAI, http: httpx.Client) -> None:
    response = client.responses.create(model="auto", input="Hello", store=False)
    assert response.store is False
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(response.id)
    answer = http.get(f"/v1/responses/{response.id}/input_items")
    assert answer.status_code == 404 and answer.json()["error"]["code"] == "not_found"
    not_found_as_previous(client, response.id)


def test_a_streams_response_is_readable_when_completed_arrives(
    http: httpx.Client, gateway: GatewayProcess
) -> None:
    """Kept before `response.completed` is sent: a GET made as that event arrives, before the
    stream is read to its end, finds the response the event carries."""
    completed: dict[str, Any] = {}
    retrieved: dict[str, Any] = {}
    assert gateway.api_key
    body = {"model": "auto", "input": "Tell me a story", "stream": True}
    with (
        client_for(gateway, gateway.api_key) as other,
        http.stream("POST", "/v1/responses", json=body) as answer,
    ):
        for line in answer.iter_lines():
            if not line.startswith("data: "):
                continue
            event = json.loads(line.removeprefix("data: "))
            if event["type"] == "response.completed":
                completed = event["response"]
                retrieved = other.get(f"/v1/responses/{completed['id']}").json()
    assert completed["status"] == "completed" and completed["usage"]["output_tokens"] > 0
    assert retrieved == completed


def test_a_streamed_turn_continues_from_a_streamed_one(
    client: openai.OpenAI, claude: anthropic.FakeAnthropic
) -> None:
    with client.responses.stream(model="claude-chat", input="Hello") as stream:
        first = stream.get_final_response()
    with client.responses.stream(
        model="claude-chat", input="And then?", previous_response_id=first.id
    ) as stream:
        second = stream.get_final_response()
    assert second.previous_response_id == first.id
    turns = json.dumps(claude.requests[-1].json["messages"])
    assert "Hello" in turns and anthropic.DEFAULT_TEXT in turns and "And then?" in turns
