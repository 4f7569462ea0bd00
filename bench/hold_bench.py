"""The hold's planning on the hot path: `plan_call` for a typical 1.1 KB chat (with
`inventory_of`, what the service runs, when the tree has it), process CPU time, best of 9 runs
of 20,000; and `inventory_of` alone, for that chat and for one with a 30 KB PNG data URI.

    PYTHONPATH=. .venv/bin/python bench/hold_bench.py           # this tree
    PYTHONPATH=/tmp/old .venv/bin/python bench/hold_bench.py    # another (before)
"""

from __future__ import annotations

import base64
import random
import tempfile
import time
import timeit
from pathlib import Path

import msgspec

from gateway.billing.pricing import ChatPrice
from gateway.chat import plan as plan_mod
from gateway.config.loader import load_config
from gateway.routing.resolver import Router
from gateway.schemas.chat import ChatRequest
from providers.registry import spec_for
from tests.support.clock import Clock
from tests.support.routing_files import CHAT_SERVICE_CONFIG

RUNS, NUMBER = 9, 20_000


def best(call: object) -> float:
    """Microseconds a call, process CPU time (time spent descheduled is not counted)."""
    runs = timeit.repeat(call, number=NUMBER, repeat=RUNS, timer=time.process_time)  # type: ignore[arg-type]
    return min(runs) / NUMBER * 1e6


def main() -> None:
    path = Path(tempfile.mkdtemp()) / "gateway.toml"
    path.write_text(CHAT_SERVICE_CONFIG)
    config = load_config(path)
    providers = {n: spec_for(e.kind).create(n, e.options) for n, e in config.providers.items()}
    router = Router(config, providers, clock=Clock(), rng=random.Random(1))
    model = next(m.id for m in config.models.values() if m.capability == "chat")
    choice = router.choose(model, config.tenants["default"], "chat", frozenset())
    prices = [ChatPrice.of(route.model) for route in choice.routes]
    bound = plan_mod.HoldBound.over(choice.routes, prices)
    messages = [
        {"role": "system", "content": "You are a helpful assistant. " * 8},
        {"role": "user", "content": "Tell me about the weather in Paris in spring. " * 10},
        {"role": "assistant", "content": "Paris in spring is mild and pleasant. " * 6},
        {"role": "user", "content": "And in autumn?"},
    ]
    body = msgspec.json.encode({"model": model, "max_tokens": 200, "messages": messages})
    request = msgspec.json.decode(body, type=ChatRequest)
    try:
        from gateway.chat.inputs import inventory_of
    except ImportError:  # a tree from before the input bound

        def old() -> None:
            plan_mod.plan_call(request, choice, bound, len(body))

        print(f"plan_call, {len(body)} bytes: {best(old):.2f} us")
        return

    def new() -> None:
        plan_mod.plan_call(request, choice, bound, len(body), inputs=inventory_of(request))

    print(f"inventory_of + plan_call, {len(body)} bytes: {best(new):.2f} us")
    print(f"inventory_of alone: {best(lambda: inventory_of(request)):.2f} us")
    from tests.support.documents import png_header

    png = base64.b64encode(png_header(1024, 768) + bytes(30_000)).decode()
    part = {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{png}"}}
    image = ChatRequest(model=model, messages=[{"role": "user", "content": [part]}])  # type: ignore[list-item]
    image = msgspec.convert(msgspec.to_builtins(image), ChatRequest)
    print(f"inventory_of, a 30 KB PNG data URI: {best(lambda: inventory_of(image)):.2f} us")


if __name__ == "__main__":
    main()
