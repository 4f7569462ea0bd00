"""What stock OpenAI clients send, answered as the OpenAI API answers it, on the simulator (the
embedded default), with the official openai SDK against a running gateway: structured output
(`parse()` with a pydantic model, `json_object`, a JSON-schema stream), `n` choices, a tool loop
that ends in text, tools without parameters, `temperature` with `top_p`, legacy function
calling, error details that name the field sent, and 501s the SDK does not retry."""

from __future__ import annotations

import json
from typing import Any, Literal

import httpx
import openai
import pytest
from pydantic import BaseModel

from tests.support.gateway_process import GatewayProcess

MODEL = "sim-chat-pro"
QUESTION = [{"role": "user", "content": "Plan a weekend by the sea."}]


class Activity(BaseModel):
    name: str
    hours: float
    kind: Literal["walk", "swim", "museum"]


class Weekend(BaseModel):
    town: str
    nights: int
    activities: list[Activity]
    budget: float | None


def test_parse_with_a_pydantic_model_gives_the_model(client: openai.OpenAI) -> None:
    for number in range(3):
        messages = [{"role": "user", "content": f"Plan weekend number {number}."}]
        completion = client.chat.completions.parse(
            model=MODEL, messages=messages, response_format=Weekend
        )
        message = completion.choices[0].message
        assert isinstance(message.parsed, Weekend), message.content
        assert completion.choices[0].finish_reason == "stop"


def test_json_object_gives_a_json_object(client: openai.OpenAI) -> None:
    completion = client.chat.completions.create(
        model=MODEL, messages=QUESTION, response_format={"type": "json_object"}
    )
    assert isinstance(json.loads(completion.choices[0].message.content or ""), dict)


def test_a_json_schema_stream_joins_into_valid_json(client: openai.OpenAI) -> None:
    with client.chat.completions.stream(
        model=MODEL, messages=QUESTION, response_format=Weekend
    ) as stream:
        pieces = [event.delta for event in stream if event.type == "content.delta" and event.delta]
        final = stream.get_final_completion()
    assert len(pieces) > 1, "the JSON came in one piece: nothing was streamed"
    assert Weekend.model_validate_json("".join(pieces)) == final.choices[0].message.parsed


def test_n_choices(client: openai.OpenAI) -> None:
    completion = client.chat.completions.create(model=MODEL, messages=QUESTION, n=3)
    assert [c.index for c in completion.choices] == [0, 1, 2]
    texts = [c.message.content for c in completion.choices]
    assert len(set(texts)) == 3
    assert completion.usage is not None
    assert completion.usage.completion_tokens == sum(len((t or "").split()) for t in texts)
    stream = client.chat.completions.create(model=MODEL, messages=QUESTION, n=3, stream=True)
    streamed = ["", "", ""]
    for chunk in stream:
        for choice in chunk.choices:
            streamed[choice.index] += choice.delta.content or ""
    assert streamed == texts


WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a town",
        "parameters": {
            "type": "object",
            "properties": {"town": {"type": "string"}, "unit": {"enum": ["c", "f"]}},
            "required": ["town", "unit"],
            "additionalProperties": False,
        },
    },
}
CLOCK = {"type": "function", "function": {"name": "get_time", "description": "The time"}}


def test_a_tool_loop_ends_in_text(client: openai.OpenAI) -> None:
    """An agent's loop: call the tools the model asks for until it answers in text."""
    messages: list[Any] = list(QUESTION)
    turns = 0
    while turns < 5:  # a chain limit, as agent frameworks have
        turns += 1
        completion = client.chat.completions.create(
            model=MODEL, messages=messages, tools=[WEATHER, CLOCK]
        )
        message = completion.choices[0].message
        if not message.tool_calls:
            break
        assert completion.choices[0].finish_reason == "tool_calls"
        messages.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls:
            assert call.type == "function"
            arguments = json.loads(call.function.arguments)
            if call.function.name == "get_weather":
                assert set(arguments) == {"town", "unit"} and arguments["unit"] in ("c", "f")
            else:
                assert arguments == {}
            messages.append({"role": "tool", "tool_call_id": call.id, "content": "done"})
    assert turns == 2, "the loop did not end after the tool results"
    assert message.content and completion.choices[0].finish_reason == "stop"


def test_a_tool_without_parameters_is_called_with_empty_arguments(client: openai.OpenAI) -> None:
    completion = client.chat.completions.create(
        model=MODEL, messages=QUESTION, tools=[CLOCK], tool_choice="required"
    )
    calls = completion.choices[0].message.tool_calls
    assert calls is not None
    assert (calls[0].function.name, calls[0].function.arguments) == ("get_time", "{}")


def test_strict_pydantic_tools_parse(client: openai.OpenAI) -> None:
    completion = client.chat.completions.parse(
        model=MODEL,
        messages=QUESTION,
        tools=[openai.pydantic_function_tool(Activity)],
        tool_choice={"type": "function", "function": {"name": "Activity"}},
    )
    calls = completion.choices[0].message.tool_calls
    assert calls is not None and isinstance(calls[0].function.parsed_arguments, Activity)


