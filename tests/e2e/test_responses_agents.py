"""The OpenAI Agents SDK (`openai-agents`) against the embedded default through the Responses
API: `Runner.run` with a function tool, the tool runs with the arguments the model chose, the
loop ends, and the final output arrives; streamed too (`Runner.run_streamed`); and chained by
`previous_response_id` (the gateway's stored responses)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import TYPE_CHECKING

import openai
import pytest

from tests.support.gateway_process import ROOT, GatewayProcess, start_gateway

if TYPE_CHECKING:
    from agents import Agent

# `agents` is imported by the tests themselves: importing it takes seconds, which every test
# process would pay at collection.


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    config = (ROOT / "config" / "gateway.toml").read_text()
    process = start_gateway(tmp_path_factory.mktemp("gw-agents"), config)
    yield process
    process.stop()


def make_agent(gateway: GatewayProcess, calls: list[str]) -> tuple[Agent, openai.AsyncOpenAI]:
    from agents import Agent, OpenAIResponsesModel, function_tool, set_tracing_disabled

    set_tracing_disabled(True)  # offline: no traces sent to OpenAI

    @function_tool
    def get_weather(city: str) -> str:
        """The weather of a city."""
        calls.append(city)
        return f"It is sunny in {city}."

    client = openai.AsyncOpenAI(base_url=gateway.base_url, api_key=gateway.api_key, max_retries=0)
    agent = Agent(
        name="Forecaster",
        instructions="Answer with the weather.",
        model=OpenAIResponsesModel(model="auto", openai_client=client),
        tools=[get_weather],
    )
    return agent, client


def test_runner_runs_the_tool_and_ends(gateway: GatewayProcess) -> None:
    from agents import Runner

    calls: list[str] = []

    async def run() -> tuple[str, int]:
        agent, client = make_agent(gateway, calls)
        async with client:
            result = await Runner.run(agent, "What is the weather in Oslo?", max_turns=4)
        return str(result.final_output), len(result.raw_responses)

    final, turns = asyncio.run(run())
    assert len(calls) == 1 and calls[0]  # the tool ran once, with the model's city
    assert final and turns == 2  # the call, then the answer after the tool's output


def test_a_streamed_run_ends_too(gateway: GatewayProcess) -> None:
    from agents import Runner

    calls: list[str] = []

    async def run() -> tuple[str, list[str]]:
        agent, client = make_agent(gateway, calls)
        kinds: list[str] = []
        async with client:
            result = Runner.run_streamed(agent, "Weather in Bergen?", max_turns=4)
            async for event in result.stream_events():
                if event.type == "raw_response_event":
                    kinds.append(event.data.type)
        return str(result.final_output), kinds

    final, kinds = asyncio.run(run())
    assert final and len(calls) == 1
    assert kinds.count("response.completed") == 2 and "response.failed" not in kinds


def test_a_run_chained_by_previous_response_id_continues(gateway: GatewayProcess) -> None:
    """`auto_previous_response_id`: each turn of the run sends only its new items and the id of
    the response before (the tool loop is rebuilt from the gateway's store); a second run goes
    on from the first's last response."""
    from agents import Runner

    calls: list[str] = []

    async def run() -> tuple[str, str, int, str | None]:
        agent, client = make_agent(gateway, calls)
        async with client:
            first = await Runner.run(
                agent, "What is the weather in Oslo?", max_turns=4, auto_previous_response_id=True
            )
            second = await Runner.run(
                agent,
                "And tomorrow?",
                max_turns=4,
                previous_response_id=first.last_response_id,
            )
            kept = await client.responses.retrieve(str(second.last_response_id))
        return (
            str(first.final_output),
            str(second.final_output),
            len(first.raw_responses),
            kept.previous_response_id,
        )

    first, second, turns, previous = asyncio.run(run())
    assert first and second and turns == 2  # the call, then the answer after the tool's output
    assert calls and calls[0]
    assert previous is not None and previous.startswith("resp_")
