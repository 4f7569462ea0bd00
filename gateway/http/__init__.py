"""The HTTP edge: what knows HTTP besides the controllers.

The bounded HTTP/1.1 protocol (`protocol`, `flow`), the middleware (request id, timing, the log
line and metrics), the request context, JSON bodies, the error envelope and the one exception
handler, rate-limit headers, Server-Sent Events (`event_stream`), the client dialects (OpenAI's
chat in `openai_sse`, Anthropic's Messages in `anthropic/`: decoding, answers, events and
errors), byte ranges and refused upgrades. Services below never import it: they take values and
return outcomes, raise `gateway.errors`, and get the client's dialect
(`gateway.chat.dialect`) passed in.
"""
