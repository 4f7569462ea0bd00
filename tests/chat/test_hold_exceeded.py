"""An upstream that bills past the hold anyway (a rule the gateway does not know) is charged
what it reported: the books follow the upstream. The call is counted in
`gateway_hold_exceeded_total{model}` and logged as the defect it is."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import msgspec
import pytest
import structlog
from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

from gateway.billing.money import UNITS_PER_CREDIT
from gateway.chat.outcomes import ChatCompleted
from gateway.metrics import Metrics
from tests.chat.support import chat_parts
from tests.fakes.openai_upstream import FakeOpenAI

CONFIG = """
[gateway]
hold_seconds = 60

[limits]
requests_per_minute = 100000
tokens_per_minute = 100000000

[providers.oa]
kind = "openai"
base_url = "{base_url}"
api_key = "sk-oa"

[[models]]
id = "oa"
provider = "oa"
upstream_model = "gpt-4o"
capability = "chat"
max_output_tokens = 64
pricing = {{ input_usd_per_mtok = 1, output_usd_per_mtok = 1 }}

[tenants.default]
"""
BILLED_PROMPT = 5_000_000
"""Far past any bound of a two-word prompt: 5,000 credits at $1 a million."""
UNITS_PER_TOKEN = 10
"""$1 a million tokens x 1,000 credits a dollar x 10,000 units a credit."""


@pytest.fixture(autouse=True)
def _plain_logging() -> None:
    structlog.reset_defaults()


def test_a_charge_above_its_hold_is_charged_counted_and_logged(tmp_path: Path) -> None:
    registry = CollectorRegistry()
    metrics = Metrics(registry, units_per_credit=UNITS_PER_CREDIT)
    body = {"model": "oa", "messages": [{"role": "user", "content": "Hi there"}]}

    async def main() -> tuple[int, int, int, list[Any]]:
        async with FakeOpenAI() as fake:
            fake.bill = lambda request: (BILLED_PROMPT, 1)
            config = CONFIG.format(base_url=fake.base_url)
            async with chat_parts(tmp_path, config_text=config, metrics=metrics) as parts:
                before = (await parts.store.wallet("default")).balance_units
                with capture_logs() as logs:
                    outcome = await parts.handle(
                        parts.caller(),
                        msgspec.json.encode(body),
                        request_id="req-over-the-hold",
                        idempotency_key=None,
                    )
                assert isinstance(outcome, ChatCompleted)
                after = (await parts.store.wallet("default")).balance_units
                return parts.gatekeeper.holds[-1], before, after, logs

    hold, before, after, logs = asyncio.run(main())
    charge = before - after
    assert charge == (BILLED_PROMPT + 1) * UNITS_PER_TOKEN > hold
    count = registry.get_sample_value("gateway_hold_exceeded_total", {"model": "oa"})
    assert count == 1
    [line] = [line for line in logs if line["event"] == "hold_exceeded"]
    assert line["log_level"] == "error"
    assert (line["request_id"], line["hold_units"], line["charge_units"]) == (
        "req-over-the-hold",
        hold,
        charge,
    )
