"""Routing files for end-to-end tests: simulator models, a few tenants with distinct limits."""

from __future__ import annotations

SIMULATOR_CONFIG = """
[gateway]
starting_grant_credits = 1000
hold_seconds = 60
max_body_bytes = 65536

[limits]
requests_per_minute = 100000
tokens_per_minute = 100000000

[providers.sim]
kind = "simulator"

[providers.sim_slow]
kind = "simulator"
tokens_per_second = 40

[[models]]
id = "sim-chat-1"
provider = "sim"
capability = "chat"
owned_by = "simulator"
markup = 1200
max_output_tokens = 256
pricing = { input_usd_per_mtok = 5, output_usd_per_mtok = 15 }

[[models]]
id = "sim-chat-pro"
provider = "sim"
capability = "chat"
owned_by = "simulator"
markup = 1200
max_output_tokens = 512
pricing = { input_usd_per_mtok = 3, output_usd_per_mtok = 15 }

[[models]]
id = "sim-slow"
provider = "sim_slow"
capability = "chat"
owned_by = "simulator"
max_output_tokens = 400
pricing = { input_usd_per_mtok = 5, output_usd_per_mtok = 15 }

[routing.auto]
chat = ["sim-chat-1", "sim-chat-pro"]

[tenants.default]
models = ["*"]

[tenants.limited]
requests_per_minute = 3

[tenants.narrow]
models = ["sim-chat-pro"]

[tenants.poor]
models = ["*"]

[tenants.tokens]
tokens_per_minute = 300
"""
