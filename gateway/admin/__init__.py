"""Administration: tenants, keys, credits, usage, tasks and routing, for operators.

`service` holds the operations and their rules, `usage` the spend report, `token` the admin
token. The HTTP API (`gateway.api.admin`) and the `gateway` CLI both call them, so the two
can never disagree. This package re-exports nothing: `gateway.app.settings` imports `token`
alone, without the store behind the others.
"""

__all__: list[str] = []
