"""Offline provider for tests, demos and benchmarks: deterministic, fast, scriptable.

It serves every capability: chat (below), images (real PNGs, `providers.simulator.images`) and
music (real WAVs, `providers.simulator.music`); options in `providers.simulator.options`.

Chat: same request -> same answer, honouring it as a model would (`n` choices, tool calls as
`tool_choice` says, JSON for `response_format`; `providers.simulator.generator`), else text of
8 to 60 tokens; cut at `max_completion_tokens` with finish_reason "length". Directives in the
user's turn being answered (the last message, system messages aside; never an earlier turn's,
so after a tool result they no longer apply) script its behaviour:

    [[sim:fail=502]]        raise ProviderError (any other 5xx likewise)
    [[sim:fail=503]]        raise UpstreamUnavailable (also 408, 429, 529)
    [[sim:fail=504]]        raise UpstreamTimeout
    [[sim:fail=400]]        raise UpstreamRejectedRequest (other 4xx likewise, but
                            401/403 raise ProviderError)
    [[sim:fail_after=N]]    a stream breaks with ProviderError after N content chunks;
                            a non-stream call fails like fail=502
    [[sim:delay_ms=N]]      N more milliseconds before the first token
    [[sim:tokens=N]]        answer with exactly N tokens (still cut at max_completion_tokens)
    [[sim:tool_call]]       answer with a tool call (one of `tools`, else `lookup`)
    [[sim:tool_call=NAME]]  answer with a call of NAME (arguments from its `parameters`)
    [[sim:tool_input={..}]] the forced call's arguments: a JSON object (no `]` in it)

`logprobs: true` (with optional `top_logprobs`) fills `choices[].logprobs.content`.
Token counting rules: see `providers.simulator.generator`. Details: docs/providers.md.

Image and music tasks read directives from their prompt (and strip them from the output):

    [[sim:fail=N]]          fail after the "starting" checkpoint, N mapped as for chat
    [[sim:images=N]]        images only: return at most N images (fewer than requested)
    [[sim:stall]]           never finish; keep calling checkpoint every 0.1 s until canceled
    [[sim:task_ms=N]]       the task takes N ms instead of the `task_seconds` option
"""

from providers.simulator.client import create
from providers.simulator.options import Options

__all__ = ["Options", "create"]
