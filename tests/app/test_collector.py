"""A serving process's garbage collector: the young generation collected every 10,000
allocations, the older ones as before (in a process of its own, so this one's collector is left
as it was)."""

from __future__ import annotations

import json
import subprocess
import sys

_PROBE = """
import gc, json
from gateway.app.collector import settle_collector
before = gc.get_threshold()
settle_collector()
print(json.dumps({"before": before, "after": gc.get_threshold()}))
"""


def test_the_young_generation_is_collected_less_often() -> None:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE], check=True, capture_output=True, text=True
    ).stdout
    probe = json.loads(out)
    assert probe["after"] == [10_000, probe["before"][1], probe["before"][2]]
