"""Adapter for servers that speak OpenAI's chat-completions wire format with differences of
their own (vLLM, Ollama's OpenAI endpoint, hosted OpenAI-compatible APIs).

The wire format, its stream and its errors are the OpenAI adapter's (`providers.openai`);
what differs per server is routing-file options (`options.py`): no `stream_options`, the
`max_tokens` spelling, fields the server refuses, extra headers, no key. `request.py` adapts
the body, `stream.py` passes a stream on without the choices a client cannot read, `client.py`
is the provider. An answer whose usage is absent, zero or malformed is counted by the gateway
from what it delivered (`gateway.chat.usage`), as for every upstream.
"""

from providers.openai_compatible.client import create
from providers.openai_compatible.options import Options

__all__ = ["Options", "create"]
