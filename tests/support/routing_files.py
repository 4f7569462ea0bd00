"""Routing files the tests start gateways and services with, in one place.

`SIMULATOR_CONFIG`: chat on the simulator, a few tenants with distinct limits (the end-to-end
HTTP, SDK and edge tests). `MEDIA_CONFIG`: image and music models on the simulator beside one
chat model, and the tenants the media tests use. `CHAT_SERVICE_CONFIG`: the chat service without
HTTP (tests/chat). `UPSTREAM_MODELS`: the chat, image and music models of the fake upstreams
(`up-chat` on an OpenAI chat provider `chat`, `gpt-image` on OpenAI images `images`, `musicgen` on
Replicate `music`), for files that declare those providers themselves. `backup_chat`: the
OpenAI-compatible server a test of another upstream falls back to. Files a single test needs
stay in that test.
"""

from __future__ import annotations

__all__ = [
    "CHAT_SERVICE_CONFIG",
    "MEDIA_CONFIG",
    "SIMULATOR_CONFIG",
    "UPSTREAM_MODELS",
    "backup_chat",
]

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

MEDIA_CONFIG = """
[gateway]
starting_grant_credits = 1000
hold_seconds = 60
task_lease_seconds = 3

[limits]
requests_per_minute = 100000
tokens_per_minute = 100000000

[providers.sim]
kind = "simulator"
task_seconds = 0.3

[[models]]
id = "image-model-2"
provider = "sim"
capabilities = ["text_to_image", "image_to_image"]
release_label = "Preview"
pricing = { credits_per_image = { standard = 50, hd = 300, "image_to_image.standard" = 60, \
"image_to_image.hd" = 320 } }

[[models]]
id = "alpha-5.5"
provider = "sim"
capabilities = ["text_to_music", "reference_audio_to_music"]
options_namespace = "alpha"
release_label = "Preview"
pricing = { credits_per_task = 80 }

[[models]]
id = "beta-music-2.6"
provider = "sim"
capabilities = ["text_to_music", "reference_audio_to_music"]
options_namespace = "beta"
release_label = "Preview"
pricing = { credits_per_task = 50 }

[[models]]
id = "sim-chat-1"
provider = "sim"
capability = "chat"
pricing = { input_usd_per_mtok = 5, output_usd_per_mtok = 15 }

[routing.auto]
chat = ["sim-chat-1"]
text_to_image = ["image-model-2"]
image_to_image = ["image-model-2"]
text_to_music = ["alpha-5.5", "beta-music-2.6"]
reference_audio_to_music = ["alpha-5.5", "beta-music-2.6"]

[tenants.default]
[tenants.other]
[tenants.poor]
[tenants.lister]
[tenants.racer]
[tenants.limited]
requests_per_minute = 3
"""

CHAT_SERVICE_CONFIG = """
[gateway]
hold_seconds = 60

[limits]
requests_per_minute = 1000
tokens_per_minute = 10000000

[providers.sim]
kind = "simulator"

[providers.sim_slow]
kind = "simulator"
tokens_per_second = 200

[[models]]
id = "sim-chat-1"
provider = "sim"
capability = "chat"
max_output_tokens = 256
pricing = { input_usd_per_mtok = 5, output_usd_per_mtok = 15 }

[[models]]
id = "sim-slow"
provider = "sim_slow"
capability = "chat"
max_output_tokens = 256
pricing = { input_usd_per_mtok = 5, output_usd_per_mtok = 15 }

[routing.auto]
chat = ["sim-chat-1"]

[tenants.default]

[tenants.limited]
requests_per_minute = 1
"""

UPSTREAM_MODELS = """
[[models]]
id = "up-chat"
provider = "chat"
upstream_model = "model-a"
capability = "chat"
max_output_tokens = 100
pricing = { input_usd_per_mtok = 5, output_usd_per_mtok = 15 }

[[models]]
id = "gpt-image"
provider = "images"
upstream_model = "gpt-image-1"
capabilities = ["text_to_image"]
pricing = { credits_per_image = { standard = 50, hd = 300 } }

[[models]]
id = "musicgen"
provider = "music"
upstream_model = "meta/musicgen"
capabilities = ["text_to_music"]
pricing = { credits_per_task = 80 }
"""


def backup_chat(primary: str, base_url: str) -> str:
    """Routing-file tables for a fallback: `backup`, an OpenAI-compatible server at
    `base_url`, its model `backup-chat` (1 and 2 USD per Mtok), and the chat policy that tries
    `primary` first, then it."""
    return f"""
[providers.backup]
kind = "openai_compatible"
base_url = "{base_url}"

[[models]]
id = "backup-chat"
provider = "backup"
upstream_model = "local-model"
capability = "chat"
max_output_tokens = 100
pricing = {{ input_usd_per_mtok = 1, output_usd_per_mtok = 2 }}

[routing.policies.chat]
candidates = [{{ model = "{primary}" }}, {{ model = "backup-chat" }}]
backoff_ms = 0
"""