def test_tool_choice_none_answers_in_text(client: openai.OpenAI) -> None:
    completion = client.chat.completions.create(
        model=MODEL, messages=QUESTION, tools=[WEATHER], tool_choice="none"
    )
    assert completion.choices[0].message.tool_calls is None
    assert completion.choices[0].message.content


def test_temperature_with_top_p_is_accepted(client: openai.OpenAI) -> None:
    completion = client.chat.completions.create(
        model=MODEL, messages=QUESTION, temperature=0.7, top_p=0.9
    )
    assert completion.choices[0].message.content


LEGACY_FUNCTION = {
    "name": "get_weather",
    "parameters": WEATHER["function"]["parameters"],  # type: ignore[index]
}


def test_legacy_functions_are_answered_with_function_call(client: openai.OpenAI) -> None:
    completion = client.chat.completions.create(
        model=MODEL,
        messages=QUESTION,
        functions=[LEGACY_FUNCTION],  # type: ignore[list-item]
        function_call={"name": "get_weather"},
    )
    choice = completion.choices[0]
    assert choice.finish_reason == "function_call"
    assert choice.message.tool_calls is None
    call = choice.message.function_call
    assert call is not None and call.name == "get_weather"
    assert set(json.loads(call.arguments)) == {"town", "unit"}

    history = [
        *QUESTION,
        {"role": "assistant", "content": None, "function_call": call.model_dump()},
        {"role": "function", "name": "get_weather", "content": "sunny, 21 degrees"},
    ]
    answer = client.chat.completions.create(
        model=MODEL,
        messages=history,  # type: ignore[arg-type]
        functions=[LEGACY_FUNCTION],  # type: ignore[list-item]
    )
    assert answer.choices[0].finish_reason == "stop" and answer.choices[0].message.content

    stream = client.chat.completions.create(
        model=MODEL,
        messages=QUESTION,
        functions=[LEGACY_FUNCTION],  # type: ignore[list-item]
        function_call={"name": "get_weather"},
        stream=True,
    )
    name, arguments, finish = "", "", None
    for chunk in stream:
        delta = chunk.choices[0].delta
        assert delta.tool_calls is None
        if delta.function_call is not None:
            name += delta.function_call.name or ""
            arguments += delta.function_call.arguments or ""
        finish = chunk.choices[0].finish_reason or finish
    assert (name, arguments, finish) == ("get_weather", call.arguments, "function_call")


@pytest.mark.parametrize(
    ("extra", "field", "message"),
    [
        (
            {"extra_body": {"colour": "blue"}},
            "colour",
            "not supported by this model's upstream",
        ),
        ({"max_tokens": 10**7}, "max_tokens", "is 10000000, more than this model's limit of 512"),
        ({"n": "three"}, "n", "expected an integer or null, got a string"),
    ],
)
def test_errors_name_the_field_as_sent(
    client: openai.OpenAI, extra: dict[str, Any], field: str, message: str
) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model=MODEL, messages=QUESTION, **extra)
    error = caught.value.body
    assert isinstance(error, dict)
    assert error["code"] == "invalid_request"
    assert error["details"] == [{"field": field, "message": message}]
    assert error["message"] == f"{field}: {message}"
    assert "max_completion_tokens" not in json.dumps(error) or field != "max_tokens"


def test_an_extension_field_the_upstream_takes_is_served(client: openai.OpenAI) -> None:
    """vLLM's `top_k` in `extra_body`: the simulator takes it (as Anthropic's and Gemini's
    adapters translate it); `min_p` beside it is named as not taken."""
    answer = client.chat.completions.create(
        model=MODEL, messages=QUESTION, max_tokens=16, extra_body={"top_k": 40}
    )
    assert answer.choices[0].message.content
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(
            model=MODEL, messages=QUESTION, extra_body={"top_k": 40, "min_p": 0.05}
        )
    assert caught.value.body["details"] == [  # type: ignore[index]
        {"field": "min_p", "message": "not supported by this model's upstream"}
    ]


def test_planned_endpoints_are_not_retried_by_the_sdk(gateway: GatewayProcess) -> None:
    sent: list[str] = []
    hooks = {"request": [lambda request: sent.append(str(request.url))]}
    with (
        openai.OpenAI(
            base_url=gateway.base_url,
            api_key=gateway.api_key,
            max_retries=3,
            http_client=httpx.Client(event_hooks=hooks),
        ) as sdk,
        pytest.raises(openai.APIStatusError) as caught,
    ):
        sdk.audio.speech.create(model="any", voice="alloy", input="hello")
    assert caught.value.status_code == 501
    assert caught.value.response.headers["x-should-retry"] == "false"
    assert len(sent) == 1, sent
