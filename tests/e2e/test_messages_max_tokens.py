"""Claude Code's `max_tokens: 32000` through `/v1/messages` on the simulator, as a served
gateway answers it: above the model's 4,096 it is lowered to the model's limit; on a wallet that
cannot hold it whole (a model priced like Claude Opus, 30 credits) it is lowered to what the
wallet pays for. Either way the answer arrives, ends as a length stop (`stop_reason:
max_tokens`), says the limit in `x-gateway-max-tokens`, and is charged within the hold; calls
at once on that wallet never take it below zero; a wallet that cannot pay the first tokens gets
a 402 naming `max_tokens`."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from pathlib import Path
from typing import Any

import anthropic
import httpx
import pytest

from tests.support.gateway_process import GatewayProcess, client_for, start_gateway

CONFIG = """
[gateway]
starting_grant_credits = 1000

[limits]
requests_per_minute = 100000
tokens_per_minute = 100000000

[providers.sim]
kind = "simulator"

[[models]]
id = "sim-chat-1"
provider = "sim"
capability = "chat"
max_output_tokens = 4096
pricing = { input_usd_per_mtok = 5, output_usd_per_mtok = 15 }

[[models]]
id = "sim-opus"
provider = "sim"
capability = "chat"
markup = 1000
max_output_tokens = 4096
pricing = { input_usd_per_mtok = 15, output_usd_per_mtok = 75 }

[routing.auto]
chat = ["sim-chat-1"]

[tenants.default]

[tenants.small]

[tenants.crowd]

[tenants.broke]
"""
LONG = "[[sim:tokens=5000]] Write me a long story"


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    workdir: Path = tmp_path_factory.mktemp("gw-max-tokens")
    process = start_gateway(workdir, CONFIG)
    yield process
    process.stop()


def _body(model: str, content: str = LONG, **fields: Any) -> dict[str, Any]:
    return {
        "model": model,
        "max_tokens": 32_000,
        "messages": [{"role": "user", "content": content}],
        **fields,
    }


def _wallet(gateway: GatewayProcess, key: str) -> dict[str, Any]:
    with client_for(gateway, key) as http:
        wallet: dict[str, Any] = http.get("/v1/wallet").json()
    return wallet


def _post(gateway: GatewayProcess, key: str, body: dict[str, Any]) -> httpx.Response:
    with client_for(gateway, key) as http:
        return http.post("/v1/messages", json=body, headers={"anthropic-version": "2023-06-01"})


def test_claude_code_s_max_tokens_is_lowered_to_the_simulator_s_limit(
    gateway: GatewayProcess,
) -> None:
    assert gateway.api_key
    answer = _post(gateway, gateway.api_key, _body("sim-chat-1"))
    assert answer.status_code == 200, answer.text
    assert answer.headers["x-gateway-max-tokens"] == "4096"
    message = answer.json()
    assert message["stop_reason"] == "max_tokens"
    assert message["usage"]["output_tokens"] == 4096
    assert Decimal(_wallet(gateway, gateway.api_key)["balance_credits"]) >= 0


def test_a_small_wallet_gets_the_answer_it_can_pay_for(gateway: GatewayProcess) -> None:
    gateway.grant("small", "30")
    key = gateway.new_key("small")

    answer = _post(gateway, key, _body("sim-opus"))
    assert answer.status_code == 200, answer.text
    lowered = int(answer.headers["x-gateway-max-tokens"])
    assert 256 <= lowered < 4096
    message = answer.json()
    assert message["stop_reason"] == "max_tokens"
    assert message["usage"]["output_tokens"] == lowered
    charged = Decimal(message["usage"]["credits"])
    assert 0 < charged <= 30  # the hold: all the wallet had
    wallet = _wallet(gateway, key)
    assert Decimal(wallet["balance_credits"]) == 30 - charged >= 0
    assert Decimal(wallet["held_credits"]) == 0

    # Streamed through the SDK, as Claude Code calls it: the same, after a top-up.
    gateway.grant("small", "30")
    left = 60 - charged
    root = gateway.base_url.removesuffix("/v1")
    with (
        anthropic.Anthropic(base_url=root, api_key=key, max_retries=0) as client,
        client.messages.stream(**_body("sim-opus")) as stream,
    ):
        final = stream.get_final_message()
        header = stream.response.headers["x-gateway-max-tokens"]
    assert final.stop_reason == "max_tokens"
    assert 256 <= final.usage.output_tokens == int(header) < 4096
    wallet = _wallet(gateway, key)
    assert Decimal(wallet["held_credits"]) == 0
    assert 0 <= Decimal(wallet["balance_credits"]) < left  # charged, within the hold


def test_calls_at_once_on_a_small_wallet_never_overdraw_it(gateway: GatewayProcess) -> None:
    gateway.grant("crowd", "30")
    key = gateway.new_key("crowd")
    bodies = [_body("sim-opus", f"[[sim:tokens=5000]] Story number {i}") for i in range(8)]
    with ThreadPoolExecutor(max_workers=8) as pool:
        answers = list(pool.map(lambda body: _post(gateway, key, body), bodies))

    statuses = sorted(answer.status_code for answer in answers)
    assert set(statuses) <= {200, 402} and 200 in statuses, statuses
    charged = Decimal(0)
    for answer in answers:
        if answer.status_code == 200:
            assert answer.json()["stop_reason"] == "max_tokens"
            charged += Decimal(answer.json()["usage"]["credits"])
        else:
            fields = answer.json()["error"]["details"]["fields"]
            assert fields[-1]["field"] == "max_tokens"
    wallet = _wallet(gateway, key)
    assert Decimal(wallet["balance_credits"]) == 30 - charged >= 0


def test_a_wallet_that_cannot_pay_the_first_tokens_is_told_to_lower_max_tokens(
    gateway: GatewayProcess,
) -> None:
    gateway.grant("broke", "1")
    key = gateway.new_key("broke")
    root = gateway.base_url.removesuffix("/v1")
    with (
        anthropic.Anthropic(base_url=root, api_key=key, max_retries=0) as client,
        pytest.raises(anthropic.PaymentRequiredError) as poor,
    ):
        client.messages.create(**_body("sim-opus", "Hello"), stream=True)  # as Claude Code
    error = poor.value.body["error"]  # type: ignore[index]
    assert error["type"] == "billing_error"
    assert [f["field"] for f in error["details"]["fields"]] == [
        "hold_credits",
        "available_credits",
        "max_tokens",
    ]
    assert "max_completion_tokens" not in error["message"]
