"""Adapter for OpenAI-compatible upstreams (OpenAI, vLLM, Ollama, most proxies): chat, and
image generation through the Images API (`images.py`) on the same provider object.

The folder shape every HTTP adapter copies: `options.py` (the config table, extending
`providers.options.HttpOptions`), `client.py` (the provider and its pooled session from
`providers.http`), `stream.py` (one streamed call over `providers.sse`), `translate.py` (upstream
wire format -> OpenAI shapes), `errors.py` (the upstream's own error objects; HTTP statuses go
through `providers.status`).
"""

from providers.openai.client import create
from providers.openai.options import Options

__all__ = ["Options", "create"]
