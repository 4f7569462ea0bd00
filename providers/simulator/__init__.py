"""Offline chat provider for tests, demos and benchmarks: deterministic, fast, scriptable.

Same messages -> same answer (text of 8 to 60 tokens, cut at `max_completion_tokens` with
finish_reason "length"). Directives in the LAST user message script its behaviour:

    [[sim:fail=502]]        raise ProviderError (any other 5xx likewise)
    [[sim:fail=503]]        raise UpstreamUnavailable (also 408, 429, 529)
    [[sim:fail=504]]        raise UpstreamTimeout
    [[sim:fail=400]]        raise UpstreamRejectedRequest (other 4xx likewise, but
                            401/403 raise ProviderError)
    [[sim:fail_after=N]]    a stream breaks with ProviderError after N content chunks;
                            a non-stream call fails like fail=502
    [[sim:delay_ms=N]]      N more milliseconds before the first token
    [[sim:tokens=N]]        answer with exactly N tokens (still cut at max_completion_tokens)
    [[sim:tool_call]]       answer with a tool call (also when `tools` is given and
                            `tool_choice` is "required" or names a function)

`logprobs: true` (with optional `top_logprobs`) fills `choices[].logprobs.content`.
Token counting rules: see `providers.simulator.generator`. Details: docs/providers.md.
"""

from providers.simulator.client import create
from providers.simulator.options import Options

__all__ = ["Options", "create"]
